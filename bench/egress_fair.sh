#!/bin/sh
# egress_fair.sh - fair egress (issue 25): one quiet sandbox's connect-to-first-byte
# p50 alone and while six other sandboxes of the same shared proxy download without
# pause; prints each round and the ratio (target: p50 at most 1.5 times quiet), with
# the 1-minute load average at the start and after each round and the CPUs the bench
# may use (taskset), so a reader can judge the noise.
# Everything runs on loopback: the origin is a thread of egress_bench, the proxy runs
# in it, each sandbox has its own sbx-relay.
#
#   bench/egress_fair.sh [FLOODERS] [CONNECTS] [ROUNDS] [MIB]   (defaults 6 300 5 64)
#   BUILD=build-dir (default build); SBX_BENCH_FLOOD_NICE=N runs the floods' threads at nice N;
#   SBX_BENCH_QUIET_OWN_PROXY=1 gives the quiet sandbox a proxy of its own (the shared
#   proxy's loop out of its path: what remains is the CPU the floods take)
set -eu
case "${1:-}" in -h | --help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
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
