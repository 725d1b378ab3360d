#!/usr/bin/env python3
"""A local OTLP/HTTP trace receiver for scripts/otlp-export.sh: accepts `POST /v1/traces` (protobuf
ExportTraceServiceRequest, gzip or not), decodes the spans with a minimal protobuf reader (no dependency), and appends
one JSON line per span to the output file: trace_id, span_id, parent_span_id (hex), name, kind and the attribute keys;
the raw request bodies go to OUT.raw. 127.0.0.1 only."""
import gzip, json, sys
from http.server import BaseHTTPRequestHandler, HTTPServer

port, out_path = int(sys.argv[1]), sys.argv[2]


def fields(data):
    """(field number, wire type, value) of one protobuf message: ints for varints, bytes for length-delimited."""
    i = 0
    while i < len(data):
        key, i = varint(data, i)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, i = varint(data, i)
        elif wire == 1:
            value, i = data[i:i + 8], i + 8
        elif wire == 2:
            length, i = varint(data, i)
            value, i = data[i:i + length], i + length
        elif wire == 5:
            value, i = data[i:i + 4], i + 4
        else:
            raise ValueError(f"wire type {wire}")
        yield number, wire, value


def varint(data, i):
    result = shift = 0
    while True:
        byte = data[i]
        i += 1
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result, i
        shift += 7


def spans(request):
    # ExportTraceServiceRequest.resource_spans = 1; ResourceSpans.scope_spans = 2; ScopeSpans.spans = 2;
    # Span: trace_id 1, span_id 2, parent_span_id 4, name 5, kind 6, attributes 9 (KeyValue: key 1).
    for n, _, resource_spans in fields(request):
        if n != 1:
            continue
        for n2, _, scope_spans in fields(resource_spans):
            if n2 != 2:
                continue
            for n3, _, span in fields(scope_spans):
                if n3 != 2:
                    continue
                record = {"parent_span_id": "", "attributes": []}
                for n4, _, value in fields(span):
                    if n4 == 1: record["trace_id"] = value.hex()
                    elif n4 == 2: record["span_id"] = value.hex()
                    elif n4 == 4: record["parent_span_id"] = value.hex()
                    elif n4 == 5: record["name"] = value.decode()
                    elif n4 == 6: record["kind"] = value
                    elif n4 == 9:
                        for n5, _, key in fields(value):
                            if n5 == 1: record["attributes"].append(key.decode())
                yield record


class Receiver(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.headers.get("Content-Encoding") == "gzip":
            body = gzip.decompress(body)
        with open(out_path + ".raw", "ab") as raw:
            raw.write(body)
        with open(out_path, "a") as out:
            for record in spans(body):
                out.write(json.dumps(record) + "\n")
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


HTTPServer(("127.0.0.1", port), Receiver).serve_forever()
