#!/usr/bin/env bash
# test.sh - the test suite (docs/testing.md).
#
#   scripts/test.sh              everything, as CI runs it (needs root: the test engine)
#   scripts/test.sh --fast       the `fast` label only (no engine, no services, no root),
#                                SBX_TEST_JOBS (default 6) at a time: these tests mostly
#                                wait on loopback servers and timers, not on the CPU
#   scripts/test.sh -- ARGS...   ctest ARGS in the sanitizer build, e.g. -- -L engine,
#                                -- -R '^runtime_test_docker_run$' (the engine is
#                                started when the selection has an engine test)
#
# Everything is: the format check; the plain -Werror build (build/: compiles
# every target, benchmarks included) and its one test of its own (the fleet's
# 1,000 jobs, test_fleet_jobs: the sanitizer build runs 300); the ASan+UBSan
# build (build-asan/, detect_leaks=1) running every test once, SBX_TEST_JOBS
# (default 3) at a time, longest first from ctest's cost data of the last runs
# (kept in the machine's cache, $SBX_TEST_CACHE). At the end: the counts of
# ctest tests and of cmocka cases run, and the ten slowest tests.
#
# The engine tests use a private Docker engine started here (scripts/dockerd.sh,
# its own socket and data root, user namespaces on, no forwarding or NAT;
# overlay2 with a filesystem of its own per sandbox, so the disk cap is real,
# as scripts/setup.sh sets a box up), one per run, stopped at the end. Run scripts/setup.sh once first.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

say() { echo "== $*" >&2; }
usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

mode=all
ctest_sel=()
while [ $# -gt 0 ]; do
    case "$1" in
    --fast) mode=fast ;;
    -h | --help)
        usage
        exit 0
        ;;
    --)
        shift
        mode=select
        ctest_sel=("$@")
        break
        ;;
    *)
        echo "test.sh: unknown argument '$1' (scripts/test.sh --help)" >&2
        exit 2
        ;;
    esac
    shift
done
jobs=${SBX_TEST_JOBS:-3}
[ "$mode" != fast ] || jobs=${SBX_TEST_JOBS:-6}
case "$jobs" in
'' | *[!0-9]*) echo "test.sh: SBX_TEST_JOBS='$jobs': a number expected" >&2; exit 2 ;;
esac
t_start=$(date +%s)

# The machine's cache (ccache's objects, ctest's cost data): scripts/build-cache.sh
. scripts/build-cache.sh
cache=$sbx_cache
launcher=("${sbx_launcher[@]}")

# Configures and builds DIR (its log in DIR.build.log; the errors shown on failure).
build() {
    local dir=$1 t0
    shift
    t0=$(date +%s)
    if ! { cmake -S . -B "$dir" -DSBX_WERROR=ON "${launcher[@]}" "$@" &&
        cmake --build "$dir" -j2; } >"$dir.build.log" 2>&1; then
        grep -E -A5 'error|Error' "$dir.build.log" | head -n 60 >&2 || true
        tail -n 20 "$dir.build.log" >&2
        echo "test.sh: building $dir failed (whole log: $dir.build.log)" >&2
        exit 1
    fi
    say "$dir built in $(($(date +%s) - t0)) s"
}

# ---- the test engine: started in this one place -------------------------
# (SBX_TEST_ENGINE_DIR: another place, for a second engineer's suite on one machine)
engine=${SBX_TEST_ENGINE_DIR:-/tmp/sbx-test-docker}
sock=$engine/docker.sock
export SBX_TEST_DOCKER_HOST=unix://$sock
# a second engine, with no images, for the tests that pull onto another box
# (runtime_test_image_registry: push, then pull by digest elsewhere)
engine2=$engine-2
sock2=$engine2/docker.sock
export SBX_TEST_DOCKER_HOST2=unix://$sock2
engine_up=0
stop_engine() {
    if [ "$engine_up" = 1 ]; then
        "$root/scripts/dockerd.sh" stop --socket "$sock" --root "$engine" || true
        "$root/scripts/dockerd.sh" stop --socket "$sock2" --root "$engine2" >/dev/null 2>&1 || true
    fi
}
# One engine per run, as a box runs it (scripts/setup.sh's default): overlay2,
# each sandbox's disk cap a filesystem of its own (docs/operations.md, "The
# disk cap"); no fresh filesystem per run and no cleanup wait. The images come
# from the root filesystem cache; SBX the binary that imports them.
start_engine() {
    local sbx=$1
    engine_up=1
    "$root/scripts/dockerd.sh" stop --socket "$sock" --root "$engine" >/dev/null 2>&1 || true
    # an earlier run's btrfs data root (before overlay2 was the default) goes
    if ! mountpoint -q "$engine/btrfs"; then
        rm -f "$engine/btrfs.img"
    fi
    scripts/dockerd.sh start --socket "$sock" --root "$engine" --overlay2
    "$root/scripts/dockerd.sh" stop --socket "$sock2" --root "$engine2" >/dev/null 2>&1 || true
    scripts/dockerd.sh start --socket "$sock2" --root "$engine2" --overlay2 >/dev/null
    # the inotify pool the abuse tests need (idempotent; docs/operations.md)
    scripts/kernel-limits.sh "$sbx"
    DOCKER_HOST=$SBX_TEST_DOCKER_HOST SBX_STATE_DIR=$engine/state \
        "$sbx" image build --cache /var/cache/sbx/image >/dev/null
    DOCKER_HOST=$SBX_TEST_DOCKER_HOST SBX_STATE_DIR=$engine/state \
        "$sbx" image build --sidecar --cache /var/cache/sbx/image >/dev/null
}
trap stop_engine EXIT
# --------------------------------------------------------------------------

