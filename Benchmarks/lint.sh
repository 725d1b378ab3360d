#!/usr/bin/env bash
# Times `norq lint` on a generated project of COUNT templates (issue 32; target: <= 2 s for 1,000, release build).
#   Benchmarks/lint.sh                 # builds `norq` in release (unless NO_BUILD=1), COUNT=1000, RUNS=5
# Prints each run's wall time and the median.
set -euo pipefail
cd "$(dirname "$0")/.."
COUNT=${COUNT:-1000}
RUNS=${RUNS:-5}
WORK=${WORK:-/tmp/norq-lint-bench}
CONFIGURATION=${CONFIGURATION:-release}
if [ "${NO_BUILD:-0}" != 1 ]; then swift build -c "$CONFIGURATION" --product norq >/dev/null; fi
NORQ=$(swift build -c "$CONFIGURATION" --show-bin-path)/norq
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
printf '%s\n' "${times[@]}" | sort -n | awk -v count="$COUNT" -v cfg="$CONFIGURATION" \
  '{ t[NR] = $1 } END { printf "norq lint, %d templates (%s): runs %s; median %.3f s\n", count, cfg, NR, t[int((NR + 1) / 2)] }'
