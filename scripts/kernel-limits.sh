#!/usr/bin/env bash
# kernel-limits.sh - raises the kernel's per-user inotify pool that all
# sandboxes share with host root (docs/operations.md, "Kernel per-user
# counters"), sized for box.max_sandboxes sandboxes plus the host, as
# `sbx info --json` computes it ("kernel"). Writes /etc/sysctl.d/60-sbx.conf
# and applies it (sysctl --system). Never lowers a value already higher.
# Run as root; scripts/setup.sh runs it. Usage: kernel-limits.sh [SBX]
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "kernel-limits: $*" >&2; }
sbx=${1:-build/sbx}
conf=/etc/sysctl.d/60-sbx.conf

if [ "$(id -u)" != 0 ]; then
    say "run as root: it writes $conf"
    exit 1
fi
# sbx info exits 1 when the engine does not answer; its JSON is printed anyway
info=$("$sbx" info --json 2>/dev/null || true)
# "needed" follows each key on the next line of the indented JSON
need() {
    printf '%s\n' "$info" | grep -A2 "\"$1\": {" | sed -n 's/.*"needed": \([0-9]*\).*/\1/p'
}
lines=()
for key in fs.inotify.max_user_instances fs.inotify.max_user_watches; do
    want=$(need "$key")
    if [ -z "$want" ]; then
        say "'$sbx info --json' does not say what $key needs (is $sbx built?)"
        exit 1
    fi
    have=$(sysctl -n "$key")
    [ "$have" -gt "$want" ] && want=$have
    lines+=("$key = $want")
done
{
    echo "# written by sbx scripts/kernel-limits.sh: the inotify pool that every"
    echo "# sandbox shares with host root, sized for box.max_sandboxes (docs/operations.md)"
    printf '%s\n' "${lines[@]}"
} >"$conf.tmp"
mv "$conf.tmp" "$conf"
sysctl --system >/dev/null
say "$(printf '%s; ' "${lines[@]}")written to $conf"