# ctest in DIR with ARGS: cost data from and back to the cache, a JUnit file
# (DIR/junit.xml) with every test's output for the counts and the table.
run_ctest() {
    local dir=$1 kind=$2 rc=0
    shift 2
    mkdir -p "$dir/Testing/Temporary"
    if [ -f "$cache/cost-$kind.txt" ] && [ ! -f "$dir/Testing/Temporary/CTestCostData.txt" ]; then
        cp "$cache/cost-$kind.txt" "$dir/Testing/Temporary/CTestCostData.txt"
    fi
    (cd "$dir" && ctest --output-on-failure --output-junit "$PWD/junit.xml" \
        --test-output-size-passed 4000000 --test-output-truncation tail "$@") || rc=1
    cp "$dir/Testing/Temporary/CTestCostData.txt" "$cache/cost-$kind.txt" 2>/dev/null || true
    return $rc
}

# Every test has exactly one class label (cmake/SbxTestPolicy.cmake).
check_classes() {
    local dir=$1 n
    n=$(cd "$dir" && ctest -N -LE '^(fast|service|engine)$' | sed -n 's/^Total Tests: //p')
    if [ "${n:-0}" != 0 ]; then
        (cd "$dir" && ctest -N -LE '^(fast|service|engine)$') >&2
        echo "test.sh: the tests above have no class label (fast, service or engine):" \
            "end their CMakeLists.txt with sbx_test_policy() (docs/testing.md)" >&2
        exit 1
    fi
}

# The counts and the ten slowest of DIR/junit.xml.
report() {
    local dir=$1
    python3 - "$dir/junit.xml" <<'EOF'
import re, sys, xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
cases = root.iter("testcase")
rows, cm, failed = [], 0, 0
for c in cases:
    t = float(c.get("time") or 0)
    st = c.get("status") or ("fail" if c.find("failure") is not None else "run")
    out = "".join(e.text or "" for e in c.iter("system-out"))
    cm += sum(int(n) for n in re.findall(r"^\[==========\] (\d+) test\(s\) run\.", out, re.M))
    failed += c.find("failure") is not None
    rows.append((t, c.get("name"), st))
print(f"test.sh: {len(rows)} ctest tests ({failed} failed), {cm} cmocka cases run")
print("test.sh: the ten slowest tests (seconds):")
for t, name, st in sorted(rows, reverse=True)[:10]:
    print(f"  {t:8.1f}  {name}{'' if st in ('run', 'pass') else '  (' + st + ')'}")
EOF
}

export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1
# (the benchmarks compile in the plain build; they are numbers, not tests)
asan=(-DSBX_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=Debug -DSBX_BUILD_BENCH=OFF)

if [ "$mode" = fast ]; then
    build build-asan "${asan[@]}"
    check_classes build-asan
    say "build-asan: ctest -L fast (-j$jobs)"
    rc=0
    run_ctest build-asan asan -L '^fast$' -j"$jobs" || rc=1
    report build-asan
    say "--fast: $(($(date +%s) - t_start)) s"
    exit $rc
fi

# every tracked C file matches .clang-format (the tree was formatted once)
scripts/check-format.sh

# the MCP SDK for tests/mcp (pinned by its package-lock.json; npm's configured registry)
if [ ! -d tests/mcp/node_modules/@modelcontextprotocol/sdk ]; then
    say "npm ci --prefix tests/mcp"
    npm ci --prefix tests/mcp --no-audit --no-fund >/dev/null
fi
# playwright-core for tests/web (the status page in Debian's chromium; pinned likewise)
if [ ! -d tests/web/node_modules/playwright-core ]; then
    say "npm ci --prefix tests/web"
    npm ci --prefix tests/web --no-audit --no-fund >/dev/null
fi
# the Dev Containers reference CLI for tests/devc (the oracle of sbx image build; pinned likewise)
if [ ! -d tests/devc/node_modules/@devcontainers/cli ]; then
    say "npm ci --prefix tests/devc"
    npm ci --prefix tests/devc --no-audit --no-fund >/dev/null
fi

if [ "$mode" = select ]; then
    build build-asan "${asan[@]}"
    check_classes build-asan
    n=$(cd build-asan && ctest -N "${ctest_sel[@]}" -L '^engine$' | sed -n 's/^Total Tests: //p')
    if [ "${n:-0}" != 0 ]; then
        say "the test engine"
        start_engine build-asan/sbx
    fi
    rc=0
    run_ctest build-asan asan "${ctest_sel[@]}" || rc=1
    report build-asan
    exit $rc
fi

# The plain -Werror build (what the optimizer's warnings catch, every target),
# then the engine (its images imported with the plain binary) while the
# sanitizer build compiles.
build build -DCMAKE_BUILD_TYPE=RelWithDebInfo
say "the test engine (in the background), the sanitizer build"
start_engine build/sbx >"$engine.start.log" 2>&1 &
engine_pid=$!
engine_up=1
build build-asan "${asan[@]}"
check_classes build-asan
if ! wait "$engine_pid"; then
    tail -n 30 "$engine.start.log" >&2
    echo "test.sh: the test engine did not start (log above: $engine.start.log)" >&2
    exit 1
fi

rc=0
say "build-asan: every test once, $jobs at a time, longest first"
run_ctest build-asan asan -j"$jobs" || rc=1
# The plain build's own step: the fleet's full 1,000 jobs at full speed (the
# sanitizer build runs 300 of them; docs/testing.md)
say "build: test_fleet_jobs (1,000 jobs, plain build)"
(cd build && ctest --output-on-failure -R '^test_fleet_jobs$') || rc=1
report build-asan
say "load average: $(cut -d' ' -f1-3 /proc/loadavg); $(($(date +%s) - t_start)) s in all"
if [ $rc = 0 ]; then
    echo "test.sh: the suite passed" >&2
fi
exit $rc
