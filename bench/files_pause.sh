#!/usr/bin/env bash
# files_pause.sh - issue 30's benchmarks for files and pause, against the peer
# measured in the same run on the same running sandbox:
#   - `sbx cp` throughput, both ways, against `docker cp` (a directory of
#     FILES files totalling MIB MiB, alternated, RUNS times each way);
#   - `sbx task pause` / `sbx task resume` latency against `docker pause` /
#     `docker unpause` (RUNS times, alternated).
# Prints p50 (and p95 for latencies) and the ratio sbx/docker of the medians.
#   bench/files_pause.sh [RUNS] [MIB] [FILES]   (default 5 64 64; DOCKER_HOST picks the engine)
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
cd "$(dirname "$0")/.."
runs=${1:-5}
mib=${2:-64}
files=${3:-64}
sbx=${SBX:-build/sbx}
export SBX_STATE_DIR=${SBX_STATE_DIR:-$(mktemp -d /tmp/sbx-bench-XXXXXX)}
command -v docker >/dev/null || { echo "bench: the docker CLI is needed (apt-get install docker.io)" >&2; exit 1; }

work=$(mktemp -d /tmp/sbx-bench-files-XXXXXX)
task=bench-files-$$
"$sbx" task start --task "$task" >/dev/null
trap '"$sbx" task end "$task" >/dev/null 2>&1 || true; rm -rf "$work"' EXIT
container=sbx-$task

# the data: FILES files of MIB/FILES MiB each (random: nothing compresses)
mkdir "$work/src"
per=$(( mib * 1024 / files ))
for i in $(seq 1 "$files"); do
    head -c "$((per * 1024))" /dev/urandom >"$work/src/f$i"
done

ns() { date +%s%N; }
# pct P VALUES... (microseconds): nearest-rank percentile in ms, one decimal
pct() { local p=$1; shift; printf '%s\n' "$@" | sort -n |
        awk -v p="$p" '{a[NR]=$1} END {r=int((p*NR+99)/100); if (r<1) r=1; printf "%.1f", a[r]/1000}'; }
mibs() { awk -v m="$mib" -v ms="$1" 'BEGIN {printf "%.0f", m / (ms / 1000)}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }

sin=() din=() sout=() dout=()
# one warm-up each way, not counted
"$sbx" cp "$work/src" "$task:/tmp/warm" && docker cp -q "$work/src" "$container:/tmp/dwarm"
for i in $(seq 1 "$runs"); do
    a=$(ns); "$sbx" cp "$work/src" "$task:/tmp/s$i"; b=$(ns); sin+=($(( (b - a) / 1000 )))
    a=$(ns); docker cp -q "$work/src" "$container:/tmp/d$i"; b=$(ns); din+=($(( (b - a) / 1000 )))
    a=$(ns); "$sbx" cp "$task:/tmp/s$i" "$work/so$i"; b=$(ns); sout+=($(( (b - a) / 1000 )))
    a=$(ns); docker cp -q "$container:/tmp/d$i" "$work/do$i"; b=$(ns); dout+=($(( (b - a) / 1000 )))
    cmp -s "$work/src/f1" "$work/so$i/f1" || { echo "bench: sbx cp out differs" >&2; exit 1; }
    rm -rf "$work/so$i" "$work/do$i"
    "$sbx" exec "$task" -- rm -rf "/tmp/s$i" "/tmp/d$i"
done
si=$(pct 50 "${sin[@]}") di=$(pct 50 "${din[@]}") so=$(pct 50 "${sout[@]}") do_=$(pct 50 "${dout[@]}")
echo "cp into the task, $mib MiB in $files files (p50 over $runs runs):"
echo "  sbx cp     ${si} ms  $(mibs "$si") MiB/s"
echo "  docker cp  ${di} ms  $(mibs "$di") MiB/s"
echo "  ratio sbx/docker (time): $(ratio "$si" "$di")"
echo "cp out of the task:"
echo "  sbx cp     ${so} ms  $(mibs "$so") MiB/s"
echo "  docker cp  ${do_} ms  $(mibs "$do_") MiB/s"
echo "  ratio sbx/docker (time): $(ratio "$so" "$do_")"

sp=() sr=() dp=() dr=()
# a process that uses CPU, so that there is something to freeze
"$sbx" exec "$task" -- sh -c 'while :; do :; done' >/dev/null 2>&1 &
spin=$!
for i in $(seq 1 "$runs"); do
    a=$(ns); "$sbx" task pause "$task"; b=$(ns); sp+=($(( (b - a) / 1000 )))
    a=$(ns); "$sbx" task resume "$task"; b=$(ns); sr+=($(( (b - a) / 1000 )))
    a=$(ns); docker pause "$container" >/dev/null; b=$(ns); dp+=($(( (b - a) / 1000 )))
    a=$(ns); docker unpause "$container" >/dev/null; b=$(ns); dr+=($(( (b - a) / 1000 )))
done
kill "$spin" 2>/dev/null || true
wait "$spin" 2>/dev/null || true
echo "pause and resume (p50 / p95 over $runs runs):"
echo "  sbx task pause   $(pct 50 "${sp[@]}") / $(pct 95 "${sp[@]}") ms    docker pause    $(pct 50 "${dp[@]}") / $(pct 95 "${dp[@]}") ms   ratio $(ratio "$(pct 50 "${sp[@]}")" "$(pct 50 "${dp[@]}")")"
echo "  sbx task resume  $(pct 50 "${sr[@]}") / $(pct 95 "${sr[@]}") ms    docker unpause  $(pct 50 "${dr[@]}") / $(pct 95 "${dr[@]}") ms   ratio $(ratio "$(pct 50 "${sr[@]}")" "$(pct 50 "${dr[@]}")")"
