#!/usr/bin/env bash
# The Expo benchmark (issue 31): NotificationRouter + NorqExpo (batched, 100 recipients a request) against h2load
# (the HTTP/2 ceiling) on the same Expo-shaped sink, in the same run: norq-bench-expo-sink (Benchmarks/Sources),
# which answers POST /--/api/v2/push/send with one ok ticket per recipient it counts (a scanner, not a JSON parser;
# gzip bodies inflated), so a partial batch (the router's linger timer fired) is answered as it should be.
# h2load sends one 100-recipient body (uncompressed); its notifications/s are its requests/s x 100. The router
# runs plain (`--expo-gzip 0`, the same bytes as h2load) and with gzip (what it does by default).
# The Python exponent-server-sdk (PyPI, on `requests`: HTTP/1.1 only) runs against the same sink's HTTP/1.1 port (TLS,
# the same answers), at the in-flight 600 label: a thread pool of 6 (Expo's advice), each thread its own PushClient
# and Session, each task one publish_multiple of 100 messages (Benchmarks/expo_sdk_peer.py). It is installed with pip
# in a venv under WORK; without PyPI it is skipped, and said so.
#
# Environment (defaults in brackets):
#   COUNT [100000]  notifications per run     RUNS [3]   IN_FLIGHTS ["600 1000"]  router maxInFlight (targets)
#   WARMUP [2000]   WORK [/tmp/norq-expo-bench]   NO_BUILD [0]  skip the release build of Benchmarks
#   SDK [1]  run the Python SDK peer   SDK_COUNT [20000]  its notifications per run   SDK_THREADS [6]
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
COUNT="${COUNT:-100000}"; RUNS="${RUNS:-3}"; IN_FLIGHTS="${IN_FLIGHTS:-600 1000}"; WARMUP="${WARMUP:-2000}"
WORK="${WORK:-/tmp/norq-expo-bench}"; NO_BUILD="${NO_BUILD:-0}"
SDK="${SDK:-1}"; SDK_COUNT="${SDK_COUNT:-20000}"; SDK_THREADS="${SDK_THREADS:-6}"
TOOLS="$ROOT/Benchmarks/bench_tools.py"

for tool in h2load:nghttp2-client python3:python3; do
    command -v "${tool%%:*}" >/dev/null || { echo "missing ${tool%%:*}: apt-get install ${tool##*:}" >&2; exit 1; }
done
if [ "$NO_BUILD" != 1 ]; then swift build -c release --package-path Benchmarks >&2; fi
BIN="$(swift build -c release --package-path Benchmarks --show-bin-path)"
BENCH="$BIN/norq-bench"

mkdir -p "$WORK"
RESULTS="$WORK/results.jsonl"; : > "$RESULTS"

# The sink's HTTP/1.1 port (for the Python SDK) needs a certificate: a self-signed one for 127.0.0.1.
[ -s "$WORK/h1.pem" ] || openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 30 \
    -subj "/CN=127.0.0.1" -addext "subjectAltName=IP:127.0.0.1" -keyout "$WORK/h1.key" -out "$WORK/h1.pem" 2>/dev/null
"$BIN/norq-bench-expo-sink" --port "${SINK_PORT:-0}" --ca-out "$WORK/sink-ca.pem" \
    --http1-port 0 --http1-cert "$WORK/h1.pem" --http1-key "$WORK/h1.key" > "$WORK/sink.log" 2>&1 &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q listening "$WORK/sink.log" && break; sleep 0.1; done
PORT="$(awk '/listening/ {print $2}' "$WORK/sink.log")"
H1_PORT="$(awk '/^http1/ {print $2}' "$WORK/sink.log")"
[ -n "$PORT" ] && [ -n "$H1_PORT" ] || { echo "the sink did not start: $(cat "$WORK/sink.log")" >&2; exit 1; }
wait_port 127.0.0.1 "$PORT"

# The Python exponent-server-sdk, in a venv of its own (skipped, and said so, when PyPI cannot be reached).
SDK_PY=""
if [ "$SDK" = 1 ]; then
    if [ -x "$WORK/sdk-venv/bin/python" ] && "$WORK/sdk-venv/bin/python" -c 'import exponent_server_sdk' 2>/dev/null; then
        SDK_PY="$WORK/sdk-venv/bin/python"
    elif python3 -m venv "$WORK/sdk-venv" >&2 && "$WORK/sdk-venv/bin/pip" install -q exponent_server_sdk >&2; then
        SDK_PY="$WORK/sdk-venv/bin/python"
    else
        echo "the Python exponent-server-sdk could not be installed (pip install exponent_server_sdk: PyPI unreachable?): its line is skipped" >&2
    fi
    [ -z "$SDK_PY" ] || echo "# exponent-server-sdk $("$SDK_PY" -m pip show exponent_server_sdk 2>/dev/null | awk '/^Version/ {print $2}'), requests $("$SDK_PY" -m pip show requests 2>/dev/null | awk '/^Version/ {print $2}')" >&2
