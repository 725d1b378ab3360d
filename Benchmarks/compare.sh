#!/usr/bin/env bash
# Benchmarks the router against h2load (the HTTP/2 ceiling) and peers, on nghttpd and on the project's
# APNs emulator. See Benchmarks/README.md. Run from anywhere; everything happens on 127.0.0.1.
#
# Environment (defaults in brackets):
#   COUNT [100000]  notifications per run      RUNS [5]  runs per (server, shape, client) for the medians
#   SHAPES ["1x100 1x1000 4x250"]  connections x streams per connection (router maxInFlight = their product)
#   SERVERS ["nghttpd emulator"]   PEERS [1] also run the AsyncHTTPClient loop (on nghttpd, 1 connection)
#   and aioapns (on the emulator: it needs the apns-id echoed), 1 run each
#   PEER_COUNT [20000]  notifications per peer run   RENDER [1] run the render micro-benchmark
#   STREAMED [1]  also one router run per shape with the recipients as an async sequence (--input stream)
#   WORK [/tmp/norq-bench]  scratch directory (certificates, docroot, results.jsonl)
#   NO_BUILD [0]  skip `swift build -c release --package-path Benchmarks`
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
COUNT="${COUNT:-100000}"; RUNS="${RUNS:-5}"; SHAPES="${SHAPES:-1x100 1x1000 4x250}"
SERVERS="${SERVERS:-nghttpd emulator}"; PEERS="${PEERS:-1}"; PEER_COUNT="${PEER_COUNT:-20000}"
RENDER="${RENDER:-1}"; STREAMED="${STREAMED:-1}"; WORK="${WORK:-/tmp/norq-bench}"; NO_BUILD="${NO_BUILD:-0}"
WARMUP="${WARMUP:-2000}"
KEY="$ROOT/examples/keys/AuthKey_DEMO000000.p8"; TEAM=DEMO000000; KEY_ID=DEMO000000; TOPIC=com.example.MyApp
TOOLS="$ROOT/Benchmarks/bench_tools.py"

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

# Docroot: 3/device/<token> is an empty file for each benchmark token, so a POST there answers 200, empty.
TOKENS=$(( COUNT > PEER_COUNT ? COUNT : PEER_COUNT ))
"$BENCH" --mode tokens --count "$TOKENS" > "$WORK/tokens.txt"
if [ "$(ls "$WORK/docroot/3/device" 2>/dev/null | wc -l)" -lt "$TOKENS" ]; then
    mkdir -p "$WORK/docroot/3/device"
    (cd "$WORK/docroot/3/device" && xargs touch < "$WORK/tokens.txt")
fi

start_server() {  # name -> sets PORT, SERVER_PID, CA
    case "$1" in
    nghttpd)
        PORT="${NGHTTPD_PORT:-18443}"
        nghttpd -a 127.0.0.1 -n 1 -m 1000 -W 24 -d "$WORK/docroot" "$PORT" "$WORK/server.key" "$WORK/server.pem" \
            > "$WORK/nghttpd.log" 2>&1 &
        SERVER_PID=$!; CA="$WORK/ca.pem"
        wait_port 127.0.0.1 "$PORT" ;;
    emulator)
        : > "$WORK/emulator.log"
        "$BIN/norq-bench-emulator" --port 0 --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" \
            --ca-out "$WORK/emulator-ca.pem" > "$WORK/emulator.log" 2>&1 &
        SERVER_PID=$!; CA="$WORK/emulator-ca.pem"
        for _ in $(seq 1 100); do grep -q listening "$WORK/emulator.log" && break; sleep 0.1; done
        PORT="$(awk '/listening/ {print $2}' "$WORK/emulator.log")"
        wait_port 127.0.0.1 "$PORT" ;;
    esac
    PIDS+=("$SERVER_PID")
}

run_h2load() {  # label connections streams count
    "$BENCH" --mode prepare --out "$WORK/request" --endpoint "https://127.0.0.1:$PORT" --ca "$CA" \
        --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" > /dev/null
    head -n "$4" "$WORK/tokens.txt" | sed "s#^#https://127.0.0.1:$PORT/3/device/#" > "$WORK/uris.txt"
    local headers=()
    while IFS= read -r line; do headers+=(-H "$line"); done < "$WORK/request/headers.txt"
    python3 "$TOOLS" h2load --server-pid "$SERVER_PID" --label "$1" -- \
        h2load -t 1 -c "$2" -m "$3" -n "$4" -d "$WORK/request/body.json" "${headers[@]}" -i "$WORK/uris.txt" \
        | tee -a "$RESULTS"
}

run_router() {  # label connections streams count [input]
    python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$BENCH" --mode router --input "${5:-array}" --label "$1" \
        --endpoint "https://127.0.0.1:$PORT" --ca "$CA" --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" \
        --count "$4" --connections "$2" --in-flight "$(( $2 * $3 ))" --warmup "$WARMUP" | tee -a "$RESULTS"
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
        if [ "$STREAMED" = 1 ]; then run_router "$label" "$connections" "$streams" "$COUNT" stream; fi
        if [ "$PEERS" = 1 ] && [ "$server" = nghttpd ] && [ "$connections" = 1 ]; then
            # A plain AsyncHTTPClient loop (it uses one HTTP/2 connection per host).
            python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$BIN/norq-bench-ahc" --label "$label" \
                --endpoint "https://127.0.0.1:$PORT" --ca "$CA" --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" \
                --count "$PEER_COUNT" --in-flight "$streams" --warmup 500 | tee -a "$RESULTS"
        fi
        if [ "$PEERS" = 1 ] && [ "$server" = emulator ]; then
            # aioapns matches answers by the apns-id response header, which nghttpd does not send: it runs
            # against the emulator only (pointed at 127.0.0.1 by overriding its host and port class attributes).
            if python3 -c 'import aioapns' 2>/dev/null || pip install -q aioapns >&2; then
                "$BENCH" --mode prepare --out "$WORK/request" --endpoint "https://127.0.0.1:$PORT" --ca "$CA" \
                    --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" > /dev/null
                python3 "$TOOLS" aioapns --server-pid "$SERVER_PID" --host 127.0.0.1 --port "$PORT" --ca "$CA" \
                    --key "$KEY" --key-id "$KEY_ID" --team "$TEAM" --topic "$TOPIC" --body "$WORK/request/body.json" \
                    --count "$PEER_COUNT" --connections "$connections" --in-flight "$(( connections * streams ))" \
                    --warmup 200 --label "$label" 2>> "$WORK/aioapns.log" | tee -a "$RESULTS" || true
            else
                echo "aioapns could not be installed (pip install aioapns): skipped" >&2
            fi
        fi
    done
    kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true
done

if [ "$RENDER" = 1 ]; then
    for run in $(seq 1 3); do "$BENCH" --mode render --seconds 3 | tee -a "$RESULTS"; done
fi

echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/machine.txt"
echo
python3 "$TOOLS" summary "$RESULTS"
