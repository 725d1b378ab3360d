#!/usr/bin/env python3
"""The Python exponent-server-sdk (PyPI `exponent_server_sdk`, on `requests`, HTTP/1.1) as expo.sh's peer.

  expo_sdk_peer.py --server-pid PID --host https://127.0.0.1:PORT --ca PEM --body body.json
                   --count N --threads 6 [--warmup W] [--label L]

Driven as a user following Expo's advice would: a thread pool of `--threads` (6) workers, each with its own
`PushClient` on its own `requests.Session` (keep-alive, the SDK's headers, TLS verified against the sink's CA; a
Session is not thread-safe), each task one `publish_multiple` of 100 `PushMessage`s (one recipient each, the fields of
the router's message in body.json: the issue's 100-message body). Tickets are counted: every one must be `ok`.
Prints one JSON line like bench_tools.py's, notifications/s = ok tickets / elapsed.
"""
import concurrent.futures
import json
import resource
import sys
import threading
import time

from bench_tools import server_cpu, take
from exponent_server_sdk import PushClient, PushMessage
import requests

# Expo's message keys -> PushMessage's field names (the SDK writes them back under Expo's names).
FIELDS = {"data": "data", "title": "title", "body": "body", "ttl": "ttl", "expiration": "expiration",
          "priority": "priority", "subtitle": "subtitle", "sound": "sound", "badge": "badge",
          "channelId": "channel_id", "categoryId": "category", "mutableContent": "mutable_content"}


def main(args):
    pid = take(args, "--server-pid")
    host = take(args, "--host")
    ca = take(args, "--ca")
    count = int(take(args, "--count", "100000"))
    threads = int(take(args, "--threads", "6"))
    warmup = int(take(args, "--warmup", "0"))
    label = take(args, "--label", "")
    with open(take(args, "--body")) as f:
        message = json.load(f)[0]
    fields = {FIELDS[k]: v for k, v in message.items() if k in FIELDS}
    local = threading.local()

    def client():
        if not hasattr(local, "client"):
            session = requests.Session()
            session.verify = ca
            # Else requests lets REQUESTS_CA_BUNDLE / CURL_CA_BUNDLE from the environment override `verify`.
            session.trust_env = False
            session.headers.update({"accept": "application/json", "accept-encoding": "gzip, deflate",
                                    "content-type": "application/json"})
            local.client = PushClient(host=host, session=session, timeout=30)
        return local.client

    def token(i):
        return f"ExponentPushToken[{i:022d}]"

    def batch(start, n):
        messages = [PushMessage(to=token(i), **fields) for i in range(start, start + n)]
        try:
            tickets = client().publish_multiple(messages)
        except Exception as e:  # noqa: BLE001 - a benchmark counts every failure
            return {f"failed:{type(e).__name__}": n}
        ok = sum(1 for t in tickets if t.status == "ok")
        return {"accepted": ok, **({"error": len(tickets) - ok} if len(tickets) != ok else {})}

    def run(n, pool):
        outcomes = {}
        futures = [pool.submit(batch, start, min(100, n - start)) for start in range(0, n, 100)]
        for future in futures:
            for kind, k in future.result().items():
                outcomes[kind] = outcomes.get(kind, 0) + k
        return outcomes

    with concurrent.futures.ThreadPoolExecutor(max_workers=threads) as pool:
        if warmup:
            run(warmup, pool)
        usage0 = resource.getrusage(resource.RUSAGE_SELF)
        server0 = server_cpu(pid)
        t0 = time.perf_counter()
        outcomes = run(count, pool)
        elapsed = time.perf_counter() - t0
        server1 = server_cpu(pid)
        usage1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (usage1.ru_utime + usage1.ru_stime) - (usage0.ru_utime + usage0.ru_stime)
    print(json.dumps({
        "client": "python-exponent-server-sdk", "label": label, "threads": threads, "count": count,
        "seconds": round(elapsed, 3), "notifications_per_s": round(outcomes.get("accepted", 0) / elapsed),
        "cpu_s": round(cpu, 3), "cpu_s_per_10k": round(cpu / count * 10000, 4),
        "peak_rss_mb": round(usage1.ru_maxrss / 1024, 1), "outcomes": outcomes,
        "all_delivered": 1 if outcomes.get("accepted", 0) == count else 0,
        "server_cpu_s": round(server1 - server0, 3)}))


if __name__ == "__main__":
    main(sys.argv[1:])
