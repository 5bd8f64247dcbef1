#!/usr/bin/env bash
# dockerd.sh - start or stop a Docker engine the way sbx expects it, safely:
# user namespaces remapped (--userns-remap=default), and no IP forwarding,
# NAT or iptables rules, so nothing a container does is routed off the machine.
#
#   scripts/dockerd.sh start [--socket PATH] [--root DIR]   (default: the system socket)
#   scripts/dockerd.sh stop  [--socket PATH] [--root DIR]
#   scripts/dockerd.sh status [--socket PATH]
#
# Tests use a private engine: --socket /tmp/sbx-test-docker/docker.sock
# --root /tmp/sbx-test-docker (scripts/test.sh does this). Needs root.
set -euo pipefail

cmd=${1:-}
shift || true
socket=/var/run/docker.sock
root=""
while [ $# -gt 0 ]; do
    case "$1" in
    --socket) socket=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0"; exit 0 ;;
    *) echo "dockerd.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
if [ -z "$root" ]; then
    if [ "$socket" = /var/run/docker.sock ]; then root=/var/lib/sbx-docker; else root=$(dirname "$socket"); fi
fi
pidfile=$root/dockerd.pid
log=$root/dockerd.log

alive() {
    curl -s --max-time 2 --unix-socket "$socket" http://localhost/_ping 2>/dev/null | grep -q OK
}

case "$cmd" in
start)
    if alive; then echo "dockerd.sh: engine already answering on $socket" >&2; exit 0; fi
    if [ "$(id -u)" != 0 ]; then echo "dockerd.sh: must run as root to start dockerd" >&2; exit 1; fi
    command -v dockerd >/dev/null || { echo "dockerd.sh: dockerd not installed (apt-get install docker.io)" >&2; exit 1; }
    mkdir -p "$root/data" "$root/exec" "$(dirname "$socket")"
    # a stale pid file from a killed engine
    if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then rm -f "$pidfile"; fi
    nohup dockerd \
        --data-root "$root/data" --exec-root "$root/exec" \
        --host "unix://$socket" --pidfile "$pidfile" \
        --userns-remap=default \
        --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
        --storage-driver=overlay2 >"$log" 2>&1 &
    for _ in $(seq 1 60); do
        if alive; then echo "dockerd.sh: engine up on $socket (log $log)" >&2; exit 0; fi
        sleep 0.5
    done
    echo "dockerd.sh: engine did not answer on $socket within 30 s; last log lines:" >&2
    tail -n 20 "$log" >&2 || true
    exit 1
    ;;
stop)
    if [ -f "$pidfile" ]; then
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do kill -0 "$pid" 2>/dev/null || break; sleep 0.25; done
        kill -9 "$pid" 2>/dev/null || true
        rm -f "$pidfile"
    fi
    echo "dockerd.sh: stopped engine on $socket" >&2
    ;;
status)
    if alive; then echo "up: $socket"; else echo "down: $socket"; exit 1; fi
    ;;
*)
    echo "usage: scripts/dockerd.sh start|stop|status [--socket PATH] [--root DIR]" >&2
    exit 2
    ;;
esac
