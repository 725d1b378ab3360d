#!/usr/bin/env bash
# expo-ab.sh: interleaved runs of two or more norq-bench binaries (`--mode expo`) against one Expo sink, for A/B
# figures of the Expo router path (Benchmarks/README.md, "Stop 36"). Run it under the benchmark lock:
#   /work/shared-cpu.sh bench Benchmarks/expo-ab.sh 4 /tmp/expo-base-bench Benchmarks/.build/release/norq-bench
# Prints one line per run: round, binary, notifications/s, CPU s per 10k, p99 ms, all delivered (1/0).
# Environment: COUNT [500000], IN_FLIGHT [1000], GZIP [0], SINK [the release build's norq-bench-expo-sink],
# WORK [/tmp/norq-expo-ab].
set -u
ROUNDS="${1:?rounds}"; shift
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
SINK="${SINK:-$ROOT/Benchmarks/.build/release/norq-bench-expo-sink}"
WORK="${WORK:-/tmp/norq-expo-ab}"
mkdir -p "$WORK"
"$SINK" --port 0 --ca-out "$WORK/ca.pem" > "$WORK/sink.log" 2>&1 &
SINK_PID=$!
trap 'kill "$SINK_PID" 2>/dev/null || true' EXIT
for _ in $(seq 1 100); do grep -q listening "$WORK/sink.log" && break; sleep 0.1; done
PORT="$(awk '/listening/ {print $2}' "$WORK/sink.log")"
[ -n "$PORT" ] || { echo "the sink did not start: $(cat "$WORK/sink.log")" >&2; exit 1; }
echo "# sink $PORT, load $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
    for bin in "$@"; do
        out="$("$bin" --mode expo --endpoint "https://127.0.0.1:$PORT" --ca "$WORK/ca.pem" --count "${COUNT:-500000}" \
            --in-flight "${IN_FLIGHT:-1000}" --warmup 2000 --expo-gzip "${GZIP:-0}" 2>&1 | tail -1)"
        echo "round $round $bin $(printf '%s' "$out" | python3 -c 'import json,sys
try:
    r = json.loads(sys.stdin.read()); print(r["notifications_per_s"], r["cpu_s_per_10k"], r["p99_ms"], r["all_delivered"])
except Exception as e:
    print("failed:", e)')"
        case "$out" in "{"*) ;; *) echo "  $out" ;; esac
    done
done
echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)"
