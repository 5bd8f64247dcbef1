#!/usr/bin/env bash
# exec_vs_docker.sh - `sbx exec TASK -- true` against `docker exec CONTAINER
# true` into the same running sandbox, alternated in one run; p50 and p95 of
# each, the ratio of the medians and the target (sbx exec at most 0.5x docker
# exec, issue 19). sbx exec goes through the exec agent in the sandbox; with
# SBX_EXEC_AGENT_OFF=1 in the environment the task is started without it and
# every exec takes the engine path (for comparison).
#   bench/exec_vs_docker.sh [RUNS]   (default 30; DOCKER_HOST picks the engine)
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
cd "$(dirname "$0")/.."
runs=${1:-30}
sbx=${SBX:-build/sbx}
export SBX_STATE_DIR=${SBX_STATE_DIR:-$(mktemp -d /tmp/sbx-bench-XXXXXX)}
command -v docker >/dev/null || { echo "bench: the docker CLI is needed (apt-get install docker.io)" >&2; exit 1; }

task=bench-exec-$$
"$sbx" task start --task "$task" >/dev/null
trap '"$sbx" task end "$task" >/dev/null 2>&1 || true' EXIT
container=sbx-$task

ms() { date +%s%N; }
sbx_times=() docker_times=()
# one warm-up each, not counted
"$sbx" exec "$task" -- true
docker exec "$container" true
for i in $(seq 1 "$runs"); do
    a=$(ms); "$sbx" exec "$task" -- true; b=$(ms)
    sbx_times+=($(( (b - a) / 1000 )))
    a=$(ms); docker exec "$container" true; b=$(ms)
    docker_times+=($(( (b - a) / 1000 )))
done
path=$(sed -n 's/.*"exec_path": "\([a-z]*\)".*/\1/p' "$SBX_STATE_DIR/tasks/$task/task.json")
# pct P VALUES...: nearest-rank percentile, in ms with one decimal
pct() { local p=$1; shift; printf '%s\n' "$@" | sort -n |
        awk -v p="$p" '{a[NR]=$1} END {r=int((p*NR+99)/100); if (r<1) r=1; printf "%.1f", a[r]/1000}'; }
s50=$(pct 50 "${sbx_times[@]}"); s95=$(pct 95 "${sbx_times[@]}")
d50=$(pct 50 "${docker_times[@]}"); d95=$(pct 95 "${docker_times[@]}")
ratio=$(awk -v a="$s50" -v b="$d50" 'BEGIN {printf "%.2f", a / b}')
echo "sbx exec TASK -- true (path: ${path:-?}):  p50 ${s50} ms  p95 ${s95} ms over $runs runs"
echo "docker exec CONTAINER true:            p50 ${d50} ms  p95 ${d95} ms over $runs runs"
verdict=$(awk -v r="$ratio" 'BEGIN {print (r <= 0.5) ? "met" : "NOT met"}')
echo "ratio sbx/docker (p50): ${ratio} (target <= 0.50: ${verdict})"
