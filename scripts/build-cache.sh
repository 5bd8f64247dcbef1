# build-cache.sh - sourced by scripts/setup.sh and scripts/test.sh: the
# machine's cache for builds and tests, kept between runs and clones
# (docs/testing.md). Sets
#   sbx_cache      the directory ($SBX_TEST_CACHE, else /var/cache/sbx/test when
#                  writable, else ~/.cache/sbx-test): ccache's objects, ctest's cost data
#   sbx_launcher   cmake arguments that compile through ccache when it is installed
# and exports ccache's settings (paths relative to the tree, so a new clone
# elsewhere hits the same objects).
sbx_cache=${SBX_TEST_CACHE:-}
if [ -z "$sbx_cache" ]; then
    if [ -w /var/cache ] || [ -w /var/cache/sbx ]; then
        sbx_cache=/var/cache/sbx/test
    else
        sbx_cache=${XDG_CACHE_HOME:-$HOME/.cache}/sbx-test
    fi
fi
mkdir -p "$sbx_cache"
sbx_launcher=()
if command -v ccache >/dev/null; then
    export CCACHE_DIR=$sbx_cache/ccache CCACHE_BASEDIR=$PWD CCACHE_NOHASHDIR=1
    export CCACHE_MAXSIZE=${CCACHE_MAXSIZE:-5G}
    sbx_launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache)
fi
