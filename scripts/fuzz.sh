#!/bin/sh
# fuzz.sh - build and run the libFuzzer harnesses of fuzz/ (docs/fuzzing.md).
set -eu

usage() {
    cat <<'EOF'
Usage: scripts/fuzz.sh TARGET SECONDS   run one harness for SECONDS
       scripts/fuzz.sh --all SECONDS    run every harness for SECONDS, two at a time
       scripts/fuzz.sh --build          only build the harnesses
       scripts/fuzz.sh --list           list the targets
       scripts/fuzz.sh --help

Builds with clang, -fsanitize=fuzzer,address,undefined in build-fuzz/ (its own
build directory), then runs build-fuzz/fuzz/fuzz_TARGET on a working corpus
(build-fuzz/corpus-work/TARGET, seeded from fuzz/corpus/TARGET and
fuzz/regress/TARGET). A crash, leak, timeout or out-of-memory input is written
to fuzz/crashes/TARGET/ and the run stops with status 1. At the end the inputs
that found new coverage are merged into fuzz/corpus/TARGET (libFuzzer
-merge=1), and one line of figures is printed and appended to
build-fuzz/fuzz-stats.tsv:
  target  seconds  execs  exec/s  corpus-files  crashes

Environment:
  SBX_FUZZ_BUILD   build directory (default: build-fuzz)
  SBX_FUZZ_NICE    nice level of the fuzzers (default: 10)
  SBX_FUZZ_JOBS    harnesses run at once by --all (default: 2)
  SBX_FUZZ_ARGS    extra libFuzzer flags, e.g. "-max_len=65536 -dict=FILE"
  SBX_FUZZ_MERGE   0: do not merge new inputs into fuzz/corpus/TARGET
  CC               the compiler (default: clang; it must be clang)

A longer campaign is the same command with more seconds (for example
scripts/fuzz.sh --all 14400 for four hours a target); see docs/fuzzing.md.
EOF
}

root=$(cd "$(dirname "$0")/.." && pwd)
build=${SBX_FUZZ_BUILD:-$root/build-fuzz}
case $build in /*) ;; *) build=$root/$build ;; esac
nice_level=${SBX_FUZZ_NICE:-10}
jobs=${SBX_FUZZ_JOBS:-2}

die() {
    echo "fuzz.sh: $*" >&2
    exit 2
}

targets() {
    # the list fuzz/CMakeLists.txt declares, in its order
    sed -n 's/^sbx_fuzz_target(\([a-z_0-9]*\).*/\1/p' "$root/fuzz/CMakeLists.txt"
}

is_target() {
    targets | grep -qx "$1"
}

build_fuzz() {
    cc=${CC:-clang}
    command -v "$cc" >/dev/null 2>&1 || die "$cc not found (Debian: apt-get install clang)"
    "$cc" --version 2>/dev/null | grep -q clang || die "$cc is not clang: libFuzzer needs clang"
    if [ ! -f "$build/CMakeCache.txt" ]; then
        cmake -S "$root" -B "$build" -DCMAKE_C_COMPILER="$cc" -DSBX_FUZZ=ON \
            -DSBX_SANITIZE=address,undefined -DSBX_BUILD_TESTS=OFF -DSBX_WERROR=ON \
            -DCMAKE_BUILD_TYPE=RelWithDebInfo >"$build.configure.log" 2>&1 ||
            { cat "$build.configure.log" >&2; die "cmake configure failed"; }
    fi
    set --
    for t in $(targets); do
        set -- "$@" --target "fuzz_$t"
    done
    nice -n "$nice_level" cmake --build "$build" -j2 "$@" >"$build/build.log" 2>&1 ||
        { tail -40 "$build/build.log" >&2; die "build failed (log: $build/build.log)"; }
}

# stat NAME LOG: a value of libFuzzer's -print_final_stats lines
stat() {
    sed -n "s/^stat::$1: *\([0-9]*\).*/\1/p" "$2" | tail -1
}

run_one() {
    t=$1
    secs=$2
    bin=$build/fuzz/fuzz_$t
    corpus=$root/fuzz/corpus/$t
    regress=$root/fuzz/regress/$t
    crashes=$root/fuzz/crashes/$t
    work=$build/corpus-work/$t
    log=$build/logs/$t.log

    [ -x "$bin" ] || die "$bin is missing (scripts/fuzz.sh --build)"
    mkdir -p "$corpus" "$crashes" "$work" "$build/logs"
    set -- "$work" "$corpus"
    [ -d "$regress" ] && set -- "$@" "$regress"
    start=$(date +%s)
    rc=0
    LSAN_OPTIONS="suppressions=$root/fuzz/lsan.supp${LSAN_OPTIONS:+:$LSAN_OPTIONS}"
    export LSAN_OPTIONS
    # shellcheck disable=SC2086 # SBX_FUZZ_ARGS is a list of flags
    nice -n "$nice_level" "$bin" -max_total_time="$secs" -timeout=25 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$crashes/" ${SBX_FUZZ_ARGS:-} "$@" \
        >"$log" 2>&1 || rc=$?
    end=$(date +%s)
    if [ "${SBX_FUZZ_MERGE:-1}" != 0 ]; then
        nice -n "$nice_level" "$bin" -merge=1 -timeout=25 -rss_limit_mb=2048 "$corpus" "$work" \
            >"$build/logs/$t.merge.log" 2>&1 || echo "fuzz.sh: $t: merge failed" \
            "(log: $build/logs/$t.merge.log)" >&2
    fi
    execs=$(stat number_of_executed_units "$log")
    rate=$(stat average_exec_per_sec "$log")
    files=$(find "$corpus" -type f | wc -l)
    found=$(find "$crashes" -type f | wc -l)
    line=$(printf '%s\t%s\t%s\t%s\t%s\t%s' "$t" "$((end - start))" "${execs:-?}" "${rate:-?}" \
        "$files" "$found")
    echo "$line"
    printf '%s\t%s\n' "$(date -u +%Y-%m-%dT%H:%M:%SZ)" "$line" >>"$build/fuzz-stats.tsv"
    if [ "$rc" != 0 ]; then
        echo "fuzz.sh: $t: libFuzzer stopped with status $rc; input in $crashes/," \
            "log $log:" >&2
        grep -E 'ERROR|SUMMARY|runtime error' "$log" | head -5 >&2
        return 1
    fi
    return 0
}

[ $# -ge 1 ] || { usage >&2; exit 2; }
case $1 in
-h | --help)
    usage
    ;;
--list)
    targets
    ;;
--build)
    build_fuzz
    ;;
--all)
    [ $# -eq 2 ] || die "--all SECONDS"
    case $2 in '' | *[!0-9]*) die "SECONDS must be a number" ;; esac
    build_fuzz
    echo "target	seconds	execs	exec/s	corpus	crashes"
    # at most $jobs at once; each child prints its own line
    targets | SBX_FUZZ_BUILD=$build xargs -P "$jobs" -I{} "$root/scripts/fuzz.sh" --run-built {} "$2"
    ;;
--run-built) # internal: one target of --all, already built
    if [ $# -ne 3 ] || ! is_target "$2"; then die "--run-built TARGET SECONDS"; fi
    run_one "$2" "$3"
    ;;
*)
    [ $# -eq 2 ] || { usage >&2; exit 2; }
    is_target "$1" || die "unknown target '$1' (scripts/fuzz.sh --list)"
    case $2 in '' | *[!0-9]*) die "SECONDS must be a number" ;; esac
    build_fuzz
    echo "target	seconds	execs	exec/s	corpus	crashes"
    run_one "$1" "$2"
    ;;
esac
