#!/usr/bin/env python3
"""Helpers for compare.sh: run h2load / norq-bench / aioapns and print one JSON line each, and summarise.

  bench_tools.py h2load --server-pid PID --label L -- h2load ARGS...
  bench_tools.py wrap   --server-pid PID -- norq-bench ARGS...      (adds server_cpu_s to its JSON)
  bench_tools.py aioapns --server-pid PID --host H --port P --ca PEM --key P8 --key-id K --team T
                         --topic TOPIC --body body.json --count N --connections C --in-flight M --label L
  bench_tools.py summary results.jsonl
"""
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import time


def server_cpu(pid):
    """utime + stime of a process in seconds from /proc/PID/stat (0 when unknown)."""
    if not pid:
        return 0.0
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except OSError:
        return 0.0


def take(args, name, default=None):
    if name in args:
        i = args.index(name)
        value = args[i + 1]
        del args[i:i + 2]
        return value
    return default


def split_command(args):
    i = args.index("--")
    return args[:i], args[i + 1:]


def run_h2load(args):
    opts, command = split_command(args)
    pid = take(opts, "--server-pid")
    label = take(opts, "--label", "")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    server_before = server_cpu(pid)
    out = subprocess.run(command, capture_output=True, text=True)
    server_after = server_cpu(pid)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    text = out.stdout + out.stderr
    m = re.search(r"finished in ([0-9.]+)(m?s), ([0-9.]+) req/s", text)
    req = re.search(r"requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored", text)
    codes = re.search(r"status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx", text)
    lat = re.search(r"time for request:\s+([0-9.]+)(us|ms|s)\s+([0-9.]+)(us|ms|s)\s+([0-9.]+)(us|ms|s)", text)
    if not (m and req):
        print(json.dumps({"client": "h2load", "label": label, "error": text[-2000:]}))
        return
    seconds = float(m.group(1)) / (1000 if m.group(2) == "ms" else 1)
    count = int(req.group(1))
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    n_opt = dict(zip(command, command[1:]))
    result = {
        "client": "h2load", "label": label,
        "connections": int(n_opt.get("-c", 1)), "in_flight": int(n_opt.get("-c", 1)) * int(n_opt.get("-m", 1)),
        "count": count, "seconds": round(seconds, 3), "notifications_per_s": round(float(m.group(3))),
        "cpu_s": round(cpu, 3), "cpu_s_per_10k": round(cpu / count * 10000, 4),
        "peak_rss_mb": round(after.ru_maxrss / 1024, 1),
        "outcomes": {"2xx": int(codes.group(1)) if codes else 0, "failed": int(req.group(5)),
                     "errored": int(req.group(6))},
        "all_delivered": 1 if codes and int(codes.group(1)) == count else 0,
        "server_cpu_s": round(server_after - server_before, 3),
    }
    if lat:
        unit = {"us": 0.001, "ms": 1, "s": 1000}
        result["mean_ms"] = round(float(lat.group(5)) * unit[lat.group(6)], 3)
    print(json.dumps(result))


def run_wrap(args):
    opts, command = split_command(args)
    pid = take(opts, "--server-pid")
    server_before = server_cpu(pid)
    out = subprocess.run(command, capture_output=True, text=True)
    server_after = server_cpu(pid)
    lines = [l for l in out.stdout.splitlines() if l.startswith("{")]
    if out.returncode != 0 or not lines:
        print(json.dumps({"client": command[0], "error": (out.stderr + out.stdout)[-2000:]}))
        return
    for line in lines:
        result = json.loads(line)
        if "count" in result:
            result["server_cpu_s"] = round(server_after - server_before, 3)
        print(json.dumps(result))


def run_aioapns(args):
    import asyncio
    import ssl
    o = {k: take(args, "--" + k) for k in ["server-pid", "host", "port", "ca", "key", "key-id", "team", "topic",
                                           "body", "count", "connections", "in-flight", "label", "warmup"]}
    from aioapns import APNs, NotificationRequest, PushType
    from aioapns import connection

    # aioapns only knows Apple's hosts: point its sandbox protocol class at the local server.
    connection.APNsDevelopmentClientProtocol.APNS_SERVER = o["host"]
    connection.APNsDevelopmentClientProtocol.APNS_PORT = int(o["port"])
    context = ssl.create_default_context(cafile=o["ca"])
    context.set_alpn_protocols(["h2"])
    with open(o["body"]) as f:
        message = json.load(f)
    with open(o["key"]) as f:
        key = f.read()
    count, in_flight = int(o["count"]), int(o["in-flight"])
    warmup = int(o["warmup"] or 0)
    latencies = []
    outcomes = {}

    def token(i):
        h = format(i, "x")
        return "ab" + "0" * (62 - len(h)) + h

    async def main():
        client = APNs(key=key, key_id=o["key-id"], team_id=o["team"], topic=o["topic"],
                      max_connections=int(o["connections"]), use_sandbox=True, ssl_context=context)

        async def one(i, record):
            request = NotificationRequest(device_token=token(i), message=message, priority=10,
                                          push_type=PushType.ALERT, time_to_live=3600)
            start = time.perf_counter()
            try:
                result = await client.send_notification(request)
                kind = "delivered" if result.is_successful else f"status:{result.status}:{result.description}"
            except Exception as e:  # noqa: BLE001 - a benchmark counts every failure
                kind = f"failed:{type(e).__name__}"
            if record:
                latencies.append(time.perf_counter() - start)
                outcomes[kind] = outcomes.get(kind, 0) + 1

        async def batch(n, record):
            semaphore = asyncio.Semaphore(in_flight)

            async def guarded(i):
                async with semaphore:
                    await one(i, record)
            await asyncio.gather(*(guarded(i) for i in range(n)))

        if warmup:
            await batch(warmup, False)
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        server0 = server_cpu(o["server-pid"])
        t0 = time.perf_counter()
        await batch(count, True)
        elapsed = time.perf_counter() - t0
        server1 = server_cpu(o["server-pid"])
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
        latencies.sort()

        def pct(q):
            return round(latencies[min(len(latencies) - 1, int(len(latencies) * q))] * 1000, 3) if latencies else 0
        print(json.dumps({
            "client": "aioapns", "label": o["label"] or "", "connections": int(o["connections"]),
            "in_flight": in_flight, "count": count, "seconds": round(elapsed, 3),
            "notifications_per_s": round(count / elapsed), "p50_ms": pct(0.5), "p90_ms": pct(0.9),
            "p99_ms": pct(0.99), "cpu_s": round(cpu, 3), "cpu_s_per_10k": round(cpu / count * 10000, 4),
            "peak_rss_mb": round(usage1.ru_maxrss / 1024, 1), "outcomes": outcomes,
            "all_delivered": 1 if outcomes.get("delivered", 0) == count else 0,
            "server_cpu_s": round(server1 - server0, 3)}))

    asyncio.run(main())


