#!/usr/bin/env bash
# snapshot_vs_docker.sh - (added, issue 30) snapshot and fork of a task holding 1 GiB of
# files, side by side with the engine's own steps in the same run, alternated:
#   `sbx task snapshot T`      vs `docker commit CONTAINER`
#   `sbx task start --from S`  vs `docker run -d --network none IMAGE sleep infinity`
#   `sbx task fork T`          vs `docker commit` + `docker run -d` of that image
# Medians of RUNS and the ratios sbx/docker. sbx's snapshot also resets the image's
# config, checks the snapshot record and quota and, for a task with a credential lease,
# scans the image for the lease's values (this task has none: no scan; docs/tasks.md).
#   bench/snapshot_vs_docker.sh [RUNS] [MIB]   (default 3 runs, 1024 MiB; DOCKER_HOST
#   picks the engine)
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
cd "$(dirname "$0")/.."
runs=${1:-3}
mib=${2:-1024}
sbx=${SBX:-build/sbx}
export SBX_STATE_DIR=${SBX_STATE_DIR:-$(mktemp -d /tmp/sbx-bench-XXXXXX)}
command -v docker >/dev/null || { echo "bench: the docker CLI is needed (apt-get install docker.io)" >&2; exit 1; }
if [ -z "${SBX_CONFIG:-}" ]; then
    export SBX_CONFIG=$SBX_STATE_DIR/bench.conf
    printf 'limits = { memory = "512M"; cpus = 1.0; };\nsnapshot = { quota = 100; max_age = 0; };\n' > "$SBX_CONFIG"
fi

task=bench-snap-$$
tasks=("$task") images=() containers=() snaps=()
cleanup() {
    for t in "${tasks[@]}"; do "$sbx" task end "$t" >/dev/null 2>&1 || true; done
    for c in "${containers[@]}"; do docker rm -f "$c" >/dev/null 2>&1 || true; done
    for s in "${snaps[@]}"; do "$sbx" snapshot rm "$s" >/dev/null 2>&1 || true; done
    for i in "${images[@]}"; do docker rmi "$i" >/dev/null 2>&1 || true; done
}
trap cleanup EXIT
"$sbx" task start --task "$task" >/dev/null
container=sbx-$task
echo "writing ${mib} MiB of files in the task ..." >&2
"$sbx" exec "$task" -- sh -c "mkdir -p /root/data && for i in \$(seq 1 $((mib / 16))); do head -c 16777216 /dev/urandom > /root/data/f\$i; done; sync"

ms() { date +%s%N; }
el() { echo $(( ($2 - $1) / 1000000 )); }
s_snap=() d_commit=() s_from=() d_run=() s_fork=() d_fork=()
for i in $(seq 1 "$runs"); do
    a=$(ms); s=$("$sbx" task snapshot "$task"); b=$(ms); snaps+=("$s"); s_snap+=($(el "$a" "$b"))
    a=$(ms); img=$(docker commit "$container"); b=$(ms); images+=("$img"); d_commit+=($(el "$a" "$b"))

    t=bench-from-$$-$i; tasks+=("$t")
    a=$(ms); "$sbx" task start --task "$t" --from "$s" >/dev/null; b=$(ms); s_from+=($(el "$a" "$b"))
    a=$(ms); c=$(docker run -d --network none "$img" sleep infinity); b=$(ms); containers+=("$c"); d_run+=($(el "$a" "$b"))
    "$sbx" task end "$t" >/dev/null; docker rm -f "$c" >/dev/null

    t=bench-fork-$$-$i; tasks+=("$t")
    a=$(ms); "$sbx" task fork "$task" --task "$t" >/dev/null; b=$(ms); s_fork+=($(el "$a" "$b"))
    a=$(ms); img2=$(docker commit "$container"); c=$(docker run -d --network none "$img2" sleep infinity); b=$(ms)
    images+=("$img2"); containers+=("$c"); d_fork+=($(el "$a" "$b"))
    "$sbx" task end "$t" >/dev/null; docker rm -f "$c" >/dev/null
done
for s in $("$sbx" snapshot ls --json | sed -n 's/.*"id": "\(s-[0-9a-f]*\)".*/\1/p'); do snaps+=("$s"); done

med() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
line() { printf '%-34s p50 %6s ms   %-40s p50 %6s ms   ratio %s\n' "$1" "$2" "$3" "$4" "$(ratio "$2" "$4")"; }
echo "task with ${mib} MiB of files, $runs runs, engine: $(docker version --format '{{.Server.Version}}' 2>/dev/null || echo ?)"
line "sbx task snapshot" "$(med "${s_snap[@]}")" "docker commit" "$(med "${d_commit[@]}")"
line "sbx task start --from SNAP" "$(med "${s_from[@]}")" "docker run -d (the image)" "$(med "${d_run[@]}")"
line "sbx task fork" "$(med "${s_fork[@]}")" "docker commit + docker run -d" "$(med "${d_fork[@]}")"
