#!/bin/bash
# image_registry.sh - `sbx image push`, `sbx image pull` by digest and the
# runner's pull before work (docs/image.md, "Publishing and pulling"),
# against Debian's docker-registry on loopback with TLS (a CA made here) and
# basic auth (htpasswd -B). Run by test_image_registry.c with:
#   SBX=build/sbx  SRC=source dir  WORK=a fresh directory
#   HOST1=unix://... (SBX_TEST_DOCKER_HOST)  HOST2=unix://... a second engine, or
#   the same engine again (then the image's digest reference is removed
#   there and pulled back: the manifest comes from the registry); with a
#   second engine, also a pool's image checked and pulled on a provider
#   instance other than the default one (the first engine's)
# Traffic goes to 127.0.0.1 only. Prints what it does; exit 0 all passed.
set -euo pipefail
: "${SBX:?}" "${SRC:?}" "${WORK:?}" "${HOST1:?}" "${HOST2:?}"
say() { echo "image_registry.sh: $*" >&2; }
die() { say "FAIL: $*"; exit 1; }
# a condition with a deadline (no fixed sleep as a wait)
wait_until() { # SECONDS CMD...
    local end=$((SECONDS + $1)); shift
    until "$@"; do [ $SECONDS -lt $end ] || return 1; sleep 0.1; done
}
command -v htpasswd >/dev/null || die "no htpasswd: apt-get install apache2-utils (scripts/setup.sh)"
command -v docker-registry >/dev/null || die "no docker-registry (scripts/setup.sh)"

# shellcheck source=../support/registry_tls.sh
. "$SRC/tests/support/registry_tls.sh"
cd "$WORK"
# the test CA, the registry's certificate for 127.0.0.1, the htpasswd login
reg_make_tls "$WORK"
reg_start "$WORK" reg auth # 401 without credentials: TLS with the test CA, basic auth
port=$reg_port regpid=$reg_pid
trap 'kill $regpid 2>/dev/null || true' EXIT
[ "$(reg_code "$port" -u sbxtest:s3cret-pw)" = 200 ] || die "basic auth refused"
say "registry up on https://127.0.0.1:$port (TLS from the test CA, basic auth)"

# the image: a tiny one with a content-hash tag, unique to this run
hash=$(printf '%s' "$WORK" | sha256sum | cut -c1-16)
repo=sbx-imgtest-$$
export DOCKER_HOST=$HOST1
docker tag sbx-busybox:test "$repo:$hash"
cleanup_local() {
    DOCKER_HOST=$HOST1 docker rmi "$repo:$hash" "127.0.0.1:$port/team/imgtest:$hash" >/dev/null 2>&1 || true
}
trap 'kill $regpid 2>/dev/null || true; cleanup_local' EXIT

cat >sbx.conf <<CONF
image_registry = {
  url = "https://127.0.0.1:$port/team/imgtest";
};
CONF
export SBX_CONFIG=$WORK/sbx.conf SBX_STATE_DIR=$WORK/state
mkdir -p dockercfg-none dockercfg
# without a login: refused by the registry, exit 1, no secret printed
set +e
DOCKER_CONFIG=$WORK/dockercfg-none "$SBX" image push --image "$repo:$hash" >out 2>err
rc=$?
set -e
[ $rc = 1 ] || die "push without credentials: exit $rc ($(cat err))"
grep -q 'image push to 127.0.0.1' err || die "push without credentials: $(cat err)"
say "push without credentials refused: $(tail -n1 err)"

# the engine's login (the Docker client's config.json), never the file
printf '{"auths": {"127.0.0.1:%s": {"auth": "%s"}}}\n' "$port" \
    "$(printf 'sbxtest:s3cret-pw' | base64 -w0)" >dockercfg/config.json
export DOCKER_CONFIG=$WORK/dockercfg
"$SBX" image push --image "$repo:$hash" --json >push.json 2>err || die "push: $(cat err)"
grep -q 's3cret' push.json err && die "the password was printed"
digest=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["digest"])' push.json)
ref=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["pull_ref"])' push.json)
[ "$ref" = "127.0.0.1:$port/team/imgtest@$digest" ] || die "pull_ref $ref"
grep -q "\"$digest\"" state/images/pushed.json || die "digest not recorded in pushed.json"
grep -rq 's3cret' state sbx.conf && die "the password was written under the state dir or the config"
# the registry has it under the content hash, with that digest (checked with the CA)
got=$(curl -s --cacert ca.crt -u sbxtest:s3cret-pw -o /dev/null -D - \
    -H 'Accept: application/vnd.docker.distribution.manifest.v2+json' \
    -H 'Accept: application/vnd.oci.image.manifest.v1+json' \
    "https://127.0.0.1:$port/v2/team/imgtest/manifests/$hash" |
    tr -d '\r' | sed -n 's/^[Dd]ocker-[Cc]ontent-[Dd]igest: //p')
