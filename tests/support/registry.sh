#!/bin/sh
# registry.sh DIR - a local Docker registry (Debian's docker-registry) on a
# free loopback port, storage under DIR, for the sidecar pull test
# (tests/runtime/test_docker_sidecar_pull.c). Prints the port on its first
# line, then runs the registry in the foreground (the test stops it).
set -e
dir=$1
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
echo "$port"
exec docker-registry serve "$dir/config.yml" >"$dir/registry.log" 2>&1
