#!/usr/bin/env bash
# Benchmarks `norq serve` (issue 19, Performance): a RELEASE `norq serve` with its worker delivering to the APNs
# emulator (`norq emulator`, its own process), loaded by `norq-serve-load` (200 keep-alive HTTP/1.1 clients, one
# 1-recipient `POST /v1/sends` in flight each, 30 s), then one 10,000-recipient send at a time; wrk against the same
# route and against /healthz (the HTTP ceiling of the server on this machine) in the same minute. See
# Benchmarks/README.md ("norq serve"). Everything runs on 127.0.0.1.
#
# Environment (defaults in brackets):
#   STORES ["sqlite"]   "sqlite postgres": also a throwaway PostgreSQL cluster (as scripts/test.sh makes)
#   CLIENTS [200]  SECONDS_LOAD [30]  WARMUP [3]  BIG [10000] recipients of the big send  BIG_REPEAT [3]
#   RENDER_SECONDS [15]  then the same load on POST /v1/render (same body, parsing, auth and template; no store)
#   LANES [2] worker lanes of norq serve   WRK [1] also run wrk   WRK_SECONDS [10]
#   WORK [/tmp/norq-serve-bench]   NO_BUILD [0] skip the two release builds   PG_FSYNC [on]
#   PERF [0]  1: `perf record -g` the server during the load (WORK/<store>/perf.data; report with perf report), of
#            PERF_EVENTS when set (default: the CPU clock)
#            stat: `perf stat -e PERF_EVENTS` the server over the warm-up and the load (WORK/<store>/perf-stat.txt),
#            e.g. PERF_EVENTS=probe_libc:malloc after `perf probe -x <libc.so.6> --add malloc`: allocations a send
#   PERF_CALL_GRAPH [fp]  `dwarf` unwinds through code without frame pointers (glibc's malloc): bigger, slower
#   NORQ_BIN [the release norq]  another norq executable (a debug one for a smoke run of this script only)
#   TRACING [off]  otlp: norq serve traces every request, enqueue, claim and attempt (sampled 100%) and exports the
#                  spans over OTLP/HTTP to a local sink (otlp_sink.py, which answers every export with 200 and counts
#                  them) with Norq's exporter (NorqOTLP); swift-otel: the same through swift-otel, which needs a norq
#                  built with `--traits OTLP` (NORQ_BIN, or the build below adds the trait)
#   SAMPLE_RATIO [1.0]  with TRACING=otlp: the share of new traces recorded (telemetry.sampleRatio)
#   START_AT []  a Unix time: the load starts then, not before (Benchmarks/serve-ab.sh runs two servers at once)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
STORES="${STORES:-sqlite}"; CLIENTS="${CLIENTS:-200}"; SECONDS_LOAD="${SECONDS_LOAD:-30}"; WARMUP="${WARMUP:-3}"
BIG="${BIG:-10000}"; BIG_REPEAT="${BIG_REPEAT:-3}"; LANES="${LANES:-2}"; WRK="${WRK:-1}"; WRK_SECONDS="${WRK_SECONDS:-10}"
RENDER_SECONDS="${RENDER_SECONDS:-15}"; WORK="${WORK:-/tmp/norq-serve-bench}"; NO_BUILD="${NO_BUILD:-0}"; PG_FSYNC="${PG_FSYNC:-on}"
TRACING="${TRACING:-off}"; export TRACING
KEY_FILE="$ROOT/examples/keys/AuthKey_DEMO000000.p8"; TEAM=DEMO000000; KEY_ID=DEMO000000

missing=0
for tool in python3:python3 curl:curl; do
    if ! command -v "${tool%%:*}" >/dev/null; then
        echo "missing ${tool%%:*}: install it with 'apt-get install ${tool##*:}'" >&2; missing=1
    fi
done
if [ "$WRK" = 1 ] && ! command -v wrk >/dev/null; then echo "missing wrk: 'apt-get install wrk' (or WRK=0)" >&2; missing=1; fi
[ "$missing" = 0 ] || exit 1

if [ "$NO_BUILD" != 1 ]; then
    if [ "$TRACING" = swift-otel ]; then swift build -c release --traits OTLP --product norq >&2; else swift build -c release --product norq >&2; fi
    swift build -c release --package-path Benchmarks --product norq-serve-load >&2
fi
NORQ="${NORQ_BIN:-$(swift build -c release --show-bin-path)/norq}"
LOAD="$(swift build -c release --package-path Benchmarks --show-bin-path)/norq-serve-load"

