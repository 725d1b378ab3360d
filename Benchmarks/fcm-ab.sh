#!/usr/bin/env bash
# fcm-ab.sh: interleaved FCM router runs of several norq-bench binaries (order reversed every other round) with
# h2load in the middle, against one nghttpd as the FCM-shaped sink. Needs fcm.sh's scratch directory (run fcm.sh
# once first). BINS="name=binary ..." (names without spaces). Results: $WORK/fcm-results.jsonl.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
COUNT="${COUNT:-100000}"; ROUNDS="${ROUNDS:-2}"; SHAPES="${SHAPES:-1x100 1x1000}"; WARMUP="${WARMUP:-2000}"
F="${FCM_WORK:-/tmp/norq-fcm-bench}"; WORK="${WORK:-/tmp/bench-fcm-ab}"; mkdir -p "$WORK"; RESULTS="$WORK/fcm-results.jsonl"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"; TOOLS="$ROOT/Benchmarks/bench_tools.py"; FCM_TOOLS="$ROOT/Benchmarks/fcm_tools.py"
PROJECT=norq-demo; ACCOUNT="$ROOT/examples/keys/fcm-service-account-DEMO.json"
cd "$ROOT"; PORT=28519
nghttpd -a 127.0.0.1 -n 1 -m 1000 -W 24 -d "$F/docroot" "$PORT" "$F/server.key" "$F/server.pem" > "$WORK/fcm-nghttpd.log" 2>&1 &
SERVER_PID=$!; trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
wait_port 127.0.0.1 $PORT
ARGS=(--endpoint "https://127.0.0.1:$PORT" --ca "$F/ca.pem" --project "$PROJECT" --service-account "$ACCOUNT" --token-endpoint "https://127.0.0.1:$PORT/token")
read -ra bins <<< "$BINS"
first="${bins[0]#*=}"
"$first" --mode fcm-prepare --out "$WORK/fcm-request" "${ARGS[@]}" > /dev/null
headers=(); while IFS= read -r line; do headers+=(-H "$line"); done < "$WORK/fcm-request/headers.txt"
router() {  # name bin c m round
    cd "$ROOT"; python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$2" --mode fcm --label "$1 $3x$4 r$5 load=$(cut -d' ' -f1 /proc/loadavg)" "${ARGS[@]}" \
        --count "$COUNT" --connections "$3" --in-flight "$(( $3 * $4 ))" --warmup "$WARMUP" | tee -a "$RESULTS"
}
h2() {  # c m round
    python3 "$TOOLS" h2load --server-pid "$SERVER_PID" --label "h2load $1x$2 r$3 load=$(cut -d' ' -f1 /proc/loadavg)" -- \
        h2load -t 1 -c "$1" -m "$2" -n "$COUNT" -d "$WORK/fcm-request/body.json" "${headers[@]}" \
        "https://127.0.0.1:$PORT$(cat "$WORK/fcm-request/path.txt")" | tee -a "$RESULTS"
}
echo "# $(date -u +%T) fcm start COUNT=$COUNT ROUNDS=$ROUNDS BINS=$BINS $(uptime)" | tee -a "$WORK/machine.txt"
run_one() { router "$@"; }  # name bin c m round
bench_interleave "fcm "
