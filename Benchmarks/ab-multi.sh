#!/usr/bin/env bash
# ab-multi.sh: ab.sh for several binaries: interleaved APNs router runs of each (order reversed every other round)
# with h2load in the middle, against one nghttpd. Needs ab.sh's scratch directory (certificates, docroot, tokens,
# the prepared request): run ab.sh once first. BINS="name=binary@root ..." (root: the worktree the binary runs
# from, for its templates); names without spaces. Results: $WORK/results.jsonl (summarize as ab.sh's).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
COUNT="${COUNT:-100000}"; ROUNDS="${ROUNDS:-2}"; SHAPES="${SHAPES:-1x100 1x1000 4x250}"; WARMUP="${WARMUP:-2000}"
W="${AB_WORK:-/tmp/bench-ab}"; WORK="${WORK:-/tmp/bench-ab-multi}"; mkdir -p "$WORK"; RESULTS="$WORK/results.jsonl"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"; KEY="$ROOT/examples/keys/AuthKey_DEMO000000.p8"; TEAM=DEMO000000; KEY_ID=DEMO000000
TOOLS="$ROOT/Benchmarks/bench_tools.py"
PORT=18449
nghttpd -a 127.0.0.1 -n 1 -m 1000 -W 24 -d "$W/docroot" "$PORT" "$W/server.key" "$W/server.pem" > "$WORK/nghttpd.log" 2>&1 &
SERVER_PID=$!; trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
wait_port 127.0.0.1 $PORT
CA="$W/ca.pem"
headers=(); while IFS= read -r line; do headers+=(-H "$line"); done < "$W/request/headers.txt"
sed "s#:18443/#:$PORT/#" "$W/uris.txt" | head -n "$COUNT" > "$WORK/uris.txt"
router() {  # name bin root c m round
    cd "$3"; python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$2" --mode router --input array --label "$1 $4x$5 r$6 load=$(cut -d' ' -f1 /proc/loadavg)" \
        --endpoint "https://127.0.0.1:$PORT" --ca "$CA" --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" \
        --count "$COUNT" --connections "$4" --in-flight "$(( $4 * $5 ))" --warmup "$WARMUP" | tee -a "$RESULTS"
}
h2() {  # c m round
    python3 "$TOOLS" h2load --server-pid "$SERVER_PID" --label "h2load $1x$2 r$3 load=$(cut -d' ' -f1 /proc/loadavg)" -- \
        h2load -t 1 -c "$1" -m "$2" -n "$COUNT" -d "$W/request/body.json" "${headers[@]}" -i "$WORK/uris.txt" | tee -a "$RESULTS"
}
echo "# $(date -u +%T) start COUNT=$COUNT ROUNDS=$ROUNDS BINS=$BINS $(uptime)" | tee -a "$WORK/machine.txt"
read -ra bins <<< "$BINS"
run_one() { router "$1" "${2%@*}" "${2#*@}" "$3" "$4" "$5"; }  # name bin@root c m round
bench_interleave ""
