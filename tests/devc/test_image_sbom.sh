#!/usr/bin/env bash
# test_image_sbom.sh - the SBOM of the final image and updateRemoteUserUID
# (docs/image.md, "The SBOM" and the field table), on the test engine:
#   1. a definition with build.dockerfile FROM the engine's sbx-sandbox image
#      that installs a Debian package built here (dpkg-deb) and an npm package
#      from a local tarball, and remoteUser: the SBOM (sbx image inspect
#      --json, the label sbx.sbom, <cache>/sbom-<hash>.json) lists both with
#      their versions, the base's packages and the definition's hash; no
#      container is left of its reading; a rebuild keeps the image;
#   2. updateRemoteUserUID (default true): a file the remote user writes in
#      the worktree (a git repository) belongs to the worktree's owner on the
#      host, and its commit lands in the repository;
#   3. updateRemoteUserUID false: the worktree stays the sandbox root's; and an
#      SBOM over the label bound (lowered here) is a file in the image whose
#      sha256 is the label sbx.sbom.sha256.
# Needs SBX_BIN, SBX_TEST_DOCKER_HOST=unix://..., the docker CLI, dpkg-deb and
# python3. No network: every image is FROM one already in the engine.
set -uo pipefail

sbx=${SBX_BIN:?SBX_BIN is needed}
export DOCKER_HOST=${SBX_TEST_DOCKER_HOST:?SBX_TEST_DOCKER_HOST=unix://... is needed}
fails=0
ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }
command -v docker >/dev/null && command -v dpkg-deb >/dev/null || {
    echo "test_image_sbom: the docker CLI and dpkg-deb are needed" >&2; exit 1; }
