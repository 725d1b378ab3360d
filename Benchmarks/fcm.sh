#!/usr/bin/env bash
# The FCM benchmark (issue 15): NotificationRouter + NorqFCM against h2load (the HTTP/2 ceiling) and the Firebase
# Admin SDK for Python, on two FCM-shaped servers: nghttpd (a docroot file answers
# POST /v1/projects/<id>/messages:send with FCM's 200 body, another is the fake OAuth token endpoint) and the
# project's FCM emulator (which verifies the RS256 assertion and the message). See Benchmarks/README.md.
# Run from anywhere; everything happens on 127.0.0.1.
#
# Environment (defaults in brackets):
#   COUNT [100000]  notifications per run      RUNS [3]  runs per (server, shape, client) for the medians
#   SHAPES ["1x100 1x1000"]  connections x streams per connection (router maxInFlight = their product)
#   SERVERS ["nghttpd emulator"]   PEERS [1] also run firebase-admin (send_each_async, HTTP/2) on nghttpd, 1 run per shape
#   PEER_COUNT [10000]  notifications per firebase-admin run   WARMUP [2000]
#   WORK [/tmp/norq-fcm-bench]  scratch directory (certificates, docroot, venv, results.jsonl)
#   NO_BUILD [0]  skip `swift build -c release --package-path Benchmarks`
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
COUNT="${COUNT:-100000}"; RUNS="${RUNS:-3}"; SHAPES="${SHAPES:-1x100 1x1000}"
SERVERS="${SERVERS:-nghttpd emulator}"; PEERS="${PEERS:-1}"; PEER_COUNT="${PEER_COUNT:-10000}"
WORK="${WORK:-/tmp/norq-fcm-bench}"; NO_BUILD="${NO_BUILD:-0}"; WARMUP="${WARMUP:-2000}"
PROJECT=norq-demo
ACCOUNT="$ROOT/examples/keys/fcm-service-account-DEMO.json"
TOOLS="$ROOT/Benchmarks/bench_tools.py"; FCM_TOOLS="$ROOT/Benchmarks/fcm_tools.py"
ACCESS_TOKEN="norq-bench-access-token"

bench_require_tools h2load:nghttp2-client nghttpd:nghttp2-server openssl:openssl python3:python3

if [ "$NO_BUILD" != 1 ]; then swift build -c release --package-path Benchmarks >&2; fi
BIN="$(swift build -c release --package-path Benchmarks --show-bin-path)"
BENCH="$BIN/norq-bench"

mkdir -p "$WORK"
RESULTS="$WORK/results.jsonl"; : > "$RESULTS"
PIDS=()
cleanup() { for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done; }
trap cleanup EXIT

bench_make_certs "$WORK"

# Docroot: FCM's answer to messages:send, and the fake OAuth token endpoint's answer (nghttpd answers a POST
# with the file's content and 200).
mkdir -p "$WORK/docroot/v1/projects/$PROJECT"
printf '{\n  "name": "projects/%s/messages/0:1700000000000000%%0123456789abcdef"\n}\n' "$PROJECT" \
    > "$WORK/docroot/v1/projects/$PROJECT/messages:send"
printf '{"access_token":"%s","expires_in":3599,"token_type":"Bearer"}\n' "$ACCESS_TOKEN" > "$WORK/docroot/token"
TOKENS=$(( COUNT > PEER_COUNT ? COUNT : PEER_COUNT ))
"$BENCH" --mode fcm-tokens --count "$TOKENS" > "$WORK/tokens.txt"

# The firebase-admin peer lives in a venv of its own.
VENV="$WORK/venv"
if [ "$PEERS" = 1 ] && ! "$VENV/bin/python" -c 'import firebase_admin' 2>/dev/null; then
    python3 -m venv "$VENV" && "$VENV/bin/pip" install -q firebase-admin >&2 \
        || { echo "firebase-admin could not be installed (pip install firebase-admin): peer skipped" >&2; PEERS=0; }
fi

