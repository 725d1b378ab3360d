#!/usr/bin/env bash
# The Web Push benchmark (issue 16): encrypted ~1 KB pushes through NotificationRouter + WebPushProvider to an
# HTTP/2 sink (nghttpd on 127.0.0.1), h2load with one pre-encrypted body to the same sink in the same minute (the
# HTTP/2 ceiling), the encryption + signing micro-benchmark, and pywebpush (PyPI, installed into a venv here) to
# the same sink. See Benchmarks/README.md ("Web Push"). Run from anywhere.
#
# The sink: nghttpd serves a docroot; a POST to an existing (empty) file answers 200 with an empty body, which
# the provider counts as delivered (any 2xx is delivered, RFC 8030 push services answer 201). One empty file per
# subscription path (docroot/wp/<token>). nghttpd is a C server that neither decrypts nor verifies, so the
# machine's CPU goes to the senders (the push-service emulator decrypts every message and verifies every VAPID
# token: its CPU would be the bottleneck, not the sender's).
#
# Environment (defaults in brackets):
#   COUNT [50000]  pushes per norq run     RUNS [3]  runs per shape     SHAPES ["1x100 1x1000"]
#   PEER_COUNT [3000]  pushes per pywebpush run      PEER_THREADS ["1 8"]  pywebpush threads per run
#   MICRO_COUNT [20000]  messages per micro-benchmark measurement
#   WORK [/tmp/norq-bench-webpush]  scratch directory      NO_BUILD [0]  skip the release build
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
COUNT="${COUNT:-50000}"; RUNS="${RUNS:-3}"; SHAPES="${SHAPES:-1x100 1x1000}"
PEER_COUNT="${PEER_COUNT:-3000}"; PEER_THREADS="${PEER_THREADS:-1 8}"; MICRO_COUNT="${MICRO_COUNT:-20000}"
WORK="${WORK:-/tmp/norq-bench-webpush}"; NO_BUILD="${NO_BUILD:-0}"; WARMUP="${WARMUP:-2000}"
VAPID="$ROOT/examples/keys/vapid-demo.pem"
TOOLS="$ROOT/Benchmarks/bench_tools.py"; WPTOOLS="$ROOT/Benchmarks/webpush_tools.py"

bench_require_tools h2load:nghttp2-client nghttpd:nghttp2-server openssl:openssl python3:python3

if [ "$NO_BUILD" != 1 ]; then nice swift build -c release --package-path Benchmarks >&2; fi
BIN="$(swift build -c release --package-path Benchmarks --show-bin-path)"
BENCH="$BIN/norq-bench"

mkdir -p "$WORK"
RESULTS="$WORK/results.jsonl"; : > "$RESULTS"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

# The peer: pywebpush from PyPI, and httpx with HTTP/2 for its requests_session hook, in a venv of our own.
if [ ! -x "$WORK/venv/bin/python" ]; then python3 -m venv "$WORK/venv" >&2; fi
if ! "$WORK/venv/bin/python" -c 'import pywebpush, httpx, h2' 2>/dev/null; then
    "$WORK/venv/bin/pip" install -q pywebpush 'httpx[http2]' >&2
fi
PY="$WORK/venv/bin/python"

bench_make_certs "$WORK"
CA="$WORK/ca.pem"

# Docroot: wp/<token> is an empty file for each subscription, so a POST there answers 200, empty.
TOKENS=$(( COUNT > PEER_COUNT ? COUNT : PEER_COUNT ))
"$BENCH" --mode tokens --count "$TOKENS" > "$WORK/tokens.txt"
if [ "$(ls "$WORK/docroot/wp" 2>/dev/null | wc -l)" -lt "$TOKENS" ]; then
    mkdir -p "$WORK/docroot/wp"
    (cd "$WORK/docroot/wp" && xargs touch < "$WORK/tokens.txt")
fi

PORT="${NGHTTPD_PORT:-18453}"
nghttpd -a 127.0.0.1 -n 1 -m 1000 -W 24 -d "$WORK/docroot" "$PORT" "$WORK/server.key" "$WORK/server.pem" \
    > "$WORK/nghttpd.log" 2>&1 &
SERVER_PID=$!; PIDS+=("$SERVER_PID")
wait_port 127.0.0.1 "$PORT"
sleep 0.2
if ! kill -0 "$SERVER_PID" 2>/dev/null; then  # another server holds the port
    echo "nghttpd did not start on port $PORT: $(cat "$WORK/nghttpd.log"); set NGHTTPD_PORT" >&2; exit 1
fi
ENDPOINT="https://127.0.0.1:$PORT"
COMMON=(--endpoint "$ENDPOINT" --ca "$CA" --vapid-key "$VAPID" --webpush-path /wp/)

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee "$WORK/machine.txt"

# What one push is: the plaintext (for pywebpush), one encrypted body and its headers (for h2load).
"$BENCH" --mode webpush-prepare --out "$WORK/request" "${COMMON[@]}" >&2

run_h2load() {  # label connections streams count
    head -n "$4" "$WORK/tokens.txt" | sed "s#^#$ENDPOINT/wp/#" > "$WORK/uris.txt"
    local headers=()
    while IFS= read -r line; do headers+=(-H "$line"); done < "$WORK/request/headers.txt"
    python3 "$TOOLS" h2load --server-pid "$SERVER_PID" --label "$1" -- \
        h2load -t 1 -c "$2" -m "$3" -n "$4" -d "$WORK/request/body.bin" "${headers[@]}" -i "$WORK/uris.txt" \
        | python3 "$WPTOOLS" load | tee -a "$RESULTS"
}

run_norq() {  # label connections streams count
    python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$BENCH" --mode webpush --label "$1" "${COMMON[@]}" \
        --count "$4" --connections "$2" --in-flight "$(( $2 * $3 ))" --warmup "$WARMUP" \
        | python3 "$WPTOOLS" load | tee -a "$RESULTS"
}

for run in $(seq 1 "$RUNS"); do
    "$BENCH" --mode webpush-encrypt --count "$MICRO_COUNT" --warmup 1000 "${COMMON[@]}" \
        | python3 "$WPTOOLS" load | tee -a "$RESULTS"
done

for shape in $SHAPES; do
    connections="${shape%x*}"; streams="${shape#*x}"
    for run in $(seq 1 "$RUNS"); do
        echo "## $shape run $run/$RUNS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        run_norq "$shape" "$connections" "$streams" "$COUNT"
        run_h2load "$shape" "$connections" "$streams" "$COUNT"
    done
done

for threads in $PEER_THREADS; do
    echo "## pywebpush, $threads thread(s) (load $(cut -d' ' -f1 /proc/loadavg))" >&2
    "$PY" "$WPTOOLS" pywebpush --server-pid "$SERVER_PID" --endpoint-prefix "$ENDPOINT/wp/" \
        --tokens "$WORK/tokens.txt" --subscription "$WORK/request/subscription.json" --vapid-key "$VAPID" \
        --ca "$CA" --payload "$WORK/request/plaintext.json" --count "$PEER_COUNT" --threads "$threads" \
        --warmup 100 --label "pywebpush ${threads}t" | python3 "$WPTOOLS" load | tee -a "$RESULTS"
    # norq in the same minute at 1x100, for the ratio.
    run_norq "1x100" 1 100 "$COUNT"
done

kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/machine.txt"
echo
python3 "$WPTOOLS" summary "$RESULTS"
