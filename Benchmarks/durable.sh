#!/usr/bin/env bash
# The durable-delivery benchmark (issue 18): `norq-bench-durable --mode durable` and `--mode durable-recovery` on SQLite and
# on PostgreSQL, delivering to nghttpd (the APNs-shaped docroot sink of compare.sh) and to the project's APNs
# emulator, with h2load on the same server in the same minute for the ratio. Starts a throwaway PostgreSQL cluster
# (like scripts/test.sh: a free port, a temporary directory, a non-root user), nghttpd and the emulator, and stops
# everything on exit. See Benchmarks/README.md ("Durable delivery").
#
# Environment (defaults in brackets):
#   COUNT [100000]  pushes per phase             STORES ["sqlite postgres"]   SERVERS ["nghttpd emulator"]
#   RUNS [1]  runs per (store, server)           PHASES ["enqueue,deliver,store,latency"]
#   LANES [4]  CLAIM_BATCH [1000, the worker's default]  IN_FLIGHT [1000]  CONNECTIONS [1]  LEASE [10] seconds
#   RATE_SQLITE [7500] RATE_POSTGRES [6000]  pushes/s of the latency phase (half the targets)
#   LATENCY_COUNT [30000]  SEND_SIZE [10]  RECOVERY [1] run the crash-recovery measurement (nghttpd)
#   POOL_SIZE [4]  PostgreSQL connections per instance (the LISTEN connection is one of them)
#   KILL_AFTER [0.6 on SQLite (its 100,000 are delivered within ~1.5 s since stop 32), 1 on PostgreSQL]  seconds after which the second instance is killed (it must
#                   hold leases by then, and must not have delivered all COUNT rows: both deliver ~25,000-30,000/s)
#   PG_OPTIONS ["-c synchronous_commit=on"]  extra server options (fsync stays on unless given here)
#   WORK [/tmp/norq-bench-durable]  NO_BUILD [0]  BIN [the release bin path]  where norq-bench is (another build:
#   the before of an A/B, with NO_BUILD=1)
set -euo pipefail
. "$(dirname "${BASH_SOURCE[0]}")/bench_lib.sh"

ROOT="$(cd "$(dirname "$0")/.." && pwd)"
cd "$ROOT"
COUNT="${COUNT:-100000}"; STORES="${STORES:-sqlite postgres}"; SERVERS="${SERVERS:-nghttpd emulator}"
RUNS="${RUNS:-1}"; PHASES="${PHASES:-enqueue,deliver,store,latency}"
LANES="${LANES:-4}"; CLAIM_BATCH="${CLAIM_BATCH:-1000}"; IN_FLIGHT="${IN_FLIGHT:-1000}"; CONNECTIONS="${CONNECTIONS:-1}"
LEASE="${LEASE:-10}"; RATE_SQLITE="${RATE_SQLITE:-7500}"; RATE_POSTGRES="${RATE_POSTGRES:-6000}"
LATENCY_COUNT="${LATENCY_COUNT:-30000}"; SEND_SIZE="${SEND_SIZE:-10}"; RECOVERY="${RECOVERY:-1}"
KILL_AFTER="${KILL_AFTER:-}"; POOL_SIZE="${POOL_SIZE:-4}"
PG_OPTIONS="${PG_OPTIONS:--c synchronous_commit=on}"
WORK="${WORK:-/tmp/norq-bench-durable}"; NO_BUILD="${NO_BUILD:-0}"
KEY="$ROOT/examples/keys/AuthKey_DEMO000000.p8"; TEAM=DEMO000000; KEY_ID=DEMO000000
TOOLS="$ROOT/Benchmarks/bench_tools.py"

missing=0
for tool in h2load:nghttp2-client nghttpd:nghttp2-server openssl:openssl python3:python3; do
    if ! command -v "${tool%%:*}" >/dev/null; then
        echo "missing ${tool%%:*}: install it with 'apt-get install ${tool##*:}'" >&2; missing=1
    fi
