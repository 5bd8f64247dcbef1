#!/usr/bin/env bash
# test_install.sh BUILD_DIR SOURCE_DIR PREFIX - `cmake --install` into a temporary
# DESTDIR puts everything in its FHS place under PREFIX, and the installed binary,
# run from / with no SBX_* variable, finds its plugins, policies, helpers and
# image definition under that prefix (not in the build or source tree), also
# after the tree is moved.
set -euo pipefail
build=$1 src=$2 prefix=$3
tmp=$(mktemp -d /tmp/sbx-install-test.XXXXXX)
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
unset SBX_PLUGIN_DIR SBX_POLICY_DIR SBX_LIBEXEC_DIR SBX_RELAY SBX_CONFIG SBX_SOURCE_DIR SBX_BUILD_DIR

DESTDIR=$tmp cmake --install "$build" >/dev/null
root=$tmp$prefix
for f in bin/sbx lib/sbx/plugins/provider_docker.so libexec/sbx/sbx-relay \
    libexec/sbx/sbx-image-build libexec/sbx/sbx-image-sbom libexec/sbx/sbx-image-sbom.py share/sbx/policies/limits.lua \
    share/sbx/policies/egress.lua \
    share/sbx/policies/slots.lua share/sbx/devcontainer/devcontainer.json \
    share/sbx/prometheus/sbx-rules.yml lib/systemd/system/sbx-serve.service \
    lib/sysusers.d/sbx.conf share/doc/sbx/README.md share/doc/sbx/operations.md; do
    [ -e "$root/$f" ] || fail "$prefix/$f is not installed"
done
[ -x "$root/bin/sbx" ] && [ -x "$root/libexec/sbx/sbx-relay" ] || fail "binaries not executable"
ls "$root"/share/zsh/*/_sbx >/dev/null 2>&1 || fail "no zsh completion _sbx under $prefix/share/zsh"
# a man page for every command of 'sbx --help'
for c in $("$root/bin/sbx" --help | sed -n '/^Commands:/,/^$/s/^  \([a-z][a-z-]*\) .*/\1/p'); do
    [ "$c" = help ] || [ -e "$root/share/man/man1/sbx-$c.1" ] || fail "no man page sbx-$c.1"
done
if ls "$root"/share/sbx/policies/*_test.lua >/dev/null 2>&1; then
    fail "policy tests installed"
fi
grep -qx "ExecStart=$prefix/bin/sbx --log-level info serve" "$root/lib/systemd/system/sbx-serve.service" ||
    fail "the unit's ExecStart is not $prefix/bin/sbx: $(grep ExecStart "$root/lib/systemd/system/sbx-serve.service")"
grep -q '^Group=sbx$' "$root/lib/systemd/system/sbx-serve.service" || fail "unit group"
grep -qE '^g sbx ' "$root/lib/sysusers.d/sbx.conf" || fail "sysusers.d does not create group sbx"

# No path into the source or build tree is compiled into the binary's data to find
# what ships with it (file names in assertions and sanitizer reports aside).
objcopy -O binary --only-section=.rodata "$root/bin/sbx" "$tmp/rodata"
for p in "$src/policies" "$src/.devcontainer" "$build/plugins" "$build/libexec" "$build/share" \
    "$prefix/lib/sbx" "$prefix/share/sbx" "$prefix/libexec/sbx"; do
    if grep -aqF "$p" "$tmp/rodata"; then
        fail "the binary's .rodata holds $p"
    fi
done

# From /, the installed binary finds what ships with it under the prefix.
check() { # ROOT: sbx info --json's directories are under ROOT
    local r=$1 out
    out=$(cd / && "$r/bin/sbx" info --json 2>/dev/null || true)
    python3 - "$r" "$out" <<'PY' || fail "sbx info from / (root $r): $out"
import json, sys
root, info = sys.argv[1], json.loads(sys.argv[2])
want = {"plugin_dir": "/lib/sbx/plugins", "policy_dir": "/share/sbx/policies",
        "libexec_dir": "/libexec/sbx",
        "image_definition": "/share/sbx/devcontainer/devcontainer.json"}
for k, rel in want.items():
    if info.get(k) != root + rel:
        sys.exit("%s is %r, want %r" % (k, info.get(k), root + rel))
PY
    (cd / && "$r/bin/sbx" plugins >"$tmp/plugins.txt") || fail "sbx plugins from / (root $r)"
    grep -q "^provider_docker .* ready" "$tmp/plugins.txt" || fail "provider_docker not ready"
    grep -qx "plugin dir: $r/lib/sbx/plugins" "$tmp/plugins.txt" || fail "plugin dir $(tail -1 "$tmp/plugins.txt")"
    (cd / && "$r/bin/sbx" policy check >/dev/null) || fail "sbx policy check from / (root $r)"
}
check "$root"
# Moved elsewhere, it still finds its own files: nothing absolute is compiled in.
mkdir -p "$tmp/moved"
mv "$root" "$tmp/moved/prefix"
check "$tmp/moved/prefix"
echo "ok: installed layout under $prefix; the binary finds its files from / and after a move"
