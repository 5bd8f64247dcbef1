#!/usr/bin/env bash
# dbstall_bench.sh - the runner API's p50/p99 per route (GET /healthz, GET /,
# GET /v1/jobs/ID, POST /v1/jobs, and a task route forwarded to the box that
# holds the task) under a steady stream of submits, with
# PostgreSQL healthy and then answering every message after 2 s (a delaying
# proxy, bench/pg_delay_proxy.py), in one run: the target is /healthz and /
# within 100 ms and submits answering 503 within their deadline
# (runner.database_timeout 1 s + 1 s) while the database is slow (docs/runner.md,
# "A slow or silent database"). A private PostgreSQL 15 cluster, the fake
# provider, the box measured and a second box on the database directly that
# holds kept task kt1.
#
#   bench/dbstall_bench.sh [BUILD_DIR]
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
src=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$src/build}" && pwd)
exec "$src/tests/support/pg_harness.sh" exec "$src/tests/fleet/fleet.sh" "$build/sbx" \
    "$build/test_plugins" dbbench
