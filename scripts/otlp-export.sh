#!/usr/bin/env bash
# The OTLP export end to end (issue 33): `norq serve` with `telemetry: { traces: $EXPORTER }` and its in-process
# emulators; one `POST /v1/sends?wait=true` carrying a W3C `traceparent` is delivered; at shutdown the spans are
# flushed to scripts/otlp_receiver.py (a local OTLP/HTTP receiver that decodes the protobuf itself). Checks: the
# request span is the caller's child, `norq.enqueue` the request's, `norq.claim` (the worker, through the store) the
# request's too, `norq.attempt` the claim's; every span in the caller's trace; the device token in no exported byte.
# Run by scripts/test.sh after schemathesis (unfiltered runs), once per exporter.
#
#   EXPORTER=otlp        Norq's own exporter (NorqOTLP, every build; the default): the package's debug `norq`
#   EXPORTER=swift-otel  swift-otel's: a norq built with the OTLP trait (`swift build --traits OTLP --product norq`,
#                        debug, in the package's .build: after `swift test` it compiles swift-otel and its
#                        dependencies and recompiles the package's own targets with the trait)
#   NORQ_OTLP_BIN=PATH   the norq to run instead of building one
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"
EXPORTER="${EXPORTER:-otlp}"; export EXPORTER
if [ -n "${NORQ_OTLP_BIN:-}" ]; then
    NORQ="$NORQ_OTLP_BIN"
elif [ "$EXPORTER" = swift-otel ]; then
    echo "scripts/otlp-export.sh: building norq with the OTLP trait" >&2
    swift build --traits OTLP --product norq >&2
    NORQ="$(swift build --traits OTLP --show-bin-path)/norq"
else
    swift build --product norq >&2
    NORQ="$(swift build --show-bin-path)/norq"
fi
[ -x "$NORQ" ] || { echo "scripts/otlp-export.sh: no $NORQ" >&2; exit 1; }

WORK="$(mktemp -d /tmp/norq-otlp.XXXXXX)"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    wait 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
wait_http() {  # url pid
    for _ in $(seq 1 150); do
        python3 -c "import urllib.request; urllib.request.urlopen('$1', timeout=1)" >/dev/null 2>&1 && return 0
        kill -0 "$2" 2>/dev/null || return 1
        sleep 0.1
    done
    return 1
}

SINK_PORT="$(free_port)"
python3 scripts/otlp_receiver.py "$SINK_PORT" "$WORK/spans.jsonl" > "$WORK/receiver.log" 2>&1 &
SINK_PID=$!; PIDS+=("$SINK_PID")
PORT="$(free_port)"
KEY="otlp-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
cat > "$WORK/norq.yaml" <<YAML
templates: $ROOT/templates
providers:
  apns:
    config:
      keyId: DEMO000000
      teamId: TEAM123ABC
      keyPath: $ROOT/examples/keys/AuthKey_DEMO000000.p8
      bundleId: com.example.MyApp
      production: false
routing:
  push: apns
store:
  sqlite: $WORK/norq.db
server:
  host: 127.0.0.1
  port: $PORT
  apiKeys:
    - { name: otlp, key: "$KEY", scopes: [admin] }
telemetry: { traces: $EXPORTER, endpoint: "http://127.0.0.1:$SINK_PORT", serviceName: norq-otlp-test, sampleRatio: 1.0 }
YAML
"$NORQ" serve -c "$WORK/norq.yaml" --emulator > "$WORK/serve.log" 2>&1 &
SERVER_PID=$!; PIDS+=("$SERVER_PID")
wait_http "http://127.0.0.1:$PORT/healthz" "$SERVER_PID" || { echo "scripts/otlp-export.sh: norq serve did not start" >&2; cat "$WORK/serve.log" >&2; exit 1; }

