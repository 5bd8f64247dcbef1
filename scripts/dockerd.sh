#!/usr/bin/env bash
# dockerd.sh - start or stop a Docker engine the way sbx expects it, safely:
# user namespaces remapped (--userns-remap=default), and no IP forwarding,
# NAT or iptables rules, so nothing a container does is routed off the machine.
#
#   scripts/dockerd.sh start [--socket PATH] [--root DIR] [--btrfs SIZE | --overlay2]
#   scripts/dockerd.sh stop  [--socket PATH] [--root DIR]
#   scripts/dockerd.sh status [--socket PATH]
#
# Default: overlay2 on ROOT/data; sbx caps each sandbox's disk with a
#               filesystem of its own (docs/operations.md, "The disk cap").
# --btrfs SIZE  (the older layout) the engine's data root is a btrfs with
#               quotas in a sparse file ROOT/btrfs.img of SIZE (e.g. 40G),
#               loop-mounted at ROOT/btrfs, --storage-driver=btrfs; a new one
#               gets simple quotas where the kernel has them (6.7+), else
#               qgroups. Made once; reused after a restart or a killed engine;
#               a larger SIZE grows it (when start runs the engine). Once
#               ROOT/btrfs.img exists, start uses it without --btrfs too.
# --overlay2    overlay2 on ROOT/data even when ROOT/btrfs.img exists.
# stop          stops the engine, then unmounts ROOT/btrfs and detaches its
#               loop device when it is mounted.
#
# Tests use a private engine: --socket /tmp/sbx-test-docker/docker.sock
# --root /tmp/sbx-test-docker --overlay2 (scripts/test.sh does this). Needs root.
set -euo pipefail

cmd=${1:-}
shift || true
case "$cmd" in -h|--help) sed -n '2,24p' "$0"; exit 0 ;; esac
socket=/var/run/docker.sock
root=""
btrfs_size=""
overlay2=0
while [ $# -gt 0 ]; do
    case "$1" in
    --socket) socket=$2; shift 2 ;;
    --root) root=$2; shift 2 ;;
    --btrfs) btrfs_size=$2; shift 2 ;;
    --overlay2) overlay2=1; shift ;;
    -h|--help) sed -n '2,24p' "$0"; exit 0 ;;
    *) echo "dockerd.sh: unknown argument '$1'" >&2; exit 2 ;;
    esac
done
if [ -n "$btrfs_size" ] && [ "$overlay2" = 1 ]; then
    echo "dockerd.sh: --btrfs and --overlay2 exclude each other" >&2
    exit 2
fi
if [ -n "$btrfs_size" ] && ! [[ $btrfs_size =~ ^[1-9][0-9]*[MGT]$ ]]; then
    echo "dockerd.sh: --btrfs '$btrfs_size': a size like 40G (M, G or T)" >&2
    exit 2
fi
if [ -z "$root" ]; then
    if [ "$socket" = /var/run/docker.sock ]; then root=/var/lib/sbx-docker; else root=$(dirname "$socket"); fi
fi
pidfile=$root/dockerd.pid
log=$root/dockerd.log
img=$root/btrfs.img
mnt=$root/btrfs

say() { echo "dockerd.sh: $*" >&2; }

alive() {
    curl -s --max-time 2 --unix-socket "$socket" http://localhost/_ping 2>/dev/null | grep -q OK
}

# the storage driver of the engine answering on the socket
engine_driver() {
    curl -s --max-time 5 --unix-socket "$socket" http://localhost/info 2>/dev/null |
        sed -n 's/.*"Driver":"\([^"]*\)".*/\1/p'
}

bytes() { # 40G -> bytes
    local n=${1%?}
    case "${1: -1}" in
    M) echo $((n << 20)) ;;
    G) echo $((n << 30)) ;;
    T) echo $((n << 40)) ;;
    esac
}

# Removes qgroups whose subvolume is gone: the engine's btrfs driver cannot
# delete a qgroup while the kernel still drops the subvolume ("Failed to
# delete btrfs qgroup ... device or resource busy"), so they would pile up.
clear_stale() {
    btrfs qgroup clear-stale "$mnt" >/dev/null 2>&1 || true
}

