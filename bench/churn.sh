#!/usr/bin/env bash
# churn.sh - sandboxes under churn, per disk-cap mechanism, in one run:
# sequential then P-parallel `sbx run -- true` (and `docker run --rm` as the
# peer) for SECONDS each; p50/p95/p99, sandboxes per minute, the first and the
# last minute, a long-lived sandbox's `docker exec true` latency meanwhile,
# the machine's load average at the start and end of each phase, what is left
# behind at the end and 60 s later, and the ratios against the reference.
#
#   bench/churn.sh [SECONDS] [PARALLEL] [MODES]
#     SECONDS  per phase (default 600; 120 is enough to compare)
#     PARALLEL streams in the parallel phase (default 6)
#     MODES    space-separated, run back to back in this order (default
#              "ovl-docker ovl-nocap ovl-loop btrfs-squota"):
#       ovl-docker    docker run --rm --network none IMG true, overlay2 (the reference)
#       ovl-nocap     sbx run -- true, overlay2, no quota (disk_enforcement = watchdog)
#       ovl-loop      sbx run -- true, overlay2, a per-sandbox ext4 (disk_enforcement = loop)
#       btrfs-squota  sbx run -- true, btrfs with simple quotas (storage-opt)
#       btrfs-docker  docker run --rm --storage-opt size=CAP, btrfs with simple quotas
# Engines: ENGINES=/tmp/sbx-churn (default): PREFIX-ovl and PREFIX-btrfs, each
# started with scripts/dockerd.sh (user remapping, no NAT) when it does not
# answer, the warm image imported from /var/cache/sbx/image. CAP (default 1G)
# is limits.disk; MEMORY (default 1G) is limits.memory, small enough that the
# box admits PARALLEL sandboxes at once (at the default 8G a 24 GiB box admits
# two, and the others wait in the box's admission: that measures the
# admission, not the disk cap). TRACE=1 runs sbx at debug level and prints
# the provider's phase timings (create, the disk cap's steps, start, the
# removal) per mode. Needs root. Results: OUT (default PREFIX-results).
# Exits 1 when anything is left behind 60 s after the last mode.
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,28p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
cd "$(dirname "$0")/.."
secs=${1:-600}
par=${2:-6}
modes=${3:-"ovl-docker ovl-nocap ovl-loop btrfs-squota"}
prefix=${ENGINES:-/tmp/sbx-churn}
cap=${CAP:-1G}
memory=${MEMORY:-1G}
trace=${TRACE:-0}
sbx=$(realpath "${SBX:-build/sbx}")
out=${OUT:-$prefix-results}
mkdir -p "$out"
say() { echo "churn: $*" >&2; }
load() { cut -d' ' -f1 /proc/loadavg; }

engine() { # kind -> root
    local kind=$1 root=$prefix-$1
    if ! scripts/dockerd.sh status --socket "$root/docker.sock" >/dev/null 2>&1; then
        if [ "$kind" = btrfs ]; then
            scripts/dockerd.sh start --socket "$root/docker.sock" --root "$root" --btrfs 20G >&2
        else
            scripts/dockerd.sh start --socket "$root/docker.sock" --root "$root" --overlay2 >&2
        fi
    fi
    mkdir -p "$root/state"
    if ! DOCKER_HOST=unix://$root/docker.sock docker image inspect sbx-sandbox:current >/dev/null 2>&1; then
        DOCKER_HOST=unix://$root/docker.sock SBX_STATE_DIR=$root/state SBX_CONFIG=/dev/null \
            "$sbx" image build --cache /var/cache/sbx/image >&2
    fi
    echo "$root"
}

conf() { # enforcement -> config file
    local f=$out/sbx-$1.conf
    printf 'limits = { disk = "%s"; memory = "%s"; };\nproviders = { docker = { plugin = "provider_docker"; disk_enforcement = "%s"; disk_check_interval = "60s"; }; };\n' \
        "$cap" "$memory" "$1" >"$f"
    echo "$f"
}

