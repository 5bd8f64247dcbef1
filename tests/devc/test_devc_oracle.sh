#!/usr/bin/env bash
# test_devc_oracle.sh - `sbx image build` against the Dev Containers reference
# CLI (@devcontainers/cli, pinned in tests/devc/package-lock.json) on the test
# engine (docs/image.md, docs/testing.md):
#   1. one definition (build.dockerfile FROM the engine's sbx-sandbox image, a
#      local feature with options, containerEnv, remoteEnv, postCreateCommand,
#      postStartCommand, remoteUser) built by both; `sbx run` in sbx's image and
#      `devcontainer up` + `exec` in the reference's give the same id,
#      environment and files written by the feature and the lifecycle commands;
#   2. sbx-sandbox:current is untouched by that build (another definition);
#   3. bad definitions exit 2 (or 1 for a failing lifecycle command) naming the
#      file and the field.
# Needs SBX_BIN, SBX_TEST_DOCKER_HOST=unix://..., the docker CLI, node, and
# `npm ci --prefix tests/devc` (scripts/test.sh does it). Talks only to the
# engine's unix socket: every image is FROM an image already in the engine.
set -uo pipefail

here=$(cd "$(dirname "$0")" && pwd)
sbx=${SBX_BIN:?SBX_BIN is needed}
export DOCKER_HOST=${SBX_TEST_DOCKER_HOST:?SBX_TEST_DOCKER_HOST=unix://... is needed}
devcontainer=$here/node_modules/.bin/devcontainer
label=${SBX_TEST_LABEL:-devc-oracle-$$}
export SBX_TEST_LABEL=$label
fails=0
ok() { echo "ok - $*"; }
not_ok() { echo "not ok - $*"; fails=$((fails + 1)); }

[ -x "$devcontainer" ] || { echo "test_devc_oracle: run 'npm ci --prefix tests/devc' first" >&2; exit 1; }
command -v docker >/dev/null || { echo "test_devc_oracle: the docker CLI is needed" >&2; exit 1; }
base=$(docker image inspect -f '{{.Id}}' sbx-sandbox:current) || {
    echo "test_devc_oracle: sbx-sandbox:current is not in the engine (sbx image build)" >&2; exit 1; }

tmp=$(mktemp -d /tmp/sbx-devc-test.XXXXXX)
ws=$tmp/ws
mkdir -p "$ws/.devcontainer/greet" "$tmp/state" "$tmp/cwd"
cleanup() {
    docker ps -aq --filter "label=sbx.test=$label" | xargs -r docker rm -f >/dev/null 2>&1
    docker ps -aq --filter "label=sbx.test=$label-2" | xargs -r docker rm -f >/dev/null 2>&1
    [ -z "${sbx_image:-}" ] || docker rmi "$sbx_image" >/dev/null 2>&1
    docker rmi "devc-ref-$label:test" >/dev/null 2>&1
    # the reference's own names for this workspace's images
    docker images --format '{{.Repository}}' | grep -E "^vsc-ws2?-[0-9a-f]+" | sort -u |
        xargs -r docker rmi >/dev/null 2>&1
    # the bases sbx built from this test's Dockerfile
    cat "$tmp"/*.err 2>/dev/null | grep -o 'sbx-sandbox-base:[0-9a-f]*' | sort -u |
        xargs -r docker rmi >/dev/null 2>&1
    rm -rf "$tmp"
}
trap cleanup EXIT

cat >"$ws/.devcontainer/Dockerfile" <<'EOF'
ARG BASE=sbx-sandbox:current
FROM ${BASE}
ARG GREETING=none
RUN useradd -m -s /bin/sh -u 1234 dev && echo "$GREETING" > /etc/greeting
EOF
# JSONC: comments and trailing commas, as the spec allows
cat >"$ws/.devcontainer/devcontainer.json" <<EOF
// built by sbx and by the reference CLI
{
  "name": "oracle",
  "build": {
    "dockerfile": "Dockerfile",
    "context": ".",
    "args": { "BASE": "$base", "GREETING": "hello" }, /* the base is the engine's */
  },
  "features": { "./greet": { "who": "world", "loud": true } },
  "containerEnv": { "TEAM": "blue" },
  "remoteEnv": { "EDITOR_MODE": "vi" },
  "postCreateCommand": { "file": "echo made-by-\$(id -un) > \$HOME/post-create.txt",
                         "argv": ["touch", "/tmp/argv-form"] },
  "postStartCommand": "echo started-by-\$(id -un) > /tmp/post-start.txt",
  "remoteUser": "dev",
  "userEnvProbe": "none",
}
EOF
cat >"$ws/.devcontainer/greet/devcontainer-feature.json" <<'EOF'
{
  "id": "greet", "version": "1.0.0", "name": "greet",
  "options": {
    "who": { "type": "string", "default": "nobody" },
    "loud": { "type": "boolean", "default": false },
    "color-name": { "type": "string", "enum": ["red", "green"], "default": "green" }
  },
  "containerEnv": { "GREET_DONE": "1" }
}
EOF
cat >"$ws/.devcontainer/greet/install.sh" <<'EOF'
#!/bin/sh
set -e
echo "who=$WHO loud=$LOUD color=$COLOR_NAME remote=$_REMOTE_USER home=$_REMOTE_USER_HOME" > /etc/greet.txt
EOF

