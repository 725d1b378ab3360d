# Shared by the benchmark scripts (compare.sh, fcm.sh, webpush.sh, durable.sh, serve.sh, ab.sh): source it.

# A CA and a server certificate for 127.0.0.1 in $1 (ca.pem, server.pem, server.key), made once: nghttpd and the
# emulators serve with them; the clients (router, h2load, the peers) trust the CA.
bench_make_certs() {  # work-dir
    local work="$1"
    [ -s "$work/server.pem" ] && return 0
    openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/ca.key" \
        -out "$work/ca.pem" -days 30 -subj "/CN=norq bench CA" \
        -addext basicConstraints=critical,CA:TRUE -addext keyUsage=critical,keyCertSign 2>/dev/null
    openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes -keyout "$work/server.key" \
        -out "$work/server.csr" -subj "/CN=127.0.0.1" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n' \
        > "$work/server.ext"
    openssl x509 -req -in "$work/server.csr" -CA "$work/ca.pem" -CAkey "$work/ca.key" -CAcreateserial \
        -out "$work/server.pem" -days 30 -extfile "$work/server.ext" 2>/dev/null
}

# Makes sure each `tool:debian-package` is on PATH: a missing one is installed with apt-get (as scripts/test.sh
# installs Chromium and PostgreSQL), so that a fresh machine runs the benchmarks; exits when one is still missing.
bench_require_tools() {  # tool:package ...
    local tool missing=()
    for tool in "$@"; do command -v "${tool%%:*}" >/dev/null || missing+=("$tool"); done
    [ "${#missing[@]}" = 0 ] && return 0
    if command -v apt-get >/dev/null; then
        local sudo=""; [ "$(id -u)" -ne 0 ] && sudo="sudo"
        echo "installing ${missing[*]##*:} (apt-get)" >&2
        DEBIAN_FRONTEND=noninteractive $sudo apt-get update -qq >&2 || true
        DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "${missing[@]##*:}" >&2 || true
    fi
    local failed=0
    for tool in "${missing[@]}"; do
        if ! command -v "${tool%%:*}" >/dev/null; then
            echo "missing ${tool%%:*}: install it with 'apt-get install ${tool##*:}'" >&2; failed=1
        fi
    done
    [ "$failed" = 0 ] || exit 1
}

# Waits (10 s at most) until something listens on host:port.
wait_port() {  # host port
    for _ in $(seq 1 100); do
        if (exec 3<>"/dev/tcp/$1/$2") 2>/dev/null; then return 0; fi
        sleep 0.1
    done
    echo "nothing listens on $1:$2" >&2; return 1
}

# Interleaved A/B rounds: for each of ROUNDS rounds and each shape CxM of SHAPES, every entry `name=spec` of the
# array `bins` runs in order (reversed every other round) as `run_one NAME SPEC C M ROUND`, with `h2 C M ROUND`
# in the middle of them. Each round ends with a line in $WORK/machine.txt.
bench_interleave() {  # label
    local r shape c m half i b
    local -a order
    for r in $(seq 1 "$ROUNDS"); do
        for shape in $SHAPES; do
            c="${shape%x*}"; m="${shape#*x}"
            order=("${bins[@]}")
            if [ $(( r % 2 )) = 0 ]; then order=(); for (( i=${#bins[@]}-1; i>=0; i-- )); do order+=("${bins[$i]}"); done; fi
            half=$(( ${#order[@]} / 2 )); i=0
            for b in "${order[@]}"; do
                [ $i = $half ] && h2 "$c" "$m" "$r"
                run_one "${b%%=*}" "${b#*=}" "$c" "$m" "$r"; i=$((i+1))
            done
        done
        echo "# $(date -u +%T) $1round $r done $(uptime)" | tee -a "$WORK/machine.txt"
    done
}