TRACE_ID="$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
PARENT_ID="$(python3 -c 'import secrets; print(secrets.token_hex(8))')"
TOKEN="$(python3 -c 'import secrets; print(secrets.token_hex(32))')"
python3 - "$PORT" "$KEY" "$TRACE_ID" "$PARENT_ID" "$TOKEN" <<'PY'
import json, sys, urllib.request
port, key, trace, parent, token = sys.argv[1:]
body = json.dumps({"template": "order-shipped", "sample": "Default", "to": [{"token": token, "platform": "ios"}]}).encode()
request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/sends?wait=true&timeout=20", data=body, method="POST",
                                 headers={"authorization": f"Bearer {key}", "content-type": "application/json",
                                          "traceparent": f"00-{trace}-{parent}-01"})
answer = json.load(urllib.request.urlopen(request, timeout=30))
assert answer.get("status") == "finished", answer
assert answer["summary"].get("delivered") == 1, answer
PY
# A graceful stop flushes the spans still batched.
kill -TERM "$SERVER_PID"
for _ in $(seq 1 200); do kill -0 "$SERVER_PID" 2>/dev/null || break; sleep 0.1; done
if kill -0 "$SERVER_PID" 2>/dev/null; then echo "scripts/otlp-export.sh: norq serve did not stop in 20 s" >&2; exit 1; fi

python3 - "$WORK/spans.jsonl" "$TRACE_ID" "$PARENT_ID" "$TOKEN" <<'PY'
import json, os, sys
path, trace, parent, token = sys.argv[1:]
spans = [json.loads(line) for line in open(path)] if os.path.exists(path) else []
def fail(message):
    print(f"scripts/otlp-export.sh: {message}; spans received: {json.dumps(spans, indent=1)}", file=sys.stderr)
    sys.exit(1)
mine = [s for s in spans if s.get("trace_id") == trace]
by_name = {}
for s in mine:
    by_name.setdefault(s["name"], []).append(s)
request = [s for s in mine if s["parent_span_id"] == parent]
if len(request) != 1: fail(f"expected one span whose parent is the caller's span {parent}")
request = request[0]
def one(name):
    found = by_name.get(name, [])
    if len(found) != 1: fail(f"expected one {name} span in trace {trace}, found {len(found)}")
    return found[0]
enqueue, claim, attempt = one("norq.enqueue"), one("norq.claim"), one("norq.attempt")
if enqueue["parent_span_id"] != request["span_id"]: fail("norq.enqueue is not the request span's child")
if claim["parent_span_id"] != request["span_id"]: fail("norq.claim (through the store) is not the request span's child")
if attempt["parent_span_id"] != claim["span_id"]: fail("norq.attempt is not norq.claim's child")
# The attributes docs/server.md names for each span (each once: OTLP keys are unique within a span).
expected = {
    "request": (request, {"http.request.method", "url.path", "http.route", "http.response.status_code"}),
    "norq.enqueue": (enqueue, {"norq.template", "norq.send.id", "norq.send.created", "norq.targets"}),
    "norq.claim": (claim, {"norq.send.id", "norq.rows", "norq.worker"}),
    "norq.attempt": (attempt, {"norq.provider", "norq.platform", "norq.target.kind", "norq.target.position",
                               "norq.attempt", "norq.send.id", "http.response.status_code", "norq.outcome"}),
}
for label, (span, keys) in expected.items():
    if not keys <= set(span["attributes"]): fail(f"{label} lacks attributes {sorted(keys - set(span['attributes']))}")
    if len(span["attributes"]) != len(set(span["attributes"])): fail(f"{label} repeats an attribute key")
raw = open(path + ".raw", "rb").read()
if token.encode() in raw or bytes.fromhex(token) in raw: fail("the device token was exported")
print(f"scripts/otlp-export.sh: OTLP export ({os.environ.get('EXPORTER', 'otlp')}) ok: {len(mine)} spans in the caller's trace "
      f"({request['name']} -> norq.enqueue, {request['name']} -> norq.claim -> norq.attempt), {len(spans)} received in all")
PY
