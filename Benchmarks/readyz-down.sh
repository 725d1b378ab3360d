#!/usr/bin/env bash
# /readyz and /metrics with the database down (issue 33's "/readyz p99 <= 100 ms with the database down"): a release
# `norq serve --emulator` on a throwaway PostgreSQL cluster (as scripts/test.sh makes one: the Debian package, a
# non-root user, a free port), N sequential keep-alive GETs of each route with the database up, then the cluster is
# stopped (`pg_ctl -m immediate`: the connections drop as in a crash) and N more of each, and once it is started again
# /readyz must be 200 within 10 s. Prints one JSON line per phase and route: statuses, p50 / p99 / max ms.
#
#   N [500] requests per route and phase   NORQ_BIN [the release build's norq]   NO_BUILD [0]
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT="$(pwd)"; N="${N:-500}"
if [ "${NO_BUILD:-0}" != 1 ] && [ -z "${NORQ_BIN:-}" ]; then swift build -c release --product norq >&2; fi
NORQ="${NORQ_BIN:-$(swift build -c release --show-bin-path)/norq}"
PGBIN="$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)"
[ -x "$PGBIN/initdb" ] || { echo "no PostgreSQL: apt-get install postgresql" >&2; exit 1; }
RUNAS=(); [ "$(id -u)" -eq 0 ] && RUNAS=(runuser -u nobody --)
WORK="$(mktemp -d /tmp/norq-readyz.XXXXXX)"; chmod 755 "$WORK"; [ "$(id -u)" -eq 0 ] && chown nobody "$WORK"
free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'; }
PGPORT="$(free_port)"; PORT="$(free_port)"
pg() { "${RUNAS[@]}" "$PGBIN/pg_ctl" -D "$WORK/data" -l "$WORK/pg.log" -w -t 60 "$@" >/dev/null; }
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null || true
    pg -m immediate stop 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM
"${RUNAS[@]}" "$PGBIN/initdb" -D "$WORK/data" -U norq --auth=trust -E UTF8 > "$WORK/initdb.log" 2>&1
START=(-o "-p $PGPORT -k $WORK -c listen_addresses=127.0.0.1" start)
pg "${START[@]}"
KEY="readyz-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
cat > "$WORK/norq.yaml" <<YAML
templates: $ROOT/templates
providers:
  apns:
    config: { keyId: DEMO000000, teamId: TEAM123ABC, keyPath: $ROOT/examples/keys/AuthKey_DEMO000000.p8, bundleId: com.example.MyApp, production: false }
routing:
  push: apns
store:
  postgres: postgres://norq@127.0.0.1:$PGPORT/postgres?sslmode=disable
server:
  host: 127.0.0.1
  port: $PORT
  apiKeys:
    - { name: ops, key: "$KEY", scopes: [admin] }
  limits: { ratePerSecond: 100000, burst: 100000 }
YAML
"$NORQ" serve -c "$WORK/norq.yaml" --emulator > "$WORK/serve.log" 2>&1 &
SERVER_PID=$!
python3 - "$PORT" "$KEY" "$N" "$WORK" "$PGBIN" "$PGPORT" <<'PY'
import http.client, json, os, subprocess, sys, time
port, key, n, work, pgbin, pgport = int(sys.argv[1]), sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5], sys.argv[6]
runas = ["runuser", "-u", "nobody", "--"] if os.getuid() == 0 else []
def pg(*args):
    subprocess.run(runas + [f"{pgbin}/pg_ctl", "-D", f"{work}/data", "-l", f"{work}/pg.log", "-w", "-t", "60", *args],
                   check=True, stdout=subprocess.DEVNULL)
def get(conn, path):
    t = time.perf_counter()
    conn.request("GET", path, headers={"authorization": f"Bearer {key}"})
    r = conn.getresponse(); r.read()
    return r.status, (time.perf_counter() - t) * 1000
def wait_ready(timeout):
    end = time.time() + timeout
    while time.time() < end:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            if get(c, "/readyz")[0] == 200: return True
        except OSError:
            pass
        time.sleep(0.1)
    return False
def phase(name):
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    for path in ("/readyz", "/metrics"):
        statuses, times = {}, []
        for _ in range(n):
            status, ms = get(conn, path)
            statuses[status] = statuses.get(status, 0) + 1
            times.append(ms)
        times.sort()
        print(json.dumps({"mode": "readyz-down", "phase": name, "path": path, "requests": n, "statuses": statuses,
                          "p50_ms": round(times[n // 2], 2), "p99_ms": round(times[int(n * 0.99) - 1], 2),
                          "max_ms": round(times[-1], 2)}), flush=True)
if not wait_ready(30): sys.exit("norq serve never became ready")
phase("database up")
pg("-m", "immediate", "stop")
time.sleep(3)   # past the background check's 2 s: /readyz now reports the outage
phase("database down")
started = time.time()
pg("-o", f"-p {pgport} -k {work} -c listen_addresses=127.0.0.1", "start")
back = wait_ready(10)
print(json.dumps({"mode": "readyz-down", "phase": "database back", "ready": back,
                  "seconds_to_ready_after_start": round(time.time() - started, 2)}), flush=True)
if not back: sys.exit("/readyz did not say 200 within 10 s of the database's restart")
PY