rm -rf "$WORK"; mkdir -p "$WORK"
RESULTS="$WORK/results.jsonl"; : > "$RESULTS"
PIDS=()
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
    if [ -n "${PGTMP:-}" ]; then "$PGTMP/pgctl" stop >/dev/null 2>&1 || true; rm -rf "$PGTMP"; fi
}
trap cleanup EXIT

# A free port below the kernel's ephemeral range: a port the kernel hands out (bind to 0) can be taken by an outgoing
# connection (another serve.sh's load, under serve-ab.sh) between this check and the bind of the process it is for.
free_port() {
    python3 - <<'PY'
import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
for _ in range(200):
    port = random.randrange(10000, max(10001, low))
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port)); print(port); break
    except OSError:
        continue
    finally:
        s.close()
PY
}
load_avg() { cut -d' ' -f1-3 /proc/loadavg; }
# CPU seconds (user + system) a process has used so far.
cpu_of() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($14 + $15) / hz }' "/proc/$1/stat" 2>/dev/null || echo 0; }

# The APNs emulator, in a process of its own (JWT verification and every APNs check on).
EMU_PORT="$(free_port)"
"$NORQ" emulator --port "$EMU_PORT" --key "$KEY_FILE" --team "$TEAM" --key-id "$KEY_ID" --ca-out "$WORK/emulator-ca.pem" \
    > "$WORK/emulator.log" 2>&1 &
EMU_PID=$!
PIDS+=($EMU_PID)
wait_port 127.0.0.1 "$EMU_PORT"

# TRACING=otlp: the local OTLP sink the server exports its spans to.
TELEMETRY_YAML=""
if [ "$TRACING" = otlp ] || [ "$TRACING" = swift-otel ]; then
    SINK_PORT="$(free_port)"
    python3 "$ROOT/Benchmarks/otlp_sink.py" "$SINK_PORT" "$WORK/otlp-sink.json" > "$WORK/otlp-sink.log" 2>&1 &
    SINK_PID=$!
    PIDS+=($SINK_PID)
    wait_port 127.0.0.1 "$SINK_PORT"
    TELEMETRY_YAML="telemetry: { traces: $TRACING, endpoint: \"http://127.0.0.1:$SINK_PORT\", sampleRatio: ${SAMPLE_RATIO:-1.0} }"
elif [ "$TRACING" != off ]; then
    echo "TRACING must be off, otlp or swift-otel" >&2; exit 1
fi

API_KEY="bench-$(python3 -c 'import secrets; print(secrets.token_hex(24))')"
export NORQ_SERVE_BENCH_KEY="$API_KEY"

# A throwaway PostgreSQL cluster (as scripts/test.sh), only when asked for.
start_postgres() {
    local pgbin; pgbin="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
    [ -x "$pgbin/initdb" ] || { echo "no PostgreSQL under /usr/lib/postgresql (apt-get install postgresql)" >&2; return 1; }
    local runas=(); [ "$(id -u)" -eq 0 ] && runas=(runuser -u nobody --)
    PGTMP="$(mktemp -d /tmp/norq-serve-pg.XXXXXX)"; chmod 755 "$PGTMP"; [ "$(id -u)" -eq 0 ] && chown nobody "$PGTMP"
    PG_PORT="$(free_port)"
    cat > "$PGTMP/pgctl" <<CTL
#!/usr/bin/env bash
set -e
case "\$1" in
    stop) exec ${runas[*]} "$pgbin/pg_ctl" -D "$PGTMP/data" -m fast -w stop ;;
    start) exec ${runas[*]} "$pgbin/pg_ctl" -D "$PGTMP/data" -l "$PGTMP/log" -w -t 60 \
        -o "-p $PG_PORT -k $PGTMP -c listen_addresses=127.0.0.1 -c fsync=$PG_FSYNC -c max_connections=100" start ;;
esac
CTL
    chmod 755 "$PGTMP/pgctl"
    "${runas[@]}" "$pgbin/initdb" -D "$PGTMP/data" -U norq --auth=trust -E UTF8 > "$PGTMP/initdb.log" 2>&1
    "$PGTMP/pgctl" start > /dev/null
    echo "PostgreSQL $("$pgbin/postgres" --version | awk '{print $3}') on 127.0.0.1:$PG_PORT (fsync=$PG_FSYNC)" >&2
}