start_server() {  # name -> sets PORT, SERVER_PID, TRUST (the CAs a client trusts), TOKEN_ENDPOINT
    case "$1" in
    nghttpd)
        PORT="${NGHTTPD_PORT:-28515}"
        nghttpd -a 127.0.0.1 -n 1 -m 1000 -W 24 -d "$WORK/docroot" "$PORT" "$WORK/server.key" "$WORK/server.pem" \
            > "$WORK/nghttpd.log" 2>&1 &
        SERVER_PID=$!; TRUST="$WORK/ca.pem"
        wait_port 127.0.0.1 "$PORT"
        # Another process may hold the port (other benchmarks share this machine): then ours has exited.
        sleep 0.2
        if ! kill -0 "$SERVER_PID" 2>/dev/null; then
            echo "nghttpd could not listen on $PORT ($(cat "$WORK/nghttpd.log")): set NGHTTPD_PORT" >&2; exit 1
        fi ;;
    emulator)
        : > "$WORK/emulator.log"
        "$BIN/norq-bench-fcm-emulator" --port 0 --service-account "$ACCOUNT" --project "$PROJECT" \
            --ca-out "$WORK/emulator-ca.pem" > "$WORK/emulator.log" 2>&1 &
        SERVER_PID=$!
        for _ in $(seq 1 100); do grep -q listening "$WORK/emulator.log" && break; sleep 0.1; done
        PORT="$(awk '/listening/ {print $2}' "$WORK/emulator.log")"
        # The emulator's CA, and the bench CA for the peer's token endpoint.
        { cat "$WORK/emulator-ca.pem"; echo; cat "$WORK/ca.pem"; } > "$WORK/emulator-trust.pem"; TRUST="$WORK/emulator-trust.pem"
        wait_port 127.0.0.1 "$PORT" ;;
    esac
    TOKEN_ENDPOINT="https://127.0.0.1:$PORT/token"
    PIDS+=("$SERVER_PID")
}

bench_args() {  # the FCM options every norq-bench call of this server takes
    echo --endpoint "https://127.0.0.1:$PORT" --ca "$TRUST" --project "$PROJECT" --service-account "$ACCOUNT" \
        --token-endpoint "$TOKEN_ENDPOINT"
}

prepare_request() {  # writes $WORK/request (body.json, headers.txt with the access token, path.txt)
    # shellcheck disable=SC2046
    "$BENCH" --mode fcm-prepare --out "$WORK/request" $(bench_args) > /dev/null
}

run_h2load() {  # label connections streams count
    prepare_request
    local headers=()
    while IFS= read -r line; do headers+=(-H "$line"); done < "$WORK/request/headers.txt"
    python3 "$TOOLS" h2load --server-pid "$SERVER_PID" --label "$1" -- \
        h2load -t 1 -c "$2" -m "$3" -n "$4" -d "$WORK/request/body.json" "${headers[@]}" \
        "https://127.0.0.1:$PORT$(cat "$WORK/request/path.txt")" \
        | python3 "$FCM_TOOLS" load | tee -a "$RESULTS"
}

run_router() {  # label connections streams count
    # shellcheck disable=SC2046
    python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$BENCH" --mode fcm --label "$1" $(bench_args) \
        --count "$4" --connections "$2" --in-flight "$(( $2 * $3 ))" --warmup "$WARMUP" \
        | python3 "$FCM_TOOLS" load | tee -a "$RESULTS"
}

run_firebase_admin() {  # label streams count
    prepare_request
    local token
    token="$(sed -n 's/^authorization: Bearer //p' "$WORK/request/headers.txt")"
    "$VENV/bin/python" "$FCM_TOOLS" firebase-admin --server-pid "$SERVER_PID" --url "https://127.0.0.1:$PORT" \
        --project "$PROJECT" --service-account "$ACCOUNT" --trust "$TRUST" --cert "$WORK/server.pem" \
        --key "$WORK/server.key" --body "$WORK/request/body.json" --tokens "$WORK/tokens.txt" \
        --access-token "$token" --count "$3" --in-flight "$2" --warmup 500 --label "$1" \
        2>> "$WORK/firebase-admin.log" | python3 "$FCM_TOOLS" load | tee -a "$RESULTS" || true
}

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/machine.txt"

for server in $SERVERS; do
    start_server "$server"
    for shape in $SHAPES; do
        connections="${shape%x*}"; streams="${shape#*x}"; label="$server $shape"
        for run in $(seq 1 "$RUNS"); do
            echo "## $label run $run/$RUNS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
            run_router "$label" "$connections" "$streams" "$COUNT"
            run_h2load "$label" "$connections" "$streams" "$COUNT"
        done
        # firebase-admin sends android.priority in lowercase ("high"), which the emulator refuses (it wants FCM's
        # enum names): the peer runs against nghttpd, the FCM-shaped sink.
        if [ "$PEERS" = 1 ] && [ "$connections" = 1 ] && [ "$server" = nghttpd ]; then
            run_firebase_admin "$label" "$streams" "$PEER_COUNT"
        fi
    done
    kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true
done

echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/machine.txt"
echo
python3 "$FCM_TOOLS" summary "$RESULTS"