done
pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
case " $STORES " in *" postgres "*)
    if [ -z "$(pg_bin)" ] || [ ! -x "$(pg_bin)/initdb" ]; then
        echo "missing PostgreSQL: install it with 'apt-get install postgresql'" >&2; missing=1
    fi ;;
esac
[ "$missing" = 0 ] || exit 1

if [ "$NO_BUILD" != 1 ]; then swift build -c release --package-path Benchmarks >&2; fi
BIN="${BIN:-$(swift build -c release --package-path Benchmarks --show-bin-path)}"
BENCH="$BIN/norq-bench"; DURABLE="$BIN/norq-bench-durable"

mkdir -p "$WORK"
RESULTS="$WORK/results.jsonl"; : > "$RESULTS"
PIDS=()
PGTMP=""
cleanup() {
    for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
    if [ -n "$PGTMP" ]; then "$PGTMP/pgctl" stop >/dev/null 2>&1 || true; rm -rf "$PGTMP"; fi
}
trap cleanup EXIT INT TERM

bench_make_certs "$WORK"
# The docroot of compare.sh (3/device/<token> is an empty file: a POST there answers 200).
"$BENCH" --mode tokens --count "$COUNT" > "$WORK/tokens.txt"
if [ "$(ls "$WORK/docroot/3/device" 2>/dev/null | wc -l)" -lt "$COUNT" ]; then
    mkdir -p "$WORK/docroot/3/device"
    (cd "$WORK/docroot/3/device" && xargs touch < "$WORK/tokens.txt")
fi

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }

# A throwaway PostgreSQL cluster (as scripts/test.sh: run as `nobody` when root).
start_postgres() {
    local RUNAS=()
    [ "$(id -u)" -eq 0 ] && RUNAS=(runuser -u nobody --)
    local PGBIN; PGBIN="$(pg_bin)"
    PGTMP="$(mktemp -d /tmp/norq-bench-pg.XXXXXX)"; chmod 755 "$PGTMP"
    [ "$(id -u)" -eq 0 ] && chown nobody "$PGTMP"
    PGPORT="$(free_port)"
    cat > "$PGTMP/pgctl" <<CTL
#!/usr/bin/env bash
set -e
case "\$1" in
    stop) exec ${RUNAS[*]} "$PGBIN/pg_ctl" -D "$PGTMP/data" -m fast -w stop ;;
    start) exec ${RUNAS[*]} "$PGBIN/pg_ctl" -D "$PGTMP/data" -l "$PGTMP/log" -w -t 60 \
        -o "-p $PGPORT -k $PGTMP -c listen_addresses=127.0.0.1 $PG_OPTIONS" start ;;
esac
CTL
    chmod 755 "$PGTMP/pgctl"
    "${RUNAS[@]}" "$PGBIN/initdb" -D "$PGTMP/data" -U norq --auth=trust -E UTF8 > "$PGTMP/initdb.log" 2>&1 \
        || { cat "$PGTMP/initdb.log" >&2; exit 1; }
    "$PGTMP/pgctl" start > /dev/null || { cat "$PGTMP/log" >&2; exit 1; }
    PGPID="$(head -n 1 "$PGTMP/data/postmaster.pid")"
    PSQL=(psql -h 127.0.0.1 -p "$PGPORT" -U norq -d postgres -q -v ON_ERROR_STOP=1)
    echo "# PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PGPORT, options: $PG_OPTIONS" \
        | tee -a "$WORK/machine.txt"
}

fresh_store() {  # store -> sets STORE_URL, DB_PID
    case "$1" in
    sqlite)
        rm -f "$WORK/bench.db" "$WORK/bench.db-wal" "$WORK/bench.db-shm"
        STORE_URL="sqlite:$WORK/bench.db"; DB_PID="" ;;
    postgres)
        [ -n "$PGTMP" ] || start_postgres
        "${PSQL[@]}" -c "DROP DATABASE IF EXISTS norq_bench" -c "CREATE DATABASE norq_bench"
        STORE_URL="postgres://norq@127.0.0.1:$PGPORT/norq_bench?sslmode=disable"; DB_PID="$PGPID" ;;
    esac
}