probe='id; env | grep -E "^(TEAM|EDITOR_MODE|GREET_DONE|HOME|LANG|PATH)=" | sort;
cat /etc/greet.txt /etc/greeting "$HOME/post-create.txt" /tmp/post-start.txt; ls /tmp/argv-form'

# 1a. sbx, from a folder with no .devcontainer: another definition
current_before=$(docker image inspect -f '{{.Id}}' sbx-sandbox:current)
out=$(cd "$tmp/cwd" && SBX_STATE_DIR=$tmp/state "$sbx" image build \
    --definition "$ws/.devcontainer/devcontainer.json" --cache "$tmp/cache" --json 2>"$tmp/build.err")
rc=$?
sbx_image=$(printf '%s' "$out" | sed -n 's/^  "image": "\(.*\)",$/\1/p')
if [ $rc -eq 0 ] && [ -n "$sbx_image" ]; then ok "sbx image build: $sbx_image"; else
    not_ok "sbx image build exit $rc"; cat "$tmp/build.err" >&2; exit 1; fi
case $sbx_image in sbx-sandbox:[0-9a-f]*) ok "tagged by content hash" ;; *) not_ok "tag $sbx_image" ;; esac
printf '%s' "$out" | grep '"current": null' >/dev/null && ok "--json: current is null" ||
    not_ok "--json current: $out"
# 2. current untouched
[ "$(docker image inspect -f '{{.Id}}' sbx-sandbox:current)" = "$current_before" ] &&
    ok "sbx-sandbox:current untouched" || not_ok "sbx-sandbox:current moved"
# the same definition again: the same content hash, nothing rebuilt
again=$(cd "$tmp/cwd" && SBX_STATE_DIR=$tmp/state "$sbx" image build \
    --definition "$ws/.devcontainer/devcontainer.json" --cache "$tmp/cache" 2>/dev/null)
[ "$again" = "$sbx_image" ] && ok "rebuild: same tag" || not_ok "rebuild gave '$again'"

printf 'image = "%s";\n' "$sbx_image" >"$tmp/sbx.conf"
(cd "$ws" && SBX_STATE_DIR=$tmp/state "$sbx" --config "$tmp/sbx.conf" run -- sh -c "$probe") \
    >"$tmp/sbx.out" 2>"$tmp/sbx.err" || { not_ok "sbx run"; cat "$tmp/sbx.err" >&2; }

# 1b. the reference: build, then up (lifecycle commands, remoteUser) and exec
if "$devcontainer" build --workspace-folder "$ws" --image-name "devc-ref-$label:test" \
    >"$tmp/ref-build.log" 2>&1; then ok "devcontainer build"; else
    not_ok "devcontainer build"; tail -n 20 "$tmp/ref-build.log" >&2; fi
if "$devcontainer" up --workspace-folder "$ws" --id-label "sbx.test=$label" \
    >"$tmp/ref-up.log" 2>&1; then ok "devcontainer up"; else
    not_ok "devcontainer up"; tail -n 20 "$tmp/ref-up.log" >&2; fi
"$devcontainer" exec --workspace-folder "$ws" --id-label "sbx.test=$label" sh -c "$probe" \
    >"$tmp/ref.out" 2>"$tmp/ref.err" || { not_ok "devcontainer exec"; cat "$tmp/ref.err" >&2; }

if diff -u "$tmp/ref.out" "$tmp/sbx.out"; then
    ok "same id, environment and files as the reference ($(wc -l <"$tmp/sbx.out") lines)"
else
    not_ok "sbx's environment differs from the reference's (diff above: - reference, + sbx)"
