#!/bin/sh
# egress_fair.sh - fair egress (issue 25): one quiet sandbox's connect-to-first-byte
# p50 and p95 alone and while N other sandboxes of the same shared proxy download
# without pause; each round waits for the proxy to be idle and for every flood to be
# streaming (conditions, not sleeps), prints a lone download's throughput, both
# phases, the floods' throughput over the loaded phase and the load averages, then
# the medians and the ratio (target: p50 at most 1.5 times quiet).
# Everything runs on loopback: the proxy and the quiet sandbox's origin run in
# egress_bench, the floods' clients and origin in a child process of their own
# session, each sandbox has its own sbx-relay. egress.connection_rate is off (its
# burst of 200 would be measured instead).
#
#   bench/egress_fair.sh [FLOODERS] [CONNECTS] [ROUNDS] [MIB]   (defaults 6 300 5 64)
#   BUILD=build-dir (default build); SBX_BENCH_FLOOD_NICE=N runs the floods' threads at
#   nice N; SBX_BENCH_BANDWIDTH=BYTES sets egress.bandwidth (0: no shares);
#   SBX_BENCH_FLOODS_IN_PROCESS=1 runs the floods in egress_bench's own process
set -eu
case "${1:-}" in -h | --help)
    sed -n '2,16p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
n=${1:-6}
connects=${2:-300}
rounds=${3:-5}
mib=${4:-64}
build=${BUILD:-build}
exe="$build/bench/egress_bench"
if [ ! -x "$exe" ]; then
    echo "egress_fair.sh: $exe not built (cmake --build $build --target egress_bench sbx-relay)" >&2
    exit 1
fi
SBX_BUILD_DIR="$build" exec "$exe" "$mib" "$connects" "$rounds" "fair=$n"