start_server() {  # name -> sets PORT, SERVER_PID, CA
    case "$1" in
    nghttpd)
        PORT="${NGHTTPD_PORT:-$(free_port)}"
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

common() {  # store server
    echo --label "$2" --endpoint "https://127.0.0.1:$PORT" --ca "$CA" --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" \
        --store "$STORE_URL" --count "$COUNT" --lanes "$LANES" --claim-batch "$CLAIM_BATCH" \
        --connections "$CONNECTIONS" --in-flight "$IN_FLIGHT" --lease "$LEASE" --pool-size "$POOL_SIZE" \
        ${DB_PID:+--db-pid $DB_PID}
}

run_h2load() {  # label
    "$BENCH" --mode prepare --out "$WORK/request" --endpoint "https://127.0.0.1:$PORT" --ca "$CA" \
        --key "$KEY" --team "$TEAM" --key-id "$KEY_ID" > /dev/null
    sed "s#^#https://127.0.0.1:$PORT/3/device/#" "$WORK/tokens.txt" > "$WORK/uris.txt"
    local headers=()
    while IFS= read -r line; do headers+=(-H "$line"); done < "$WORK/request/headers.txt"
    python3 "$TOOLS" h2load --server-pid "$SERVER_PID" --label "$1" -- \
        h2load -t 1 -c "$CONNECTIONS" -m "$(( IN_FLIGHT / CONNECTIONS ))" -n "$COUNT" -d "$WORK/request/body.json" \
        "${headers[@]}" -i "$WORK/uris.txt" | tee -a "$RESULTS"
}

echo "# machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs), load before: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/machine.txt"

for server in $SERVERS; do
    start_server "$server"
    for store in $STORES; do
        rate="$RATE_SQLITE"; [ "$store" = postgres ] && rate="$RATE_POSTGRES"
        for run in $(seq 1 "$RUNS"); do
            echo "## $store -> $server run $run/$RUNS (load $(cut -d' ' -f1 /proc/loadavg))" >&2
            fresh_store "$store"
            # shellcheck disable=SC2046
            python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$DURABLE" --mode durable --phases "$PHASES" \
                $(common "$store" "$server") --rate "$rate" --send-size "$SEND_SIZE" \
                --latency-count "$LATENCY_COUNT" | tee -a "$RESULTS"
            run_h2load "$server"
            # The in-memory router on the same sink in the same minute: the durable figures are ratios to it.
            python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$BENCH" --mode router --input array \
                --label "$server" --endpoint "https://127.0.0.1:$PORT" --ca "$CA" --key "$KEY" --team "$TEAM" \
                --key-id "$KEY_ID" --count "$COUNT" --connections "$CONNECTIONS" --in-flight "$IN_FLIGHT" \
                --warmup 1000 | tee -a "$RESULTS"
        done
        if [ "$RECOVERY" = 1 ] && [ "$server" = nghttpd ]; then
            echo "## $store crash recovery (load $(cut -d' ' -f1 /proc/loadavg))" >&2
            fresh_store "$store"
            # shellcheck disable=SC2046
            python3 "$TOOLS" wrap --server-pid "$SERVER_PID" -- "$DURABLE" --mode durable-recovery \
                $(common "$store" "$server") --kill-after "${KILL_AFTER:-$([ "$store" = sqlite ] && echo 0.6 || echo 1)}" \
                | tee -a "$RESULTS"
        fi
    done
    kill "$SERVER_PID" 2>/dev/null || true; wait "$SERVER_PID" 2>/dev/null || true
done

echo "# load after: $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$WORK/machine.txt"
echo
python3 - "$RESULTS" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
h2 = {}
for r in rows:
    if r.get("client") == "h2load":
        h2.setdefault(r["label"], []).append(r["notifications_per_s"])