[ "$got" = "$digest" ] || die "registry digest '$got', pushed '$digest'"
say "pushed $repo:$hash as $ref"

# delete locally, then pull by digest on the second engine (or this one again)
export DOCKER_HOST=$HOST2
if [ "$HOST2" = "$HOST1" ]; then
    docker rmi "127.0.0.1:$port/team/imgtest:$hash" >/dev/null
fi
docker rmi "$ref" >/dev/null 2>&1 || true
docker image inspect "$ref" >/dev/null 2>&1 && die "$ref still in the engine"
"$SBX" image pull --image "$ref" >pull.out 2>err || die "pull: $(cat err)"
grep -q "pulled" pull.out || die "pull: $(cat pull.out)"
grep -q "pulling image $ref" err || die "no 'pulling image' line: $(cat err)"
"$SBX" image pull --image "$ref" >pull.out 2>err || die "second pull: $(cat err)"
grep -q "already in the engine" pull.out || die "second pull: $(cat pull.out)"
# run it
[ "$(docker run --rm --network none "$ref" echo ran-from-digest)" = ran-from-digest ] ||
    die "cannot run $ref"
"$SBX" image inspect --image "$ref" --json >inspect.json 2>err || die "inspect: $(cat err)"
grep -q "$digest" inspect.json || die "inspect: $(cat inspect.json)"
say "pulled by digest on $HOST2 and ran it"

