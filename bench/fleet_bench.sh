#!/usr/bin/env bash
# fleet_bench.sh - submit -> grant and submit -> sandbox ready, p50 and p95, over
# three `sbx serve` boxes on PostgreSQL against one box on SQLite, in one run
# (docs/runner.md, "Several boxes"). A private PostgreSQL 15 cluster, the fake
# provider; one job every 20 ms, alternating pools.
#
#   bench/fleet_bench.sh [BUILD_DIR]      (SBX_FLEET_JOBS=N, default 200)
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,7p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
exec "$src/tests/support/pg_harness.sh" exec "$src/tests/fleet/fleet.sh" "$build/sbx" \
    "$build/test_plugins" bench