run_store() {  # store
    local store="$1" dir="$WORK/$1" port store_line
    mkdir -p "$dir"
    case "$store" in
    sqlite) store_line="  sqlite: $dir/norq.db" ;;
    postgres)
        [ -n "${PGTMP:-}" ] || start_postgres
        store_line="  postgres: postgres://norq@127.0.0.1:$PG_PORT/postgres?sslmode=disable" ;;
    *) echo "unknown store $store" >&2; return 1 ;;
    esac
    port="$(free_port)"
    cat > "$dir/norq.yaml" <<YAML
templates: $ROOT/Benchmarks/templates
providers:
  apns:
    config:
      keyId: $KEY_ID
      teamId: $TEAM
      bundleId: com.example.MyApp
      keyPath: $KEY_FILE
      endpoint: https://127.0.0.1:$EMU_PORT
      caPath: $WORK/emulator-ca.pem
routing:
  push: apns
store:
$store_line
server:
  host: 127.0.0.1
  port: $port
  apiKeys:
    - name: bench
      key: \${NORQ_SERVE_BENCH_KEY}
      scopes: [metrics]               # the drain check reads /metrics (a scope of its own since issue 33)
  limits:
    ratePerSecond: 1000000
    burst: 1000000
$TELEMETRY_YAML
YAML
    "$NORQ" serve -c "$dir/norq.yaml" --lanes "$LANES" > "$dir/serve.log" 2>&1 &
    local server=$!
    PIDS+=($server)
    wait_port 127.0.0.1 "$port"
    curl -fsS "http://127.0.0.1:$port/readyz" > /dev/null
    echo "norq serve ($store) pid $server on 127.0.0.1:$port; load $(load_avg)" >&2

    local before after perf_pid=""
    before="$(load_avg)"
    if [ "${PERF:-0}" = 1 ]; then
        perf record ${PERF_EVENTS:+-e "$PERF_EVENTS"} --call-graph "${PERF_CALL_GRAPH:-fp}" -o "$dir/perf.data" -p "$server" -- sleep "$(( ${WARMUP%.*} + ${SECONDS_LOAD%.*} ))" > "$dir/perf.log" 2>&1 &
        perf_pid=$!
    elif [ "${PERF:-0}" = stat ]; then
        perf stat -e "${PERF_EVENTS:-task-clock}" -o "$dir/perf-stat.txt" -p "$server" -- sleep "$(( ${WARMUP%.*} + ${SECONDS_LOAD%.*} ))" > "$dir/perf.log" 2>&1 &
        perf_pid=$!
    fi
    # START_AT (serve-ab.sh): the load of two servers begins in the same second.
    [ -n "${START_AT:-}" ] && python3 -c "import time; time.sleep(max(0.0, $START_AT - time.time()))"
    local emu_before; emu_before="$(cpu_of "$EMU_PID")"
    "$LOAD" --port "$port" --key "$API_KEY" --clients "$CLIENTS" --seconds "$SECONDS_LOAD" --warmup "$WARMUP" \
        --server-pid "$server" --label "$store" > "$dir/load.json"
    after="$(load_avg)"
    # The APNs emulator's CPU over the run (warm-up included): it shares the 2 cores with the server and the load.
    EMU_CPU="$(python3 -c "print(round($(cpu_of "$EMU_PID") - $emu_before, 2))")"
    [ -n "$perf_pid" ] && wait "$perf_pid" 2>/dev/null || true
    python3 - "$dir/load.json" "$before" "$after" "$store" "$EMU_CPU" >> "$RESULTS" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1])); r["load_before"] = sys.argv[2]; r["load_after"] = sys.argv[3]; r["store"] = sys.argv[4]
r["tracing"] = os.environ.get("TRACING", "off")
if r["tracing"] != "off": r["sample_ratio"] = float(os.environ.get("SAMPLE_RATIO", "1.0"))
r["emulator_cpu_s"] = float(sys.argv[5])
print(json.dumps(r, sort_keys=True))
PY
    tail -n 1 "$RESULTS" >&2

    # The outbox drains: pending + leased rows from /metrics, until 0 (bounded).
    local drained=-1 started=$SECONDS
    for _ in $(seq 1 600); do
        local depth
        depth="$(curl -fsS -H "Authorization: Bearer $API_KEY" "http://127.0.0.1:$port/metrics" \
            | awk '/^norq_outbox_rows\{/ { s += $2 } END { print s + 0 }')"
        if [ "${depth%.*}" = 0 ]; then drained=$(( SECONDS - started )); break; fi
        sleep 1
    done
    echo "{\"mode\": \"serve-drain\", \"store\": \"$store\", \"drain_s_after_load\": $drained, \"load\": \"$(load_avg)\"}" >> "$RESULTS"
    tail -n 1 "$RESULTS" >&2

    # One 10,000-recipient send at a time.
    "$LOAD" --port "$port" --key "$API_KEY" --big "$BIG" --repeat "$BIG_REPEAT" --label "$store" --timeout 30 > "$dir/big.json"
    python3 - "$dir/big.json" "$(load_avg)" "$store" >> "$RESULTS" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); r["load"] = sys.argv[2]; r["store"] = sys.argv[3]
