#!/usr/bin/env bash
# The README's test command. Starts a throwaway PostgreSQL server (installing the Debian package `postgresql` when
# missing) as a non-root user on a free port in a temporary directory, exports its URL for the PostgreSQL tests
# (NORQ_TEST_POSTGRES_URL), runs `swift test --no-parallel` (extra arguments are passed on), and stops the server
# on exit; then schemathesis against a live server (scripts/schemathesis.sh, installed from PyPI when missing), and
# the OTLP export end to end (scripts/otlp-export.sh: Norq's exporter, then swift-otel's with the OTLP trait).
#
#   NORQ_SKIP_SCHEMATHESIS=1               skip schemathesis (also skipped on a --filter/--skip run)
#   NORQ_SKIP_DOCS=1                       skip the DocC build (scripts/docs.sh; also skipped on a filtered run)
#   NORQ_SKIP_OTLP=1                       skip the OTLP export check (scripts/otlp-export.sh: builds norq with the
#                                          OTLP trait; also skipped on a filtered run)
#   NORQ_TEST_POSTGRES_URL=postgres://...  use that server instead (it must allow CREATE DATABASE)
#   NORQ_SKIP_POSTGRES=1                   skip the PostgreSQL tests explicitly (they fail when neither is set)
#
# `norq preview`'s browser test needs headless Chromium: installed here when missing (Debian package `chromium`),
# and NORQ_REQUIRE_BROWSER=1 is exported so that the test fails rather than skips without it.
#   NORQ_SKIP_BROWSER=1                    neither install Chromium nor require it (the browser test then runs only
#                                          when a chromium is on PATH, and says it was skipped otherwise)
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO="sudo"
if [ "${NORQ_SKIP_BROWSER:-}" != "1" ]; then
    if ! command -v chromium >/dev/null 2>&1 && ! command -v chromium-browser >/dev/null 2>&1 \
        && [ -z "${NORQ_CHROMIUM:-}" ]; then
        echo "scripts/test.sh: installing Chromium (Debian package chromium) for the norq preview browser test" >&2
        export DEBIAN_FRONTEND=noninteractive
        $SUDO apt-get update -qq
        $SUDO apt-get install -y -qq chromium >/dev/null
    fi
    export NORQ_REQUIRE_BROWSER=1
fi

# After the tests, schemathesis against a live `norq serve --emulator` (scripts/schemathesis.sh: every operation of
# docs/openapi.yaml, all checks, a fixed seed, 300 examples per operation; zero failures). Skipped when the run is
# filtered (--filter/--skip) or NORQ_SKIP_SCHEMATHESIS=1.
run_tests() {
    local status=0
    swift test --no-parallel "$@" || status=$?
    [ "$status" -ne 0 ] && return "$status"
    case " $* " in
        *" --filter "*|*" --skip "*)
            echo "scripts/test.sh: filtered run, schemathesis not run" >&2; return 0 ;;
    esac
    if [ "${NORQ_SKIP_DOCS:-}" = "1" ]; then
        echo "scripts/test.sh: NORQ_SKIP_DOCS=1, the DocC build not run" >&2
    else
        scripts/docs.sh || return 1
    fi
    if [ "${NORQ_SKIP_SCHEMATHESIS:-}" = "1" ]; then
        echo "scripts/test.sh: NORQ_SKIP_SCHEMATHESIS=1, schemathesis not run" >&2
        return 0
    fi
    scripts/schemathesis.sh || return 1
    # The OTLP export end to end: Norq's own exporter (the tests' build), then swift-otel's (a norq built with the OTLP
    # trait; the tests above run without it).
    if [ "${NORQ_SKIP_OTLP:-}" = "1" ]; then
        echo "scripts/test.sh: NORQ_SKIP_OTLP=1, the OTLP export not checked" >&2
        return 0
    fi
    EXPORTER=otlp scripts/otlp-export.sh || return 1
    EXPORTER=swift-otel scripts/otlp-export.sh
}

if [ "${NORQ_SKIP_POSTGRES:-}" = "1" ] || [ -n "${NORQ_TEST_POSTGRES_URL:-}" ]; then
    run_tests "$@"
    exit $?
fi

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1; }
if [ -z "$(pg_bin)" ] || [ ! -x "$(pg_bin)/initdb" ]; then
    echo "scripts/test.sh: installing PostgreSQL (Debian package postgresql)" >&2
    export DEBIAN_FRONTEND=noninteractive
    $SUDO apt-get update -qq
    $SUDO apt-get install -y -qq postgresql >/dev/null
fi
PGBIN="$(pg_bin)"
[ -x "$PGBIN/initdb" ] || { echo "scripts/test.sh: no initdb under /usr/lib/postgresql/*/bin" >&2; exit 1; }

# PostgreSQL refuses to run as root: as root, run it as `nobody`.
RUNAS=()
if [ "$(id -u)" -eq 0 ]; then
    RUNAS=(runuser -u nobody --)
fi

PGTMP="$(mktemp -d /tmp/norq-pg.XXXXXX)"
chmod 755 "$PGTMP"
[ "$(id -u)" -eq 0 ] && chown nobody "$PGTMP"

free_port() {
    if command -v python3 >/dev/null 2>&1; then
        python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
    else
        echo $(( 20000 + RANDOM % 40000 ))
    fi
}
PORT="$(free_port)"

# A control script the chaos tests use to stop and start the server mid-burst.
cat > "$PGTMP/pgctl" <<CTL
#!/usr/bin/env bash
set -e
case "\$1" in
    stop) exec ${RUNAS[*]} "$PGBIN/pg_ctl" -D "$PGTMP/data" -m fast -w stop ;;
    start) exec ${RUNAS[*]} "$PGBIN/pg_ctl" -D "$PGTMP/data" -l "$PGTMP/log" -w -t 60 \
        -o "-p $PORT -k $PGTMP -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=200" start ;;
    *) echo "usage: pgctl stop|start" >&2; exit 2 ;;
esac
CTL
chmod 755 "$PGTMP/pgctl"

cleanup() {
    "$PGTMP/pgctl" stop >/dev/null 2>&1 || true
    rm -rf "$PGTMP"
}
trap cleanup EXIT INT TERM

"${RUNAS[@]}" "$PGBIN/initdb" -D "$PGTMP/data" -U norq --auth=trust -E UTF8 >"$PGTMP/initdb.log" 2>&1 \
    || { cat "$PGTMP/initdb.log" >&2; exit 1; }
"$PGTMP/pgctl" start >/dev/null || { cat "$PGTMP/log" >&2; exit 1; }

export NORQ_TEST_POSTGRES_URL="postgres://norq@127.0.0.1:$PORT/postgres?sslmode=disable"
export NORQ_TEST_POSTGRES_CTL="$PGTMP/pgctl"
echo "scripts/test.sh: PostgreSQL $("$PGBIN/postgres" --version | awk '{print $3}') on 127.0.0.1:$PORT ($PGTMP)" >&2

status=0
run_tests "$@" || status=$?
exit $status