fi

ARGS=(--endpoint "https://127.0.0.1:$PORT" --ca "$WORK/sink-ca.pem")
"$BENCH" --mode expo-prepare --out "$WORK/request" "${ARGS[@]}" >&2
HEADERS=()
while IFS= read -r line; do HEADERS+=(-H "$line"); done < "$WORK/request/headers.txt"

echo "# machine: $(nproc) cores, load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$WORK/machine.txt" >&2
for in_flight in $IN_FLIGHTS; do
    streams=$(( in_flight / 100 ))
    for run in $(seq 1 "$RUNS"); do
        echo "## in-flight $in_flight ($streams streams of 100) run $run/$RUNS" >&2
        for gzip in 0 1; do
            python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$BENCH" --mode expo --label "expo $in_flight" \
                "${ARGS[@]}" --count "$COUNT" --in-flight "$in_flight" --warmup "$WARMUP" --expo-gzip "$gzip" \
                | tee -a "$RESULTS"
        done
        # The Python SDK at the in-flight of its 6 threads (600 targets = 6 requests of 100), over HTTP/1.1.
        if [ -n "$SDK_PY" ] && [ "$streams" = "$SDK_THREADS" ]; then
            PYTHONPATH="$ROOT/Benchmarks" "$SDK_PY" "$ROOT/Benchmarks/expo_sdk_peer.py" --server-pid "$SERVER_PID" \
                --host "https://127.0.0.1:$H1_PORT" --ca "$WORK/h1.pem" --body "$WORK/request/body.json" \
                --count "$SDK_COUNT" --threads "$SDK_THREADS" --warmup 1000 --label "expo $in_flight" | tee -a "$RESULTS"
        fi
        # h2load: COUNT/100 requests of 100 recipients on `streams` concurrent streams; notifications = requests x 100.
        # Twice: the issue's body (100 messages) and the router's (one message, 100 tokens in `to`: the same bytes).
        for shape in body:h2load body-batched:h2load-router-body; do
            python3 "$TOOLS" h2load --server-pid "$SERVER_PID" --label "expo $in_flight" -- \
                h2load -t 1 -c 1 -m "$streams" -n "$(( COUNT / 100 ))" -d "$WORK/request/${shape%%:*}.json" "${HEADERS[@]}" \
                "https://127.0.0.1:$PORT$(cat "$WORK/request/path.txt")" \
                | CLIENT="${shape##*:}" python3 -c 'import json,os,sys
for line in sys.stdin:
    r = json.loads(line)
    if "notifications_per_s" in r:
        r["client"] = os.environ["CLIENT"]
        r["requests_per_s"] = r["notifications_per_s"]; r["notifications_per_s"] *= 100; r["count"] *= 100
        r["cpu_s_per_10k"] = round(r["cpu_s"] / r["count"] * 10000, 4)
    print(json.dumps(r))' | tee -a "$RESULTS"
        done
    done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/machine.txt" >&2

python3 - "$RESULTS" <<'PY'
import json, sys, statistics
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
groups = {}
for r in rows:
    if "notifications_per_s" in r:
        groups.setdefault((r.get("label"), r["client"]), []).append(r)
print(f'{"label":<12} {"client":<24} {"notif/s":>10} {"cpu s/10k":>10} {"p99 ms":>8} {"x h2load":>9} {"x same bytes":>13}')
for label in sorted({k[0] for k in groups}):
    def ceiling(client):
        rs = groups.get((label, client))
        return statistics.median(r["notifications_per_s"] for r in rs) if rs else None
    h2, same = ceiling("h2load"), ceiling("h2load-router-body")
    for (l, client), rs in sorted(groups.items()):
        if l != label: continue
        rate = statistics.median(r["notifications_per_s"] for r in rs)
        cpu = statistics.median(r["cpu_s_per_10k"] for r in rs)
        p99 = statistics.median(r.get("p99_ms", 0) for r in rs)
        ratio = f"{rate / h2:.2f}" if h2 else "-"
        ratio_same = f"{rate / same:.2f}" if same else "-"
        print(f"{label:<12} {client:<24} {rate:>10.0f} {cpu:>10.4f} {p99:>8.1f} {ratio:>9} {ratio_same:>13}")
    sdk = ceiling("python-exponent-server-sdk")
    if sdk:
        for client in ("norq-router-expo", "norq-router-expo-gzip"):
            norq = ceiling(client)
            if norq:
                print(f"{label:<12} {client} / python-exponent-server-sdk: {norq / sdk:.1f} x")
PY