fi
# the build-time parts (the Dockerfile's and the feature's files, the image's
# environment) of both tools' images, both through `sbx run`
probe_img='cat /etc/greet.txt /etc/greeting; echo "GREET_DONE=$GREET_DONE TEAM=$TEAM"'
printf 'image = "%s";\n' "devc-ref-$label:test" >"$tmp/ref.conf"
for who in sbx ref; do
    conf=$tmp/sbx.conf
    [ $who = sbx ] || conf=$tmp/ref.conf
    (cd "$ws" && SBX_STATE_DIR=$tmp/state "$sbx" --config "$conf" run -- sh -c "$probe_img") \
        >"$tmp/img-$who.out" 2>"$tmp/img-$who.err" || { not_ok "sbx run ($who's image)"; cat "$tmp/img-$who.err" >&2; }
done
if diff -u "$tmp/img-ref.out" "$tmp/img-sbx.out"; then
    ok "sbx run in the reference's image and in sbx's: the same files and environment"
else
    not_ok "the images differ through sbx run (diff above: - reference, + sbx)"
fi
grep -q '^uid=1234(dev)' "$tmp/sbx.out" && ok "remoteUser" || not_ok "remoteUser: $(head -n 1 "$tmp/sbx.out")"
grep -q '^who=world loud=true color=green remote=dev home=/home/dev$' "$tmp/sbx.out" &&
    ok "feature options" || not_ok "feature options"

# 1c. a second definition: `image` (the engine's), containerUser, the array
# form and updateContentCommand, a value with a '$'
ws2=$tmp/ws2
mkdir -p "$ws2/.devcontainer"
cat >"$ws2/.devcontainer/devcontainer.json" <<EOF
{
  "image": "$base",
  "containerUser": "root",
  "onCreateCommand": ["sh", "-c", "echo on-create > /lifecycle.txt"],
  "updateContentCommand": "echo update-content >> /lifecycle.txt",
  "containerEnv": { "X": "a\$b \\"q\\"" }
}
EOF
probe2='id; cat /lifecycle.txt; echo "X=$X"'
img2=$(cd "$tmp/cwd" && SBX_STATE_DIR=$tmp/state "$sbx" image build \
    --definition "$ws2/.devcontainer/devcontainer.json" --cache "$tmp/cache" 2>"$tmp/build2.err") ||
    { not_ok "sbx image build (image)"; cat "$tmp/build2.err" >&2; }
printf 'image = "%s";\n' "$img2" >"$tmp/sbx2.conf"
(cd "$ws2" && SBX_STATE_DIR=$tmp/state "$sbx" --config "$tmp/sbx2.conf" run -- sh -c "$probe2") \
    >"$tmp/sbx2.out" 2>"$tmp/sbx2.err" || { not_ok "sbx run (image)"; cat "$tmp/sbx2.err" >&2; }
"$devcontainer" up --workspace-folder "$ws2" --id-label "sbx.test=$label-2" >"$tmp/ref-up2.log" 2>&1 ||
    { not_ok "devcontainer up (image)"; tail -n 20 "$tmp/ref-up2.log" >&2; }
"$devcontainer" exec --workspace-folder "$ws2" --id-label "sbx.test=$label-2" sh -c "$probe2" \
    >"$tmp/ref2.out" 2>"$tmp/ref2.err" || { not_ok "devcontainer exec (image)"; cat "$tmp/ref2.err" >&2; }
if diff -u "$tmp/ref2.out" "$tmp/sbx2.out"; then
    ok "image: the same as the reference ($(tr '\n' ' ' <"$tmp/sbx2.out"))"
else
    not_ok "image: sbx differs from the reference"
fi
[ -z "$img2" ] || docker rmi "$img2" >/dev/null 2>&1

# 3. bad definitions: exit status, file and field
bad() { # NAME WANT-RC WANT-TEXT: the definition is $tmp/bad/.devcontainer/devcontainer.json
    local name=$1 want_rc=$2 want=$3 rc
    (cd "$tmp/cwd" && SBX_STATE_DIR=$tmp/state "$sbx" image build \
        --definition "$tmp/bad/.devcontainer/devcontainer.json" --cache "$tmp/cache") \
        >/dev/null 2>"$tmp/bad.err"
    rc=$?
    if [ $rc -eq "$want_rc" ] && grep -qF -- "$want" "$tmp/bad.err" &&
        grep -qF "$tmp/bad/.devcontainer/devcontainer.json" "$tmp/bad.err"; then
        ok "$name: exit $rc, $(grep -F -- "$want" "$tmp/bad.err" | head -n 1)"
    else
        not_ok "$name: exit $rc (want $want_rc and '$want'):"; cat "$tmp/bad.err" >&2
    fi
}
newbad() { rm -rf "$tmp/bad"; cp -r "$ws" "$tmp/bad"; }