print(json.dumps(r, sort_keys=True))
PY
    tail -n 1 "$RESULTS" >&2

    # The same load on POST /v1/render: what the server does without the store (a 200 counts as accepted).
    if [ "$RENDER_SECONDS" != 0 ]; then
        "$LOAD" --port "$port" --key "$API_KEY" --clients "$CLIENTS" --seconds "$RENDER_SECONDS" --warmup "$WARMUP" \
            --server-pid "$server" --label "$store-render" --path /v1/render --expect 200 > "$dir/render.json"
        python3 - "$dir/render.json" "$(load_avg)" "$store" >> "$RESULTS" <<'PY'
import json, sys
r = json.load(open(sys.argv[1])); r["load"] = sys.argv[2]; r["store"] = sys.argv[3]
print(json.dumps(r, sort_keys=True))
PY
        tail -n 1 "$RESULTS" >&2
    fi

    if [ "$WRK" = 1 ]; then
        # The same 1-recipient send through wrk (one token for every request), then /healthz: no store, no auth,
        # the ceiling of the HTTP layer on this machine.
        cat > "$dir/send.lua" <<LUA
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["Authorization"] = "Bearer $API_KEY"
wrk.body = '{"template":"order-shipped-bench","to":["a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d4a1b2c3d40000000000000001"]}'
LUA
        wrk -t 1 -c "$CLIENTS" -d "${WRK_SECONDS}s" --latency -s "$dir/send.lua" "http://127.0.0.1:$port/v1/sends" > "$dir/wrk-send.txt" 2>&1 || true
        wrk -t 1 -c "$CLIENTS" -d "${WRK_SECONDS}s" --latency "http://127.0.0.1:$port/healthz" > "$dir/wrk-healthz.txt" 2>&1 || true
        python3 - "$dir/wrk-send.txt" "$dir/wrk-healthz.txt" "$store" "$(load_avg)" >> "$RESULTS" <<'PY'
import json, re, sys
def parse(path):
    text = open(path).read()
    out = {}
    m = re.search(r"Requests/sec:\s+([0-9.]+)", text); out["req_per_s"] = float(m.group(1)) if m else None
    for p in ("50", "99"):
        m = re.search(r"\s%s%%\s+([0-9.]+)(us|ms|s)" % p, text)
        if m:
            v = float(m.group(1)) * {"us": 0.001, "ms": 1, "s": 1000}[m.group(2)]
            out["p%s_ms" % p] = round(v, 2)
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", text); out["non_2xx"] = int(m.group(1)) if m else 0
    m = re.search(r"Socket errors: (.*)", text); out["socket_errors"] = m.group(1) if m else ""
    return out
send, health = parse(sys.argv[1]), parse(sys.argv[2])
ratio = round(send["req_per_s"] / health["req_per_s"], 3) if send.get("req_per_s") and health.get("req_per_s") else None
print(json.dumps({"mode": "serve-wrk", "store": sys.argv[3], "load": sys.argv[4], "send": send, "healthz": health,
                  "send_over_healthz": ratio}, sort_keys=True))
PY
        tail -n 1 "$RESULTS" >&2
    fi

    kill -TERM "$server"; wait "$server" 2>/dev/null || true
    grep -E "error|warning" "$dir/serve.log" | head -5 >&2 || true
}

echo "machine: $(nproc) cores; load $(load_avg)" >&2
for store in $STORES; do run_store "$store"; done
if [ "$TRACING" != off ]; then
    # What reached the sink: the exports (batches of spans) and their bytes.
    kill -TERM "$SINK_PID"; wait "$SINK_PID" 2>/dev/null || true
    python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); r["mode"] = "otlp-sink"; print(json.dumps(r, sort_keys=True))' \
        "$WORK/otlp-sink.json" >> "$RESULTS" || true
fi
echo "results: $RESULTS" >&2
cat "$RESULTS"
