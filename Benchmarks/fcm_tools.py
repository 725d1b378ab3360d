#!/usr/bin/env python3
"""Helpers for fcm.sh (the FCM benchmark): the firebase-admin peer and the summary. h2load and norq-bench runs
go through bench_tools.py (h2load, wrap), whose JSON lines this summary reads.

  fcm_tools.py firebase-admin --server-pid PID --url https://127.0.0.1:PORT --project ID --service-account JSON
                              --trust PEM --cert PEM --key PEM --body body.json --tokens tokens.txt
                              --access-token TOKEN --count N --in-flight M --warmup N --label L
      (run with the venv's python, where firebase-admin is installed; prints one JSON line)
  fcm_tools.py load < lines        (adds the 1-minute load average to each JSON line)
  fcm_tools.py summary results.jsonl
"""
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_tools import server_cpu, take  # noqa: E402


def start_token_server(cert, key, access_token):
    """A fake Google OAuth token endpoint (HTTP/1.1 over TLS: google-auth posts with `requests`) on 127.0.0.1,
    in a thread of this process: it answers every POST with `access_token`. It is called once per hour of
    tokens, so it costs the peer nothing measurable."""
    import http.server
    import ssl
    import threading

    body = json.dumps({"access_token": access_token, "expires_in": 3600, "token_type": "Bearer"}).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # noqa: N802 - http.server's naming
            self.rfile.read(int(self.headers.get("content-length", 0)))
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server.server_address[1]


def admin_message(messaging, message, token):
    """The firebase-admin `Message` for a norq FCM `message` object (notification, data, android), so that the
    SDK encodes the same JSON itself (its per-message cost is part of what is measured)."""
    notification = message.get("notification") or {}
    android = message.get("android")
    android_config = None
    if android is not None:
        n = android.get("notification")
        android_notification = None
        if n is not None:
            android_notification = messaging.AndroidNotification(
                title=n.get("title"), body=n.get("body"), icon=n.get("icon"), color=n.get("color"),
                sound=n.get("sound"), tag=n.get("tag"), click_action=n.get("click_action"),
                image=n.get("image"), channel_id=n.get("channel_id"))
        ttl = android.get("ttl")
        android_config = messaging.AndroidConfig(
            collapse_key=android.get("collapse_key"),
            priority=android["priority"].lower() if android.get("priority") else None,
            ttl=float(ttl[:-1]) if ttl else None, data=android.get("data"), notification=android_notification)
    unsupported = set(message) - {"token", "notification", "data", "android"}
    if unsupported:
        raise SystemExit(f"fcm_tools: the firebase-admin peer maps notification, data and android only, not {unsupported}")
    return messaging.Message(
        token=token, data=message.get("data"), android=android_config,
        notification=messaging.Notification(title=notification.get("title"), body=notification.get("body"),
                                            image=notification.get("image")) if notification else None)


