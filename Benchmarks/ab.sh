#!/usr/bin/env bash
# Interleaved A/B of two norq-bench binaries against one nghttpd, with h2load between them.
# Same commands as Benchmarks/compare.sh (run_router / run_h2load / start_server nghttpd).
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
COUNT="${COUNT:-100000}"; ROUNDS="${ROUNDS:-2}"; SHAPES="${SHAPES:-1x100 1x1000 4x250}"; WARMUP="${WARMUP:-2000}"
# Usage: BASE_ROOT=<worktree of the old commit> NEW_ROOT=<worktree of the new one> ROUNDS=6 Benchmarks/ab.sh
# (each worktree with `swift build -c release --package-path Benchmarks` done). Results: $WORK/results.jsonl.
WORK="${WORK:-/tmp/bench-ab}"; mkdir -p "$WORK"
BASE_ROOT="${BASE_ROOT:?the old commit's worktree}"; NEW_ROOT="${NEW_ROOT:?the new commit's worktree}"; ROOT="$BASE_ROOT"
BASE="$BASE_ROOT/Benchmarks/.build/release/norq-bench"
NEW="$NEW_ROOT/Benchmarks/.build/release/norq-bench"
KEY="$ROOT/examples/keys/AuthKey_DEMO000000.p8"; TEAM=DEMO000000; KEY_ID=DEMO000000
TOOLS="$ROOT/Benchmarks/bench_tools.py"; RESULTS="$WORK/results.jsonl"
cd "$ROOT"
bench_make_certs "$WORK"
"$BASE" --mode tokens --count "$COUNT" > "$WORK/tokens.txt"
if [ "$(ls "$WORK/docroot/3/device" 2>/dev/null | wc -l)" -lt "$COUNT" ]; then
    mkdir -p "$WORK/docroot/3/device"; (cd "$WORK/docroot/3/device" && xargs touch < "$WORK/tokens.txt")
fi
PORT=18443
nghttpd -a 127.0.0.1 -n 1 -m 1000 -W 24 -d "$WORK/docroot" "$PORT" "$WORK/server.key" "$WORK/server.pem" > "$WORK/nghttpd.log" 2>&1 &
SERVER_PID=$!; echo "$SERVER_PID" > "$WORK/nghttpd.pid"
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do (exec 3<>"/dev/tcp/127.0.0.1/$PORT") 2>/dev/null && break; sleep 0.1; done
CA="$WORK/ca.pem"
"$BASE" --mode prepare --out "$WORK/request" --endpoint "https://127.0.0.1:$PORT" --ca "$CA" --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" > /dev/null
head -n "$COUNT" "$WORK/tokens.txt" | sed "s#^#https://127.0.0.1:$PORT/3/device/#" > "$WORK/uris.txt"
headers=(); while IFS= read -r line; do headers+=(-H "$line"); done < "$WORK/request/headers.txt"
router() {  # which(base|new) bin c m round   (run from that worktree's root, as compare.sh does: templates path)
    if [ "$1" = base ]; then cd "$BASE_ROOT"; else cd "$NEW_ROOT"; fi; python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$2" --mode router --input array --label "$1 $3x$4 r$5 load=$(cut -d' ' -f1 /proc/loadavg)" \
        --endpoint "https://127.0.0.1:$PORT" --ca "$CA" --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" \
        --count "$COUNT" --connections "$3" --in-flight "$(( $3 * $4 ))" --warmup "$WARMUP" | tee -a "$RESULTS"; cd "$ROOT"
}
h2() {  # c m round
    python3 "$TOOLS" h2load --server-pid "$SERVER_PID" --label "h2load $1x$2 r$3 load=$(cut -d' ' -f1 /proc/loadavg)" -- \
        h2load -t 1 -c "$1" -m "$2" -n "$COUNT" -d "$WORK/request/body.json" "${headers[@]}" -i "$WORK/uris.txt" | tee -a "$RESULTS"
}
echo "# $(date -u +%T) start COUNT=$COUNT ROUNDS=$ROUNDS $(uptime)" | tee -a "$WORK/machine.txt"
for r in $(seq 1 "$ROUNDS"); do
  for shape in $SHAPES; do
    c="${shape%x*}"; m="${shape#*x}"
    if [ $(( r % 2 )) = 1 ]; then router base "$BASE" $c $m $r; h2 $c $m $r; router new "$NEW" $c $m $r
    else router new "$NEW" $c $m $r; h2 $c $m $r; router base "$BASE" $c $m $r; fi
  done
  echo "# $(date -u +%T) round $r done $(uptime)" | tee -a "$WORK/machine.txt"
done