# the runner: a box whose image is missing pulls it by digest before it takes
# work, and /readyz says "image" meanwhile (here: while the registry is down)
cat >serve.conf <<CONF
image = "$ref";
image_registry = {
  url = "https://127.0.0.1:$port/team/imgtest";
};
CONF
readyz() { curl -s -m 5 --unix-socket "$1/runner.sock" http://localhost/readyz || true; }
readyz_has() { readyz "$1" | grep "$2" >/dev/null; } # STATE PATTERN
servepid=""
serve() { # STATE
    mkdir -p "$1"
    SBX_CONFIG=$WORK/serve.conf SBX_STATE_DIR=$1 "$SBX" --log-level info serve >"$1/serve.log" 2>&1 &
    servepid=$!
}
stop_serve() { kill "$servepid" 2>/dev/null || true; wait "$servepid" 2>/dev/null || true; servepid=""; }
trap 'stop_serve; kill $regpid 2>/dev/null || true; cleanup_local' EXIT
docker rmi "$ref" >/dev/null
serve "$WORK/serve1"
wait_until 120 readyz_has "$WORK/serve1" '"status": *"ok"' ||
    die "the runner is not ready: $(readyz "$WORK/serve1") $(cat "$WORK/serve1/serve.log")"
grep -q "pulling image $ref" "$WORK/serve1/serve.log" || die "no 'pulling image': $(cat "$WORK/serve1/serve.log")"
grep -q "pulled image $ref" "$WORK/serve1/serve.log" || die "no 'pulled image'"
docker image inspect "$ref" >/dev/null || die "the runner did not pull $ref"
stop_serve
say "the runner pulled $ref before it was ready"
if [ "$HOST2" != "$HOST1" ]; then
    # (added) a pool's image on every provider instance: here the default
    # instance (HOST2) has it and another instance, on HOST1's engine, lacks it;
    # no top-level image. The runner pulls it there before it is ready.
    cat >serve3.conf <<CONF
pools = { ci = { image = "$ref"; }; };
providers = { other = { plugin = "provider_docker"; socket = "${HOST1#unix://}"; }; };
image_registry = {
  url = "https://127.0.0.1:$port/team/imgtest";
};
CONF
    DOCKER_HOST=$HOST1 docker rmi "127.0.0.1:$port/team/imgtest:$hash" >/dev/null 2>&1 || true
    DOCKER_HOST=$HOST1 docker rmi "$ref" >/dev/null 2>&1 || true
    DOCKER_HOST=$HOST1 docker image inspect "$ref" >/dev/null 2>&1 && die "$ref still in $HOST1"
    mkdir -p "$WORK/serve3"
    SBX_CONFIG=$WORK/serve3.conf SBX_STATE_DIR=$WORK/serve3 "$SBX" --log-level info serve \
        >"$WORK/serve3/serve.log" 2>&1 &
    servepid=$!
    wait_until 120 readyz_has "$WORK/serve3" '"status": *"ok"' ||
        die "pool image on another instance: not ready: $(readyz "$WORK/serve3") $(cat "$WORK/serve3/serve.log")"
    stop_serve
    DOCKER_HOST=$HOST1 docker image inspect "$ref" >/dev/null 2>&1 ||
        die "the runner did not pull the pool's image on the instance 'other': $(cat "$WORK/serve3/serve.log")"
    grep -q "pulling image $ref" "$WORK/serve3/serve.log" || die "no 'pulling image' (other instance)"
    say "the runner pulled the pool's image on the other provider instance before it was ready"
fi
docker rmi "$ref" >/dev/null
kill $regpid; wait $regpid 2>/dev/null || true
serve "$WORK/serve2"
wait_until 60 readyz_has "$WORK/serve2" '"down": *\[.*"image"' ||
    die "/readyz does not say image: $(readyz "$WORK/serve2") $(cat "$WORK/serve2/serve.log")"
say "registry down: /readyz $(readyz "$WORK/serve2" | tr -d '\n' | cut -c1-300)"
# the queue says so too
SBX_CONFIG=$WORK/serve.conf SBX_STATE_DIR=$WORK/serve2 "$SBX" queue >queue.out 2>&1 ||
    die "sbx queue: $(cat queue.out)"
grep -q "box not ready, no job starts: image $ref" queue.out || die "sbx queue: $(cat queue.out)"
SBX_CONFIG=$WORK/serve.conf SBX_STATE_DIR=$WORK/serve2 "$SBX" queue --json >queue.json 2>&1
python3 -c 'import json,sys; i=json.load(open(sys.argv[1]))["box"]["image"]; sys.exit(0 if i["ready"] is False and i["ref"] == sys.argv[2] else 1)' \
    queue.json "$ref" || die "sbx queue --json: $(cat queue.json)"
stop_serve

# a reference not by digest is never pulled (nor built): exit 1 naming it
set +e
"$SBX" image pull --image "sbx-imgtest-missing:$hash" >out 2>err
rc=$?
set -e
[ $rc = 1 ] && grep -q "not a reference by digest" err || die "missing tag: exit $rc $(cat err)"
# gc never removes current or in-use images (dry run: the engine is shared)
"$SBX" image gc --dry-run --keep 1000 --json >gc.json 2>err || die "gc: $(cat err)"
grep -q '"removed": \[\]' gc.json || die "gc --keep 1000 would remove: $(cat gc.json)"
if [ "$HOST2" != "$HOST1" ]; then
    # gc on the second engine (the test's own): 4 images, current + 3 more;
    # --keep 1 removes 2 of the 3, never current
    mkdir -p gcimg
    for i in 1 2 3 4; do
        echo "$i" >gcimg/n
        tar -C gcimg -c n | docker import - "sbx-sandbox:00000000000000a$i" >/dev/null
    done
    docker tag sbx-sandbox:00000000000000a4 sbx-sandbox:current
    "$SBX" image gc --keep 1 --json >gc.json 2>err || die "gc: $(cat err)"
    n=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["removed"]))' gc.json)
    [ "$n" = 2 ] || die "gc --keep 1 removed $n: $(cat gc.json)"
    docker image inspect sbx-sandbox:current >/dev/null || die "gc removed current"
    [ "$(docker images -q --filter reference=sbx-sandbox | sort -u | wc -l)" = 2 ] ||
        die "gc left: $(docker images --filter reference=sbx-sandbox)"
    docker rmi sbx-sandbox:current sbx-sandbox:00000000000000a4 >/dev/null 2>&1 || true
    docker images --format '{{.Repository}}:{{.Tag}}' --filter reference=sbx-sandbox |
        xargs -r docker rmi >/dev/null 2>&1 || true
    docker rmi "$ref" >/dev/null 2>&1 || true
    say "gc kept current and the newest 1 of 3"
fi
say "all passed"
