#!/bin/sh
# registry.sh DIR [CERT KEY HTPASSWD] - a local Docker registry (Debian's
# docker-registry) on a free loopback port, storage under DIR, for the sidecar
# pull test (tests/runtime/test_docker_sidecar_pull.c) and, with TLS and basic
# auth (CERT, KEY: PEM files; HTPASSWD: bcrypt entries, htpasswd -B), for
# the image registry test (tests/runtime/image_registry.sh). Prints the port
# on its first line, then runs the registry in the foreground (the test stops
# it).
set -e
dir=$1 cert=${2:-} key=${3:-} htpasswd=${4:-}
command -v docker-registry >/dev/null || {
    echo "no docker-registry: apt-get install docker-registry (scripts/setup.sh)" >&2
    exit 1
}
port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
mkdir -p "$dir/data"
cat > "$dir/config.yml" <<CFG
version: 0.1
log:
  level: error
storage:
  filesystem:
    rootdirectory: $dir/data
http:
  addr: 127.0.0.1:$port
CFG
if [ -n "$cert" ]; then
    printf '  tls:\n    certificate: %s\n    key: %s\n' "$cert" "$key" >>"$dir/config.yml"
fi
if [ -n "$htpasswd" ]; then
    printf 'auth:\n  htpasswd:\n    realm: sbx-test\n    path: %s\n' "$htpasswd" >>"$dir/config.yml"
fi
echo "$port"
exec docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1
