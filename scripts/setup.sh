#!/usr/bin/env bash
# setup.sh - sets up sbx on a fresh Debian 12 machine: the Debian packages it
# needs, the build (build/sbx and build/plugins), a Docker engine when none
# answers on /var/run/docker.sock (started with scripts/dockerd.sh: user
# namespaces on, no forwarding or NAT, overlay2; sbx gives each sandbox's
# writable layer a filesystem of its cap, docs/operations.md "The disk cap"),
# and the warm sandbox image. A box already on a btrfs data root
# (/var/lib/sbx-docker/btrfs.img) keeps it.
# Safe to run twice. Run as root (sudo scripts/setup.sh).
set -euo pipefail
cd "$(dirname "$0")/.."

say() { echo "setup: $*" >&2; }

if [ "$(id -u)" != 0 ]; then
    say "run as root (sudo scripts/setup.sh): it installs packages and starts dockerd"
    exit 1
fi

packages=(
    build-essential cmake pkg-config git clang-format ccache
    liblua5.4-dev libconfig-dev libcurl4-openssl-dev libjansson-dev libcmocka-dev
    libevent-dev libsqlite3-dev prometheus chromium
    docker.io docker-registry debootstrap curl ca-certificates openssl python3 iproute2 iptables
    procps busybox-static apache2-utils
    btrfs-progs util-linux e2fsprogs postgresql-15 libpq-dev
    dpkg-dev fakeroot help2man man-db bash-completion zsh
)
missing=()
for p in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    say "installing ${missing[*]}"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    say "Debian packages already installed"
fi
# docker-registry is there for the tests, which start their own on loopback
# (apache2-utils: htpasswd -B for the image registry test's basic auth)
# (tests/support/registry.sh); the package's own service (:5000 on every
# address) is not wanted on a box
if command -v systemctl >/dev/null && systemctl is-enabled --quiet docker-registry 2>/dev/null; then
    say "disabling the docker-registry service (the tests start their own)"
    systemctl disable --now docker-registry >/dev/null 2>&1 || true
fi

# npm installs the sandbox image's Node packages (customizations.sbx.npm); a
# machine with a Node.js that ships npm already has it
if ! command -v npm >/dev/null; then
    say "installing npm"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends npm >/dev/null
fi

say "building (build/)"
# through ccache when installed (scripts/build-cache.sh); SBX_CMAKE_ARGS adds
# configure arguments (.ci/run: -DSBX_WERROR=ON, so scripts/test.sh reuses this build)
. scripts/build-cache.sh
# shellcheck disable=SC2086
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo "${sbx_launcher[@]}" ${SBX_CMAKE_ARGS:-} >/dev/null
cmake --build build -j2 >/dev/null

say "raising the kernel's shared inotify pool for box.max_sandboxes (scripts/kernel-limits.sh)"
scripts/kernel-limits.sh build/sbx

if ! scripts/dockerd.sh status >/dev/null 2>&1; then
    say "no Docker engine answers on /var/run/docker.sock: starting one (scripts/dockerd.sh;" \
        "overlay2, or the btrfs data root already there)"
    scripts/dockerd.sh start
else
    driver=$(curl -s --max-time 5 --unix-socket /var/run/docker.sock http://localhost/info |
        sed -n 's/.*"Driver":"\([^"]*\)".*/\1/p')
    say "Docker engine answering on /var/run/docker.sock (storage driver ${driver:-?})"
    case "$driver" in
    btrfs|zfs|overlay2) ;;
    *) say "warning: storage driver ${driver:-?}: the disk cap is the watchdog here;" \
           "docs/operations.md, \"The disk cap\", says how to move to overlay2" ;;
    esac
fi

say "building the warm image (sbx image build; the first time takes about a minute)"
DOCKER_HOST=unix:///var/run/docker.sock build/sbx image build --cache /var/cache/sbx/image
say "building the per-sandbox Docker daemon image (sbx image build --sidecar)"
DOCKER_HOST=unix:///var/run/docker.sock build/sbx image build --sidecar --cache /var/cache/sbx/image
say "done: try  build/sbx run -- echo hello"
