#!/usr/bin/env bash
# test_devc_oracle_oci.sh - a feature from an OCI registry built by
# `sbx image build` and by the Dev Containers reference CLI (pinned in
# tests/devc/package-lock.json) against the test engine, from Debian's
# docker-registry on loopback with TLS from a test CA and basic auth
# (tests/support/registry_tls.sh); both images must have the same files and
# environment from the feature. Both tools read the same login (the Docker
# client's config.json under $DOCKER_CONFIG); the reference trusts the test
# CA through NODE_EXTRA_CA_CERTS, sbx through image_registry.ca_file.
# Needs SBX_BIN, SBX_TEST_DOCKER_HOST=unix://..., the docker CLI, node,
# `npm ci --prefix tests/devc`, docker-registry and htpasswd. Loopback only.
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd)
SRC=$(cd "$here/../.." && pwd)
sbx=${SBX_BIN:?SBX_BIN is needed}
export DOCKER_HOST=${SBX_TEST_DOCKER_HOST:?SBX_TEST_DOCKER_HOST=unix://... is needed}
devcontainer=$here/node_modules/.bin/devcontainer
say() { echo "test_devc_oracle_oci: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
wait_until() { # SECONDS CMD...: a condition with a deadline
    local end=$((SECONDS + $1)); shift
    until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.1; done
}
[ -x "$devcontainer" ] || die "run 'npm ci --prefix tests/devc' first"
command -v docker-registry >/dev/null || die "no docker-registry (scripts/setup.sh)"
command -v htpasswd >/dev/null || die "no htpasswd (scripts/setup.sh)"
[ -x /bin/busybox ] || die "no /bin/busybox: apt-get install busybox-static"

WORK=$(mktemp -d /tmp/sbx-devc-oci.XXXXXX)
tag=devc-oci-ref-$$:test
base=sbx-devc-oci-base-$$:test
sbx_image=""
# shellcheck source=../support/registry_tls.sh
. "$SRC/tests/support/registry_tls.sh"
cleanup() {
    kill "${reg_pid:-}" 2>/dev/null || true
    docker rmi "$tag" ${sbx_image:+"$sbx_image"} >/dev/null 2>&1 || true
    grep -so 'sbx-sandbox-base:[0-9a-f]*' "$WORK/sbx.err" | sort -u | xargs -r docker rmi >/dev/null 2>&1 || true
    docker rmi "$base" >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT
cd "$WORK"
reg_make_tls "$WORK"
reg_start "$WORK" reg auth
port=$reg_port

# the feature, pushed as the spec's artifact
mkdir -p feat ws/.devcontainer dockercfg state
cat >feat/devcontainer-feature.json <<'EOF'
{ "id": "greet", "version": "1.0.0", "name": "greet",
  "options": { "greeting": { "type": "string", "default": "hello", "enum": ["hello", "hi"] },
               "loud": { "type": "boolean", "default": false } },
  "containerEnv": { "GREET_FROM": "oci" },
  "dependsOn": { "127.0.0.1:PORT/features/dep:1": { "word": "yes" } } }
EOF
sed -i "s/PORT/$port/" feat/devcontainer-feature.json
cat >feat/install.sh <<'EOF'
#!/bin/sh
set -e
mkdir -p /usr/local/share/greet
echo "$GREETING loud=$LOUD for $_REMOTE_USER home $_REMOTE_USER_HOME dep=$(cat /usr/local/share/greet/dep)" >/usr/local/share/greet/said
EOF
# the feature greet dependsOn, not listed in the definition: both tools fetch
# it with the options dependsOn gives and install it first
mkdir -p dep
echo '{ "id": "dep", "version": "1.0.0", "options": { "word": { "type": "string", "default": "no" } } }' \
    >dep/devcontainer-feature.json
printf '#!/bin/sh\nmkdir -p /usr/local/share/greet && echo "$WORD" >/usr/local/share/greet/dep\n' >dep/install.sh
OCI_CA=$WORK/ca.crt OCI_USER=sbxtest OCI_PASS=s3cret-pw \
    python3 "$SRC/tests/support/oci_push.py" feature "127.0.0.1:$port" features/dep 1 dep >/dev/null
OCI_CA=$WORK/ca.crt OCI_USER=sbxtest OCI_PASS=s3cret-pw \
    python3 "$SRC/tests/support/oci_push.py" feature "127.0.0.1:$port" features/greet 1 feat >pushed
say "feature pushed: 127.0.0.1:$port/features/greet:1 $(cut -d' ' -f1 pushed)"

# the base: the host's static busybox (as the runtime tests' sbx-busybox:test)
mkdir -p img/bin
cp /bin/busybox img/bin/busybox
for a in sh sleep echo cat true tr cut id ls; do ln -s busybox "img/bin/$a"; done
tar -C img -c . | docker import - "$base" >/dev/null
# one definition, on it with a passwd and a group
printf 'FROM '"$base"'\nRUN echo root:x:0:0:root:/root:/bin/sh >/etc/passwd && echo root:x:0: >/etc/group\n' \
    >ws/.devcontainer/Dockerfile
cat >ws/.devcontainer/devcontainer.json <<EOF
{ "build": { "dockerfile": "Dockerfile" },
  "features": { "127.0.0.1:$port/features/greet:1": { "greeting": "hi", "loud": true } } }
EOF
printf '{"auths": {"127.0.0.1:%s": {"auth": "%s"}}}\n' "$port" \
    "$(printf 'sbxtest:s3cret-pw' | base64 -w0)" >dockercfg/config.json
export DOCKER_CONFIG=$WORK/dockercfg
cat >sbx.conf <<EOF
image_registry = {
  feature_registries = [ "127.0.0.1:$port" ];
  ca_file = "$WORK/ca.crt";
};
EOF

# sbx
SBX_CONFIG=$WORK/sbx.conf SBX_STATE_DIR=$WORK/state "$sbx" image build \
    --definition "$WORK/ws/.devcontainer/devcontainer.json" --cache "$WORK/cache" \
    >sbx.out 2>sbx.err || die "sbx image build: $(tail -n 5 sbx.err)"
sbx_image=$(tail -n1 sbx.out)
# the reference
NODE_EXTRA_CA_CERTS=$WORK/ca.crt timeout 600 "$devcontainer" build --workspace-folder "$WORK/ws" \
    --image-name "$tag" >ref.out 2>ref.err || die "devcontainer build: $(tail -n 5 ref.err)"

probe='cat /usr/local/share/greet/said; echo "GREET_FROM=$GREET_FROM"; ls /usr/local/share/greet'
a=$(docker run --rm --network none "$sbx_image" sh -c "$probe")
b=$(docker run --rm --network none "$tag" sh -c "$probe")
[ "$a" = "$b" ] || die "the images differ: sbx: [$a] reference: [$b]"
[ "$(echo "$a" | head -n1)" = "hi loud=true for root home /root dep=yes" ] || die "unexpected: [$a]"
say "same feature files and environment in both images: $(echo "$a" | tr '\n' ' ')"
say "all passed"