def summary(path):
    rows = [json.loads(l) for l in open(path) if l.startswith("{")]
    groups = {}
    for r in rows:
        if "count" not in r or "label" not in r:
            continue
        groups.setdefault((r["label"], r["client"]), []).append(r)

    def med(rs, key):
        values = [r[key] for r in rs if key in r and r[key] is not None]
        return statistics.median(values) if values else float("nan")

    print("| server | shape | client | runs | notifications/s (median) | p50 / p99 ms | client CPU s/10k | "
          "peak RSS MB | server CPU s | all delivered |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (label, client), rs in sorted(groups.items()):
        server, _, shape = label.partition(" ")
        lat = f"{med(rs, 'p50_ms'):.2f} / {med(rs, 'p99_ms'):.2f}" if "p50_ms" in rs[0] else \
            (f"mean {med(rs, 'mean_ms'):.2f}" if "mean_ms" in rs[0] else "")
        print(f"| {server} | {shape} | {client} | {len(rs)} | {med(rs, 'notifications_per_s'):,.0f} | {lat} | "
              f"{med(rs, 'cpu_s_per_10k'):.3f} | {med(rs, 'peak_rss_mb'):.1f} | {med(rs, 'server_cpu_s'):.2f} | "
              f"{sum(r.get('all_delivered', 0) for r in rs)}/{len(rs)} |")
    print()
    print("| server | shape | router/h2load throughput | router/h2load CPU per notification | target >= 0.5 |")
    print("|---|---|---|---|---|")
    status = []
    for (label, client), rs in sorted(groups.items()):
        if client != "norq-router":
            continue
        h2 = groups.get((label, "h2load"))
        if not h2:
            continue
        tput = med(rs, "notifications_per_s") / med(h2, "notifications_per_s")
        cpu = med(rs, "cpu_s_per_10k") / med(h2, "cpu_s_per_10k")
        met = "met" if tput >= 0.5 else "NOT met"
        print(f"| {label.partition(' ')[0]} | {label.partition(' ')[2]} | {tput:.2f} | {cpu:.1f}x | {met} |")
        if label.startswith("nghttpd"):
            status.append((label, tput, med(rs, "cpu_s_per_10k"), med(rs, "peak_rss_mb"), rs[0].get("in_flight")))
    print()
    if status:
        print("Targets (against nghttpd):")
        for label, tput, cpu, rss, inflight in status:
            print(f"- {label}: throughput {tput:.2f} x h2load ({'met' if tput >= 0.5 else 'NOT met'}); "
                  f"CPU {cpu:.3f} s/10k ({'met' if cpu <= 0.25 else 'NOT met'}); "
                  f"peak RSS {rss:.1f} MB" + (f" ({'met' if rss <= 64 else 'NOT met'}, 1000 in flight)"
                                              if inflight == 1000 else ""))
    for (label, client), rs in sorted(groups.items()):
        if client == "norq-router-streamed-input" and label.startswith("nghttpd"):
            rss = med(rs, "peak_rss_mb")
            inflight = rs[0].get("in_flight")
            print(f"- {label}, recipients as an async sequence: peak RSS {rss:.1f} MB"
                  + (f" ({'met' if rss <= 64 else 'NOT met'}, 1000 in flight)" if inflight == 1000 else "")
                  + f", {med(rs, 'notifications_per_s'):,.0f}/s, CPU {med(rs, 'cpu_s_per_10k'):.3f} s/10k")
    for r in rows:
        if r.get("client") == "render":
            # The target is for templates/order-shipped; the bench template (five items) is shown for scale.
            target = r["template"].endswith("templates/order-shipped")
            ok = (" (met for >= 200,000)" if r["renders_per_s"] >= 200000 else " (NOT met for >= 200,000)") if target else ""
            print(f"- render {r['template']}: {r['renders_per_s']:,} renders/s{ok}")
    for r in rows:
        if "error" in r:
            print(f"- ERROR from {r.get('client')} {r.get('label', '')}: {r['error'][:300]}")


if __name__ == "__main__":
    command, rest = sys.argv[1], sys.argv[2:]
    {"h2load": run_h2load, "wrap": run_wrap, "aioapns": run_aioapns, "summary": lambda a: summary(a[0])}[command](rest)
