#!/usr/bin/env python3
"""Web Push helpers for webpush.sh (issue 16); the shared ones (h2load, wrap, server CPU) are bench_tools.py's.

  webpush_tools.py pywebpush --server-pid PID --endpoint-prefix https://127.0.0.1:P/wp/ --tokens tokens.txt
                   --subscription subscription.json --vapid-key vapid.pem --ca ca.pem --payload plaintext.json
                   --count N --threads T --warmup W --label L
      pywebpush's documented one-call API, webpush(), per message (it encrypts and signs a VAPID token each
      time), its HTTP POST through an httpx HTTP/2 client (pywebpush's `requests_session` hook) so that it
      reaches the same HTTP/2 sink as norq; T threads, one HTTP/2 connection each. One JSON line.
  webpush_tools.py load                 adds "load" (1-minute load average now) to each JSON line of stdin
  webpush_tools.py summary results.jsonl
"""
import json
import os
import resource
import statistics
import sys
import threading
import time
import warnings

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tools import server_cpu, take  # noqa: E402


def run_pywebpush(args):
    import concurrent.futures
    import ssl

    import httpx
    from py_vapid import Vapid
    from pywebpush import WebPusher, webpush

    warnings.simplefilter("ignore")  # httpx's notice about data=bytes (pywebpush passes the body that way)
    o = {k: take(args, "--" + k) for k in ["server-pid", "endpoint-prefix", "tokens", "subscription", "vapid-key",
                                           "ca", "payload", "count", "threads", "warmup", "label"]}
    count, threads, warmup = int(o["count"]), int(o["threads"] or 1), int(o["warmup"] or 0)
    tokens = [line.strip() for line in open(o["tokens"]) if line.strip()]
    keys = json.load(open(o["subscription"]))["keys"]
    data = open(o["payload"], "rb").read()
    vapid = Vapid.from_file(o["vapid-key"])
    context = ssl.create_default_context(cafile=o["ca"])
    local = threading.local()
    clients = []
    lock = threading.Lock()

    def session():
        client = getattr(local, "client", None)
        if client is None:
            client = httpx.Client(http2=True, verify=context, timeout=30)
            local.client = client
            with lock:
                clients.append(client)
        return client

    def send(index):
        subscription = {"endpoint": o["endpoint-prefix"] + tokens[index % len(tokens)], "keys": keys}
        try:
            response = webpush(subscription, data=data, vapid_private_key=vapid,
                               vapid_claims={"sub": "mailto:bench@example.com"}, ttl=3600,
                               requests_session=session())
            return str(response.status_code)
        except Exception as error:  # WebPushException for > 202, transport errors
            return "error:" + type(error).__name__

    # CPU of encryption + VAPID signing alone (what webpush() does before the POST), one thread.
    subscription = {"endpoint": o["endpoint-prefix"] + tokens[0], "keys": keys}
    claims_base = {"sub": "mailto:bench@example.com", "aud": o["endpoint-prefix"].split("/wp/")[0]}
    samples = 500
    start = time.thread_time()
    for _ in range(samples):
        WebPusher(subscription).encode(data, "aes128gcm")
        vapid.sign(dict(claims_base, exp=int(time.time()) + 43200))
    encrypt_sign_us = (time.thread_time() - start) / samples * 1e6

    outcomes = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        for status in pool.map(send, range(warmup)):
            pass
        before = resource.getrusage(resource.RUSAGE_SELF)
        server_before = server_cpu(o["server-pid"])
        started = time.perf_counter()
        for status in pool.map(send, range(count)):
            outcomes[status] = outcomes.get(status, 0) + 1
        seconds = time.perf_counter() - started
        server_after = server_cpu(o["server-pid"])
        after = resource.getrusage(resource.RUSAGE_SELF)
    for client in clients:
        client.close()
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    delivered = sum(v for k, v in outcomes.items() if k.startswith("2"))
    print(json.dumps({
        "client": "pywebpush", "label": o["label"] or "", "connections": threads, "in_flight": threads,
        "count": count, "seconds": round(seconds, 3), "notifications_per_s": round(count / seconds),
        "cpu_s": round(cpu, 3), "cpu_s_per_10k": round(cpu / count * 10000, 4),
        "cpu_us_per_message": round(cpu / count * 1e6, 1),
        "peak_rss_mb": round(after.ru_maxrss / 1024, 1), "outcomes": outcomes,
        "all_delivered": 1 if delivered == count else 0, "server_cpu_s": round(server_after - server_before, 3),
        "encrypt_sign_us": round(encrypt_sign_us, 1),
    }))


def add_load(_args):
    load = float(open("/proc/loadavg").read().split()[0])
    for line in sys.stdin:
        if line.startswith("{"):
            row = json.loads(line)
            row["load"] = load
            line = json.dumps(row) + "\n"
        sys.stdout.write(line)
        sys.stdout.flush()


