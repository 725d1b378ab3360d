#!/usr/bin/env bash
# Schemathesis (PyPI) against a live `norq serve --emulator` (the built debug `norq`, in-process APNs, FCM and Web
# Push emulators, a SQLite store in a temporary directory, one admin key): every operation of docs/openapi.yaml, all
# checks, a fixed seed. Exits non-zero on any failure. Run by scripts/test.sh after `swift test`; installs
# schemathesis with pip when it is missing.
#
#   NORQ_SCHEMATHESIS_EXAMPLES=N   examples per operation (default 300)
#   NORQ_SCHEMATHESIS_SEED=N       the seed (default 33)
#   NORQ_BIN=PATH                  the norq binary (default: the debug build's)
set -euo pipefail
cd "$(dirname "$0")/.."
SCHEMATHESIS_VERSION=4.32.5
installed() { python3 -c 'import importlib.metadata as m; print(m.version("schemathesis"))' 2>/dev/null || true; }
if [ "$(installed)" != "$SCHEMATHESIS_VERSION" ]; then
    echo "scripts/schemathesis.sh: installing schemathesis $SCHEMATHESIS_VERSION (PyPI)" >&2
    python3 -m pip install -q "schemathesis==$SCHEMATHESIS_VERSION" >&2
fi
# Through python3 rather than the `st` script, which a pyenv or a user install may not have put on PATH yet.
st() { python3 -c 'import sys; from schemathesis.cli import schemathesis; sys.argv[0] = "st"; sys.exit(schemathesis())' "$@"; }
NORQ="${NORQ_BIN:-$(swift build --show-bin-path)/norq}"
[ -x "$NORQ" ] || { echo "scripts/schemathesis.sh: no $NORQ (build first)" >&2; exit 1; }

WORK="$(mktemp -d /tmp/norq-schemathesis.XXXXXX)"
SERVER_PID=""
cleanup() {
    [ -n "$SERVER_PID" ] && kill "$SERVER_PID" 2>/dev/null && wait "$SERVER_PID" 2>/dev/null || true
    rm -rf "$WORK"
}
trap cleanup EXIT INT TERM

ROOT="$(pwd)"
KEY="schemathesis-$(python3 -c 'import secrets; print(secrets.token_hex(16))')"
PORT="$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')"
cat > "$WORK/norq.yaml" <<YAML
templates: $ROOT/templates
providers:
  apns:
    config:
      keyId: DEMO000000
      teamId: TEAM123ABC
      keyPath: $ROOT/examples/keys/AuthKey_DEMO000000.p8
      bundleId: com.example.MyApp
      production: false
  fcm:
    config:
      projectId: norq-demo
      serviceAccount: $ROOT/examples/keys/fcm-service-account-DEMO.json
routing:
  push: apns
  push.android: fcm
store:
  sqlite: $WORK/norq.db
server:
  host: 127.0.0.1
  port: $PORT
  apiKeys:
    - { name: schemathesis, key: "$KEY", scopes: [admin] }
  limits: { ratePerSecond: 100000, burst: 100000, waitTimeout: 2s }
YAML
"$NORQ" serve -c "$WORK/norq.yaml" --emulator > "$WORK/serve.log" 2>&1 &
SERVER_PID=$!
for _ in $(seq 1 100); do
    python3 -c "import urllib.request; urllib.request.urlopen('http://127.0.0.1:$PORT/healthz', timeout=1)" \
        >/dev/null 2>&1 && break
    kill -0 "$SERVER_PID" 2>/dev/null || { cat "$WORK/serve.log" >&2; exit 1; }
    sleep 0.1
done

status=0
st --config-file scripts/schemathesis.toml run docs/openapi.yaml --url "http://127.0.0.1:$PORT" -H "Authorization: Bearer $KEY" \
    --checks all --seed "${NORQ_SCHEMATHESIS_SEED:-33}" --max-examples "${NORQ_SCHEMATHESIS_EXAMPLES:-300}" \
    --workers 1 --request-timeout 10 --no-color "$@" || status=$?
if [ "$status" -ne 0 ]; then
    echo "scripts/schemathesis.sh: failures (server log: last lines)" >&2
    tail -n 20 "$WORK/serve.log" >&2
fi
exit "$status"