base=$(docker image inspect -f '{{.Id}}' sbx-sandbox:current) || {
    echo "test_image_sbom: sbx-sandbox:current is not in the engine (sbx image build)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/sbx-sbom-test.XXXXXX)
chmod 755 "$tmp"
dc=$tmp/ws/.devcontainer
mkdir -p "$dc" "$tmp/state" "$tmp/cwd"
imgs=()
cleanup() {
    for i in "${imgs[@]}"; do docker rmi "$i" >/dev/null 2>&1; done
    cat "$tmp"/*.err 2>/dev/null | grep -o 'sbx-sandbox-base:[0-9a-f]*' | sort -u |
        xargs -r docker rmi >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT

# a Debian package and an npm package, made here
mkdir -p "$tmp/deb/DEBIAN" "$tmp/deb/usr/share/sbx-sbom-probe" "$tmp/npm/package"
cat >"$tmp/deb/DEBIAN/control" <<'EOF'
Package: sbx-sbom-probe
Version: 1.2.3-4
Architecture: all
Maintainer: sbx test <test@localhost>
Description: a tiny package for sbx's SBOM test
EOF
echo probe >"$tmp/deb/usr/share/sbx-sbom-probe/probe"
dpkg-deb --build --root-owner-group "$tmp/deb" "$dc/probe.deb" >/dev/null ||
    { echo "test_image_sbom: dpkg-deb failed" >&2; exit 1; }
echo '{"name": "sbx-sbom-npm-probe", "version": "0.7.1"}' >"$tmp/npm/package/package.json"
tar -C "$tmp/npm" -czf "$dc/npm-probe.tgz" package
# npm install -g of a tarball unpacks it as <prefix>/lib/node_modules/<name>
cat >"$dc/Dockerfile" <<'EOF'
ARG BASE=sbx-sandbox:current
FROM ${BASE}
COPY probe.deb /tmp/probe.deb
RUN dpkg -i /tmp/probe.deb && rm /tmp/probe.deb && useradd -m -s /bin/sh -u 1234 dev
ADD npm-probe.tgz /usr/local/lib/node_modules/
RUN mv /usr/local/lib/node_modules/package /usr/local/lib/node_modules/sbx-sbom-npm-probe
EOF
cat >"$dc/devcontainer.json" <<EOF
{ "build": { "dockerfile": "Dockerfile", "args": { "BASE": "$base" } }, "remoteUser": "dev" }
EOF

build() { # DEFINITION ERRFILE: prints the image
    (cd "$tmp/cwd" && SBX_STATE_DIR=$tmp/state "$sbx" image build --definition "$1" \
        --cache "$tmp/cache" 2>"$2")
}
img=$(build "$dc/devcontainer.json" "$tmp/build.err") && [ -n "$img" ] || {
    not_ok "sbx image build"; cat "$tmp/build.err" >&2; exit 1; }
imgs+=("$img")
ok "sbx image build: $img"
hash=${img##*:}

# 1. the SBOM: inspect --json, the label, the file beside it
"$sbx" image inspect --image "$img" --json >"$tmp/inspect.json" 2>"$tmp/inspect.err" ||
    not_ok "sbx image inspect: $(cat "$tmp/inspect.err")"
check() { # PYTHON-EXPRESSION over s (the SBOM) and h (the hash)
    python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["sbom"]; h=sys.argv[2]; sys.exit(0 if ('"$1"') else 1)' \
        "$tmp/inspect.json" "$hash"
}
check '{"name": "sbx-sbom-probe", "version": "1.2.3-4"} in s["debian"]' &&
    ok "the Debian package of the Dockerfile, with its version" || not_ok "no sbx-sbom-probe 1.2.3-4"
check '{"name": "sbx-sbom-npm-probe", "version": "0.7.1", "dir": "/usr/local/lib/node_modules"} in s["npm"]' &&
    ok "the global npm package of the Dockerfile, with its version" || not_ok "no sbx-sbom-npm-probe 0.7.1"
check 'any(p["name"] == "bash" for p in s["debian"]) and s["definition_hash"] == h and s["user"] == "dev"' &&
    ok "the base's packages, the definition's hash, the user" || not_ok "SBOM: $(head -c 300 "$tmp/inspect.json")"
label=$(docker image inspect -f '{{index .Config.Labels "sbx.sbom"}}' "$img")
[ "$label" = "$(cat "$tmp/cache/sbom-$hash.json")" ] && ok "label sbx.sbom = <cache>/sbom-$hash.json" ||
    not_ok "the label and the file beside the image differ"
[ -z "$(docker ps -aq --filter label=dev.sbx.sbom-reader)" ] && ok "no container left of the reading" ||
    not_ok "containers left: $(docker ps -a --filter label=dev.sbx.sbom-reader)"
id1=$(docker image inspect -f '{{.Id}}' "$img")
again=$(build "$dc/devcontainer.json" "$tmp/build-again.err")
[ "$again" = "$img" ] && [ "$(docker image inspect -f '{{.Id}}' "$img")" = "$id1" ] &&
    ok "rebuild: the same image" || not_ok "rebuild gave $again $(docker image inspect -f '{{.Id}}' "$img")"

# 2. updateRemoteUserUID (true): the remote user's files are the worktree owner's
mkdir -p "$tmp/wt"
git -C "$tmp/wt" init -q && git -C "$tmp/wt" -c user.name=t -c user.email=t@localhost \
    commit -q --allow-empty -m init
chown -R 4321:4321 "$tmp/wt"
run() { # IMAGE CMD: sbx run in the worktree
    printf 'image = "%s";\n' "$1" >"$tmp/run.conf"
    SBX_STATE_DIR=$tmp/state "$sbx" --config "$tmp/run.conf" run --worktree "$tmp/wt" -- sh -c "$2"
}
out=$(run "$img" 'id -u; stat -c %u:%g /workspace; cd /workspace; echo x > by-dev; mkdir dir;
    git add by-dev && git -c user.name=d -c user.email=d@localhost commit -qm by-dev && echo committed' \
    2>"$tmp/run.err")
[ "$out" = "$(printf '1234\n1234:1234\ncommitted')" ] &&
    ok "inside, the worktree (and its git dir) is the remote user's" ||
    not_ok "inside: '$out' $(cat "$tmp/run.err")"
owners=$(stat -c %u:%g "$tmp/wt/by-dev" "$tmp/wt/dir" 2>&1 | tr '\n' ' ')
[ "$owners" = "4321:4321 4321:4321 " ] &&
    ok "a file and a folder the remote user wrote are the worktree owner's on the host" ||
    not_ok "on the host: $owners"
git -c safe.directory='*' -C "$tmp/wt" log --format=%s | grep -x by-dev >/dev/null &&
    ok "the remote user's commit is in the worktree's repository" ||
    not_ok "no commit by-dev: $(git -c safe.directory='*' -C "$tmp/wt" log --oneline 2>&1 | head -3)"

# 3. updateRemoteUserUID false: the worktree stays root's inside; an SBOM over
# the label bound is a file in the image
sed 's/"remoteUser": "dev"/"remoteUser": "dev", "updateRemoteUserUID": false/' \
    "$dc/devcontainer.json" >"$dc/no-uid.json"
img2=$(SBX_SBOM_LABEL_MAX=1000 build "$dc/no-uid.json" "$tmp/build2.err") && [ -n "$img2" ] ||
    { not_ok "sbx image build (updateRemoteUserUID false)"; cat "$tmp/build2.err" >&2; }
imgs+=("$img2")
[ "$img2" != "$img" ] && ok "updateRemoteUserUID false: another hash" || not_ok "the same hash"
out=$(run "$img2" 'stat -c %u:%g /workspace; touch /workspace/f 2>/dev/null && echo WROTE || echo DENIED' \
    2>"$tmp/run2.err")
[ "$out" = "$(printf '0:0\nDENIED')" ] && ok "updateRemoteUserUID false: the worktree is root's inside" ||
    not_ok "updateRemoteUserUID false: '$out' $(cat "$tmp/run2.err")"
"$sbx" image inspect --image "$img2" --json >"$tmp/inspect2.json" 2>&1
sum=$(python3 -c 'import json,sys; j=json.load(open(sys.argv[1])); print(j["sbom_file"]["sha256"] if j["sbom"] is None else "")' \
    "$tmp/inspect2.json" 2>/dev/null)
cid=$(docker create "$img2" true)
got=$(docker cp "$cid:/opt/sbx-devc/sbom.json" - | tar -xO | sha256sum | cut -d' ' -f1)
docker rm "$cid" >/dev/null
[ -n "$sum" ] && [ "$got" = "$sum" ] && [ "$got" = "$(sha256sum <"$tmp/cache/sbom-${img2##*:}.json" | cut -d' ' -f1)" ] &&
    ok "a large SBOM: /opt/sbx-devc/sbom.json in the image, its sha256 in sbx.sbom.sha256" ||
    not_ok "large SBOM: label '$sum', file '$got': $(cat "$tmp/inspect2.json")"

echo "test_image_sbom: $fails failed"
[ $fails -eq 0 ]