def summary(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]

    def med(rs, key):
        values = [r[key] for r in rs if r.get(key) is not None]
        return statistics.median(values) if values else float("nan")

    groups = {}
    for r in rows:
        if "count" in r and "notifications_per_s" in r:
            groups.setdefault((r.get("label", ""), r["client"]), []).append(r)
    print("| shape | client | runs | pushes/s (median) | p50 / p99 ms | client CPU µs/push | peak RSS MB | "
          "server CPU s | load (1 min) | all delivered |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (label, client), rs in sorted(groups.items()):
        lat = f"{med(rs, 'p50_ms'):.2f} / {med(rs, 'p99_ms'):.2f}" if "p50_ms" in rs[0] else \
            (f"mean {med(rs, 'mean_ms'):.2f}" if "mean_ms" in rs[0] else "")
        print(f"| {label} | {client} | {len(rs)} | {med(rs, 'notifications_per_s'):,.0f} | {lat} | "
              f"{med(rs, 'cpu_s_per_10k') * 100:.1f} | {med(rs, 'peak_rss_mb'):.1f} | {med(rs, 'server_cpu_s'):.2f} | "
              f"{med(rs, 'load'):.1f} | {sum(r.get('all_delivered', 0) for r in rs)}/{len(rs)} |")
    print()
    encrypt = [r for r in rows if r.get("client") == "norq-webpush-encrypt"]
    if encrypt:
        print("| micro-benchmark (one thread) | runs | µs CPU per message (median) |")
        print("|---|---|---|")
        for key, name in [("encrypt_us", "RFC 8291 encryption (ephemeral key, ECDH, HKDF, AES-128-GCM)"),
                          ("vapid_sign_us", "one VAPID ES256 signature (cached per origin: once per 11 h per origin)"),
                          ("encrypt_plus_sign_us", "encryption + one signature (no token cache at all)"),
                          ("prepare_us", "the provider's whole prepare (keys decoded, encryption, headers, cached token)")]:
            print(f"| {name} | {len(encrypt)} | {med(encrypt, key):.1f} |")
        peers = [r for r in rows if r.get("client") == "pywebpush" and "encrypt_sign_us" in r]
        if peers:
            print(f"| pywebpush: encode() + Vapid.sign() | {len(peers)} | {med(peers, 'encrypt_sign_us'):.1f} |")
        print()
    print("Targets:")
    for (label, client), rs in sorted(groups.items()):
        if client != "norq-webpush":
            continue
        tput = med(rs, "notifications_per_s")
        line = f"- {label}: {tput:,.0f} pushes/s"
        if label.endswith("1x100"):
            line += f" ({'met' if tput >= 10000 else 'NOT met'} for >= 10,000 at 1x100)"
        h2 = groups.get((label, "h2load"))
        if h2:
            line += f"; {tput / med(h2, 'notifications_per_s'):.2f} x h2load's rate with one pre-encrypted body"
        print(line)
    peer_rows = [r for (label, client), rs in groups.items() if client == "pywebpush" for r in rs]
    norq_rows = [r for (label, client), rs in groups.items() if client == "norq-webpush" and label.endswith("1x100")
                 for r in rs]
    if peer_rows and norq_rows:
        best_peer = max(peer_rows, key=lambda r: r["notifications_per_s"])
        ratio = med(norq_rows, "notifications_per_s") / best_peer["notifications_per_s"]
        print(f"- norq 1x100 / best pywebpush ({best_peer['label']}, {best_peer['notifications_per_s']:,}/s): "
              f"{ratio:.1f} x ({'met' if ratio >= 10 else 'NOT met'} for >= 10 x)")
    if encrypt:
        cached = med(encrypt, "encrypt_us")
        fresh = med(encrypt, "encrypt_plus_sign_us")
        print(f"- encryption + signing as the provider does it (the VAPID token signed once per origin and cached "
              f"~11 h, so signing adds ~0 per message): {cached:.1f} µs CPU per message, one thread "
              f"({'met' if cached <= 80 else 'NOT met'} for <= 80 µs); with a new signature for every message (as "
              f"pywebpush's webpush() does): {fresh:.1f} µs ({'met' if fresh <= 80 else 'NOT met'} for <= 80 µs)")
    for r in rows:
        if "error" in r:
            print(f"- ERROR from {r.get('client')} {r.get('label', '')}: {r['error'][:300]}")


if __name__ == "__main__":
    command, rest = sys.argv[1], sys.argv[2:]
    {"pywebpush": run_pywebpush, "load": add_load, "summary": lambda a: summary(a[0])}[command](rest)
