#!/usr/bin/env bash
# warm_vs_docker.sh - issue 19's benchmark, alternated in one run, p50 and p95:
#   1. `sbx run -- echo x` through the runner, claiming a sandbox of its warm
#      pool: (a) warm claim to first output, from the runner's own monotonic
#      timestamps (its debug log: the claim's start in the job's worker to
#      the command's first output byte reaching the runner), and (b) request
#      to first output at the client (the whole `sbx run` process, start to
#      exit: the output is one line, its end follows it), against
#   2. `docker exec CONTAINER echo x` into a running container and
#   3. `docker run --rm --network none IMAGE echo x`;
#   4. `sbx exec TASK -- true` (an embedded task, through the exec agent)
#      against `docker exec CONTAINER true`.
# It starts its own runner (a state directory of its own, pools.ci.warm = 3,
# small limits, --log-level debug) and waits, untimed, before each warm run
# until the pool is full with no refill in flight (a refill is measured by
# the runner, sbx_warm_refill_seconds_total). Prints the targets (warm claim
# to first output p50 <= 20 ms; sbx exec p50 <= 0.5x docker exec), whether
# they were met, and the load average.
#   bench/warm_vs_docker.sh [RUNS]   (default 20; DOCKER_HOST picks the engine)
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
cd "$(dirname "$0")/.."
runs=${1:-20}
sbx=$(realpath "${SBX:-build/sbx}")
image=${SBX_BENCH_IMAGE:-sbx-sandbox:current}
command -v docker >/dev/null || { echo "bench: the docker CLI is needed (apt-get install docker.io)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "bench: python3 is needed (to read the runner's queue)" >&2; exit 1; }

dir=$(mktemp -d /tmp/sbx-bench-warm-XXXXXX)
mkdir -p "$dir/runner" "$dir/embedded"
cat >"$dir/runner.conf" <<EOF
runner = { listen = "unix:$dir/runner/runner.sock"; };
box = { pools = ["ci"]; heavy_min_memory = "1G"; };
limits = { cpus = 0.25; memory = "256M"; };
pools = { ci = { warm = 3; }; };
EOF
cat >"$dir/embedded.conf" <<EOF
limits = { cpus = 0.25; memory = "256M"; };
EOF
container=bench-docker-$$
task=bench-warm-$$
serve_pid=""
cleanup() {
    docker rm -f "$container" >/dev/null 2>&1 || true
    SBX_STATE_DIR=$dir/embedded SBX_CONFIG=$dir/embedded.conf "$sbx" task end "$task" >/dev/null 2>&1 || true
    if [ -n "$serve_pid" ]; then
        kill "$serve_pid" 2>/dev/null || true
        wait "$serve_pid" 2>/dev/null || true
    fi
    rm -rf "$dir"
}
trap cleanup EXIT

SBX_STATE_DIR=$dir/runner SBX_CONFIG=$dir/runner.conf "$sbx" --log-level debug serve \
    2>"$dir/serve.log" >/dev/null &
serve_pid=$!
run_r() { SBX_STATE_DIR=$dir/runner SBX_CONFIG=$dir/runner.conf "$sbx" "$@"; }
run_e() { SBX_STATE_DIR=$dir/embedded SBX_CONFIG=$dir/embedded.conf "$sbx" "$@"; }
warm_full() { # 1 when the pool has all its warm sandboxes and none is starting
    run_r queue --json 2>/dev/null |
        python3 -c 'import json,sys; w=json.load(sys.stdin)["warm"]["ci"]
print(1 if w["ready"] >= w["wanted"] and w["starting"] == 0 else 0)' 2>/dev/null ||
        echo 0
}
wait_warm() { # up to 300 s for a full pool
    for _ in $(seq 1 3000); do
        [ "$(warm_full)" = 1 ] && return 0
        sleep 0.1
    done
    echo "bench: the warm pool is not full after 300 s (see the runner's log below)" >&2
    tail -n 20 "$dir/serve.log" >&2
    exit 1
}

docker run -d --name "$container" --network none "$image" sleep infinity >/dev/null
run_e task start --task "$task" >/dev/null

ms() { date +%s%N; }
warm_times=() dexec_times=() drun_times=() sexec_times=() dtrue_times=()
# one warm-up each, not counted
wait_warm
run_r run -- echo x >/dev/null
docker exec "$container" echo x >/dev/null
docker run --rm --network none "$image" echo x >/dev/null
run_e exec "$task" -- true
skip=$(grep -c 'warm claim to first output' "$dir/serve.log" || true)
for i in $(seq 1 "$runs"); do
    wait_warm
    a=$(ms); run_r run -- echo x >/dev/null; b=$(ms)
    warm_times+=($(( (b - a) / 1000 )))
    a=$(ms); docker exec "$container" echo x >/dev/null; b=$(ms)
    dexec_times+=($(( (b - a) / 1000 )))
    a=$(ms); docker run --rm --network none "$image" echo x >/dev/null; b=$(ms)
    drun_times+=($(( (b - a) / 1000 )))
    a=$(ms); run_e exec "$task" -- true; b=$(ms)
    sexec_times+=($(( (b - a) / 1000 )))
    a=$(ms); docker exec "$container" true; b=$(ms)
    dtrue_times+=($(( (b - a) / 1000 )))
done
# the runner's own timestamps: "warm claim to first output N ms" per claimed job (us)
mapfile -t claim_times < <(grep -o 'warm claim to first output [0-9.]* ms' "$dir/serve.log" |
    tail -n +$((skip + 1)) | awk '{printf "%d\n", $6 * 1000}')
claimed=${#claim_times[@]}
# the runner's breakdown of the median and the slowest claim (grant to claim,
# claim, store, exec start), to see where the time went
grep 'warm claim to first output' "$dir/serve.log" | tail -n +$((skip + 1)) |
    sed 's/.*runner: job [^:]*: //' | sort -t' ' -k6,6n >"$dir/claims"
echo "median claim: $(sed -n "$(( (claimed + 1) / 2 ))p" "$dir/claims")"
echo "slowest claim: $(tail -n 1 "$dir/claims")"
[ "$claimed" -gt 0 ] || { echo "bench: no warm claim in the runner's log" >&2; tail -n 20 "$dir/serve.log" >&2; exit 1; }
# pct P VALUES...: nearest-rank percentile, in ms with one decimal
pct() { local p=$1; shift; printf '%s\n' "$@" | sort -n |
        awk -v p="$p" '{a[NR]=$1} END {r=int((p*NR+99)/100); if (r<1) r=1; printf "%.1f", a[r]/1000}'; }
c50=$(pct 50 "${claim_times[@]}"); c95=$(pct 95 "${claim_times[@]}")
w50=$(pct 50 "${warm_times[@]}"); w95=$(pct 95 "${warm_times[@]}")
x50=$(pct 50 "${dexec_times[@]}"); x95=$(pct 95 "${dexec_times[@]}")
r50=$(pct 50 "${drun_times[@]}"); r95=$(pct 95 "${drun_times[@]}")
s50=$(pct 50 "${sexec_times[@]}"); s95=$(pct 95 "${sexec_times[@]}")
t50=$(pct 50 "${dtrue_times[@]}"); t95=$(pct 95 "${dtrue_times[@]}")
echo "warm claim to first output (runner's timestamps): p50 ${c50} ms  p95 ${c95} ms ($claimed of $runs runs claimed warm)"
echo "request to first output, sbx run -- echo x (runner, warm): p50 ${w50} ms  p95 ${w95} ms"
echo "request to first output, docker exec CONTAINER echo x:     p50 ${x50} ms  p95 ${x95} ms"
echo "request to first output, docker run --rm IMAGE echo x:     p50 ${r50} ms  p95 ${r95} ms"
echo "sbx exec TASK -- true:                 p50 ${s50} ms  p95 ${s95} ms"
echo "docker exec CONTAINER true:            p50 ${t50} ms  p95 ${t95} ms"
refill=$(run_r queue --json | python3 -c 'import json,sys; w=json.load(sys.stdin)["warm"]["ci"]
print("%.2f" % (w["refill_seconds_sum"] / w["refills"]) if w["refills"] else "?")')
echo "warm refill (create + start, background): mean ${refill} s"
wv=$(awk -v a="$c50" 'BEGIN {print (a <= 20) ? "met" : "NOT met"}')
ratio=$(awk -v a="$s50" -v b="$t50" 'BEGIN {printf "%.2f", a / b}')
ev=$(awk -v r="$ratio" 'BEGIN {print (r <= 0.5) ? "met" : "NOT met"}')
echo "target: warm claim to first output p50 <= 20 ms: ${wv} (${c50} ms)"
echo "target: sbx exec p50 <= 0.5x docker exec: ${ev} (ratio ${ratio})"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
