#!/usr/bin/env bash
# fcm-pair.sh: paired FCM router runs of two norq-bench binaries against one nghttpd sink, A and B alternating (the
# order swapped every pair); prints each binary's median and the median of the per-pair ratios B/A (throughput and
# CPU). On a machine whose run-to-run spread is large, the ratio of neighbouring runs is steadier than either median:
# two runs of one binary gave a median ratio of 0.988 (0.91-1.02), so about +-2% is noise.
# Needs fcm.sh's scratch directory (run fcm.sh once first).
#   A=<binary> B=<binary> [PAIRS=8] [SHAPE=1x1000] [COUNT=100000] Benchmarks/fcm-pair.sh
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"
A="${A:?the first norq-bench binary}"; B="${B:?the second norq-bench binary}"
PAIRS="${PAIRS:-8}"; SHAPE="${SHAPE:-1x1000}"; COUNT="${COUNT:-100000}"; WARMUP="${WARMUP:-2000}"
F="${FCM_WORK:-/tmp/norq-fcm-bench}"; PORT="${PORT:-28571}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"; cd "$ROOT"
C="${SHAPE%x*}"; M="${SHAPE#*x}"
nghttpd -a 127.0.0.1 -n 1 -m 1000 -W 24 -d "$F/docroot" "$PORT" "$F/server.key" "$F/server.pem" > /dev/null 2>&1 &
SERVER_PID=$!; trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
wait_port 127.0.0.1 "$PORT"
run() {  # label binary
    "$2" --mode fcm --label "$1" --endpoint "https://127.0.0.1:$PORT" --ca "$F/ca.pem" --project norq-demo \
        --service-account examples/keys/fcm-service-account-DEMO.json --token-endpoint "https://127.0.0.1:$PORT/token" \
        --count "$COUNT" --connections "$C" --in-flight "$((C * M))" --warmup "$WARMUP"
}
for i in $(seq 1 "$PAIRS"); do
    if [ $((i % 2)) = 1 ]; then run "A $i" "$A"; run "B $i" "$B"; else run "B $i" "$B"; run "A $i" "$A"; fi
done | python3 -c '
import json, statistics, sys
runs = {}
for line in sys.stdin:
    result = json.loads(line)
    side, pair = result["label"].split()
    runs.setdefault(pair, {})[side] = (result["notifications_per_s"], result["cpu_s_per_10k"], result["all_delivered"])
pairs = [r for r in runs.values() if "A" in r and "B" in r]
if not all(r[s][2] for r in pairs for s in "AB"):
    print("not every run delivered everything")
throughput = sorted(r["B"][0] / r["A"][0] for r in pairs)
cpu = sorted(r["B"][1] / r["A"][1] for r in pairs)
print("A median %.0f/s, B median %.0f/s" % (statistics.median(r["A"][0] for r in pairs), statistics.median(r["B"][0] for r in pairs)))
print("B/A throughput: median %.3f (%s)" % (statistics.median(throughput), " ".join("%.2f" % x for x in throughput)))
print("B/A CPU s/10k: median %.3f (%s)" % (statistics.median(cpu), " ".join("%.2f" % x for x in cpu)))
'
