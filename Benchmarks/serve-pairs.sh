#!/bin/bash
# Issue 33's own measure of tracing's cost, sequential: PAIRS interleaved pairs of `Benchmarks/serve.sh` runs, one
# with tracing off and one with TRACING (otlp), the order alternating by pair, each alone on the machine (200
# clients, SECONDS_LOAD s). Prints per run: pair, tracing, accepted sends/s, p99 ms, server CPU us per accepted send,
# errors; then per pair traced/off and their median. A host whose speed drifts between runs moves these by ±10%:
# Benchmarks/serve-ab.sh (both at once) is the drift-free measure.
#
# env: PAIRS [6]  TRACING [otlp]  SAMPLE_RATIO [1.0]  SECONDS_LOAD [20]  NORQ_BIN [the release norq]  WORK [/tmp/norq-serve-pairs]
#      KEEP_DB [0]: 1 keeps each run's SQLite database (by default removed once its figures are read)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PAIRS="${PAIRS:-6}"; TRACED="${TRACING:-otlp}"; WORK="${WORK:-/tmp/norq-serve-pairs}"
mkdir -p "$WORK"; : > "$WORK/runs.txt"
for i in $(seq 1 "$PAIRS"); do
    if [ $((i % 2)) = 1 ]; then order="off $TRACED"; else order="$TRACED off"; fi
    for t in $order; do
        TRACING=$t SAMPLE_RATIO="${SAMPLE_RATIO:-1.0}" NO_BUILD=1 RENDER_SECONDS=0 WRK=0 BIG_REPEAT=1 \
            SECONDS_LOAD="${SECONDS_LOAD:-20}" WORK="$WORK/$t-$i" "$ROOT/Benchmarks/serve.sh" > "$WORK/$t-$i.out" 2>&1
        python3 - "$WORK/$t-$i/results.jsonl" "$i" "$t" >> "$WORK/runs.txt" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    r = json.loads(line)
    if r.get("mode") == "serve-load":
        print(sys.argv[2], sys.argv[3], r["accepted_per_s"], r["p99_ms"],
              round(r["server_cpu_s"] / r["accepted"] * 1e6, 1), r["error_count"])
PY
        tail -n 1 "$WORK/runs.txt"
        [ "${KEEP_DB:-0}" = 1 ] || rm -f "$WORK/$t-$i"/sqlite/norq.db*
    done
done
python3 - "$WORK/runs.txt" "$TRACED" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    pair, tracing, rate, p99, cpu, errors = line.split()
    runs.setdefault(pair, {})[tracing] = (float(rate), float(cpu))
pairs = [p for p in runs if "off" in runs[p] and sys.argv[2] in runs[p]]
ratio = [runs[p][sys.argv[2]][0] / runs[p]["off"][0] for p in pairs]
cpu = [runs[p][sys.argv[2]][1] / runs[p]["off"][1] for p in pairs]
print({"mode": "serve-pairs", "tracing": sys.argv[2], "traced_over_off": [round(x, 3) for x in ratio],
       "median": round(statistics.median(ratio), 3), "cpu_per_send_median": round(statistics.median(cpu), 3)})
PY