# What is left on the engine, one line. all=1: everything (the final check);
# else live containers and their loop devices and mounts are not counted
# (another mode may run on the same engine 60 s later).
leftover() { # root all
    local root=$1 loops mounts merged subs=- qg=- ctrs files live=0 backlog
    loops=$(losetup -a -n -O NAME,BACK-FILE 2>/dev/null | grep -v "$root/btrfs.img" | grep -c "$root" || true)
    mounts=$(findmnt -rn -o TARGET | grep -c "^$root/.*/\(overlay2/[^/]*\|btrfs/subvolumes/[^/]*\)$" || true)
    merged=$(findmnt -rn -o TARGET | grep -c "^$root/.*/overlay2/[^/]*/merged$" || true)
    [ "$2" = 1 ] || live=$(DOCKER_HOST=unix://$root/docker.sock docker ps -q | grep -c . || true)
    ctrs=$(DOCKER_HOST=unix://$root/docker.sock docker ps -aq | grep -c . || true)
    ctrs=$((ctrs - live))
    loops=$((loops > live ? loops - live : 0))
    mounts=$(((mounts > live ? mounts - live : 0) + (merged > live ? merged - live : 0)))
    files=$(find "$root" -xdev -maxdepth 4 -name '*.img' ! -path "$root/btrfs.img" 2>/dev/null | grep -c . || true)
    backlog=$(DOCKER_HOST=unix://$root/docker.sock SBX_STATE_DIR=$root/state SBX_CONFIG=/dev/null \
        "$sbx" info 2>/dev/null | sed -n 's/^removal: *\([0-9]*\) sandboxes killed.*/\1/p' | head -1)
    if mountpoint -q "$root/btrfs"; then
        subs=$(btrfs subvolume list -d "$root/btrfs" 2>/dev/null | grep -c . || true)
        qg=$(btrfs qgroup show "$root/btrfs" 2>/dev/null | grep -c '^0/' || true)
    fi
    echo "containers=$ctrs loop_devices=$loops mounts=$mounts image_files=$files deleted_subvolumes=$subs qgroups=$qg killed_awaiting_removal=${backlog:--}"
}

one() { # mode -> runs one sandbox
    case "$1" in
    ovl-docker) docker run --rm --network none sbx-sandbox:current true ;;
    btrfs-docker) docker run --rm --network none --storage-opt "size=$cap" sbx-sandbox:current true ;;
    *) "$sbx" run -- true ;;
    esac
}

stream() { # mode until file
    local t0 t1 log=$out/$1.err
    [ "$trace" = 1 ] && log=$out/$1.trace
    while [ "$(date +%s)" -lt "$2" ]; do
        t0=$(date +%s%N)
        if one "$1" >/dev/null 2>>"$log"; then
            t1=$(date +%s%N)
            echo "$((t1 / 1000000)) $(((t1 - t0) / 1000000))" >>"$3"
        else
            echo "$(date +%s%3N) fail" >>"$3"
        fi
    done
}

pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {if (NR == 0) {print "-"; exit} i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; print a[i]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (a == "-" || b == "-" || b == 0) print "-"; else printf "%.2f", a / b}'; }

# one line per phase; the figures also go to OUT/MODE.PHASE.vars for the ratios
report() { # mode phase file start_ms load_start load_end
    local f=$3 n fails p50 p95 p99 rate first last
    n=$(grep -vc fail "$f" || true)
    fails=$(grep -c fail "$f" || true)
    p50=$(grep -v fail "$f" | awk '{print $2}' | pct 50)
    p95=$(grep -v fail "$f" | awk '{print $2}' | pct 95)
    p99=$(grep -v fail "$f" | awk '{print $2}' | pct 99)
    rate=$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.1f", n * 60 / s}')
    first=$(grep -v fail "$f" | awk -v s="$4" '$1 - s < 60000' | awk '{print $2}' | pct 50)
    last=$(grep -v fail "$f" | awk -v s="$4" -v d="$secs" '$1 - s >= (d - 60) * 1000' | awk '{print $2}' | pct 50)
    printf 'p50=%s p95=%s p99=%s rate=%s first=%s last=%s\n' "$p50" "$p95" "$p99" "$rate" "$first" "$last" >"$out/$1.$2.vars"
    printf '%-13s %-10s n=%-5s fail=%-3s per_min=%-6s p50=%-6s p95=%-6s p99=%-6s p95/p50=%-5s first_min_p50=%-6s last_min_p50=%-6s last/first=%-5s load=%s->%s\n' \
        "$1" "$2" "$n" "$fails" "$rate" "$p50" "$p95" "$p99" "$(ratio "$p95" "$p50")" "$first" "$last" \
        "$(ratio "$last" "$first")" "$5" "$6" | tee -a "$out/summary.txt"
}

probe_exec() { # until file: a long-lived sandbox's docker exec latency
    local c t0 t1
    c=$(docker run -d --network none --name "churn-probe-$$" sbx-sandbox:current sleep infinity)
    while [ "$(date +%s)" -lt "$1" ]; do
        t0=$(date +%s%N)
        docker exec "$c" true >/dev/null 2>&1 || true
        t1=$(date +%s%N)
        echo $(((t1 - t0) / 1000000)) >>"$2"
        sleep 1
    done
    docker rm -f "$c" >/dev/null 2>&1 || true
}

# the provider's phase timings (TRACE=1): p50 / p95 of each, in ms
phases() { # mode
    local f=$out/$1.trace
    [ -s "$f" ] || return 0
    awk '
        /engine create [0-9]+ ms/ { for (i = 1; i <= NF; i++) {
            if ($i == "create") v["engine create"] = v["engine create"] " " $(i + 1)
            if ($i == "cap") v["disk cap (all)"] = v["disk cap (all)"] " " $(i + 1)
            if ($i == "start") v["engine start"] = v["engine start"] " " $(i + 1) } }
        /disk cap [0-9a-f]+: inspect/ { for (i = 1; i <= NF; i++) {
            if ($i == "inspect" || $i == "format" || $i == "mount" || $i == "fill") v["  " $i] = v["  " $i] " " $(i + 1)
            if ($i == "attach") v["  attach"] = v["  attach"] " " $(i + 2) } }
        /removed [0-9a-f]+ in the background in/ { v["removal (DELETE)"] = v["removal (DELETE)"] " " $(NF - 1) }
        END { for (k in v) print k "\t" v[k] }' "$f" | sort | while IFS=$'\t' read -r k vals; do
        printf '%s phase %-18s p50=%-6s p95=%-6s n=%s\n' "$1" "$k" \
            "$(tr ' ' '\n' <<<"$vals" | grep . | pct 50)" "$(tr ' ' '\n' <<<"$vals" | grep . | pct 95)" \
            "$(tr ' ' '\n' <<<"$vals" | grep -c .)"
    done | tee -a "$out/summary.txt"
}

