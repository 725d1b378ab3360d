#!/usr/bin/env bash
# perf-one.sh: one APNs router run of a norq-bench binary against a fresh nghttpd, under a wrapper command (a profiler
# or a counter), for the profiles of the README's "NorqHTTP2 CPU, stop 24". Needs ab.sh's scratch directory (run
# ab.sh once first). Run it under the benchmark lock:
#   flock /tmp/norq-bench.lock Benchmarks/perf-one.sh "perf record -F 4999 -g -o /tmp/p.data" <norq-bench> 1 1000
#   flock /tmp/norq-bench.lock Benchmarks/perf-one.sh "perf stat -e syscalls:sys_enter_futex,task-clock" <norq-bench> 4 250
#   flock /tmp/norq-bench.lock Benchmarks/perf-one.sh "strace -f -e trace=futex -k -o /tmp/futex.txt" <norq-bench> 4 250
# ROOT (default: this worktree) is where the binary runs from (its templates); COUNT defaults to 100,000.
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
WRAP="${1?wrapper command, or \"\"}"; BIN="${2:?norq-bench binary}"; C="${3:-1}"; M="${4:-1000}"
W="${AB_WORK:-/tmp/bench-ab}"; ROOT="${ROOT:-$(cd "$(dirname "$0")/.." && pwd)}"; PORT="${PORT:-18471}"
[ -s "$W/server.pem" ] || { echo "run Benchmarks/ab.sh once first (it makes $W)" >&2; exit 1; }
nghttpd -a 127.0.0.1 -n 1 -m 1000 -W 24 -d "$W/docroot" "$PORT" "$W/server.key" "$W/server.pem" > /dev/null 2>&1 &
SERVER_PID=$!; trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
wait_port 127.0.0.1 "$PORT"
cd "$ROOT"
# shellcheck disable=SC2086  # the wrapper is a command line
$WRAP "$BIN" --mode router --input array --endpoint "https://127.0.0.1:$PORT" --ca "$W/ca.pem" \
    --key examples/keys/AuthKey_DEMO000000.p8 --team DEMO000000 --key-id DEMO000000 \
    --count "${COUNT:-100000}" --connections "$C" --in-flight $(( C * M )) --warmup 2000
