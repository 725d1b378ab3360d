#!/usr/bin/env bash
# norq preview's two figures (issue 32), with curl against a built `norq` on 127.0.0.1:
#   first render:            the first POST /api/render after start (a fresh process: the template compiled on
#                            first use), and GET /api/templates;
#   re-render after a save:  from the write of push.md to the `change` event on /events (the watcher's poll, the
#                            project loaded again, validate's checks) plus the POST /api/render the page then makes.
# Works on a copy of the quick start (examples/ and templates/) in a temporary folder; nothing in the tree changes.
#
#   Benchmarks/preview/measure.sh [path/to/norq] [saves]     (default .build/debug/norq, 10 saves)
set -euo pipefail
cd "$(dirname "$0")/../.."
NORQ="$(cd "$(dirname "${1:-.build/debug/norq}")" && pwd)/$(basename "${1:-.build/debug/norq}")"
SAVES="${2:-10}"
TMP="$(mktemp -d /tmp/norq-preview-measure.XXXXXX)"
cp -r examples templates "$TMP/"
PREVIEW_PID=""; EVENTS_PID=""
cleanup() {
    [ -n "$EVENTS_PID" ] && kill "$EVENTS_PID" 2>/dev/null || true
    [ -n "$PREVIEW_PID" ] && kill "$PREVIEW_PID" 2>/dev/null && wait "$PREVIEW_PID" 2>/dev/null || true
    rm -rf "$TMP"
}
trap cleanup EXIT INT TERM

(cd "$TMP/examples/quickstart" && exec "$NORQ" preview --port 0 > "$TMP/preview.out" 2>&1) &
PREVIEW_PID=$!
for _ in $(seq 1 200); do grep -q "http://127.0.0.1:" "$TMP/preview.out" 2>/dev/null && break; sleep 0.05; done
URL="$(grep -o 'http://127.0.0.1:[0-9]*' "$TMP/preview.out" | head -n 1)"
[ -n "$URL" ] || { cat "$TMP/preview.out" >&2; exit 1; }
render() {
    curl -s -o /dev/null -w '%{time_total}' -X POST -H 'content-type: application/json' \
        -d '{"template": "order-shipped", "sample": "Default"}' "$URL/api/render"
}
ms() { awk -v s="$1" 'BEGIN { printf "%.1f", s * 1000 }'; }
echo "norq: $NORQ"
echo "first render (POST /api/render, first request): $(ms "$(render)") ms"
echo "templates list (GET /api/templates): $(ms "$(curl -s -o /dev/null -w '%{time_total}' "$URL/api/templates")") ms"
echo "render again (warm): $(ms "$(render)") ms"

# Each line of the event stream with the time it arrived (ns).
curl -s -N "$URL/events" | while IFS= read -r line; do echo "$(date +%s%N) $line"; done > "$TMP/events.log" &
EVENTS_PID=$!
for _ in $(seq 1 100); do grep -q "event: hello" "$TMP/events.log" 2>/dev/null && break; sleep 0.05; done
results=()
for i in $(seq 1 "$SAVES"); do
    sleep 0.3
    before=$(grep -c "event: change" "$TMP/events.log" || true)
    saved=$(date +%s%N)
    printf '\n' >> "$TMP/templates/order-shipped/push.md"
    for _ in $(seq 1 400); do
        [ "$(grep -c "event: change" "$TMP/events.log" || true)" -gt "$before" ] && break
        sleep 0.005
    done
    changed=$(grep "event: change" "$TMP/events.log" | tail -n 1 | cut -d' ' -f1)
    total=$(awk -v a="$saved" -v b="$changed" -v r="$(render)" 'BEGIN { printf "%.1f", (b - a) / 1e6 + r * 1000 }')
    results+=("$total")
done
sorted=$(printf '%s\n' "${results[@]}" | sort -n)
echo "re-render after a save (write -> change event -> POST /api/render), $SAVES saves: median $(echo "$sorted" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }') ms, max $(echo "$sorted" | tail -n 1) ms"
