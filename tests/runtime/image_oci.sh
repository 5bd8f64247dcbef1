#!/bin/bash
# image_oci.sh - features from an OCI registry (docs/image.md, "Features from
# a registry"), the Docker credential helpers of the engine's login, and
# `sbx image gc --registry`, against Debian's docker-registry on loopback with
# TLS from a test CA and basic auth (tests/support/registry_tls.sh). Run by
# test_image_oci.c with:
#   SBX=build/sbx  SRC=source dir  WORK=a fresh directory  HOST1=unix://... (the test engine)
# The feature artifacts and the images gc collects are written with
# tests/support/oci_push.py. Traffic goes to 127.0.0.1 only. Exit 0: all passed.
set -euo pipefail
: "${SBX:?}" "${SRC:?}" "${WORK:?}" "${HOST1:?}"
say() { echo "image_oci.sh: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
wait_until() { # SECONDS CMD...: a condition with a deadline
    local end=$((SECONDS + $1)); shift
    until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.1; done
}
command -v htpasswd >/dev/null || die "no htpasswd: apt-get install apache2-utils (scripts/setup.sh)"
command -v docker-registry >/dev/null || die "no docker-registry (scripts/setup.sh)"
# shellcheck source=../support/registry_tls.sh
. "$SRC/tests/support/registry_tls.sh"

cd "$WORK"
reg_make_tls "$WORK"
REGISTRY_STORAGE_DELETE_ENABLED=true reg_start "$WORK" reg auth
port=$reg_port regpid=$reg_pid
reg_start "$WORK" nodel # no deletes, no login: for the 405 case
port2=$reg_port regpid2=$reg_pid
images=()
cleanup() {
    kill "$regpid" "$regpid2" ${tokpid:+"$tokpid"} 2>/dev/null || true
    [ ${#images[@]} -eq 0 ] || DOCKER_HOST=$HOST1 docker rmi "${images[@]}" >/dev/null 2>&1 || true
}
trap cleanup EXIT
export OCI_CA=$WORK/ca.crt OCI_USER=sbxtest OCI_PASS=s3cret-pw
push() { python3 "$SRC/tests/support/oci_push.py" "$@"; }
say "registries up: https://127.0.0.1:$port (login, deletes) and :$port2"

# the feature, pushed as the spec's artifact
mkdir -p feat
cat >feat/devcontainer-feature.json <<EOF
{ "id": "greet", "version": "1.0.0", "name": "greet",
  "options": { "greeting": { "type": "string", "default": "hello", "enum": ["hello", "hi"] } },
  "installsAfter": [ "127.0.0.1:$port/features/first" ],
  "containerEnv": { "GREET_FROM": "oci" } }
EOF
cat >feat/install.sh <<'EOF'
#!/bin/sh
set -e
mkdir -p /usr/local/share
echo "$GREETING from the registry, for $_REMOTE_USER" >/usr/local/share/greet.txt
EOF
read -r mdigest ldigest < <(push feature "127.0.0.1:$port" features/greet 1 feat)
# a second one, which greet installs after (named without its tag)
mkdir -p first
echo '{ "id": "first", "version": "1.0.0" }' >first/devcontainer-feature.json
printf '#!/bin/sh\nmkdir -p /usr/local/share && echo first >/usr/local/share/first.txt\n' >first/install.sh
push feature "127.0.0.1:$port" features/first 1 first >/dev/null
[ -n "$ldigest" ] || die "pushing the feature"
say "feature pushed: 127.0.0.1:$port/features/greet:1 = $mdigest"

export DOCKER_HOST=$HOST1 SBX_STATE_DIR=$WORK/state SBX_CONFIG=$WORK/sbx.conf
cat >sbx.conf <<CONF
image_registry = {
  url = "https://127.0.0.1:$port/team/imgs";
  feature_registries = [ "127.0.0.1:$port", "127.0.0.1:$port2" ];
  ca_file = "$WORK/ca.crt";
};
CONF
mkdir -p dockercfg
printf '{"auths": {"127.0.0.1:%s": {"auth": "%s"}}}\n' "$port" \
    "$(printf 'sbxtest:s3cret-pw' | base64 -w0)" >dockercfg/config.json
export DOCKER_CONFIG=$WORK/dockercfg
def() { # NAME FEATURE-REF [MORE]: a definition on the engine's busybox (with a
    # passwd: the spec's layer runs as root by name) with that feature (and
    # MORE, more entries of "features")
    mkdir -p "$1/.devcontainer"
    printf 'FROM sbx-busybox:test\nRUN echo root:x:0:0:root:/root:/bin/sh >/etc/passwd\n' \
        >"$1/.devcontainer/Dockerfile"
    cat >"$1/.devcontainer/devcontainer.json" <<EOF
{ "build": { "dockerfile": "Dockerfile" },
  "features": { "$2": { "greeting": "hi" }${3:+, $3} } }
EOF
}
build() { # NAME [ARGS...]: sbx image build of it, its JSON in NAME.json, stderr in NAME.err
    local n=$1
    shift
    "$SBX" image build --definition "$WORK/$n/.devcontainer/devcontainer.json" \
        --cache "$WORK/cache" --json "$@" >"$n.json" 2>"$n.err"
}
built_ok() { # NAME: checks the feature's file and environment in the image
    local img
    img=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image"])' "$1.json")
    images+=("$img")
    [ "$(docker run --rm --network none "$img" cat /usr/local/share/greet.txt)" = \
        "hi from the registry, for root" ] || die "$1: the feature's file in $img"
    [ "$(docker run --rm --network none "$img" sh -c 'echo "$GREET_FROM"')" = oci ] ||
        die "$1: the feature's containerEnv in $img"
    docker image inspect -f '{{index .Config.Labels "dev.sbx.features"}}' "$img" |
        grep -q "features/greet@$mdigest" || die "$1: no pin in the label of $img"
    python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["features"]; g=[x for x in f if x["id"] == "greet"]; sys.exit(0 if g and g[0]["pinned"].endswith(sys.argv[2]) else 1)' \
        "$1.json" "$mdigest" || die "$1: --json features: $(cat "$1.json")"
    "$SBX" image inspect --image "$img" --json >"$1.inspect" 2>&1 || die "$1: inspect: $(cat "$1.inspect")"
    python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["features"]; sys.exit(0 if any(x["pinned"].endswith(sys.argv[2]) for x in f) else 1)' \
        "$1.inspect" "$mdigest" || die "$1: inspect --json features: $(cat "$1.inspect")"
    grep -rq 's3cret' "$1.json" "$1.err" && die "$1: the password was printed"
    true
}

# 1. by tag, with the engine's login (auths)
def bytag "127.0.0.1:$port/features/greet:1"
build bytag || die "build by tag: $(cat bytag.err)"
built_ok bytag
grep -q "features/greet@$mdigest" bytag.err || true
say "built with the feature by tag: $(head -c 80 bytag.json | tr -d '\n')..."

# features for dependsOn (issue 29): needsdep and otherdep need dep, which is
# not listed in the definitions (built in 2., refused in 3.)
mkdir -p dep needsdep cyca cycb
echo '{ "id": "dep", "version": "1.0.0", "options": { "word": { "type": "string", "default": "none" } } }' \
    >dep/devcontainer-feature.json
printf '#!/bin/sh\nmkdir -p /usr/local/share && echo "$WORD" >/usr/local/share/dep.txt\n' >dep/install.sh
read -r depdigest _ < <(push feature "127.0.0.1:$port" features/dep 1 dep)
echo "{ \"id\": \"needsdep\", \"dependsOn\": { \"127.0.0.1:$port/features/dep:1\": { \"word\": \"yes\" } } }" \
    >needsdep/devcontainer-feature.json
printf '#!/bin/sh\nset -e\n[ "$(cat /usr/local/share/dep.txt)" = yes ]\necho needs >/usr/local/share/needsdep.txt\n' \
    >needsdep/install.sh
push feature "127.0.0.1:$port" features/needsdep 1 needsdep >/dev/null
echo "{ \"id\": \"cyca\", \"dependsOn\": { \"127.0.0.1:$port/features/cycb:1\": {} } }" \
    >cyca/devcontainer-feature.json
echo "{ \"id\": \"cycb\", \"dependsOn\": { \"127.0.0.1:$port/features/cyca:1\": {} } }" \
    >cycb/devcontainer-feature.json
# otherdep needs dep with other options (another feature: installed again)
mkdir -p otherdep
echo "{ \"id\": \"otherdep\", \"dependsOn\": { \"127.0.0.1:$port/features/dep:1\": { \"word\": \"other\" } } }" \
    >otherdep/devcontainer-feature.json
for f in cyca cycb otherdep; do
    printf '#!/bin/sh\ntrue\n' >$f/install.sh
    push feature "127.0.0.1:$port" features/$f 1 $f >/dev/null
done
defdep() { # NAME FEATURE-REF: a definition with only that feature, its defaults
    def "$1" x
    sed -i "s|\"x\": { \"greeting\": \"hi\" }|\"$2\": {}|" "$1/.devcontainer/devcontainer.json"
}

# 2. by digest, the login from a credential helper (credsStore) on PATH, a
# fresh cache (the layer is fetched again)
mkdir -p bin helpercfg
cat >bin/docker-credential-sbxfake <<EOF
#!/bin/sh
[ "\$1" = get ] || exit 1
read -r server
echo "\$server" >>"$WORK/helper.calls"
[ "\$server" = "127.0.0.1:$port" ] || { echo "credentials not found in native keychain"; exit 1; }
printf '{"ServerURL": "%s", "Username": "sbxtest", "Secret": "s3cret-pw"}\n' "\$server"
EOF
chmod +x bin/docker-credential-sbxfake
echo '{"credsStore": "sbxfake"}' >helpercfg/config.json
# with needsdep (which needs dep with the options of the dep listed: the same
# feature, installed once) and otherdep (dep with other options: another
# feature, not listed, fetched and installed again)
def bydigest "127.0.0.1:$port/features/greet@$mdigest" "\"127.0.0.1:$port/features/first:1\": {}, \"127.0.0.1:$port/features/needsdep:1\": {}, \"127.0.0.1:$port/features/dep:1\": { \"word\": \"yes\" }, \"127.0.0.1:$port/features/otherdep:1\": {}"
rm -rf cache
PATH=$WORK/bin:$PATH DOCKER_CONFIG=$WORK/helpercfg build bydigest || die "build by digest: $(cat bydigest.err)"
built_ok bydigest
# installsAfter: first (listed second) is installed before greet
# and dependsOn: dep before needsdep, installed again (other options) before
# otherdep, pinned
python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["features"]; sys.exit(0 if [x["id"] for x in f] == ["first", "greet", "dep", "needsdep", "dep", "otherdep"] and f[2]["pinned"].endswith(sys.argv[2]) else 1)' \
    bydigest.json "$depdigest" || die "bydigest: not in order: $(cat bydigest.json)"
img=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["image"])' bydigest.json)
[ "$(docker run --rm --network none "$img" cat /usr/local/share/first.txt)" = first ] ||
    die "bydigest: no file of the feature first"
[ "$(docker run --rm --network none "$img" cat /usr/local/share/dep.txt /usr/local/share/needsdep.txt | tr '\n' ' ')" = "other needs " ] ||
    die "bydigest: the files of dep and needsdep in $img"
docker image inspect -f '{{index .Config.Labels "dev.sbx.features"}}' "$img" |
    grep -q "features/dep@$depdigest" || die "bydigest: no pin of dep in the label of $img"
grep -qx "127.0.0.1:$port" helper.calls || die "the credential helper was not asked"
grep -rq 's3cret' cache state 2>/dev/null && die "the password was written"
say "built by digest with the login of a credential helper, and a dependsOn not listed"
# the engine's push takes the helper's login too (X-Registry-Auth)
docker tag sbx-busybox:test "sbx-ocitest-$$:0123456789abcdef"
images+=("sbx-ocitest-$$:0123456789abcdef" "127.0.0.1:$port/team/imgs:0123456789abcdef")
PATH=$WORK/bin:$PATH DOCKER_CONFIG=$WORK/helpercfg "$SBX" image push \
    --image "sbx-ocitest-$$:0123456789abcdef" --json >push.json 2>push.err ||
    die "push with the helper's login: $(cat push.err)"
grep -q '"credentials": "docker login (credential helper)"' push.json || die "push: $(cat push.json)"
say "pushed with the credential helper's login"

# 3. bad cases
bad() { # NAME EXIT PATTERN [ENV...]: the build exits EXIT and says PATTERN
    local n=$1 want=$2 pat=$3 rc=0
    shift 3
    env "$@" "$SBX" image build --definition "$WORK/$n/.devcontainer/devcontainer.json" \
        --cache "$WORK/cache" >"$n.out" 2>"$n.err" || rc=$?
    [ "$rc" = "$want" ] || die "$n: exit $rc, not $want: $(cat "$n.err")"
    grep -qF -- "$pat" "$n.err" || die "$n: no '$pat' in: $(cat "$n.err")"
    [ "$(wc -l <"$n.err")" -le 2 ] || die "$n: more than one line: $(cat "$n.err")"
    say "$n: exit $rc, $(tail -n1 "$n.err")"
}
def unknown "127.0.0.9:$port/features/greet:1"
bad unknown 2 "unknown/.devcontainer/devcontainer.json: features[\"127.0.0.9:$port/features/greet:1\"]: registry 127.0.0.9:$port is not one of image_registry.feature_registries"
mkdir -p fardep/.devcontainer/far
echo "{ \"id\": \"far\", \"dependsOn\": { \"127.0.0.9:$port/features/dep:1\": {} } }" \
    >fardep/.devcontainer/far/devcontainer-feature.json
printf '#!/bin/sh\ntrue\n' >fardep/.devcontainer/far/install.sh
defdep fardep ./far
bad fardep 2 "features[\"./far\"].dependsOn[\"127.0.0.9:$port/features/dep:1\"]: registry 127.0.0.9:$port is not one of image_registry.feature_registries"
defdep cycle "127.0.0.1:$port/features/cyca:1"
bad cycle 2 "cycle/.devcontainer/devcontainer.json: features: a cycle in dependsOn/installsAfter among 127.0.0.1:$port/features/cyca:1, 127.0.0.1:$port/features/cycb:1"
def notag "127.0.0.1:$port/features/greet:nope"
bad notag 1 "features[\"127.0.0.1:$port/features/greet:nope\"]: 127.0.0.1:$port has no tag nope"
def nologin "127.0.0.1:$port/features/greet:1"
bad nologin 1 "refused the request (401)" DOCKER_CONFIG="$WORK/nonexistent"
def badopt "127.0.0.1:$port/features/greet:1"
sed -i 's/"greeting": "hi"/"colour": "red"/' badopt/.devcontainer/devcontainer.json
bad badopt 2 "features[\"127.0.0.1:$port/features/greet:1\"].colour: unknown option"
# a registry that asks for a bearer token from its realm (the login given
# there as basic auth): the feature is fetched (its unknown option is found
# in the fetched devcontainer-feature.json); without a login the realm refuses
python3 "$SRC/tests/support/oci_token_registry.py" "$WORK/ca.crt" "$WORK/reg.crt" "$WORK/reg.key" \
    feat >tokreg.port 2>tokreg.log &
tokpid=$!
wait_until 60 grep -qs . tokreg.port || die "the token registry printed no port: $(cat tokreg.log)"
tport=$(head -n1 tokreg.port)
mkdir -p tokcfg
printf '{"auths": {"127.0.0.1:%s": {"auth": "%s"}}}\n' "$tport" \
    "$(printf 'sbxtest:s3cret-pw' | base64 -w0)" >tokcfg/config.json
cat >tok.conf <<CONF
image_registry = {
  feature_registries = [ "127.0.0.1:$tport" ];
  ca_file = "$WORK/ca.crt";
};
CONF
rm -rf cache/features # the layer is read again, with the token
def token "127.0.0.1:$tport/features/greet:1"
sed -i 's/"greeting": "hi"/"colour": "red"/' token/.devcontainer/devcontainer.json
bad token 2 "features[\"127.0.0.1:$tport/features/greet:1\"].colour: unknown option" \
    SBX_CONFIG="$WORK/tok.conf" DOCKER_CONFIG="$WORK/tokcfg"
bad token 1 "its token realm answered 401 (no login for it)" \
    SBX_CONFIG="$WORK/tok.conf" DOCKER_CONFIG="$WORK/nonexistent"
kill $tokpid 2>/dev/null || true
# a registry that sends other bytes than the digest says: the layer's file in
# the registry's storage is changed after the push
mkdir -p feat2 && cp feat/* feat2/ && echo '# other' >>feat2/install.sh
read -r _ ldigest2 < <(push feature "127.0.0.1:$port" features/tampered 1 feat2)
blob=$WORK/reg/data/docker/registry/v2/blobs/sha256/${ldigest2:7:2}/${ldigest2:7}/data
[ -f "$blob" ] || die "no blob file $blob"
python3 -c 'import sys; p=sys.argv[1]; b=bytearray(open(p,"rb").read()); b[600]^=1; open(p,"wb").write(b)' "$blob"
def tampered "127.0.0.1:$port/features/tampered:1"
bad tampered 1 "does not match its digest: the manifest says $ldigest2"
[ ! -e "cache/features/${ldigest2:7}" ] || die "a layer that does not match its digest was kept"
for t in cache/features/.tmp-*; do [ ! -e "$t" ] || die "a temporary folder was left: $t"; done

# 4. gc --registry: three images in image_registry.url's repository (plus the
# one pushed above, created earlier by busybox's date); --keep 1 deletes all
# but the newest
for i in 1 2 3; do
    push image "127.0.0.1:$port" team/imgs "00000000000000a$i" "2027-01-0${i}T00:00:00.5Z" >/dev/null
done
"$SBX" image gc --registry --keep 1 --dry-run --json >gcdry.json 2>gc.err || die "gc --dry-run: $(cat gc.err)"
[ "$(push tags "127.0.0.1:$port" team/imgs | wc -l)" = 4 ] || die "gc --dry-run deleted"
"$SBX" image gc --registry --keep 1 --json >gc.json 2>gc.err || die "gc --registry: $(cat gc.err)"
n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["removed"]))' gc.json)
[ "$n" = 3 ] || die "gc --registry --keep 1 deleted $n: $(cat gc.json)"
[ "$(push tags "127.0.0.1:$port" team/imgs)" = 00000000000000a3 ] ||
    die "gc left: $(push tags "127.0.0.1:$port" team/imgs)"
[ "$(push tags "127.0.0.1:$port" features/greet)" = 1 ] || die "gc touched the features"
say "gc --registry --keep 1 deleted 3 manifests, kept the newest"
# a registry without deletes: one line, exit 1
cat >nodel.conf <<CONF
image_registry = {
  url = "https://127.0.0.1:$port2/team/imgs";
  ca_file = "$WORK/ca.crt";
};
CONF
OCI_USER=x OCI_PASS=y push image "127.0.0.1:$port2" team/imgs 00000000000000b1 2026-01-01T00:00:00Z >/dev/null
OCI_USER=x OCI_PASS=y push image "127.0.0.1:$port2" team/imgs 00000000000000b2 2026-01-02T00:00:00Z >/dev/null
rc=0
SBX_CONFIG=$WORK/nodel.conf "$SBX" image gc --registry --keep 1 >gc2.out 2>gc2.err || rc=$?
[ $rc = 1 ] || die "gc on a registry without deletes: exit $rc $(cat gc2.err)"
grep -q "does not allow deleting manifests (405 UNSUPPORTED)" gc2.err || die "gc: $(cat gc2.err)"
[ "$(wc -l <gc2.err)" = 1 ] || die "gc: more than one line: $(cat gc2.err)"
say "a registry without deletes: $(cat gc2.err)"
say "all passed"
