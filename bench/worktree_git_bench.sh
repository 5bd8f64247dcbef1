#!/usr/bin/env bash
# worktree_git_bench.sh - what a repository worktree costs (docs/tasks.md,
# "Worktrees"), under churn: STREAMS parallel streams, each alternating RUNS
# times between
#   plain:  docker run --rm --network none IMAGE true          (the plain engine)
#   dir:    sbx run --worktree DIR -- sh -c 'echo x >> f'       (no repository)
#   repo:   sbx run --worktree REPO -- sh -c 'echo x >> f; git add f; git commit -qm x'
#           (the sandbox's own git dir, the harvest of one commit, the scan)
#   big:    sbx run --worktree BIG -- true                      (the scan of 100,000 files)
# Each stream has its own directories. Prints p50 and p95 of each, and the
# ratios against `dir` and `plain`.
#   bench/worktree_git_bench.sh [RUNS] [STREAMS]   (default 6 and 3; DOCKER_HOST picks the engine)
set -euo pipefail
case "${1:-}" in -h | --help)
    sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
    exit 0
    ;;
esac
cd "$(dirname "$0")/.."
runs=${1:-6}
streams=${2:-3}
sbx=$(realpath "${SBX:-build/sbx}")
image=${SBX_BENCH_IMAGE:-sbx-sandbox:current}
command -v docker >/dev/null || { echo "bench: the docker CLI is needed" >&2; exit 1; }
dir=$(mktemp -d /tmp/sbx-bench-wtgit-XXXXXX)
trap 'rm -rf "$dir"' EXIT
export SBX_STATE_DIR=$dir/state GIT_AUTHOR_NAME=b GIT_AUTHOR_EMAIL=b@example.invalid \
    GIT_COMMITTER_NAME=b GIT_COMMITTER_EMAIL=b@example.invalid
mkdir -p "$SBX_STATE_DIR"
for s in $(seq "$streams"); do
    mkdir -p "$dir/$s/dir" "$dir/$s/big"
    git init -q -b main "$dir/$s/repo" && git -C "$dir/$s/repo" commit -q --allow-empty -m base
    (cd "$dir/$s/big" && for d in $(seq 100); do mkdir "d$d" && (cd "d$d" && seq 1000 | xargs touch); done)
done
ms() { date +%s%N | cut -c1-13; }
stream() {
    local s=$1 t0
    for i in $(seq "$runs"); do
        t0=$(ms); docker run --rm --network none "$image" true >/dev/null; echo "plain $(($(ms) - t0))"
        t0=$(ms); "$sbx" run --task "b$s-d$i" --worktree "$dir/$s/dir" -- sh -c 'echo x >> f' >/dev/null 2>&1
        echo "dir $(($(ms) - t0))"
        t0=$(ms)
        "$sbx" run --task "b$s-r$i" --worktree "$dir/$s/repo" -- \
            sh -c 'git config user.name b; git config user.email b@example.invalid; echo x >> f; git add f; git commit -qm x' >/dev/null 2>&1
        echo "repo $(($(ms) - t0))"
        t0=$(ms); "$sbx" run --task "b$s-b$i" --worktree "$dir/$s/big" -- true >/dev/null 2>&1
        echo "big $(($(ms) - t0))"
    done
}
for s in $(seq "$streams"); do stream "$s" >"$dir/out.$s" & done
wait
cat "$dir"/out.* | python3 -c '
import sys, statistics
v = {}
for line in sys.stdin:
    k, ms = line.split(); v.setdefault(k, []).append(int(ms))
def pct(a, p):
    a = sorted(a); return a[min(len(a) - 1, int(round(p * (len(a) - 1))))]
d50 = pct(v["dir"], .5)
p50 = pct(v["plain"], .5)
for k in ("plain", "dir", "repo", "big"):
    a = v.get(k, [])
    m = pct(a, .5)
    print("%-6s n=%3d p50 %6d ms  p95 %6d ms  p50/dir %.2f  p50/plain %.2f"
          % (k, len(a), m, pct(a, .95), m / d50, m / p50))
'
for s in $(seq "$streams"); do
    n=$(git -C "$dir/$s/repo" rev-list --count main)
    [ "$n" -eq $((runs + 1)) ] || { echo "bench: stream $s: $n commits on main, wanted $((runs + 1))" >&2; exit 1; }
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"