def run_firebase_admin(args):
    import asyncio
    import resource
    import tempfile

    o = {k: take(args, "--" + k) for k in ["server-pid", "url", "project", "service-account", "trust", "cert", "key",
                                           "body", "tokens", "access-token", "count", "in-flight", "warmup", "label"]}
    # httpx (the SDK's HTTP/2 client for send_each_async) and requests (google-auth's token fetch) trust the
    # bench CAs through these variables; set before the SDK is imported.
    os.environ["SSL_CERT_FILE"] = o["trust"]
    os.environ["REQUESTS_CA_BUNDLE"] = o["trust"]
    import firebase_admin
    from firebase_admin import credentials, messaging

    port = start_token_server(o["cert"], o["key"], o["access-token"])
    with open(o["service-account"]) as f:
        account = json.load(f)
    account["token_uri"] = f"https://127.0.0.1:{port}/token"
    account_file = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump(account, account_file)
    account_file.close()
    # The SDK only knows Google's host: point its FCM URL at the local server.
    messaging._MessagingService.FCM_URL = o["url"] + "/v1/projects/{0}/messages:send"
    app = firebase_admin.initialize_app(credentials.Certificate(account_file.name), {"projectId": o["project"]})
    os.unlink(account_file.name)

    with open(o["body"]) as f:
        template = json.load(f)["message"]
    with open(o["tokens"]) as f:
        tokens = [line.strip() for line in f if line.strip()]
    count, in_flight, warmup = int(o["count"]), int(o["in-flight"]), int(o["warmup"] or 0)
    batch_size = min(in_flight, 500)  # send_each_async takes at most 500 messages
    # The SDK encodes a message the way norq does (checked on the first one).
    encoded = messaging._MessagingService.encode_message(admin_message(messaging, template, template["token"]))
    same = encoded == template
    outcomes = {}
    batch_seconds = []

    async def send(first, n, record):
        for start in range(first, first + n, batch_size):
            size = min(batch_size, first + n - start)
            messages = [admin_message(messaging, template, tokens[i % len(tokens)]) for i in range(start, start + size)]
            t0 = time.perf_counter()
            try:
                response = await messaging.send_each_async(messages, app=app)
                results = [("delivered" if r.success else f"failed:{type(r.exception).__name__}") for r in response.responses]
            except Exception as e:  # noqa: BLE001 - a benchmark counts every failure
                results = [f"failed:{type(e).__name__}"] * size
            if record:
                batch_seconds.append(time.perf_counter() - t0)
                for kind in results:
                    outcomes[kind] = outcomes.get(kind, 0) + 1

    async def main():
        if warmup:
            await send(0, warmup, False)
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        server0 = server_cpu(o["server-pid"])
        t0 = time.perf_counter()
        await send(0, count, True)
        elapsed = time.perf_counter() - t0
        server1 = server_cpu(o["server-pid"])
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
        cpu = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
        batch_seconds.sort()
        print(json.dumps({
            "client": "firebase-admin", "label": o["label"] or "", "connections": 1, "in_flight": batch_size,
            "count": count, "seconds": round(elapsed, 3), "notifications_per_s": round(count / elapsed),
            "batch_p50_ms": round(batch_seconds[len(batch_seconds) // 2] * 1000, 3) if batch_seconds else 0,
            "cpu_s": round(cpu, 3), "cpu_s_per_10k": round(cpu / count * 10000, 4),
            "peak_rss_mb": round(usage1.ru_maxrss / 1024, 1), "outcomes": outcomes,
            "all_delivered": 1 if outcomes.get("delivered", 0) == count else 0,
            "server_cpu_s": round(server1 - server0, 3), "same_json_as_norq": same,
            "sdk": f"firebase-admin {firebase_admin.__version__} send_each_async (httpx HTTP/2)"}))

    asyncio.run(main())


def summary(path):
    rows = [json.loads(line) for line in open(path) if line.startswith("{")]
    groups = {}
    for r in rows:
        if "count" in r and "label" in r:
            groups.setdefault((r["label"], r["client"]), []).append(r)

    def med(rs, key):
        values = [r[key] for r in rs if r.get(key) is not None]
        return statistics.median(values) if values else float("nan")

    print("| server | shape | client | runs | notifications/s (median) | p50 / p99 ms | client CPU s/10k | "
          "peak RSS MB | server CPU s | load | all delivered |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for (label, client), rs in sorted(groups.items()):
        server, _, shape = label.partition(" ")
        lat = f"{med(rs, 'p50_ms'):.2f} / {med(rs, 'p99_ms'):.2f}" if "p50_ms" in rs[0] else \
            (f"mean {med(rs, 'mean_ms'):.2f}" if "mean_ms" in rs[0] else
             (f"batch {med(rs, 'batch_p50_ms'):.1f}" if "batch_p50_ms" in rs[0] else ""))
        print(f"| {server} | {shape} | {client} | {len(rs)} | {med(rs, 'notifications_per_s'):,.0f} | {lat} | "
              f"{med(rs, 'cpu_s_per_10k'):.3f} | {med(rs, 'peak_rss_mb'):.1f} | {med(rs, 'server_cpu_s'):.2f} | "
              f"{med(rs, 'load'):.1f} | {sum(r.get('all_delivered', 0) for r in rs)}/{len(rs)} |")
    print()
    print("Targets (issue 15): router >= 0.8 x h2load at 1x100 and 1x1000; <= 0.12 client CPU s per 10,000; "
          ">= 10 x firebase-admin.")
    for (label, client), rs in sorted(groups.items()):
        if client != "norq-router-fcm":
            continue
        line = f"- {label}: CPU {med(rs, 'cpu_s_per_10k'):.3f} s/10k ({'met' if med(rs, 'cpu_s_per_10k') <= 0.12 else 'NOT met'})"
        h2 = groups.get((label, "h2load"))
        if h2:
            tput = med(rs, "notifications_per_s") / med(h2, "notifications_per_s")
            line += f"; throughput {tput:.2f} x h2load ({'met' if tput >= 0.8 else 'NOT met'})"
        admin = groups.get((label, "firebase-admin"))
        if admin:
            ratio = med(rs, "notifications_per_s") / med(admin, "notifications_per_s")
            line += f"; {ratio:.1f} x firebase-admin ({'met' if ratio >= 10 else 'NOT met'})"
        print(line)
    for r in rows:
        if "error" in r:
            print(f"- ERROR from {r.get('client')} {r.get('label', '')}: {r['error'][:300]}")
        if r.get("client") == "firebase-admin" and not r.get("same_json_as_norq", True):
            print(f"- note: firebase-admin encoded the message differently from norq ({r.get('label')})")


def add_load(_args):
    """Copies JSON lines from stdin to stdout, each with the 1-minute load average at the time it is read."""
    for line in sys.stdin:
        if line.startswith("{"):
            with open("/proc/loadavg") as f:
                load = float(f.read().split()[0])
            print(json.dumps({**json.loads(line), "load": load}), flush=True)
        else:
            print(line, end="", flush=True)


if __name__ == "__main__":
    command, rest = sys.argv[1], sys.argv[2:]
    {"firebase-admin": run_firebase_admin, "load": add_load, "summary": lambda a: summary(a[0])}[command](rest)