targets = {"sqlite": 15000, "postgres": 12000}
print("| store | server | phase | figure | target | load 1m |")
print("|---|---|---|---|---|---|")
for r in rows:
    if "error" in r:
        print(f"| | | ERROR | {r['error'][:300]} | | |"); continue
    if r.get("client") != "norq-durable":
        continue
    s, srv, p, load = r["store"], r.get("label", ""), r["phase"], r.get("load_1m")
    if p == "enqueue":
        v = r["rows_per_s"]; print(f"| {s} | {srv} | enqueue | {v:,.0f} rows/s | >= 100,000 ({'met' if v >= 100000 else 'NOT met'}) | {load} |")
    elif p == "deliver":
        v = r["pushes_per_s"]; peer = h2.get(srv)
        ratio = f", {v / max(peer):.2f} x h2load ({max(peer):,.0f}/s)" if peer else ""
        print(f"| {s} | {srv} | deliver | {v:,.0f} pushes/s{ratio}, all delivered {r['all_delivered']} | >= {targets[s]:,} ({'met' if v >= targets[s] else 'NOT met'}) | {load} |")
    elif p == "store":
        v = r["store_cpu_s_per_10k"]; print(f"| {s} | {srv} | store claim+complete | {v:.4f} CPU s/10k (process {r['cpu_s']} s + db {r['db_cpu_s']} s) | <= 0.1 ({'met' if v <= 0.1 else 'NOT met'}) | {load} |")
    elif p == "latency":
        # The target is enqueue to the request's first byte (enqueue->send); the answer comes one round trip later.
        a, b = r["enqueue_to_send_p50_ms"], r["enqueue_to_send_p99_ms"]
        print(f"| {s} | {srv} | latency at {r['rate_per_s']:,}/s | enqueue->send p50 {a} / p99 {b} ms; enqueue->answer p50 {r['enqueue_to_answer_p50_ms']} / p99 {r['enqueue_to_answer_p99_ms']} ms | first byte p50 <= 5, p99 <= 50 ({'met' if a <= 5 and b <= 50 else 'NOT met'}) | {load} |")
    elif p == "recovery":
        v = r.get("recovery_s")
        print(f"| {s} | {srv} | crash recovery (lease {r['lease_s']} s) | {v} s for {r['killed_instance_held']} held rows; one outcome each {r['all_delivered_one_outcome']} | <= 15 s ({'met' if v is not None and v <= 15 else 'NOT met'}) | {load} |")

# Issue 29's figures, one line per store (read from here): durable delivered pushes/s against the in-memory router
# on the same sink (nghttpd when it ran), the database server's CPU per push against the router's own CPU per push,
# and the router process's store work (claim + complete) per 10,000.
def median(values):
    values = sorted(values)
    return values[len(values) // 2] if values else None
memory = {}
for r in rows:
    if r.get("client") == "norq-router" and "error" not in r:
        memory.setdefault(r["label"], []).append(r)
print()
for s in ["sqlite", "postgres"]:
    mine = [r for r in rows if r.get("client") == "norq-durable" and r.get("store") == s and "error" not in r]
    if not mine:
        continue
    sink = "nghttpd" if any(r.get("label") == "nghttpd" for r in mine) else mine[0].get("label")
    deliver = [r for r in mine if r["phase"] == "deliver" and r.get("label") == sink]
    store = [r for r in mine if r["phase"] == "store" and r.get("label") == sink]
    peer = memory.get(sink, [])
    rate = median([r["pushes_per_s"] for r in deliver]); base = median([r["notifications_per_s"] for r in peer])
    router_cpu = median([r["cpu_s_per_10k"] for r in peer])
    ratio = f"{rate / base:.2f}" if rate and base else "n/a"
    server = "n/a"
    if s != "sqlite" and deliver and router_cpu:
        db = median([r["db_cpu_s"] / r["count"] * 10_000 for r in deliver if r.get("db_cpu_s") is not None and r.get("count")])
        if db is not None:
            server = f"{db / router_cpu:.2f}"
    store_cpu = median([r["cpu_s"] / r["count"] * 10_000 for r in store if r.get("count")])
    store_text = f"{store_cpu:.3f}" if store_cpu is not None else "n/a"
    print(f"- {s}: delivered {ratio} x in-memory; server CPU {server} x router; store CPU {store_text} s/10k")
PY
