#!/usr/bin/env bash
# Times `norq lint` on a generated project of COUNT templates (issue 32; target: <= 2 s for 1,000, release build).
#   Benchmarks/lint.sh                 # builds `norq` in release (unless NO_BUILD=1), COUNT=1000, RUNS=5
# Prints the median wall time of RUNS runs and the CPU time of one (load average too: a busy machine inflates wall).
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-1000}
RUNS=${RUNS:-5}
WORK=${WORK:-/tmp/norq-lint-bench}
CONFIGURATION=${CONFIGURATION:-release}
SCRATCH_ARGS=()
if [ -n "${SCRATCH:-}" ]; then SCRATCH_ARGS=(--scratch-path "$SCRATCH"); fi   # a separate build folder
if [ "${NO_BUILD:-0}" != 1 ]; then swift build -c "$CONFIGURATION" --product norq "${SCRATCH_ARGS[@]}" >/dev/null; fi
NORQ=$(swift build -c "$CONFIGURATION" --show-bin-path "${SCRATCH_ARGS[@]}")/norq
rm -rf "$WORK"
python3 Benchmarks/lint_project.py "$WORK" --count "$COUNT" >/dev/null
"$NORQ" lint --config "$WORK/norq.yaml" | tail -1
times=()
for _ in $(seq "$RUNS"); do
  start=$(date +%s.%N)
  "$NORQ" lint --config "$WORK/norq.yaml" >/dev/null
  end=$(date +%s.%N)
  times+=("$(echo "$end - $start" | bc)")
done
# CPU time of one more run (user + system), which load from other processes does not inflate.
/usr/bin/time -f "cpu: %U s user, %S s system, %e s wall, %M KB max RSS" "$NORQ" lint --config "$WORK/norq.yaml" >/dev/null
uptime
printf '%s\n' "${times[@]}" | sort -n | awk -v count="$COUNT" -v cfg="$CONFIGURATION" \
  '{ t[NR] = $1 } END { printf "norq lint, %d templates (%s): runs %s; median %.3f s\n", count, cfg, NR, t[int((NR + 1) / 2)] }'
