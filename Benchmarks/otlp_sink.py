#!/usr/bin/env python3
"""A local OTLP/HTTP collector stand-in for Benchmarks/serve.sh (TRACING=otlp): accepts every POST (a
`/v1/traces` export of protobuf spans), answers 200 with an empty ExportTraceServiceResponse, and counts the exports
and their bytes, and its own CPU seconds (written to the stats file on SIGTERM). 127.0.0.1 only; nothing is kept."""
import json, resource, signal, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, stats_path = int(sys.argv[1]), sys.argv[2]
stats = {"exports": 0, "bytes": 0}


class Sink(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        remaining = length
        while remaining > 0:
            chunk = self.rfile.read(min(remaining, 1 << 16))
            if not chunk:
                break
            remaining -= len(chunk)
        stats["exports"] += 1
        stats["bytes"] += length
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def stop(*_):
    usage = resource.getrusage(resource.RUSAGE_SELF)
    stats["cpu_s"] = round(usage.ru_utime + usage.ru_stime, 2)
    with open(stats_path, "w") as f:
        json.dump(stats, f)
    sys.exit(0)


signal.signal(signal.SIGTERM, stop)
ThreadingHTTPServer(("127.0.0.1", port), Sink).serve_forever()