newbad
sed -i 's/"loud": true/"loud": true, "colour": "red"/' "$tmp/bad/.devcontainer/devcontainer.json"
bad "unknown feature option" 2 'features["./greet"].colour: unknown option'
newbad
sed -i 's/"color-name": { "type": "string", "enum": \["red", "green"\], "default": "green" }/"c": { "type": "string", "enum": ["red"] }/' \
    "$tmp/bad/.devcontainer/greet/devcontainer-feature.json"
sed -i 's/"loud": true/"loud": true, "c": "blue"/' "$tmp/bad/.devcontainer/devcontainer.json"
bad "option not in its enum" 2 'features["./greet"].c: "blue" is not one of'
newbad
mkdir -p "$tmp/bad/.devcontainer/other"
cp "$tmp/bad/.devcontainer/greet/install.sh" "$tmp/bad/.devcontainer/other/"
echo '{ "id": "other", "dependsOn": { "./greet": {} } }' >"$tmp/bad/.devcontainer/other/devcontainer-feature.json"
sed -i 's/"id": "greet",/"id": "greet", "dependsOn": { "other": {} },/' \
    "$tmp/bad/.devcontainer/greet/devcontainer-feature.json"
sed -i 's|"./greet": {|"./other": {}, "./greet": {|' "$tmp/bad/.devcontainer/devcontainer.json"
bad "dependsOn cycle" 2 'features: a cycle in dependsOn/installsAfter among ./other, ./greet'
newbad
rm "$tmp/bad/.devcontainer/Dockerfile"
bad "missing Dockerfile" 2 'build.dockerfile:'
newbad
sed -i 's|"postStartCommand"|"onCreateCommand": "echo about to fail; exit 3", "postStartCommand"|' \
    "$tmp/bad/.devcontainer/devcontainer.json"
bad "failing lifecycle command" 1 'devcontainer.json: onCreateCommand failed (exit 3)'
newbad
sed -i 's|"name": "oracle",|"name": "oracle", "forwardPorts": [3000],|' "$tmp/bad/.devcontainer/devcontainer.json"
bad "a field sbx cannot honour" 2 'forwardPorts is not honoured by sbx image build'
newbad
sed -i 's|"./greet"|"registry.example/features/node:1"|' "$tmp/bad/.devcontainer/devcontainer.json"
bad "a feature from an OCI registry" 2 'features["registry.example/features/node:1"]: registry registry.example is not one of image_registry.feature_registries'
newbad
sed -i 's|"BASE": "[^"]*"|"BASE": "sbx-no-such-image:none"|' "$tmp/bad/.devcontainer/devcontainer.json"
bad "a base not in the engine" 1 'build.dockerfile: the engine'"'"'s build'

# a postStartCommand that fails: the sandbox does not start
newbad
sed -i 's|"postStartCommand": "[^"]*"|"postStartCommand": "exit 4"|' "$tmp/bad/.devcontainer/devcontainer.json"
img=$(cd "$tmp/cwd" && SBX_STATE_DIR=$tmp/state "$sbx" image build \
    --definition "$tmp/bad/.devcontainer/devcontainer.json" --cache "$tmp/cache" 2>/dev/null)
printf 'image = "%s";\n' "$img" >"$tmp/bad.conf"
(cd "$ws" && SBX_STATE_DIR=$tmp/state "$sbx" --config "$tmp/bad.conf" run -- true) >/dev/null 2>"$tmp/bad.err"
rc=$?
if [ $rc -ne 0 ] && grep -q 'postStartCommand failed (exit 4)' "$tmp/bad.err"; then
    ok "failing postStartCommand: sbx run exit $rc"
else
    not_ok "failing postStartCommand: exit $rc"; cat "$tmp/bad.err" >&2
fi
[ -z "$img" ] || docker rmi "$img" >/dev/null 2>&1

[ "$(docker image inspect -f '{{.Id}}' sbx-sandbox:current)" = "$current_before" ] &&
    ok "sbx-sandbox:current untouched at the end" || not_ok "sbx-sandbox:current moved"
echo "test_devc_oracle: $fails failed"
[ $fails -eq 0 ]
