# registry_tls.sh - sourced by the registry tests (tests/runtime/image_oci.sh):
# a test CA, a certificate for 127.0.0.1, an htpasswd login, and Debian's
# docker-registry on a free loopback port with them (tests/support/registry.sh).
# Needs SRC (the source dir), say, die and wait_until from the sourcing script.
#   reg_make_tls DIR            DIR/ca.crt, DIR/reg.crt, DIR/reg.key, DIR/users.htpasswd
#                               (user sbxtest, password s3cret-pw)
#   reg_start DIR NAME [auth]   starts a registry under DIR/NAME (with basic auth
#                               when the third argument is "auth"), sets reg_port
#                               and reg_pid; the caller stops it (kill $reg_pid).
#                               The caller's environment reaches it
#                               (REGISTRY_STORAGE_DELETE_ENABLED=true, ...).
reg_make_tls() {
    local d=$1
    openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=sbx-test-ca \
        -keyout "$d/ca.key" -out "$d/ca.crt" 2>/dev/null
    openssl req -newkey rsa:2048 -nodes -subj /CN=127.0.0.1 -keyout "$d/reg.key" \
        -out "$d/reg.csr" 2>/dev/null
    printf 'subjectAltName=IP:127.0.0.1\n' >"$d/ext.cnf"
    openssl x509 -req -in "$d/reg.csr" -CA "$d/ca.crt" -CAkey "$d/ca.key" -CAcreateserial \
        -days 1 -extfile "$d/ext.cnf" -out "$d/reg.crt" 2>/dev/null
    htpasswd -Bbn sbxtest 's3cret-pw' >"$d/users.htpasswd" 2>/dev/null
}

reg_code() { # PORT CURL-ARGS...: the /v2/ status
    local p=$1
    shift
    curl -s -o /dev/null -w '%{http_code}' --cacert "$WORK/ca.crt" "$@" "https://127.0.0.1:$p/v2/" || true
}

reg_start() {
    local d=$1/$2 want=200
    mkdir -p "$d"
    if [ "${3:-}" = auth ]; then
        sh "$SRC/tests/support/registry.sh" "$d" "$1/reg.crt" "$1/reg.key" "$1/users.htpasswd" >"$d/port" &
        want=401
    else
        sh "$SRC/tests/support/registry.sh" "$d" "$1/reg.crt" "$1/reg.key" >"$d/port" &
    fi
    reg_pid=$!
    wait_until 60 grep -qs . "$d/port" || die "the registry $2 printed no port"
    reg_port=$(head -n1 "$d/port")
    _reg_up() { [ "$(reg_code "$reg_port")" = "$want" ]; }
    wait_until 60 _reg_up || die "registry $2 on :$reg_port not up ($(cat "$d/registry.log"))"
}