: >"$out/summary.txt"
say "$secs s per phase, $par parallel, modes: $modes; cap $cap, memory $memory; results in $out"
roots=()
for mode in $modes; do
    case "$mode" in
    ovl-docker | ovl-nocap | ovl-loop) root=$(engine ovl) ;;
    btrfs-squota | btrfs-docker) root=$(engine btrfs) ;;
    *) say "unknown mode $mode"; exit 2 ;;
    esac
    case " ${roots[*]} " in *" $root "*) ;; *) roots+=("$root") ;; esac
    case "$mode" in
    ovl-nocap) c=$(conf watchdog) ;;
    ovl-loop) c=$(conf loop) ;;
    *) c=$(conf auto) ;;
    esac
    export DOCKER_HOST=unix://$root/docker.sock SBX_STATE_DIR=$root/state SBX_CONFIG=$c
    if [ "$trace" = 1 ]; then export SBX_LOG_LEVEL=debug; else unset SBX_LOG_LEVEL; fi
    case "$mode" in
    *-docker) echo "$mode: disk cap:    ${mode%-docker}: the engine's own (docker run --rm$([ "$mode" = btrfs-docker ] && echo " --storage-opt size=$cap"))" ;;
    *) "$sbx" info 2>/dev/null | grep '^disk cap' | sed "s/^/$mode: /" ;;
    esac | tee -a "$out/summary.txt"
    rm -f "$out/$mode".*
    one "$mode" >/dev/null 2>&1 || true # warm-up
    # sequential
    l0=$(load)
    start=$(date +%s%3N)
    stream "$mode" $(($(date +%s) + secs)) "$out/$mode.seq"
    report "$mode" sequential "$out/$mode.seq" "$start" "$l0" "$(load)"
    # parallel, with the exec probe
    l0=$(load)
    start=$(date +%s%3N)
    until=$(($(date +%s) + secs))
    : >"$out/$mode.exec"
    probe_exec "$until" "$out/$mode.exec" &
    pids=()
    for i in $(seq 1 "$par"); do
        stream "$mode" "$until" "$out/$mode.par" &
        pids+=($!)
    done
    wait "${pids[@]}"
    wait
    report "$mode" "parallel$par" "$out/$mode.par" "$start" "$l0" "$(load)"
    echo "$mode exec-probe p50=$(pct 50 <"$out/$mode.exec") p95=$(pct 95 <"$out/$mode.exec") ms" | tee -a "$out/summary.txt"
    phases "$mode"
    echo "$mode left at end: $(leftover "$root" 0)" | tee -a "$out/summary.txt"
    (sleep 60; echo "$mode left 60 s later: $(leftover "$root" 0)" >>"$out/summary.txt") &
done
wait

# ratios against the reference, measured in the same run
if [ -f "$out/ovl-docker.sequential.vars" ]; then
    eval "$(sed 's/^/rs_/; s/ / rs_/g' "$out/ovl-docker.sequential.vars")"
    eval "$(sed 's/^/rp_/; s/ / rp_/g' "$out/ovl-docker.parallel$par.vars")"
    for mode in $modes; do
        [ "$mode" = ovl-docker ] && continue
        eval "$(sed 's/^/ms_/; s/ / ms_/g' "$out/$mode.sequential.vars")"
        eval "$(sed 's/^/mp_/; s/ / mp_/g' "$out/$mode.parallel$par.vars")"
        echo "$mode vs ovl-docker: sequential p50 $(ratio "$ms_p50" "$rs_p50")x (target <= 1.2)," \
            "parallel per minute $(ratio "$mp_rate" "$rp_rate")x (target >= 0.67)," \
            "parallel p50 $(ratio "$mp_p50" "$rp_p50")x; own p95/p50 $(ratio "$mp_p95" "$mp_p50") (target <= 2)," \
            "last/first minute $(ratio "$mp_last" "$mp_first") (target <= 1)" | tee -a "$out/summary.txt"
    done
fi

# nothing may be left 60 s after the end
sleep 60
bad=0
for root in "${roots[@]}"; do
    l=$(leftover "$root" 1)
    echo "final check 60 s after the end ($root): $l" | tee -a "$out/summary.txt"
    if grep -qE '(containers|loop_devices|mounts|image_files|killed_awaiting_removal)=[1-9]' <<<"$l"; then
        bad=1
    fi
done
say "done"
grep "left 60 s later" "$out/summary.txt" || true
if [ "$bad" = 1 ]; then
    say "FAILED: something is left behind 60 s after the end"
    exit 1
fi
