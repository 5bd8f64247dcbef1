#!/usr/bin/env bash
# run_vs_docker.sh - request to first output to teardown: `sbx run -- true`
# against `docker run --rm --network none IMAGE true` on the same image and
# engine, alternated in one run. Prints each median (p50), p95 and the ratio
# of the medians (target: sbx at most 1.2x docker run).
#   bench/run_vs_docker.sh [RUNS]   (default 20; DOCKER_HOST picks the engine)
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
cd "$(dirname "$0")/.."
runs=${1:-20}
sbx=${SBX:-build/sbx}
image=${IMAGE:-sbx-sandbox:current}
export SBX_STATE_DIR=${SBX_STATE_DIR:-$(mktemp -d /tmp/sbx-bench-XXXXXX)}
command -v docker >/dev/null || { echo "bench: the docker CLI is needed (apt-get install docker.io)" >&2; exit 1; }

ms() { date +%s%N; }
sbx_times=() docker_times=()
# one warm-up each, not counted
"$sbx" run -- true >/dev/null
docker run --rm --network none "$image" true >/dev/null
for i in $(seq 1 "$runs"); do
    a=$(ms); "$sbx" run -- true >/dev/null; b=$(ms)
    sbx_times+=($(( (b - a) / 1000000 )))
    a=$(ms); docker run --rm --network none "$image" true >/dev/null; b=$(ms)
    docker_times+=($(( (b - a) / 1000000 )))
    printf 'run %d/%d: sbx %d ms, docker %d ms\n' "$i" "$runs" "${sbx_times[-1]}" "${docker_times[-1]}" >&2
done
median() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {print (NR % 2) ? a[(NR+1)/2] : (a[NR/2] + a[NR/2+1]) / 2}'; }
# nearest rank: the smallest time with at least 95% of the runs at or below it
p95() { printf '%s\n' "$@" | sort -n | awk '{a[NR]=$1} END {r = int((NR * 95 + 99) / 100); print a[r < 1 ? 1 : r]}'; }
ms_sbx=$(median "${sbx_times[@]}")
ms_docker=$(median "${docker_times[@]}")
p95_sbx=$(p95 "${sbx_times[@]}")
p95_docker=$(p95 "${docker_times[@]}")
ratio=$(awk -v a="$ms_sbx" -v b="$ms_docker" 'BEGIN {printf "%.2f", a / b}')
echo "sbx run -- true:                 median ${ms_sbx} ms, p95 ${p95_sbx} ms over $runs runs"
echo "docker run --rm IMAGE true:      median ${ms_docker} ms, p95 ${p95_docker} ms over $runs runs"
echo "ratio sbx/docker: ${ratio} (target <= 1.20)"
