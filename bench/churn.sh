#!/usr/bin/env bash
# churn.sh - sandboxes under churn, per disk-cap mechanism, in one run:
# sequential then P-parallel `sbx run -- true` (and `docker run --rm` as the
# peer) for SECONDS each; p50/p95/p99, sandboxes per minute, the first and the
# last minute, a long-lived sandbox's `docker exec true` latency meanwhile,
# and the engine's cleanup backlog at the end and 60 s later.
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
# is limits.disk. Needs root. Results: OUT (default PREFIX-results).
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-600}
par=${2:-6}
modes=${3:-"ovl-docker ovl-nocap ovl-loop btrfs-squota"}
prefix=${ENGINES:-/tmp/sbx-churn}
cap=${CAP:-1G}
sbx=$(realpath "${SBX:-build/sbx}")
out=${OUT:-$prefix-results}
mkdir -p "$out"
say() { echo "churn: $*" >&2; }

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
    printf 'limits = { disk = "%s"; };\nproviders = { docker = { plugin = "provider_docker"; disk_enforcement = "%s"; disk_check_interval = "60s"; }; };\n' \
        "$cap" "$1" >"$f"
    echo "$f"
}

# what the engine still has to clean, one line (live sandboxes not counted:
# another mode may run on the same engine 60 s later)
backlog() { # root
    local root=$1 loops mounts subs=- qg=- ctrs files live
    loops=$(losetup -a -n -O NAME,BACK-FILE 2>/dev/null | grep -v "$root/btrfs.img" | grep -c "$root" || true)
    mounts=$(findmnt -rn -o TARGET | grep -c "^$root/.*/\(overlay2/[^/]*\|btrfs/subvolumes/[^/]*\)$" || true)
    live=$(DOCKER_HOST=unix://$root/docker.sock docker ps -q | grep -c . || true)
    ctrs=$(DOCKER_HOST=unix://$root/docker.sock docker ps -aq | grep -c . || true)
    ctrs=$((ctrs - live))
    loops=$((loops > live ? loops - live : 0))
    mounts=$((mounts > live ? mounts - live : 0))
    files=$(find "$root" -xdev -maxdepth 4 -name '*.img' ! -path "$root/btrfs.img" 2>/dev/null | grep -c . || true)
    if mountpoint -q "$root/btrfs"; then
        subs=$(btrfs subvolume list -d "$root/btrfs" 2>/dev/null | grep -c . || true)
        qg=$(btrfs qgroup show "$root/btrfs" 2>/dev/null | grep -c '^0/' || true)
    fi
    echo "containers=$ctrs deleted_subvolumes=$subs qgroups=$qg loop_devices=$loops mounts=$mounts image_files=$files"
}

one() { # mode root conf -> runs one sandbox
    case "$1" in
    ovl-docker) docker run --rm --network none sbx-sandbox:current true ;;
    btrfs-docker) docker run --rm --network none --storage-opt "size=$cap" sbx-sandbox:current true ;;
    *) "$sbx" run -- true ;;
    esac
}

stream() { # mode root conf until file
    local t0 t1
    while [ "$(date +%s)" -lt "$4" ]; do
        t0=$(date +%s%N)
        if one "$1" "$2" "$3" >/dev/null 2>>"$out/$1.err"; then
            t1=$(date +%s%N)
            echo "$(( t1 / 1000000 )) $(( (t1 - t0) / 1000000 ))" >>"$5"
        else
            echo "$(date +%s%3N) fail" >>"$5"
        fi
    done
}

pct() { sort -n | awk -v p="$1" '{a[NR]=$1} END {if (NR == 0) {print "-"; exit} i = int(NR * p / 100 + 0.999); if (i < 1) i = 1; print a[i]}'; }

report() { # mode phase file start_ms
    local f=$3 n fails p50 p95 p99 rate first last
    n=$(grep -vc fail "$f" || true)
    fails=$(grep -c fail "$f" || true)
    p50=$(grep -v fail "$f" | awk '{print $2}' | pct 50)
    p95=$(grep -v fail "$f" | awk '{print $2}' | pct 95)
    p99=$(grep -v fail "$f" | awk '{print $2}' | pct 99)
    rate=$(awk -v n="$n" -v s="$secs" 'BEGIN {printf "%.1f", n * 60 / s}')
    first=$(grep -v fail "$f" | awk -v s="$4" '$1 - s < 60000' | awk '{print $2}' | pct 50)
    last=$(grep -v fail "$f" | awk -v s="$4" -v d="$secs" '$1 - s >= (d - 60) * 1000' | awk '{print $2}' | pct 50)
    printf '%-13s %-10s n=%-5s fail=%-3s per_min=%-7s p50=%-6s p95=%-6s p99=%-6s first_min_p50=%-6s last_min_p50=%s\n' \
        "$1" "$2" "$n" "$fails" "$rate" "$p50" "$p95" "$p99" "$first" "$last" | tee -a "$out/summary.txt"
}

probe_exec() { # root until file: a long-lived sandbox's docker exec latency
    local c t0 t1
    c=$(docker run -d --network none --name "churn-probe-$$" sbx-sandbox:current sleep infinity)
    while [ "$(date +%s)" -lt "$2" ]; do
        t0=$(date +%s%N)
        docker exec "$c" true >/dev/null 2>&1 || true
        t1=$(date +%s%N)
        echo $(( (t1 - t0) / 1000000 )) >>"$3"
        sleep 1
    done
    docker rm -f "$c" >/dev/null 2>&1 || true
}

: >"$out/summary.txt"
say "$secs s per phase, $par parallel, modes: $modes; results in $out"
for mode in $modes; do
    case "$mode" in
    ovl-docker|ovl-nocap|ovl-loop) root=$(engine ovl) ;;
    btrfs-squota|btrfs-docker) root=$(engine btrfs) ;;
    *) say "unknown mode $mode"; exit 2 ;;
    esac
    case "$mode" in
    ovl-nocap) c=$(conf watchdog) ;;
    ovl-loop) c=$(conf loop) ;;
    *) c=$(conf auto) ;;
    esac
    export DOCKER_HOST=unix://$root/docker.sock SBX_STATE_DIR=$root/state SBX_CONFIG=$c
    "$sbx" info 2>/dev/null | grep '^disk cap' | sed "s/^/$mode: /" | tee -a "$out/summary.txt"
    one "$mode" "$root" "$c" >/dev/null 2>&1 || true # warm-up
    rm -f "$out/$mode".*
    # sequential
    start=$(date +%s%3N)
    stream "$mode" "$root" "$c" $(( $(date +%s) + secs )) "$out/$mode.seq"
    report "$mode" sequential "$out/$mode.seq" "$start"
    # parallel, with the exec probe
    start=$(date +%s%3N)
    until=$(( $(date +%s) + secs ))
    probe_exec "$root" "$until" "$out/$mode.exec" &
    pids=()
    for i in $(seq 1 "$par"); do
        stream "$mode" "$root" "$c" "$until" "$out/$mode.par" &
        pids+=($!)
    done
    wait "${pids[@]}"
    wait
    report "$mode" "parallel$par" "$out/$mode.par" "$start"
    echo "$mode exec-probe p50=$(pct 50 <"$out/$mode.exec") p95=$(pct 95 <"$out/$mode.exec") ms" | tee -a "$out/summary.txt"
    echo "$mode backlog at end: $(backlog "$root")" | tee -a "$out/summary.txt"
    (sleep 60; echo "$mode backlog 60 s later: $(backlog "$root")" >>"$out/summary.txt") &
done
wait
say "done"
grep backlog "$out/summary.txt" | grep later
