#!/usr/bin/env bash
# Two norq-bench binaries, interleaved, against the APNs emulator (which answers every request with its own apns-id,
# so no response header block repeats): APNs router runs of COUNT notifications at 1xIN_FLIGHT.
#
#   OLD=<norq-bench> NEW=<norq-bench> [ROUNDS=3] [COUNT=20000] [IN_FLIGHT=100] Benchmarks/emulator-ab.sh
#
# Prints one line per run: label, notifications/s, client CPU s per 10,000, outcomes. The emulator is this
# package's release `norq-bench-emulator` (build first: `swift build -c release --package-path Benchmarks`).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
: "${OLD:?OLD=<norq-bench binary>}"; : "${NEW:?NEW=<norq-bench binary>}"
ROUNDS="${ROUNDS:-3}"; COUNT="${COUNT:-20000}"; IN_FLIGHT="${IN_FLIGHT:-100}"
KEY="$ROOT/examples/keys/AuthKey_DEMO000000.p8"
WORK="$(mktemp -d /tmp/norq-emulator-ab.XXXXXX)"
"$ROOT/Benchmarks/.build/release/norq-bench-emulator" --port 0 --key "$KEY" --team DEMO000000 --key-id DEMO000000 \
    --ca-out "$WORK/ca.pem" > "$WORK/emulator.log" 2>&1 &
SERVER=$!; trap 'kill $SERVER 2>/dev/null || true; rm -rf "$WORK"' EXIT
for _ in $(seq 1 100); do grep -q listening "$WORK/emulator.log" && break; sleep 0.1; done
PORT="$(awk '/listening/ {print $2}' "$WORK/emulator.log")"
[ -n "$PORT" ] || { echo "emulator-ab.sh: the emulator did not start" >&2; exit 1; }
cd "$ROOT"
for _ in $(seq 1 "$ROUNDS"); do
    for pair in "old=$OLD" "new=$NEW"; do
        "${pair#*=}" --mode router --input array --label "${pair%%=*}" --endpoint "https://127.0.0.1:$PORT" \
            --ca "$WORK/ca.pem" --key "$KEY" --team DEMO000000 --key-id DEMO000000 --count "$COUNT" \
            --connections 1 --in-flight "$IN_FLIGHT" --warmup 1000 | tail -n 1 | python3 -c '
import json, sys
r = json.loads(sys.stdin.read())
print(r["label"], r["notifications_per_s"], r["cpu_s_per_10k"], r.get("outcomes"))'
    done
done
