#!/usr/bin/env bash
# egress_transparent.sh - the transparent egress path against the proxy-variable
# path, in one sandbox (docs/egress.md, "Without proxy variables"): RUNS plain HTTP
# GETs to a local origin with curl, alternating: with http_proxy (relay port 3128,
# the proxy forwards the request) and without it (the name resolved by the relay's
# resolver, the connection redirected by the netns, a CONNECT tunnel in the proxy).
# Prints, side by side, p50 and p95 of curl's name lookup, of connect to first byte
# (time_starttransfer - time_namelookup) and of the whole request to first byte.
#
#   bench/egress_transparent.sh [RUNS]     (default 200)
#
# Needs root, the engine in DOCKER_HOST (or SBX_TEST_DOCKER_HOST) with the sbx
# images imported, and build/sbx. Only the origin started here is reached.
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
cd "$(dirname "$0")/.."
runs=${1:-200}
sbx=$(realpath "${SBX:-build/sbx}")
export DOCKER_HOST=${DOCKER_HOST:-${SBX_TEST_DOCKER_HOST:?set DOCKER_HOST or SBX_TEST_DOCKER_HOST}}
work=$(mktemp -d /tmp/sbx-egress-transparent.XXXXXX)
trap 'kill "$origin" 2>/dev/null || true; rm -rf "$work"' EXIT
python3 tests/support/egress_origin.py http >"$work/port" &
origin=$!
for _ in $(seq 100); do [ -s "$work/port" ] && break; sleep 0.05; done
port=$(head -1 "$work/port")
[ -n "$port" ] || { echo "egress_transparent.sh: the origin did not start" >&2; exit 1; }
cat >"$work/sbx.conf" <<CONF
egress = {
  log = "$work/egress.jsonl";
  system_dns = false;
  registries = ["allowed.test:$port"];
  hosts = ( { name = "allowed.test"; address = "127.0.0.1"; } );
};
CONF
export SBX_CONFIG=$work/sbx.conf SBX_STATE_DIR=$work/state
# in the sandbox: one line per request, "proxy|direct namelookup starttransfer"
script='
P=$1; N=$2; F="%{time_namelookup} %{time_starttransfer}\n"
for i in $(seq "$N"); do
  printf "proxy ";  curl -s -o /dev/null -w "$F" "http://allowed.test:$P/"
  printf "direct "; env -u http_proxy -u HTTP_PROXY curl -s -o /dev/null -w "$F" "http://allowed.test:$P/"
done'
"$sbx" run -- bash -c "$script" sh "$port" "$runs" >"$work/times"
python3 - "$work/times" <<'PY'
import sys
rows = {"proxy": [], "direct": []}
for line in open(sys.argv[1]):
    kind, look, first = line.split()
    rows[kind].append((float(look) * 1e6, (float(first) - float(look)) * 1e6, float(first) * 1e6))
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(len(v) * p))]
print("%-34s %14s %14s %8s" % ("(microseconds, %d requests each)" % len(rows["proxy"]),
                               "proxy vars", "transparent", "ratio"))
for i, what in enumerate(["name lookup", "connect to first byte", "request to first byte"]):
    for p, tag in ((0.5, "p50"), (0.95, "p95")):
        a, b = pct([r[i] for r in rows["proxy"]], p), pct([r[i] for r in rows["direct"]], p)
        print("%-34s %14.0f %14.0f %8s" % (what + " " + tag, a, b, "%.2f" % (b / a) if a > 0 else "-"))
PY
