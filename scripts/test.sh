#!/usr/bin/env bash
# test.sh - the whole test suite, twice: a plain build (build/) and an
# ASan+UBSan build with leak checking (build-asan/). Runtime tests use a
# private Docker engine started here (scripts/dockerd.sh, its own socket and
# data root, user namespaces on, no forwarding or NAT; the data root a btrfs
# with quotas in a sparse 40G file, /tmp/sbx-test-docker/btrfs.img, so the
# disk cap is a real quota) and stopped at the end.
# Run scripts/setup.sh once first. Needs root (dockerd).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

# every tracked C file matches .clang-format (the tree was formatted once)
scripts/check-format.sh

engine=/tmp/sbx-test-docker
sock=$engine/docker.sock
stop_engine() { "$root/scripts/dockerd.sh" stop --socket "$sock" --root "$engine" || true; }
trap stop_engine EXIT
# a fresh btrfs for each suite: with quotas on, the kernel cleans a deleted
# subvolume in seconds, and the last suite's backlog (a hundred sandboxes and
# more) would hold up the quota test ('btrfs subvolume sync') for minutes;
# the images are imported again in suite() from the root filesystem cache
fresh_engine() {
    stop_engine
    if ! mountpoint -q "$engine/btrfs"; then
        rm -f "$engine/btrfs.img"
    fi
    scripts/dockerd.sh start --socket "$sock" --root "$engine" --btrfs 40G
}
export SBX_TEST_DOCKER_HOST=unix://$sock

# the MCP SDK for tests/mcp (pinned by its package-lock.json; npm's configured registry)
if [ ! -d tests/mcp/node_modules/@modelcontextprotocol/sdk ]; then
    echo "== npm ci --prefix tests/mcp" >&2
    npm ci --prefix tests/mcp --no-audit --no-fund >/dev/null
fi
# playwright-core for tests/web (the status page in Debian's chromium; pinned likewise)
if [ ! -d tests/web/node_modules/playwright-core ]; then
    echo "== npm ci --prefix tests/web" >&2
    npm ci --prefix tests/web --no-audit --no-fund >/dev/null
fi

suite() {
    local dir=$1; shift
    echo "== $dir: configure and build ($*)" >&2
    cmake -S . -B "$dir" -DSBX_WERROR=ON "$@" >/dev/null
    cmake --build "$dir" -j2 >/dev/null
    fresh_engine
    # the inotify pool the abuse tests need (idempotent; docs/operations.md)
    scripts/kernel-limits.sh "$dir/sbx"
    # the warm image in the test engine (from the cached root filesystem)
    DOCKER_HOST=$SBX_TEST_DOCKER_HOST SBX_STATE_DIR=$engine/state \
        "$dir/sbx" image build --cache /var/cache/sbx/image >/dev/null
    DOCKER_HOST=$SBX_TEST_DOCKER_HOST SBX_STATE_DIR=$engine/state \
        "$dir/sbx" image build --sidecar --cache /var/cache/sbx/image >/dev/null
    # the tests that need no engine two at a time (2 cores); those of the
    # engine one at a time (each checks that it left no sandbox behind)
    local rc=0
    echo "== $dir: ctest (no engine, -j2)" >&2
    (cd "$dir" && ctest --output-on-failure --timeout 600 -LE runtime -j2) || rc=1
    echo "== $dir: ctest (the engine's, one at a time)" >&2
    (cd "$dir" && ctest --output-on-failure --timeout 600 -L runtime) || rc=1
    return $rc
}

suite build
ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 \
    suite build-asan -DSBX_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug
echo "test.sh: plain and sanitizer suites passed" >&2
