#!/usr/bin/env bash
# Tracing's cost in `norq serve` (issue 33), measured so that the host's drift cancels: two `Benchmarks/serve.sh`
# runs AT ONCE on the same machine, A (tracing off) and B (TRACING, sampled SAMPLE_RATIO), each a release norq serve
# with its own APNs emulator, SQLite store and load (CLIENTS clients each), the loads started in the same second.
# The kernel shares the cores between them, so whatever the host does in that minute it does to both, and B's
# accepted sends per second over A's is what tracing costs (a server that needs more CPU per send gets fewer sends
# for the same share). Prints each round's ratio and the median. See Benchmarks/README.md ("Stop 37").
#
# Environment (defaults in brackets): ROUNDS [5]  TRACING [otlp] (or swift-otel, with a norq built with the OTLP
# trait)  SAMPLE_RATIO [1.0]  CLIENTS [100]  SECONDS_LOAD [20]  NORQ_BIN [the release norq]  WORK [/tmp/norq-serve-ab]
# SWAP [1]: odd rounds give B the first start (the other order on even rounds)
# A_BIN [NORQ_BIN]: another norq for A (with TRACING=off for B: two builds compared untraced, e.g. an older commit's)
# KEEP_DB [0]: 1 keeps each round's SQLite databases (~125 MB a server a round; by default they are removed once the
# round's figures are read: 26 rounds once filled the disk)
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
ROUNDS="${ROUNDS:-5}"; B_TRACING="${TRACING:-otlp}"; CLIENTS="${CLIENTS:-100}"; WORK="${WORK:-/tmp/norq-serve-ab}"
SECONDS_LOAD="${SECONDS_LOAD:-20}"; SWAP="${SWAP:-1}"
[ -x "${NORQ_BIN:-}" ] || NORQ_BIN="$(cd "$ROOT" && swift build -c release --show-bin-path)/norq"
[ -x "$NORQ_BIN" ] || { echo "no release norq ($NORQ_BIN): swift build -c release --product norq" >&2; exit 1; }
A_BIN="${A_BIN:-$NORQ_BIN}"
mkdir -p "$WORK"
run_one() {  # label tracing start_at
    local bin="$NORQ_BIN"; [ "${1:0:1}" = a ] && bin="$A_BIN"
    env TRACING="$2" START_AT="$3" NO_BUILD=1 NORQ_BIN="$bin" CLIENTS="$CLIENTS" SECONDS_LOAD="$SECONDS_LOAD" \
        RENDER_SECONDS=0 WRK=0 BIG=100 BIG_REPEAT=1 WORK="$WORK/$1" "$ROOT/Benchmarks/serve.sh" > "$WORK/$1.out" 2>&1
}
: > "$WORK/rounds.jsonl"
for round in $(seq 1 "$ROUNDS"); do
    start_at=$(( $(date +%s) + 6 ))
    if [ "$SWAP" = 1 ] && [ $(( round % 2 )) = 1 ]; then
        run_one "b$round" "$B_TRACING" "$start_at" & b=$!; run_one "a$round" off "$start_at" & a=$!
    else
        run_one "a$round" off "$start_at" & a=$!; run_one "b$round" "$B_TRACING" "$start_at" & b=$!
    fi
    wait "$a" || echo "round $round: A (tracing off) exited with $?" >&2
    wait "$b" || echo "round $round: B exited with $?" >&2
    python3 - "$WORK/a$round/results.jsonl" "$WORK/b$round/results.jsonl" "$round" "$B_TRACING" >> "$WORK/rounds.jsonl" <<'PY'
import json, sys
def load(path):
    return next(json.loads(l) for l in open(path) if '"serve-load"' in l)
a, b = load(sys.argv[1]), load(sys.argv[2])
print(json.dumps({"round": int(sys.argv[3]), "tracing": sys.argv[4], "a_per_s": a["accepted_per_s"], "b_per_s": b["accepted_per_s"],
                  "a_p99_ms": a["p99_ms"], "b_p99_ms": b["p99_ms"],
                  "a_cpu_us_per_send": round(a["server_cpu_s"] / a["accepted"] * 1e6, 1),
                  "b_cpu_us_per_send": round(b["server_cpu_s"] / b["accepted"] * 1e6, 1),
                  "b_over_a": round(b["accepted_per_s"] / a["accepted_per_s"], 3)}))
PY
    tail -n 1 "$WORK/rounds.jsonl"
    [ "${KEEP_DB:-0}" = 1 ] || rm -f "$WORK/a$round"/sqlite/norq.db* "$WORK/b$round"/sqlite/norq.db*
done
python3 - "$WORK/rounds.jsonl" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
ratios = sorted(r["b_over_a"] for r in rows)
cpu = sorted(round(r["b_cpu_us_per_send"] / r["a_cpu_us_per_send"], 3) for r in rows)
print(json.dumps({"mode": "serve-ab", "tracing": rows[0]["tracing"], "rounds": len(rows), "b_over_a": ratios,
                  "median_b_over_a": statistics.median(ratios), "cpu_per_send_b_over_a": cpu,
                  "median_cpu_b_over_a": statistics.median(cpu)}))
PY
