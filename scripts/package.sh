#!/usr/bin/env bash
# package.sh - builds the Debian package of sbx (CPack DEB) from a release build
# with prefix /usr in build-deb/ (no tests), and prints the .deb's path.
#   scripts/package.sh [BUILD_DIR]      then: dpkg -i BUILD_DIR/sbx_*.deb
# Needs dpkg-dev (dpkg-shlibdeps computes the library dependencies) and help2man.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-deb}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_INSTALL_PREFIX=/usr \
    -DSBX_BUILD_TESTS=OFF >/dev/null
cmake --build "$build" -j"${SBX_JOBS:-2}" >/dev/null
(cd "$build" && cpack -G DEB >/dev/null)
ls "$build"/sbx_*.deb