# Mounts ROOT/btrfs.img at ROOT/btrfs (made or grown first), quotas on.
btrfs_prepare() {
    local dev size have free
    for t in mkfs.btrfs btrfs losetup mountpoint; do
        command -v "$t" >/dev/null || { say "$t not installed (apt-get install btrfs-progs util-linux)"; exit 1; }
    done
    mkdir -p "$mnt"
    if mountpoint -q "$mnt"; then
        if [ "$(stat -f -c %T "$mnt")" != btrfs ]; then
            say "$mnt is a mount point but not btrfs: unmount it first"
            exit 1
        fi
        say "reusing the btrfs data root mounted at $mnt"
    else
        if [ ! -f "$img" ]; then
            [ -n "$btrfs_size" ] || { say "no $img: give --btrfs SIZE"; exit 2; }
            size=$(bytes "$btrfs_size")
            free=$(( $(stat -f -c '%a*%S' "$root") ))
            if [ "$size" -gt "$free" ]; then
                say "warning: $img ($btrfs_size, sparse) is larger than the free space under $root" \
                    "($((free >> 30))G): if that fills, the engine's writes fail with I/O errors"
            fi
            truncate -s "$size" "$img"
            mkfs.btrfs -q -L sbx-docker "$img" >/dev/null
            say "made $img ($btrfs_size, sparse, btrfs)"
        fi
        # a loop device left attached by a killed engine or a failed unmount
        dev=$(losetup -j "$img" -n -O NAME | head -n 1)
        if [ -z "$dev" ]; then
            dev=$(losetup --find --show "$img")
        else
            say "reusing loop device $dev of $img"
        fi
        mount -t btrfs -o discard=async "$dev" "$mnt"
        say "mounted $img at $mnt ($dev)"
    fi
    if [ -n "$btrfs_size" ]; then
        size=$(bytes "$btrfs_size")
        have=$(stat -c %s "$img")
        if [ "$size" -gt "$have" ]; then
            truncate -s "$size" "$img"
            dev=$(findmnt -n -o SOURCE --target "$mnt")
            losetup -c "$dev"
            btrfs filesystem resize max "$mnt" >/dev/null
            say "grew $img to $btrfs_size"
        fi
    fi
    # quotas once: simple quotas (accounted at allocation, no backref walks
    # on removal) where the kernel has them; Debian's btrfs-progs 6.2 has no
    # `quota enable --simple`, so BTRFS_IOC_QUOTA_CTL with command 4
    if ! btrfs qgroup show "$mnt" >/dev/null 2>&1; then
        if python3 -c 'import fcntl, os, struct, sys
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.ioctl(fd, 0xC0109428, bytearray(struct.pack("QQ", 4, 0)))' "$mnt" 2>/dev/null; then
            say "btrfs simple quotas on $mnt"
        else
            btrfs quota enable "$mnt"
            say "btrfs qgroups on $mnt (no simple quotas in this kernel)"
        fi
    fi
    clear_stale
}

# Unmounts ROOT/btrfs and detaches its loop device (after the engine stopped).
btrfs_release() {
    local dev
    mountpoint -q "$mnt" || return 0
    dev=$(findmnt -n -o SOURCE --target "$mnt")
    clear_stale
    # blocks freed inside go back to the host's filesystem (discard=async does
    # it too, gradually)
    fstrim "$mnt" 2>/dev/null || true
    for _ in $(seq 1 20); do
        # -R: the engine's btrfs driver bind-mounts its own directories inside
        umount -R "$mnt" 2>/dev/null && break
        sleep 0.25
    done
    if mountpoint -q "$mnt"; then
        say "could not unmount $mnt (busy: containers of a killed engine still running?);" \
            "start reuses it"
        return 1
    fi
    case "$dev" in /dev/loop*) losetup -d "$dev" 2>/dev/null || true ;; esac
    say "unmounted $mnt"
}

case "$cmd" in
start)
    use_btrfs=0
    if [ "$overlay2" = 0 ] && { [ -n "$btrfs_size" ] || [ -f "$img" ]; }; then use_btrfs=1; fi
    if alive; then
        drv=$(engine_driver)
        if [ "$use_btrfs" = 1 ] && [ "$drv" != btrfs ]; then
            say "an engine already answers on $socket with storage driver '${drv:-?}', not btrfs:" \
                "stop it first (scripts/dockerd.sh stop --socket $socket --root $root)"
            exit 1
        fi
        say "engine already answering on $socket (storage driver ${drv:-?})"
        exit 0
    fi
    if [ "$(id -u)" != 0 ]; then say "must run as root to start dockerd"; exit 1; fi
    command -v dockerd >/dev/null || { say "dockerd not installed (apt-get install docker.io)"; exit 1; }
    mkdir -p "$root" "$root/exec" "$(dirname "$socket")"
    # a stale pid file from a killed engine
    if [ -f "$pidfile" ] && ! kill -0 "$(cat "$pidfile")" 2>/dev/null; then rm -f "$pidfile"; fi
    if [ "$use_btrfs" = 1 ]; then
        btrfs_prepare
        data=$mnt
        driver=btrfs
    else
        data=$root/data
        driver=overlay2
        mkdir -p "$data"
    fi
    nohup dockerd \
        --data-root "$data" --exec-root "$root/exec" \
        --host "unix://$socket" --pidfile "$pidfile" \
        --userns-remap=default \
        --iptables=false --ip-forward=false --ip-masq=false --bridge=none \
        --storage-driver="$driver" >"$log" 2>&1 &
    for _ in $(seq 1 60); do
        if alive; then say "engine up on $socket ($driver on $data, log $log)"; exit 0; fi
        sleep 0.5
    done
    say "engine did not answer on $socket within 30 s; last log lines:"
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
    say "stopped engine on $socket"
    btrfs_release || exit 1
    ;;
status)
    if alive; then echo "up: $socket"; else echo "down: $socket"; exit 1; fi
    ;;
*)
    echo "usage: scripts/dockerd.sh start|stop|status [--socket PATH] [--root DIR] [--btrfs SIZE|--overlay2]" >&2
    exit 2
    ;;
esac
