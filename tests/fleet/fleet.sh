#!/usr/bin/env bash
# fleet.sh - three `sbx serve` boxes on one PostgreSQL (docs/runner.md,
# "Several boxes"), run inside tests/support/pg_harness.sh:
#
#   pg_harness.sh exec tests/fleet/fleet.sh SBX PLUGIN_DIR CASE
#
# Boxes (fake provider, separate state dirs and box ids, lease 2 s):
#   b1 serves ci, b2 serves ci and agent, b3 serves agent.
# Cases:
#   jobs   N jobs (SBX_FLEET_JOBS, default 1000) submitted round-robin to the
#          three APIs, alternating pools: each ends exactly once (finished),
#          none on a box that does not serve its pool, claims FIFO per pool;
#          `sbx queue` on every box shows all three boxes.
#   kill   kill -9 of b2 with running and queued jobs: within one lease its
#          jobs are back in the queue or interrupted 'box lost', the others
#          finish them; b2 started again destroys and takes work again.
#   stop   SIGSTOP of b2 past its lease, then SIGCONT: its writes are refused
#          (the records stay the survivors'), it learns it was lost.
#   pgrestart  PostgreSQL restarts with jobs running: all of them, and those
#          submitted after, finish.
#   bench  submit -> grant / ready p50 and p95: three boxes vs one on SQLite
#          (bench/fleet_bench.sh).
#   bad    a DSN of another engine, a wrong DSN and a schema version that
#          differs: one line, exit 2.
#   scale  the fleet's one autoscaler: a wait in the shared queue makes only
#          the leader alert and run scale_up_command, once; after kill -9 of
#          the leader another box leads and does not repeat the scale-up; the
#          day spend cap recorded in the shared rows holds for the new leader;
#          a paused leader (SIGSTOP) is deposed once its lease lapsed; a box
#          started with the same configuration joins and is counted.
#   docker two boxes with the real Docker provider (SBX_TEST_DOCKER_HOST, label
#          runtime) run real sandboxed jobs that each end once; (added) a kept
#          task's file written and read (and as a tar), pause, resume and a
#          terminal through the box that does not hold it.
#   fwd    (added) a job on b2 followed, read and cancelled through b1: the
#          bytes are b2's, the cancel ends it; a request with the forward
#          marker is not forwarded again.
#   fwdtask  (added) a kept task's commands submitted to other boxes run in
#          the task's box; (added) its files, pause, a port preview and a
#          terminal through another box reach the owner (task_routes); its end
#          through another box ends it.
#   fwdkill  (added) the owner killed mid-follow through b1: a clean error.
#   fwdbad (added) a slow client pauses the relay; a hostile owner: a huge
#          head, garbage, a cut stream, an endless body: one bounded error
#          each, b1 goes on; (added) a terminal relayed to an echo owner,
#          8 MiB each way, byte for byte; an owner's 403 and an owner's
#          silence on a port (502).
#   fwdtcp (added) boxes on TCP: the caller's token goes to the owner; scopes
#          hold across the hop; the unix socket gets a 502 for a TCP owner.
#   db503  (added) PostgreSQL stopped: submit and GET answer 503 at once;
#          started again, every accepted job finishes.
#   dbstall (added, issue 31) the jobs table locked (a psql session holds
#          ACCESS EXCLUSIVE): a submit answers 503 within its deadline
#          (runner.database_timeout 1 s, + 1 s); (changed) while it waits on
#          the lock, the stall's first GET / and GET /healthz answer within
#          100 ms (SBX_TEST_STALL_FAST_MS), then 5 more of each within 1 s;
#          (added) then the box's backends stopped (SIGSTOP, a silent
#          database): a submit 503 within its deadline, GET / at once;
#          the lock released, the store is ok again, and every accepted job
#          and a new one finish; (added) a task route of b2's kept task
#          through b1 while the tasks table is locked: 503 within its
#          deadline, b1's GET / and /healthz within 100 ms meanwhile.
#   dbbench (added, issue 31) the API's p50/p99 per route (GET /healthz, GET /,
#          GET /v1/jobs/ID, POST /v1/jobs; (added) a task route forwarded
#          to b2, which holds kept task kt1) under a steady stream of submits,
#          with the database healthy and then answering every message after
#          2 s (bench/pg_delay_proxy.py); runner.database_timeout 1 s
#          (bench/dbstall_bench.sh).
#   taskdup (added, issue 25) one task id, two jobs: alice's queued behind the
#          pool's busy heavy slot and a light one of the task that the API
#          did not see (two boxes' submits at once, written
#          into the shared queue): the claim passes over alice's until the
#          other one's task is gone, so the two never run at once, each ends
#          once, and the box stops on SIGTERM with no sanitizer report
#          (before: two live tasks of one id, the first task end freed the
#          other's, heap-use-after-free in runner_cancel); then over TCP
#          mallory naming alice's task gets 403 and alice's own second job
#          while the first waits 409.
set -euo pipefail

sbx=$1
plugins=$2
case_=$3
: "${SBX_TEST_PG_DSN:?run inside tests/support/pg_harness.sh}"
bindir=${PG_BINDIR:-/usr/lib/postgresql/15/bin}
work=$(mktemp -d /tmp/sbx-fleet.XXXXXX)
declare -A pid

# Nothing in a case may wait forever (a hung box would hold ctest to its
# timeout and lose every log): every curl has a deadline unless the call sets
# a shorter one (curl takes the last -m), and processes are waited for with
# wait_pid.
curl() { command curl -m 90 "$@"; }

# wait_pid PID SECONDS: PID's exit status; one still running after SECONDS is
# killed (-9) and gives 124.
wait_pid() {
    local p=$1 end=$((SECONDS + $2))
    while kill -0 "$p" 2>/dev/null && [ "$SECONDS" -lt "$end" ]; do
        sleep 0.1
    done
    if kill -0 "$p" 2>/dev/null; then
        echo "fleet: pid $p still running after $2 s: killed" >&2
        kill -9 "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
        return 124
    fi
    wait "$p"
}

# fail MESSAGE: the failure, first in one short line (a CI log shows only the
# tail of a failing test's output, and long lines get cut), then every box's
# log, then the same line again so that the tail shows it too.
fail() {
    local msg=$* line
    msg=${msg//$'\n'/ }
    line="fleet $case_: FAIL after ${SECONDS}s: ${msg:0:240}"
    [ ${#msg} -le 240 ] || line="$line [...]"
    echo "$line" >&2
    [ ${#msg} -le 240 ] || echo "fleet: the whole message: $msg" >&2
    for l in "$work"/*/log; do
        [ -f "$l" ] && { echo "--- $(basename "$(dirname "$l")") log (last 30 lines)" >&2; tail -30 "$l" >&2; }
    done
    echo "$line" >&2
    exit 1
}

# has TEXT GREP-ARGS...: grep over TEXT without a pipe (under pipefail,
# `echo "$m" | grep -q` fails at random when grep -q exits at its first match
# and echo, writing a large /metrics in pieces, gets SIGPIPE)
has() {
    local t=$1
    shift
    grep "$@" <<<"$t"
}

# note WHAT: a step of the case, with the seconds since it started (so a slow
# step shows where a loaded machine spent the time)
note() { echo "fleet: [${SECONDS}s] $*"; }

# wait_until SECONDS WHAT CMD [ARG...]: runs CMD every 0.1 s until it succeeds;
# after SECONDS (of the clock, however long CMD takes), fails naming WHAT it
# waited for (fail shows the boxes' logs).
wait_until() {
    local secs=$1 what=$2 end
    shift 2
    end=$((SECONDS + secs))
    until "$@"; do
        [ "$SECONDS" -lt "$end" ] || fail "waited $secs s for $what"
        sleep 0.1
    done
}

# lite_finished N: the SQLite box "one" has N finished jobs.
lite_finished() {
    local got
    got=$(python3 - "$work/one/runner.db" <<'PY' 2>/dev/null
import sqlite3, sys
print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM jobs WHERE state = 'finished'").fetchone()[0])
PY
    ) || return 1
    [ "$got" -ge "$1" ]
}

# ended_in_logs ID...: each job has ended, as a box's log says: its end
# line, or (the database down) its end waiting to be written.
ended_in_logs() {
    local id
    for id in "$@"; do
        grep -Eqh "runner: job $id( [a-z]+ \(exit|: the database is unavailable)" "$work"/*/log ||
            return 1
    done
}

# beats_all BOX...: waits (60 s at most) until each box has written a new
# heartbeat row (every third of its lease).
hb_moved() { [ "$(sql "SELECT heartbeat FROM boxes WHERE id = '$1'")" != "$2" ]; }
beats_all() {
    local b
    declare -A h0
    for b in "$@"; do h0[$b]=$(sql "SELECT heartbeat FROM boxes WHERE id = '$b'"); done
    for b in "$@"; do wait_until 60 "a heartbeat of box $b" hb_moved "$b" "${h0[$b]}"; done
}

cleanup() {
    for b in "${!pid[@]}"; do
        kill -CONT "${pid[$b]}" 2>/dev/null || true
        kill -TERM "${pid[$b]}" 2>/dev/null || true
    done
    for b in "${!pid[@]}"; do
        wait_pid "${pid[$b]}" 30 2>/dev/null || true
    done
    rm -rf "$work"
}
trap cleanup EXIT
# a command of a case that fails outside a test (set -e) says where, as a
# FAIL line with the boxes' logs (functions and $(...) exit without it; not
# under set +e, where a case reads the status itself)
on_err() {
    local rc=$?
    [[ $- != *e* ]] || fail "line $1: a command failed (exit $rc)"
}
trap 'on_err $LINENO' ERR

# Stops every box still up (SIGTERM): each must exit 0 with no sanitizer report
# in its log (the ASan build runs these boxes too).
stop_all() {
    for b in "${!pid[@]}"; do
        kill -TERM "${pid[$b]}" 2>/dev/null || true
    done
    for b in "${!pid[@]}"; do
        rc=0
        wait_pid "${pid[$b]}" 60 || rc=$?
        unset "pid[$b]"
        [ "$rc" = 0 ] || fail "box $b exited $rc after SIGTERM (124: did not stop within 60 s)"
    done
    if grep -l "AddressSanitizer\|LeakSanitizer\|runtime error:" "$work"/*/log 2>/dev/null; then
        fail "a sanitizer report in a box's log"
    fi
}

sql() {
    PGPASSWORD=$SBX_TEST_PG_PASSWORD "$bindir/psql" -X -q -At "$SBX_TEST_PG_DSN" -c "$1"
}

conf() { # box pools
    mkdir -p "$work/$1"
    cat >"$work/$1/sbx.conf" <<EOF
plugin_dir = "$plugins";
state_dir = "$work/$1";
provider = "fake";
providers = { fake = { plugin = "provider_good"; }; };
limits = { cpus = 0.25; memory = "64M"; idle = "1h"; };
box = { id = "$1"; pools = [$2]; memory = "8G"; max_sandboxes = 8; };
runner = { database = "$SBX_TEST_PG_DSN"; database_password_env = "SBX_TEST_PG_PASSWORD";
           lease = 2; };
EOF
}

start() {
    SBX_LOG_LEVEL=info "$sbx" --config "$work/$1/sbx.conf" serve >>"$work/$1/log" 2>&1 &
    pid[$1]=$!
}

# wait_socket BOX: its API socket, 60 s at most (an ASan box on a loaded
# machine takes seconds to start)
sock_up() {
    # a socket that answers: a box killed -9 leaves its file behind, and the
    # new box binds only once it is ready, so the file alone is not enough
    [ -S "$work/$1/runner.sock" ] &&
        curl -s -o /dev/null --max-time 5 --unix-socket "$work/$1/runner.sock" http://localhost/healthz &&
        return 0
    kill -0 "${pid[$1]}" 2>/dev/null || fail "box $1 exited at start"
    return 1
}
wait_socket() { wait_until 60 "box $1 to open its socket" sock_up "$1"; }

# submit SOCKET... : reads "ID POOL MS" lines on stdin, posts each to the next socket
submit_py=$(
    cat <<'EOF'
import http.client, json, socket, sys
socks = sys.argv[1:]
class U(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=60)
        self.path = path
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(self.path)
import threading, time
lines = [l.split() for l in sys.stdin if l.strip()]
paced = any(l[2].startswith("pace") for l in lines)
errors = []

def post(c, jid, pool, ms):
    # "sleep MS" runs MS; "hello" prints at once (the bench); "paceMS" waits first
    if ms.startswith("pace"):
        time.sleep(int(ms[4:]) / 1000.0)
        argv = ["hello"]
    elif ms.startswith("echo"):  # a real shell in a real sandbox (the docker case)
        argv = ["sh", "-c", "echo " + ms[4:]]
    else:
        argv = ["sleep", ms]
    body = json.dumps({"argv": argv, "pool": pool, "labels": {"n": jid}})
    c.request("POST", "/v1/jobs", body, {"Content-Type": "application/json"})
    r = c.getresponse()
    text = r.read()
    if r.status != 201:
        errors.append("submit %s to %s: HTTP %d %s" % (jid, c.path, r.status, text))

def worker(k):
    # one client per API, each submitting its share (round-robin) in order
    c = U(socks[k])
    for i in range(k, len(lines), len(socks)):
        if not errors:
            post(c, *lines[i])

if paced:  # one job at a time: latencies of an idle fleet
    conns = [U(s) for s in socks]
    for i, l in enumerate(lines):
        post(conns[i % len(conns)], *l)
else:
    ts = [threading.Thread(target=worker, args=(k,)) for k in range(len(socks))]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
if errors:
    sys.exit(errors[0])
EOF
)
submit() {
    python3 -c "$submit_py" "$@"
}

wait_ended() { # count timeout_s
    local n end=$((SECONDS + $2))
    while :; do
        n=$(sql "SELECT count(*) FROM jobs WHERE state IN ('finished','cancelled','interrupted')")
        [ "$n" -ge "$1" ] && return 0
        [ "$SECONDS" -lt "$end" ] || break
        sleep 0.1
    done
    # the jobs that did not end, and every line of every box's log naming them
    local stuck id b
    stuck=$(sql "SELECT id || ' ' || state || ' box=' || coalesce(box, '-') FROM jobs WHERE state NOT IN ('finished','cancelled','interrupted') LIMIT 5")
    echo "fleet: not ended: $(echo "$stuck" | tr '\n' ';')" >&2
    for id in $(echo "$stuck" | cut -d' ' -f1); do
        for b in "$work"/*/log; do
            [ -f "$b" ] && grep -F "$id" "$b" | sed "s|^|fleet: $(basename "$(dirname "$b")"): |" >&2
        done
    done
    fail "only $n of $1 jobs ended within $2 s ($(sql "SELECT state || ':' || count(*) FROM jobs GROUP BY state" | tr '\n' ' '))"
}

three_boxes() {
    conf b1 '"ci"'
    conf b2 '"ci", "agent"'
    conf b3 '"agent"'
    for b in b1 b2 b3; do start $b; done
    for b in b1 b2 b3; do wait_socket $b; done
}

check_pools() {
    bad=$(sql "SELECT count(*) FROM jobs WHERE (pool = 'ci' AND box = 'b3') OR (pool = 'agent' AND box = 'b1')")
    [ "$bad" = 0 ] || fail "$bad job(s) ran on a box that does not serve their pool"
}

# (added) forwarding cases: b1 serves ci, b2 ci and agent (an agent job
# submitted to b1 runs on b2)
two_boxes() {
    conf b1 '"ci"'
    conf b2 '"ci", "agent"'
    for b in b1 b2; do start $b; done
    for b in b1 b2; do wait_socket $b; done
}

api() { # box method path [body]: the body of a 2xx answer
    local out code
    out=$(mktemp "$work/api.XXXXXX")
    if [ $# -ge 4 ]; then
        code=$(curl -sS -m 60 --unix-socket "$work/$1/runner.sock" -X "$2" -o "$out" -w '%{http_code}' \
            -H 'Content-Type: application/json' -d "$4" "http://sbx$3")
    else
        code=$(curl -sS -m 60 --unix-socket "$work/$1/runner.sock" -X "$2" -o "$out" -w '%{http_code}' \
            "http://sbx$3")
    fi
    case "$code" in 2??) cat "$out" ;; *) fail "$2 $3 on $1: HTTP $code $(cat "$out")" ;; esac
}

jid() { python3 -c 'import json, sys; print(json.load(sys.stdin)["id"])'; }

wait_state() { # job state(s: "running|finished") timeout_s
    local end=$((SECONDS + $3))
    until sql "SELECT state FROM jobs WHERE id = '$1'" | grep -Eqx "$2"; do
        [ "$SECONDS" -lt "$end" ] ||
            fail "job $1 is $(sql "SELECT state || ' ' || coalesce(reason, '') FROM jobs WHERE id = '$1'"), not $2, after $3 s"
        sleep 0.1
    done
}

# (added) www_start: a page of 2 MiB ($work/www/page.bin) served on loopback
# at $port (the fake provider's port P of a sandbox is 127.0.0.1:P); www_stop
www_start() {
    mkdir -p "$work/www"
    head -c 2097152 /dev/urandom >"$work/www/page.bin"
    rm -f "$work/www.port"
    python3 - "$work/www" "$work/www.port" <<'PY' &
import http.server, functools, sys, os
h = functools.partial(http.server.SimpleHTTPRequestHandler, directory=sys.argv[1])
s = http.server.ThreadingHTTPServer(("127.0.0.1", 0), h)
open(sys.argv[2] + ".tmp", "w").write(str(s.server_address[1]))
os.rename(sys.argv[2] + ".tmp", sys.argv[2])
s.serve_forever()
PY
    www=$!
    wait_until 30 "the page server" test -s "$work/www.port"
    port=$(cat "$work/www.port")
}
www_stop() {
    kill "$www" 2>/dev/null || true
    wait "$www" 2>/dev/null || true
}

# (added) task_routes OWNER: the routes of issue 30 used through b1 for task
# kt1, which OWNER holds: each answer is the owner's (the fake provider has
# no files, pause or snapshot: its refusal names it, where b1 alone said
# 404; an egress change's refusal quotes the body), a port's
# page (the fake's port P is 127.0.0.1:P, a server of this test) comes back
# whole with the owner's CSP, a terminal answers 101 and its frames go both
# ways, and a request that carries the forward marker is not relayed again.
task_routes() {
    local owner=$1 code port
    rq() { # METHOD PATH [curl args...]: the HTTP code; the body in $work/r.out
        local m=$1 p=$2
        shift 2
        curl -sS -m 60 --unix-socket "$work/b1/runner.sock" -X "$m" -o "$work/r.out" \
            -w '%{http_code}' "$@" "http://sbx$p"
    }
    code=$(rq GET '/v1/tasks/kt1/files?path=/etc/hostname')
    [ "$code" = 501 ] && grep -q "provider 'fake' cannot read files" "$work/r.out" ||
        fail "GET files of kt1 through b1: HTTP $code $(cat "$work/r.out")"
    head -c 300000 /dev/urandom >"$work/put.bin"
    code=$(rq PUT '/v1/tasks/kt1/files?path=/tmp/x' --data-binary "@$work/put.bin")
    [ "$code" = 501 ] && grep -q "cannot write files" "$work/r.out" ||
        fail "PUT files of kt1 through b1: HTTP $code $(cat "$work/r.out")"
    code=$(rq POST /v1/tasks/kt1/pause)
    [ "$code" = 501 ] && grep -q "cannot pause" "$work/r.out" ||
        fail "pause of kt1 through b1: HTTP $code $(cat "$work/r.out")"
    grep -q "runner: task kt1 is held by box $owner: forwarding PUT /v1/tasks/kt1/files" "$work/b1/log" ||
        fail "b1 did not log the forward of PUT files to $owner"
    # the owner read the body: its refusal quotes the rule
    code=$(rq POST /v1/tasks/kt1/egress -H 'Content-Type: application/json' -d '{"allow": "10.0.0.1:443"}')
    grep -q "task kt1: allow '10.0.0.1:443'" "$work/r.out" ||
        fail "egress change of kt1 through b1: HTTP $code $(cat "$work/r.out")"
    code=$(rq POST /v1/tasks/kt1/snapshot)
    grep -q "provider 'fake' cannot snapshot" "$work/r.out" ||
        fail "snapshot of kt1 through b1: HTTP $code $(cat "$work/r.out")"
    # a port: a page of 2 MiB served on loopback, read through b1 (streamed)
    www_start
    code=$(rq GET "/v1/tasks/kt1/ports/$port/page.bin" -D "$work/r.head")
    www_stop
    [ "$code" = 200 ] && cmp -s "$work/r.out" "$work/www/page.bin" ||
        fail "GET port $port of kt1 through b1: HTTP $code, $(wc -c <"$work/r.out") bytes"
    grep -qi "^Content-Security-Policy: sandbox" "$work/r.head" ||
        fail "the page through b1 lacks the owner's CSP: $(cat "$work/r.head")"
    # (added, issue 31) once, and the connection is not kept: b1 makes the
    # head as the owner does, whatever sbx the owner runs
    [ "$(grep -ci "^Content-Security-Policy:" "$work/r.head")" = 1 ] &&
        grep -qi "^Connection: close" "$work/r.head" ||
        fail "the page's head through b1: $(cat "$work/r.head")"
    code=$(rq GET "/v1/tasks/kt1/ports/$port/" -H "X-Sbx-Forwarded-By: $owner" \
        -H 'X-Sbx-Client: local' -H 'X-Sbx-Scopes: 255')
    [ "$code" = 409 ] || fail "a port request marked as forwarded, to b1: HTTP $code $(cat "$work/r.out")"
    # the terminal: 101 through b1, then the request frame up and the result
    # down; (added, issue 31) `sbx port`'s raw connection and `sbx cp`'s
    # archive likewise: each asks the owner for its own upgrade, and after
    # its 101 bytes go both ways (before, b1 asked for none: the owner
    # answered 426 or a preview)
    www_start
    python3 - "$work/b1/runner.sock" "$port" "$work/www/page.bin" <<'PY' || fail "the terminal, a raw port and an archive of kt1 through b1 (above)"
import json, socket, struct, sys
def upgrade(path, proto):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(60)
    s.connect(sys.argv[1])
    s.sendall(("GET %s HTTP/1.1\r\nHost: sbx\r\nConnection: Upgrade\r\n"
               "Upgrade: %s\r\n\r\n" % (path, proto)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            sys.exit("%s: no 101: %r" % (proto, head))
        head += b
    if not head.startswith(b"HTTP/1.1 101"):
        sys.exit("%s: not a 101: %r %r" % (proto, head, s.recv(4096)))
    return s
def result(s, req):
    """Sends the 'R' frame, returns the owner's 'X' frame."""
    req = json.dumps(req).encode()
    s.sendall(b"R\0\0\0" + struct.pack(">I", len(req)) + req)
    buf = b""
    while True:
        while len(buf) >= 8 and len(buf) >= 8 + struct.unpack(">I", buf[4:8])[0]:
            n = struct.unpack(">I", buf[4:8])[0]
            t, data, buf = buf[:1], buf[8:8 + n], buf[8 + n:]
            if t == b"X":
                return json.loads(data)
        b = s.recv(65536)
        if not b:
            sys.exit("the relay ended before the 'X' frame: %r" % buf)
        buf += b
# the fake's sandbox has no exec agent, so that is its error (a real one: status 7)
x = result(upgrade("/v1/tasks/kt1/terminal", "sbx-terminal.v2"), {"argv": ["fake-exit", "7"]})
if x.get("status") != 7 and "exec agent" not in x.get("error", ""):
    sys.exit("the terminal's result: %r" % x)
print("fleet: the terminal of kt1 through b1: %r" % x)
# a raw port: an HTTP/1.0 request of our own to the page server, its whole answer back
s = upgrade("/v1/tasks/kt1/ports/" + sys.argv[2], "sbx-port.v1")
s.sendall(b"GET /page.bin HTTP/1.0\r\n\r\n")
got = b""
while True:
    b = s.recv(65536)
    if not b:
        break
    got += b
page = open(sys.argv[3], "rb").read()
if not got.startswith(b"HTTP/1.0 200") or not got.endswith(page):
    sys.exit("the raw port's answer: %d bytes, %r" % (len(got), got[:80]))
print("fleet: a raw port of kt1 through b1: %d bytes" % len(got))
# an archive: the fake provider has no files, the owner's refusal names it
x = result(upgrade("/v1/tasks/kt1/archive", "sbx-archive.v1"),
           {"op": "files_stat", "path": "/etc/hostname"})
if "fake" not in x.get("error", "") and x.get("status") != 0:
    sys.exit("the archive's result: %r" % x)
print("fleet: the archive of kt1 through b1: %r" % x)
PY
    www_stop
    echo "fleet: task kt1 on $owner: files, pause, egress, snapshot, a port (2 MiB), a terminal, a raw port and an archive through b1 reached it"
}

case "$case_" in
jobs)
    n=${SBX_FLEET_JOBS:-1000}
    three_boxes
    t0=$(date +%s%N)
    for i in $(seq 1 "$n"); do
        if [ $((i % 2)) = 0 ]; then echo "j$i ci 20"; else echo "j$i agent 20"; fi
    done | submit "$work/b1/runner.sock" "$work/b2/runner.sock" "$work/b3/runner.sock" ||
        fail "submit"
    wait_ended "$n" 120
    t1=$(date +%s%N)
    fin=$(sql "SELECT count(*) FROM jobs WHERE state = 'finished' AND exit_status = 0")
    [ "$fin" = "$n" ] || fail "$fin of $n finished ($(sql "SELECT state, reason, count(*) FROM jobs GROUP BY 1, 2" | tr '\n' ' '))"
    # each exactly once: one row per id (the primary key) ended once, granted once
    twice=$(grep -h "granted a" "$work"/b*/log | sed 's/.*job \([^ ]*\) granted.*/\1/' | sort | uniq -d | wc -l)
    [ "$twice" = 0 ] || fail "$twice job(s) were granted twice"
    check_pools
    # FIFO per pool: claim tokens grow with submit order, for the jobs of each
    # client (one per API, each submitting in order; two clients' concurrent
    # submits have no order between them: seq is taken before the commit)
    inv=$(sql "SELECT count(*) FROM (SELECT token, lag(token) OVER (PARTITION BY pool, (substring(labels from 'j([0-9]+)')::int - 1) % 3 ORDER BY seq) AS prev FROM jobs) x WHERE prev IS NOT NULL AND token < prev")
    [ "$inv" = 0 ] || fail "$inv claim(s) out of submit order"
    used=$(sql "SELECT count(DISTINCT box) FROM jobs")
    [ "$used" = 3 ] || fail "only $used box(es) ran jobs"
    for b in b1 b2 b3; do
        out=$(timeout 60 "$sbx" --config "$work/$b/sbx.conf" queue) || fail "sbx queue on $b"
        for o in b1 b2 b3; do
            has "$out" -q "^  $o " || fail "sbx queue on $b does not show box $o: $out"
        done
        # each box's /metrics has the per-box series of every box
        m=$(curl -s --unix-socket "$work/$b/runner.sock" http://localhost/metrics) || fail "/metrics on $b"
        for o in b1 b2 b3; do
            has "$m" -q "^sbx_fleet_box_up{box=\"$o\"} 1$" &&
                has "$m" -Eq "^sbx_fleet_box_heartbeat_age_seconds{box=\"$o\"} [0-9]+\.[0-9]{3}$" &&
                has "$m" -Eq "^sbx_fleet_box_jobs{box=\"$o\"} [0-9]+$" ||
                fail "/metrics on $b lacks box $o's series: $(has "$m" '^sbx_fleet_box')"
        done
    done
    echo "fleet: $n jobs over 3 boxes in $(((t1 - t0) / 1000000)) ms"
    ;;
kill)
    three_boxes
    # long jobs so that b2 holds running and claimed ones when it dies
    for i in $(seq 1 40); do
        if [ $((i % 2)) = 0 ]; then echo "k$i ci 1500"; else echo "k$i agent 1500"; fi
    done | submit "$work/b2/runner.sock" "$work/b1/runner.sock" "$work/b3/runner.sock" || fail "submit"
    b2_running() { [ "$(sql "SELECT count(*) FROM jobs WHERE box = 'b2' AND state = 'running'")" -gt 0 ]; }
    wait_until 60 "a job running on b2" b2_running
    held=$(sql "SELECT count(*) FROM jobs WHERE box = 'b2' AND state IN ('queued', 'running')")
    [ "$held" -gt 0 ] || fail "b2 held no job"
    kill -9 "${pid[b2]}"
    wait "${pid[b2]}" 2>/dev/null || true
    unset "pid[b2]"
    # within one lease (2 s) and a beat of the others (lease/3) on an idle
    # machine (a minute at most on a loaded one): no job is b2's
    b2_holds_none() { [ "$(sql "SELECT count(*) FROM jobs WHERE box = 'b2' AND state IN ('queued', 'running')")" = 0 ]; }
    wait_until 60 "the dead box b2's jobs to be taken from it" b2_holds_none
    lost=$(sql "SELECT count(*) FROM jobs WHERE reason = 'box lost' AND state = 'interrupted'")
    [ "$lost" -gt 0 ] || fail "no running job of b2 ended 'box lost'"
    wait_ended 40 120
    notlost=$(sql "SELECT count(*) FROM jobs WHERE state = 'finished'")
    [ $((notlost + lost)) = 40 ] || fail "finished $notlost + lost $lost != 40"
    check_pools
    # b2 comes back: it joins again and takes work
    start b2
    wait_socket b2
    echo "j-after ci 10" | submit "$work/b2/runner.sock" || fail "submit after restart"
    wait_ended 41 60
    echo "fleet: kill -9: $held job(s) of b2, $lost interrupted (box lost), the rest finished elsewhere"
    ;;
stop)
    three_boxes
    for i in $(seq 1 12); do
        if [ $((i % 2)) = 0 ]; then echo "s$i ci 3000"; else echo "s$i agent 3000"; fi
    done | submit "$work/b2/runner.sock" "$work/b1/runner.sock" "$work/b3/runner.sock" || fail "submit"
    b2_running() { [ "$(sql "SELECT count(*) FROM jobs WHERE box = 'b2' AND state = 'running'")" -gt 0 ]; }
    wait_until 60 "a job running on b2" b2_running
    kill -STOP "${pid[b2]}"
    b2_holds_none() { [ "$(sql "SELECT count(*) FROM jobs WHERE box = 'b2' AND state IN ('queued', 'running')")" = 0 ]; }
    wait_until 60 "the paused box b2's jobs to be taken from it" b2_holds_none
    before=$(sql "SELECT string_agg(id || state || coalesce(reason, '') || finished_at, ',' ORDER BY id) FROM jobs WHERE reason = 'box lost'")
    kill -CONT "${pid[b2]}"
    wait_until 60 "b2 to learn it was lost ('lost its lease' in its log)" grep -q "lost its lease" "$work/b2/log"
    wait_ended 12 120
    # b2 tried to write and was refused: what the records hold now is final
    wait_until 60 "b2's refused write ('was taken over' in its log)" grep -q "was taken over" "$work/b2/log"
    after=$(sql "SELECT string_agg(id || state || coalesce(reason, '') || finished_at, ',' ORDER BY id) FROM jobs WHERE reason = 'box lost'")
    [ "$before" = "$after" ] || fail "the lost box overwrote records: '$before' -> '$after'"
    grep -q "was taken over" "$work/b2/log" || fail "b2's writes were not refused"
    echo "fleet: SIGSTOP/SIGCONT: b2's writes refused, records kept"
    ;;
pgrestart)
    # PostgreSQL restarts mid-run: the boxes go on once it is back, nothing
    # accepted is lost (every job submitted before and after ends finished)
    three_boxes
    for i in $(seq 1 20); do
        if [ $((i % 2)) = 0 ]; then echo "r$i ci 2500"; else echo "r$i agent 2500"; fi
    done | submit "$work/b1/runner.sock" "$work/b2/runner.sock" "$work/b3/runner.sock" || fail "submit"
    some_running() { [ "$(sql "SELECT count(*) FROM jobs WHERE state = 'running'")" -gt 0 ]; }
    wait_until 30 "a job running before the restart" some_running
    $SBX_TEST_PG_CTL restart
    for i in $(seq 21 30); do
        if [ $((i % 2)) = 0 ]; then echo "r$i ci 20"; else echo "r$i agent 20"; fi
    done | submit "$work/b1/runner.sock" "$work/b2/runner.sock" "$work/b3/runner.sock" ||
        fail "submit after the restart"
    wait_ended 30 60
    fin=$(sql "SELECT count(*) FROM jobs WHERE state = 'finished'")
    [ "$fin" = 30 ] || fail "$fin of 30 finished after a restart of the database ($(sql "SELECT state, reason, count(*) FROM jobs GROUP BY 1, 2" | tr '\n' ' '))"
    echo "fleet: PostgreSQL restarted mid-run: 30 of 30 finished"
    ;;
bench)
    # submit -> grant and submit -> sandbox ready (the fake command prints at
    # once after it), one job every 20 ms, three boxes on PostgreSQL, then one
    # box on SQLite; p50/p95 in ms from the stored timings
    n=${SBX_FLEET_JOBS:-200}
    three_boxes
    for i in $(seq 1 "$n"); do
        if [ $((i % 2)) = 0 ]; then echo "p$i ci pace20"; else echo "p$i agent pace20"; fi
    done | submit "$work/b1/runner.sock" "$work/b2/runner.sock" "$work/b3/runner.sock" ||
        fail "submit"
    wait_ended "$n" 120
    conns=""
    for b in b1 b2 b3; do
        m=$(curl -s --unix-socket "$work/$b/runner.sock" http://localhost/metrics)
        conns="$conns $b $(has "$m" '^sbx_fleet_store_connections_total' | sed 's/.*how="\([a-z]*\)"} \([0-9]*\)/\1 \2/' | tr '\n' ' ')"
    done
    pg=$(sql "SELECT round(percentile_cont(0.5) WITHIN GROUP (ORDER BY granted_at - queued_at)) || ' ' || round(percentile_cont(0.95) WITHIN GROUP (ORDER BY granted_at - queued_at)) || ' ' || round(percentile_cont(0.5) WITHIN GROUP (ORDER BY ready_at - queued_at)) || ' ' || round(percentile_cont(0.95) WITHIN GROUP (ORDER BY ready_at - queued_at)) FROM jobs WHERE state = 'finished'")
    mkdir -p "$work/one"
    grep -v "database\|lease = 2" "$work/b2/sbx.conf" | sed "s|$work/b2|$work/one|; s|id = \"b2\"; ||" >"$work/one/sbx.conf"
    SBX_LOG_LEVEL=warn "$sbx" --config "$work/one/sbx.conf" serve >>"$work/one/log" 2>&1 &
    pid[one]=$!
    wait_socket one
    for i in $(seq 1 "$n"); do
        if [ $((i % 2)) = 0 ]; then echo "q$i ci pace20"; else echo "q$i agent pace20"; fi
    done | submit "$work/one/runner.sock" || fail "submit (SQLite)"
    wait_until 120 "the $n jobs of the SQLite box to finish" lite_finished "$n"
    lite=$(python3 - "$work/one/runner.db" <<'PY'
import sqlite3, sys
db = sqlite3.connect(sys.argv[1])
rows = db.execute("SELECT granted_at - queued_at, ready_at - queued_at FROM jobs WHERE state = 'finished'").fetchall()
def pct(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p * (len(v) - 1))))]
g = [r[0] for r in rows]
s = [r[1] for r in rows]
print(len(rows), pct(g, .5), pct(g, .95), pct(s, .5), pct(s, .95))
PY
)
    set -- $pg
    echo "bench: $n jobs, one every 20 ms, fake provider"
    echo "bench: workers' store connections:$conns"
    echo "bench: 3 boxes, PostgreSQL: submit->grant p50 $1 ms p95 $2 ms; submit->ready p50 $3 ms p95 $4 ms"
    set -- $lite
    echo "bench: 1 box, SQLite ($1 finished): submit->grant p50 $2 ms p95 $3 ms; submit->ready p50 $4 ms p95 $5 ms"
    ;;
bad)
    conf b1 '"ci"'
    sed -i 's|database = "[^"]*"|database = "mysql://x/y"|' "$work/b1/sbx.conf"
    set +e
    out=$("$sbx" --config "$work/b1/sbx.conf" serve 2>&1)
    rc=$?
    set -e
    [ "$rc" = 2 ] || fail "a DSN of another engine: exit $rc, want 2: $out"
    has "$out" -q "sbx.conf:[0-9]*: 'runner.database' must be a postgresql:// DSN" ||
        fail "a DSN of another engine: $out"
    conf b1 '"ci"'
    sed -i "s|database = \"[^\"]*\"|database = \"postgresql://sbx@/sbx?host=$work/none\"|" "$work/b1/sbx.conf"
    set +e
    out=$("$sbx" --config "$work/b1/sbx.conf" serve 2>&1)
    rc=$?
    set -e
    [ "$rc" = 2 ] || fail "a wrong DSN: exit $rc, want 2: $out"
    [ "$(echo "$out" | wc -l)" = 1 ] || fail "a wrong DSN: not one line: $out"
    has "$out" -q "cannot connect" || fail "a wrong DSN: $out"
    conf b2 '"ci"'
    start b2
    wait_socket b2
    sql "UPDATE sbx_meta SET value = '9' WHERE key = 'schema_version'"
    conf b3 '"agent"'
    set +e
    out=$("$sbx" --config "$work/b3/sbx.conf" serve 2>&1)
    rc=$?
    set -e
    [ "$rc" = 2 ] || fail "another schema version: exit $rc, want 2: $out"
    [ "$(echo "$out" | wc -l)" = 1 ] || fail "another schema version: not one line: $out"
    has "$out" -q "schema version is 9, this sbx uses 3" || fail "schema: $out"
    echo "fleet: bad DSN and schema version refused with exit 2"
    ;;
scale)
    # every box runs the same hooks; each call is recorded with the box's id
    rec="$work/rec.sh"
    printf '#!/bin/sh\necho "$* ${SBX_ALERT_JOB:-}" >>"%s/calls"\n' "$work" >"$rec"
    chmod +x "$rec"
    : >"$work/calls"
    conf b1 '"ci"'
    conf b2 '"ci", "agent"'
    conf b3 '"agent"'
    for b in b1 b2 b3; do
        sed -i "s|lease = 2;|lease = 2; alert_after = 1; cooldown = \"10m\"; max_boxes = 10; box_hour_price = 0.01; alert_command = \"$rec alert $b\"; scale_up_command = \"$rec scale $b\";|" "$work/$b/sbx.conf"
    done
    leader_of() { # the box whose /metrics says it leads, or ""
        for b in "$@"; do
            m=$(curl -s --unix-socket "$work/$b/runner.sock" http://localhost/metrics || true)
            if has "$m" -q "^sbx_fleet_leader{box=\"$b\"} 1"; then
                echo "$b"
                return
            fi
        done
        echo ""
    }
    leads() { [ "$(leader_of "$1")" = "$1" ]; }
    some_leads() { [ -n "$(leader_of "$@")" ]; }
    calls_of() { grep -c "^$1" "$work/calls" || true; } # calls_of "scale" | "alert b2"
    ci_queued() { sql "SELECT count(*) FROM jobs WHERE state = 'queued' AND pool = 'ci'"; }
    # feed_until SECONDS WHAT N MS CMD...: a leader decides only when a job
    # has waited past alert_after at one of its beats, and what it decides
    # depends on the queue it reads then; so while CMD fails, whenever no ci
    # job is queued, N more ci jobs of MS ms (more than the ci slots left)
    # are submitted to $socks. Fails after SECONDS (a loaded sanitizer run
    # can take a minute where an idle one takes a second).
    batch=0
    feed_until() {
        local secs=$1 what=$2 n=$3 ms=$4 end
        shift 4
        end=$((SECONDS + secs))
        until "$@"; do
            [ "$SECONDS" -lt "$end" ] || fail "waited $secs s (feeding the ci queue, $batch batches) for $what"
            if [ "$(ci_queued)" = 0 ]; then
                batch=$((batch + 1))
                # shellcheck disable=SC2086
                for i in $(seq 1 "$n"); do echo "f$batch-$i ci $ms"; done | submit $socks ||
                    fail "submit batch $batch ($what)"
            fi
            sleep 0.2
        done
    }
    # b1 first, so that it leads (the case's steps assume that b2's ci slots
    # are what is left after the leader is killed)
    start b1
    wait_socket b1
    wait_until 60 "b1, the only box, to lead" leads b1
    start b2
    start b3
    wait_socket b2
    wait_socket b3
    note "b1 leads; b2 and b3 up"
    socks="$work/b1/runner.sock $work/b2/runner.sock $work/b3/runner.sock"
    # more ci jobs than the ci slots of b1 and b2: some wait past alert_after
    feed_until 120 "the leader's scale_up_command" 20 2000 grep -q "^scale" "$work/calls"
    note "scaled up"
    beats_all b1 b2 b3 # two more beats of every box: nothing may repeat it
    beats_all b1 b2 b3
    [ "$(calls_of scale)" = 1 ] || fail "scale_up_command ran $(calls_of scale) times, want once: $(cat "$work/calls")"
    lead=$(grep "^scale" "$work/calls" | cut -d' ' -f2)
    [ "$(leader_of b1 b2 b3)" = "$lead" ] ||
        fail "the scale-up came from $lead, /metrics names '$(leader_of b1 b2 b3)'"
    grep -q "^scale $lead ci [0-9]" "$work/calls" || fail "scale_up_command args: $(cat "$work/calls")"
    others=$(grep -cv "^[a-z]* $lead " "$work/calls" || true)
    [ "$others" = 0 ] || fail "a box other than the leader $lead alerted or scaled: $(cat "$work/calls")"
    dup=$(grep "^alert" "$work/calls" | awk '{print $NF}' | sort | uniq -d | wc -l)
    [ "$dup" = 0 ] || fail "a job was alerted twice: $(cat "$work/calls")"
    [ "$(sql "SELECT count(*) FROM fleet_scale WHERE kind = 'scale_up'")" = 1 ] || fail "scale-up rows"
    m=$(curl -s --unix-socket "$work/$lead/runner.sock" http://localhost/metrics)
    has "$m" -q '^sbx_fleet_wait_seconds{pool="ci"}' || fail "the leader's /metrics has no fleet wait"
    # what scale_up_command would start: a box with the same configuration
    # (its own state dir, a generated id) joins by itself: the leader counts it
    mkdir -p "$work/b4"
    sed "s|$work/b1|$work/b4|; s|id = \"b1\"; ||" "$work/b1/sbx.conf" >"$work/b4/sbx.conf"
    start b4
    wait_socket b4
    counts_b4() {
        curl -s --unix-socket "$work/$lead/runner.sock" http://localhost/metrics | grep '^sbx_fleet_boxes_live 4$' >/dev/null
    }
    wait_until 60 "the leader $lead to count the added box b4 (sbx_fleet_boxes_live 4)" counts_b4
    grep -q "joined the fleet" "$work/b4/log" || fail "b4 did not log its joining"
    kill -TERM "${pid[b4]}"
    rc=0
    wait_pid "${pid[b4]}" 60 || rc=$?
    unset "pid[b4]"
    [ "$rc" = 0 ] || fail "b4 exited $rc after SIGTERM (124: did not stop within 60 s)"
    note "b4 joined, counted and stopped"
    # kill -9 of the leader: another box takes the lock at its next beat
    kill -9 "${pid[$lead]}"
    wait "${pid[$lead]}" 2>/dev/null || true
    unset "pid[$lead]"
    rest=$(echo b1 b2 b3 | tr ' ' '\n' | grep -v "^$lead$" | tr '\n' ' ')
    # shellcheck disable=SC2086
    wait_until 60 "a box of $rest to take over from the killed leader $lead" some_leads $rest
    # shellcheck disable=SC2086
    new=$(leader_of $rest)
    note "$new leads after kill -9 of $lead"
    socks=""
    for b in $rest; do socks="$socks $work/$b/runner.sock"; done
    n0=$(calls_of "alert $new")
    # the new leader alerts, and sees the scale-up recorded by the old one:
    # it is in the cooldown and does not repeat it
    feed_until 120 "the new leader $new to alert and name the recorded cooldown" 12 1500 \
        grep -q "of the fleet .*autoscaler: cooldown" "$work/$new/log"
    alerted_more() { [ "$(calls_of "alert $new")" -gt "$n0" ]; }
    wait_until 60 "the new leader $new's alert_command" alerted_more
    [ "$(calls_of scale)" = 1 ] || fail "the new leader repeated the scale-up: $(cat "$work/calls")"
    note "$new alerted in the cooldown"
    # the spend so far is a shared row: at the day cap, the leader adds nothing.
    # Written under the leaders' decision lock (store/scale.c, DECIDE_LOCK) in
    # one transaction: a decision between the two updates would scale up, and
    # one under way would write the spend it read over this one.
    sql "BEGIN; SELECT pg_advisory_xact_lock($((0x73627821))); UPDATE fleet_scale SET at = at - 3600000 WHERE kind = 'scale_up'; UPDATE fleet_spend SET day = 150, month = 150; COMMIT" >/dev/null
    feed_until 120 "the new leader $new to hold the day spend cap" 12 1500 \
        grep -q "allowed by the day spend cap" "$work/$new/log"
    [ "$(calls_of scale)" = 1 ] || fail "a scale-up past the spend cap: $(cat "$work/calls")"
    note "the spend cap held"
    # a paused leader keeps its session and the lock; once its lease lapsed
    # the third box deposes it (its backend ends) and leads
    third=$(echo $rest | tr ' ' '\n' | grep -v "^$new$")
    kill -STOP "${pid[$new]}"
    wait_until 60 "$third to take over from the paused leader $new" leads "$third"
    kill -CONT "${pid[$new]}"
    wait_until 60 "the paused leader $new to learn that it no longer leads (its log)" \
        grep -q "box $new is no longer the fleet's leader" "$work/$new/log"
    [ "$(leader_of "$new")" = "" ] || fail "two leaders: $new and $third"
    note "$third deposed the paused $new"
    out=$(timeout 60 "$sbx" --config "$work/$third/sbx.conf" queue) || fail "sbx queue on $third"
    has "$out" -q "leader (autoscaler) $third" || fail "sbx queue does not name the leader $third: $out"
    wait_ended "$(sql "SELECT count(*) FROM jobs")" 120
    echo "fleet: one leader ($lead, then $new, then $third) alerted $(grep -c "^alert" "$work/calls") job(s) and scaled once; the spend cap held"
    ;;
docker)
    # the real Docker provider: two boxes on the test engine, real sandboxes
    : "${SBX_TEST_DOCKER_HOST:?the docker case needs SBX_TEST_DOCKER_HOST=unix://... (scripts/test.sh starts a test engine)}"
    export DOCKER_HOST=$SBX_TEST_DOCKER_HOST
    engine=${SBX_TEST_DOCKER_HOST#unix://}
    # this test's scope (docs/testing.md): every sandbox the boxes make carries
    # sbx.test=<scope>, and only those are counted or swept as orphans
    export SBX_TEST_LABEL=${SBX_TEST_LABEL:-fleet-$$}
    for b in b1 b2; do
        mkdir -p "$work/$b"
        cat >"$work/$b/sbx.conf" <<EOF
state_dir = "$work/$b";
limits = { cpus = 0.25; memory = "128M"; idle = "1h"; };
box = { id = "$b"; pools = ["ci", "agent"]; max_sandboxes = 4; };
runner = { database = "$SBX_TEST_PG_DSN"; database_password_env = "SBX_TEST_PG_PASSWORD";
           lease = 5; };
EOF
        start $b
    done
    for b in b1 b2; do wait_socket $b; done
    for i in $(seq 1 6); do
        if [ $((i % 2)) = 0 ]; then echo "d$i ci echofleet-$i"; else echo "d$i agent echofleet-$i"; fi
    done | submit "$work/b1/runner.sock" "$work/b2/runner.sock" || fail "submit"
    wait_ended 6 120
    fin=$(sql "SELECT count(*) FROM jobs WHERE state = 'finished' AND exit_status = 0 AND provider = 'docker' AND ready_at > 0")
    [ "$fin" = 6 ] || fail "$fin of 6 finished in a Docker sandbox ($(sql "SELECT id, state, provider, reason FROM jobs" | tr '\n' ' '))"
    twice=$(grep -h "granted a" "$work"/b*/log | sed 's/.*job \([^ ]*\) granted.*/\1/' | sort | uniq -d | wc -l)
    [ "$twice" = 0 ] || fail "$twice job(s) were granted twice"
    # each job's output, on the box that ran it
    for id in $(sql "SELECT id FROM jobs"); do
        box=$(sql "SELECT box FROM jobs WHERE id = '$id'")
        n=$(sql "SELECT substring(labels from 'd([0-9]+)') FROM jobs WHERE id = '$id'")
        out=$(curl -s --unix-socket "$work/$box/runner.sock" "http://localhost/v1/jobs/$id/output")
        has "$out" -q "fleet-$n" || fail "job $id (d$n) on $box: output '$out'"
    done
    # (added, issue 30) a kept task's files, a tar of them, pause and resume,
    # and a terminal, through the box that does not hold the task
    api b1 POST /v1/jobs '{"argv": ["true"], "pool": "agent", "task": "dk1"}' >/dev/null
    dk1_ready() { [ -n "$(sql "SELECT box FROM tasks WHERE id = 'dk1' AND state = 'ready'")" ]; }
    wait_until 120 "task dk1 to be ready" dk1_ready
    owner=$(sql "SELECT box FROM tasks WHERE id = 'dk1' AND state = 'ready'")
    other=b1
    [ "$owner" = b1 ] && other=b2
    via() { # BOX METHOD PATH [curl args]: the HTTP code; the body in $work/via.out
        local b=$1 m=$2 p=$3
        shift 3
        curl -sS -m 60 --unix-socket "$work/$b/runner.sock" -X "$m" -o "$work/via.out" \
            -w '%{http_code}' "$@" "http://sbx$p"
    }
    head -c 200000 /dev/urandom >"$work/note.bin"
    code=$(via $other PUT '/v1/tasks/dk1/files?path=/tmp/note.bin' --data-binary "@$work/note.bin")
    [ "$code" = 200 ] || fail "PUT a file of dk1 through $other: HTTP $code $(cat "$work/via.out")"
    for b in $other $owner; do
        code=$(via $b GET '/v1/tasks/dk1/files?path=/tmp/note.bin')
        [ "$code" = 200 ] && cmp -s "$work/via.out" "$work/note.bin" ||
            fail "GET the file of dk1 through $b: HTTP $code, $(wc -c <"$work/via.out") bytes"
    done
    code=$(via $other GET '/v1/tasks/dk1/files?path=/tmp/note.bin&archive=1')
    [ "$code" = 200 ] && tar -xOf "$work/via.out" note.bin | cmp -s - "$work/note.bin" ||
        fail "GET a tar of dk1's file through $other: HTTP $code"
    code=$(via $other POST /v1/tasks/dk1/pause)
    [ "$code" = 200 ] || fail "pause dk1 through $other: HTTP $code $(cat "$work/via.out")"
    code=$(via $other POST /v1/tasks/dk1/resume)
    [ "$code" = 200 ] || fail "resume dk1 through $other: HTTP $code $(cat "$work/via.out")"
    python3 - "$work/$other/runner.sock" <<'PY' || fail "the terminal of dk1 through $other (above)"
import json, socket, struct, sys
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/tasks/dk1/terminal HTTP/1.1\r\nHost: sbx\r\nConnection: Upgrade\r\n"
          b"Upgrade: sbx-terminal.v2\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    b = s.recv(1)
    if not b:
        sys.exit("no 101: %r" % head)
    head += b
if not head.startswith(b"HTTP/1.1 101"):
    sys.exit("not a 101: %r %r" % (head, s.recv(4096)))
def frame(t, b):
    s.sendall(t + b"\0\0\0" + struct.pack(">I", len(b)) + b)
frame(b"R", json.dumps({"argv": ["sh", "-c", "read x; echo got-$x; exit 3"]}).encode())
frame(b"I", b"hello\n")
buf, shown = b"", b""
while True:
    while len(buf) >= 8 and len(buf) >= 8 + struct.unpack(">I", buf[4:8])[0]:
        n = struct.unpack(">I", buf[4:8])[0]
        t, data, buf = buf[:1], buf[8:8 + n], buf[8 + n:]
        if t == b"O":
            shown += data
        elif t == b"X":
            x = json.loads(data)
            if x.get("status") != 3 or b"got-hello" not in shown:
                sys.exit("the terminal: %r, shown %r" % (x, shown))
            print("fleet: the terminal of dk1 through the other box: %r" % x)
            sys.exit(0)
    b = s.recv(65536)
    if not b:
        sys.exit("the relay ended before the 'X' frame (shown %r)" % shown)
    buf += b
PY
    api b1 POST /v1/tasks/dk1/end >/dev/null
    dk1_gone() { [ -z "$(sql "SELECT box FROM tasks WHERE id = 'dk1' AND state IN ('starting', 'ready')")" ]; }
    wait_until 120 "task dk1 to end" dk1_gone
    stop_all
    left=$(curl -s --unix-socket "$engine" "http://localhost/containers/json?all=1&filters=%7B%22label%22%3A%5B%22sbx.task%22%2C%22sbx.test%3D$SBX_TEST_LABEL%22%5D%7D")
    [ "$left" = "[]" ] || fail "sbx containers left on the engine: $left"
    echo "fleet: 6 jobs in Docker sandboxes over 2 boxes, each ended once; task dk1 on $owner: a file, a tar, pause, resume and a terminal through $other"
    ;;
fwd)
    # (added) a job running on b2 read, followed and cancelled through b1's
    # API: the request is forwarded to b2 and its answer relayed; one hop only
    two_boxes
    id=$(api b1 POST /v1/jobs '{"argv": ["fake-drip", "16", "100"], "pool": "agent"}' | jid)
    wait_state "$id" 'running|finished' 30
    [ "$(sql "SELECT box FROM jobs WHERE id = '$id'")" = b2 ] || fail "job $id is not on b2"
    "$sbx" --config "$work/b1/sbx.conf" job --follow "$id" >"$work/f1.out" 2>"$work/f1.err" &
    f1=$!
    "$sbx" --config "$work/b2/sbx.conf" job --follow "$id" >"$work/f2.out" 2>"$work/f2.err" &
    f2=$!
    wait_pid $f1 90 || fail "sbx job --follow through b1: exit $? ($(cat "$work/f1.err"))"
    wait_pid $f2 90 || fail "sbx job --follow on b2: exit $? ($(cat "$work/f2.err"))"
    [ "$(wc -l <"$work/f1.out")" = 8 ] || fail "follow through b1: $(wc -l <"$work/f1.out") stdout lines, want 8"
    cmp "$work/f1.out" "$work/f2.out" || fail "the followed stdout differs between b1 and b2"
    cmp "$work/f1.err" "$work/f2.err" || fail "the followed stderr differs between b1 and b2"
    for b in b1 b2; do
        curl -sS --unix-socket "$work/$b/runner.sock" -o "$work/$b.frames" -w '%{http_code}' \
            "http://sbx/v1/jobs/$id/output?frames=1" >"$work/$b.code"
        [ "$(cat "$work/$b.code")" = 200 ] || fail "output through $b: HTTP $(cat "$work/$b.code")"
    done
    cmp "$work/b1.frames" "$work/b2.frames" || fail "the output frames differ between b1 and b2"
    grep -q "is held by box b2: forwarding GET /v1/jobs/$id/output" "$work/b1/log" ||
        fail "b1 did not log its forward"
    # one hop: a request that says it was forwarded is answered, not forwarded
    code=$(curl -sS --unix-socket "$work/b1/runner.sock" -o "$work/loop.out" -w '%{http_code}' \
        -H 'X-Sbx-Forwarded-By: b3' -H 'X-Sbx-Client: local' -H 'X-Sbx-Scopes: 31' \
        "http://sbx/v1/jobs/$id/output")
    [ "$code" = 409 ] || fail "a forwarded request on b1: HTTP $code, want 409"
    grep -q "forwarded by box b3 and is not forwarded again" "$work/loop.out" ||
        fail "a forwarded request on b1: $(cat "$work/loop.out")"
    # (added, issue 25) the marker without the client it acts for: 400
    code=$(curl -sS --unix-socket "$work/b1/runner.sock" -o "$work/bare.out" -w '%{http_code}' \
        -H 'X-Sbx-Forwarded-By: b3' "http://sbx/v1/jobs/$id/output")
    [ "$code" = 400 ] || fail "a bare forward marker on b1: HTTP $code, want 400"
    n=$(grep -c "forwarding GET /v1/jobs/$id/output" "$work/b1/log")
    [ "$n" = 2 ] || fail "b1 forwarded $n output requests, want 2 (the marked one is not)"
    # a follow through b1 of a job still in the shared queue (b2, the only
    # agent box, paused for 1 s, well within its lease) waits for its claim
    kill -STOP "${pid[b2]}"
    id3=$(api b1 POST /v1/jobs '{"argv": ["fake-drip", "4", "10"], "pool": "agent"}' | jid)
    "$sbx" --config "$work/b1/sbx.conf" job --follow "$id3" >"$work/q.out" 2>"$work/q.err" &
    q=$!
    wait_until 30 "b1 to hold the follow of $id3 while it is queued (its log)" \
        grep -q "follow of job $id3 waits for its claim" "$work/b1/log"
    [ "$(sql "SELECT state || coalesce(box, '-') FROM jobs WHERE id = '$id3'")" = "queued-" ] ||
        fail "job $id3 was claimed while b2 was paused"
    kill -CONT "${pid[b2]}"
    wait_pid $q 90 || fail "follow of a queued job through b1: exit $? ($(cat "$work/q.err"))"
    [ "$(cat "$work/q.out")" = "$(printf 'line 0\nline 2')" ] || fail "follow of a queued job: '$(cat "$work/q.out")'"
    # cancel through b1 of a job that runs on b2
    id2=$(api b1 POST /v1/jobs '{"argv": ["fake-say-wait"], "pool": "agent"}' | jid)
    wait_state "$id2" running 30
    "$sbx" --config "$work/b1/sbx.conf" cancel "$id2" >/dev/null || fail "sbx cancel through b1"
    wait_state "$id2" cancelled 30
    grep -q "job $id2 cancelled" "$work/b2/log" || fail "b2 did not cancel $id2"
    echo "fleet: follow, output and cancel of a job on b2 through b1: identical bytes, cancelled"
    ;;
fwdtask)
    # (added) a kept task's next command, submitted to another box, runs in
    # the task's box; its end through another box ends it there
    three_boxes
    api b1 POST /v1/jobs '{"argv": ["hello"], "pool": "agent", "task": "kt1"}' >/dev/null
    task_is() { [ "$(sql "SELECT state FROM tasks WHERE id = 'kt1'")" = "$1" ]; }
    wait_until 60 "task kt1 to be ready" task_is ready
    owner=$(sql "SELECT box FROM tasks WHERE id = 'kt1' AND state = 'ready'")
    [ -n "$owner" ] || fail "task kt1 did not start"
    other=b3
    [ "$owner" = b3 ] && other=b2
    for b in b1 $other; do
        id=$(api $b POST /v1/jobs '{"argv": ["fake-env", "HOME"], "pool": "agent", "task": "kt1"}' | jid)
        wait_state "$id" finished 30
        box=$(sql "SELECT box FROM jobs WHERE id = '$id'")
        [ "$box" = "$owner" ] || fail "a command for task kt1 submitted to $b ran on $box, not on $owner"
    done
    n=$(sql "SELECT count(*) FROM tasks WHERE id = 'kt1'")
    [ "$n" = 1 ] || fail "$n task rows for kt1"
    task_routes "$owner"
    "$sbx" --config "$work/b1/sbx.conf" cancel --task kt1 >/dev/null || fail "sbx cancel --task through b1"
    wait_until 60 "task kt1 to end" task_is ended
    echo "fleet: task kt1 on $owner: commands through b1 and $other ran there; ended through b1"
    ;;
fwdkill)
    # (added) the owner killed while b1 relays its followed output: a clean
    # error, b1 goes on
    two_boxes
    id=$(api b1 POST /v1/jobs '{"argv": ["fake-say-wait"], "pool": "agent"}' | jid)
    wait_state "$id" running 30
    "$sbx" --config "$work/b1/sbx.conf" job --follow "$id" >"$work/f.out" 2>"$work/f.err" &
    f=$!
    wait_until 60 "the job's output ('waiting') through b1" grep -q waiting "$work/f.out"
    kill -9 "${pid[b2]}"
    wait "${pid[b2]}" 2>/dev/null || true
    unset "pid[b2]"
    # its socket gone while its lease still runs (a box stopped cleanly unlinks
    # it): the connect fails at once (ENOENT); b1 answers and goes on
    rm -f "$work/b2/runner.sock"
    code=$(curl -sS --unix-socket "$work/b1/runner.sock" -o "$work/n.out" -w '%{http_code}' \
        "http://sbx/v1/jobs/$id/output")
    { [ "$code" = 502 ] || [ "$code" = 503 ]; } || fail "output with the owner's socket gone: HTTP $code"
    kill -0 "${pid[b1]}" || fail "b1 died when the owner's socket was gone"
    echo "fleet: the owner's socket gone: HTTP $code $(cat "$work/n.out")"
    rc=0
    wait_pid $f 90 || rc=$?
    [ "$rc" != 0 ] || fail "the follow through b1 ended cleanly after its owner was killed"
    grep -q "box b2 went away in the middle of the output of job $id" "$work/f.err" ||
        fail "the follow through b1: $(cat "$work/f.err")"
    code=$(curl -sS --unix-socket "$work/b1/runner.sock" -o "$work/o.out" -w '%{http_code}' \
        "http://sbx/v1/jobs/$id/output?follow=1")
    { [ "$code" = 502 ] || [ "$code" = 503 ]; } || fail "output of a dead box's job: HTTP $code"
    grep -q "box b2" "$work/o.out" || fail "output of a dead box's job: $(cat "$work/o.out")"
    kill -0 "${pid[b1]}" || fail "b1 died"
    echo "fleet: owner killed mid-follow: '$(cat "$work/f.err")'; then HTTP $code"
    ;;
dbbench)
    pgdir=${SBX_TEST_PG_DSN##*host=}
    pgsock=$(ls "$pgdir"/.s.PGSQL.* | grep -v '\.lock$' | sed -n 1p)
    mkdir -p "$work/px"
    python3 "$(dirname "$0")/../../bench/pg_delay_proxy.py" "$work/px/$(basename "$pgsock")" \
        "$pgsock" "$work/px/delay" 2 &
    proxy=$!
    trap 'kill $proxy 2>/dev/null || true; cleanup' EXIT
    px_up() { [ -S "$work/px/$(basename "$pgsock")" ]; }
    wait_until 10 "the delaying proxy" px_up
    conf b1 '"ci"'
    sed -i "s|host=$pgdir|host=$work/px|; s/lease = 2;/lease = 8; database_timeout = 1;/" "$work/b1/sbx.conf"
    # (added) b2, on the database directly, holds kept task kt1: b1 forwards
    # its task routes there once its store thread has read kt1's box
    conf b2 '"agent"'
    sed -i 's/lease = 2;/lease = 8; database_timeout = 1;/' "$work/b2/sbx.conf"
    start b1
    start b2
    wait_socket b1
    wait_socket b2
    kt=$(api b2 POST /v1/jobs '{"argv": ["hello"], "pool": "agent", "task": "kt1"}' | jid)
    wait_state "$kt" finished 60
    kt1_ready() { [ "$(sql "SELECT box || ' ' || state FROM tasks WHERE id = 'kt1'")" = "b2 ready" ]; }
    wait_until 30 "task kt1 to be ready on b2" kt1_ready
    python3 - "$work/b1/runner.sock" "$work/px/delay" "$work/accepted" <<'PY'
import http.client, json, os, socket, sys, threading, time
sock, flag, accepted = sys.argv[1:4]
class U(http.client.HTTPConnection):
    def __init__(self):
        super().__init__("localhost", timeout=60)
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(60)
        self.sock.connect(sock)
def call(c, method, path, body=None):
    t = time.monotonic()
    c.request(method, path, body, {"Content-Type": "application/json"} if body else {})
    r = c.getresponse()
    data = r.read()
    return (time.monotonic() - t) * 1000, r.status, data
ids = []
FWD = "GET task fwd"  # (added) /v1/tasks/kt1/files through b1 to b2 (fwd_owner.c)
def phase(name, secs):
    lat = {"GET /healthz": [], "GET /": [], "GET /v1/jobs/ID": [], "POST /v1/jobs": [], FWD: []}
    codes = {}
    fcodes = {}
    stop = time.monotonic() + secs
    def forwarder():
        c = U()
        while time.monotonic() < stop:
            ms, code, _ = call(c, "GET", "/v1/tasks/kt1/files?path=/etc/hostname")
            lat[FWD].append(ms)
            fcodes[code] = fcodes.get(code, 0) + 1
            time.sleep(0.05)
    def submitter():
        c = U()
        while time.monotonic() < stop:
            ms, code, data = call(c, "POST", "/v1/jobs", json.dumps({"argv": ["hello"], "pool": "ci"}))
            lat["POST /v1/jobs"].append(ms)
            codes[code] = codes.get(code, 0) + 1
            if code == 201:
                ids.append(json.loads(data)["id"])
            time.sleep(0.05)
    th = threading.Thread(target=submitter)
    th.start()
    tf = threading.Thread(target=forwarder)
    tf.start()
    c = U()
    while time.monotonic() < stop:
        for route, path in (("GET /healthz", "/healthz"), ("GET /", "/"),
                            ("GET /v1/jobs/ID", "/v1/jobs/" + (ids[0] if ids else "j-000000000000"))):
            ms, code, _ = call(c, "GET", path)
            lat[route].append(ms)
        time.sleep(0.02)
    th.join()
    tf.join()
    out = {}
    for route, v in lat.items():
        v.sort()
        p = lambda q: v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")
        out[route] = (p(0.5), p(0.99), len(v), v[-1] if v else float("nan"))
    print("dbbench: %s: submits by HTTP code %s; task routes forwarded (501: the fake's answer from b2) %s" %
          (name, json.dumps(codes, sort_keys=True), json.dumps(fcodes, sort_keys=True)))
    return out
healthy = phase("healthy", 8)
open(flag, "w").close()
delayed = phase("delayed 2 s", 12)
os.unlink(flag)
print("dbbench: route             healthy p50/p99/max ms        delayed p50/p99/max ms        p99 ratio")
for route in healthy:
    h, d = healthy[route], delayed[route]
    print("dbbench: %-18s %7.1f / %7.1f / %7.1f    %7.1f / %7.1f / %7.1f    %6.1fx  (n %d, %d)" %
          (route, h[0], h[1], h[3], d[0], d[1], d[3], d[1] / h[1] if h[1] else float("nan"), h[2], d[2]))
open(accepted, "w").write("\n".join(ids))
PY
    store_ok() { curl -sS -m 10 --unix-socket "$work/b1/runner.sock" http://sbx/healthz | grep '"store":"ok"' >/dev/null; }
    wait_until 60 "/healthz to say the store is ok again" store_ok
    n=$(wc -l <"$work/accepted")
    for id in $(cat "$work/accepted"); do wait_state "$id" finished 60; done
    echo "dbbench: every accepted job ($((n + 1))) finished"
    ;;
dbstall)
    conf b1 '"ci"'
    sed -i 's/lease = 2;/lease = 8; database_timeout = 1;/' "$work/b1/sbx.conf"
    start b1
    wait_socket b1
    ids=""
    for i in 1 2; do
        ids="$ids $(api b1 POST /v1/jobs '{"argv": ["sleep", "2500"], "pool": "ci"}' | jid)"
    done
    for id in $ids; do wait_state "$id" "running|finished" 30; done
    # the stall: a session holds the jobs table until it is terminated
    PGAPPNAME=sbxstall PGPASSWORD=$SBX_TEST_PG_PASSWORD "$bindir/psql" -X -q "$SBX_TEST_PG_DSN" \
        -c "BEGIN; LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(600); COMMIT;" \
        >/dev/null 2>&1 &
    locker=$!
    locked() {
        [ "$(sql "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'jobs' AND l.mode = 'AccessExclusiveLock' AND l.granted")" = 1 ]
    }
    wait_until 30 "the jobs table to be locked" locked
    ms() { echo $((($(date +%s%N) - $1) / 1000000)); }
    # (changed) the first requests of the stall: a submit is handed to the
    # store thread and waits on the lock; while it does, GET / and /healthz
    # answer within fast_ms (the loop never waits on the database; before
    # the store thread they waited with the submit, about 1 s)
    fast_ms=${SBX_TEST_STALL_FAST_MS:-100}
    t0=$(date +%s%N)
    curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -D "$work/s.head" -o "$work/s.out" \
        -w '%{http_code}' -d '{"argv": ["hello"], "pool": "ci"}' http://sbx/v1/jobs >"$work/s.code" &
    submitter=$!
    waiting() { # a statement of the box waits on the lock (the submit's or a claim's)
        [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND application_name <> 'sbxstall'")" -ge 1 ]
    }
    wait_until 30 "a statement of b1 to wait on the lock" waiting
    kill -0 "$submitter" 2>/dev/null || fail "the stalled submit was answered before its statement waited"
    first_p=$(curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -o /dev/null \
        -w '%{http_code} %{time_total}' http://sbx/)
    first_h=$(curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -o "$work/h.out" \
        -w '%{http_code} %{time_total}' http://sbx/healthz)
    in_flight=0
    kill -0 "$submitter" 2>/dev/null && in_flight=1
    wait "$submitter" || fail "the stalled submit: curl failed"
    submit_ms=$(ms "$t0")
    code=$(cat "$work/s.code")
    first_p_ms=$(awk '{printf "%d", $2 * 1000}' <<<"$first_p")
    first_h_ms=$(awk '{printf "%d", $2 * 1000}' <<<"$first_h")
    echo "fleet: the stall's first requests: GET / $first_p_ms ms, /healthz $first_h_ms ms (the submit still waiting: $in_flight); the submit 503 in $submit_ms ms"
    case "${first_p%% *}" in 2??|3??) ;; *) fail "the first GET / of the stall: HTTP ${first_p%% *}" ;; esac
    # (its probe may not have met the stall yet: 200 or 503, at once either way)
    case "${first_h%% *}" in 200|503) ;; *) fail "the first /healthz of the stall: HTTP ${first_h%% *}" ;; esac
    [ "$first_p_ms" -lt "$fast_ms" ] || fail "the first GET / of the stall took $first_p_ms ms (a store call waited on the lock; target $fast_ms ms)"
    [ "$first_h_ms" -lt "$fast_ms" ] || fail "the first /healthz of the stall took $first_h_ms ms (a store call waited on the lock; target $fast_ms ms)"
    [ "$code" = 503 ] || fail "a submit with the database stalled: HTTP $code ($(cat "$work/s.out"))"
    [ "$(wc -l <"$work/s.out")" = 1 ] || fail "the stalled submit's 503: not one line"
    grep -qi '^Retry-After:' "$work/s.head" || fail "the stalled submit's 503 has no Retry-After"
    # its deadline: runner.database_timeout + 1 s = 2 s, from the hand-over
    [ "$submit_ms" -lt 3000 ] || fail "the stalled submit took $submit_ms ms (deadline 2000)"
    worst_h=0
    worst_p=0
    for i in 1 2 3 4 5; do
        t0=$(date +%s%N)
        code=$(curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -o "$work/h.out" -w '%{http_code}' \
            http://sbx/healthz)
        t=$(ms "$t0")
        [ "$t" -gt "$worst_h" ] && worst_h=$t
        [ "$code" = 503 ] || fail "/healthz with the database stalled: HTTP $code ($(cat "$work/h.out"))"
        t0=$(date +%s%N)
        code=$(curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -o /dev/null -w '%{http_code}' \
            http://sbx/)
        t=$(ms "$t0")
        [ "$t" -gt "$worst_p" ] && worst_p=$t
        case "$code" in 2??|3??) ;; *) fail "GET / with the database stalled: HTTP $code" ;; esac
    done
    if grep -q '"store":"ok"' "$work/h.out"; then
        fail "/healthz says the stalled store is ok: $(cat "$work/h.out")"
    fi
    echo "fleet: database stalled: submit 503 in $submit_ms ms; /healthz worst $worst_h ms, GET / worst $worst_p ms (of 5)"
    [ "$worst_h" -lt 1000 ] || fail "/healthz took $worst_h ms with the database stalled"
    [ "$worst_p" -lt 1000 ] || fail "GET / took $worst_p ms with the database stalled"
    sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sbxstall'" >/dev/null
    wait_pid "$locker" 30 || true
    store_ok() { curl -sS -m 10 --unix-socket "$work/b1/runner.sock" http://sbx/healthz | grep '"store":"ok"' >/dev/null; }
    wait_until 30 "/healthz to say the store is ok again" store_ok
    after=$(api b1 POST /v1/jobs '{"argv": ["hello"], "pool": "ci"}' | jid)
    for id in $ids $after; do wait_state "$id" finished 60; done
    # (added) a silent database: the box's backends stopped (SIGSTOP), no
    # answer at all (statement_timeout cannot fire): the submit is answered
    # 503 within its deadline (the loop's timer or the thread's own
    # deadline, whichever is first), GET / at once meanwhile; once they go
    # on, the store is ok again and a new job finishes
    pids=$(sql "SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND pid <> pg_backend_pid()")
    [ -n "$pids" ] || fail "no backend of b1 to stop"
    kill -STOP $pids
    t0=$(date +%s%N)
    curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -D "$work/s.head" -o "$work/s.out" \
        -w '%{http_code}' -d '{"argv": ["hello"], "pool": "ci"}' http://sbx/v1/jobs >"$work/s.code" &
    submitter=$!
    first_p=$(curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -o /dev/null \
        -w '%{http_code} %{time_total}' http://sbx/)
    wait "$submitter" || { kill -CONT $pids; fail "the silent submit: curl failed"; }
    submit_ms=$(ms "$t0")
    kill -CONT $pids
    first_p_ms=$(awk '{printf "%d", $2 * 1000}' <<<"$first_p")
    echo "fleet: database silent: the submit 503 in $submit_ms ms ($(cat "$work/s.out")); GET / meanwhile $first_p_ms ms"
    [ "$(cat "$work/s.code")" = 503 ] || fail "a submit with the database silent: HTTP $(cat "$work/s.code") ($(cat "$work/s.out"))"
    grep -qi '^Retry-After:' "$work/s.head" || fail "the silent submit's 503 has no Retry-After"
    [ "$submit_ms" -lt 3000 ] || fail "the silent submit took $submit_ms ms (deadline 2000)"
    [ "$first_p_ms" -lt "$fast_ms" ] || fail "GET / with the database silent took $first_p_ms ms (target $fast_ms ms)"
    wait_until 30 "/healthz to say the store is ok again" store_ok
    after2=$(api b1 POST /v1/jobs '{"argv": ["hello"], "pool": "ci"}' | jid)
    wait_state "$after2" finished 60
    curl -sS -m 10 --unix-socket "$work/b1/runner.sock" http://sbx/metrics >"$work/m.out"
    grep -q '^sbx_store_thread_calls_total{how="handed"} [1-9]' "$work/m.out" ||
        fail "/metrics: no store thread calls: $(grep sbx_store_thread "$work/m.out")"
    echo "fleet: database stall ended: the 2 accepted jobs and a new one finished; $(grep '^sbx_store_thread' "$work/m.out" | tr '\n' ' ')"
    # (added) a forwarded task route while the database stalls: b2 holds
    # kept task kt1; b1's read of the box that holds it (a call of the
    # store thread, fwd_owner.c) waits on a lock of the tasks table (which
    # nothing else of the boxes reads now); meanwhile b1's GET / and
    # /healthz answer within fast_ms (before, that read ran on the loop:
    # they waited with it), the route is answered 503 within its deadline,
    # and once the lock is gone it reaches b2 again
    conf b2 '"ci", "agent"'
    sed -i 's/lease = 2;/lease = 8; database_timeout = 1;/' "$work/b2/sbx.conf"
    start b2
    wait_socket b2
    kt=$(api b2 POST /v1/jobs '{"argv": ["hello"], "pool": "agent", "task": "kt1"}' | jid)
    wait_state "$kt" finished 60
    kt1_ready() { [ "$(sql "SELECT box || ' ' || state FROM tasks WHERE id = 'kt1'")" = "b2 ready" ]; }
    wait_until 30 "task kt1 to be ready on b2" kt1_ready
    PGAPPNAME=sbxstall PGPASSWORD=$SBX_TEST_PG_PASSWORD "$bindir/psql" -X -q "$SBX_TEST_PG_DSN" \
        -c "BEGIN; LOCK TABLE tasks IN ACCESS EXCLUSIVE MODE; SELECT pg_sleep(600); COMMIT;" \
        >/dev/null 2>&1 &
    locker=$!
    tasks_locked() {
        [ "$(sql "SELECT count(*) FROM pg_locks l JOIN pg_class c ON c.oid = l.relation WHERE c.relname = 'tasks' AND l.mode = 'AccessExclusiveLock' AND l.granted")" = 1 ]
    }
    wait_until 30 "the tasks table to be locked" tasks_locked
    t0=$(date +%s%N)
    curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -D "$work/f.head" -o "$work/f.out" \
        -w '%{http_code}' 'http://sbx/v1/tasks/kt1/files?path=/etc/hostname' >"$work/f.code" &
    getter=$!
    lookup_waits() { # b1's read of kt1's box waits on the lock
        [ "$(sql "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%FROM tasks t LEFT JOIN boxes%'")" -ge 1 ]
    }
    wait_until 30 "b1's read of task kt1's box to wait on the lock" lookup_waits
    kill -0 "$getter" 2>/dev/null || fail "the stalled task route was answered before its read waited"
    # a client of a port preview (relayed: fwd_tunnel.c, the same lookup)
    # that gives up while its lookup waits behind that one: its answer, when
    # the read is back, goes nowhere (no crash, no sanitizer report)
    curl -sS -m 0.3 --unix-socket "$work/b1/runner.sock" -o /dev/null \
        'http://sbx/v1/tasks/kt1/ports/8080/' 2>/dev/null &
    quitter=$!
    first_p=$(curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -o /dev/null \
        -w '%{http_code} %{time_total}' http://sbx/)
    first_h=$(curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -o /dev/null \
        -w '%{http_code} %{time_total}' http://sbx/healthz)
    in_flight=0
    kill -0 "$getter" 2>/dev/null && in_flight=1
    wait "$getter" || fail "the stalled task route: curl failed"
    route_ms=$(ms "$t0")
    wait "$quitter" 2>/dev/null || true
    first_p_ms=$(awk '{printf "%d", $2 * 1000}' <<<"$first_p")
    first_h_ms=$(awk '{printf "%d", $2 * 1000}' <<<"$first_h")
    echo "fleet: a forwarded task route stalled: GET / $first_p_ms ms, /healthz $first_h_ms ms meanwhile (the route still waiting: $in_flight); the route $(cat "$work/f.code") in $route_ms ms ($(cat "$work/f.out"))"
    case "${first_p%% *}" in 2??|3??) ;; *) fail "GET / while a task route's read waits: HTTP ${first_p%% *}" ;; esac
    case "${first_h%% *}" in 200|503) ;; *) fail "/healthz while a task route's read waits: HTTP ${first_h%% *}" ;; esac
    [ "$first_p_ms" -lt "$fast_ms" ] || fail "GET / while a task route's read waited took $first_p_ms ms (target $fast_ms ms)"
    [ "$first_h_ms" -lt "$fast_ms" ] || fail "/healthz while a task route's read waited took $first_h_ms ms (target $fast_ms ms)"
    [ "$(cat "$work/f.code")" = 503 ] || fail "a task route with the database stalled: HTTP $(cat "$work/f.code") ($(cat "$work/f.out"))"
    grep -qi '^Retry-After:' "$work/f.head" || fail "the stalled task route's 503 has no Retry-After"
    [ "$route_ms" -lt 3000 ] || fail "the stalled task route took $route_ms ms (deadline 2000)"
    sql "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'sbxstall'" >/dev/null
    wait_pid "$locker" 30 || true
    wait_until 30 "/healthz to say the store is ok again" store_ok
    code=$(curl -sS -m 60 --unix-socket "$work/b1/runner.sock" -o "$work/f.out" -w '%{http_code}' \
        'http://sbx/v1/tasks/kt1/files?path=/etc/hostname')
    [ "$code" = 501 ] && grep -q "provider 'fake' cannot read files" "$work/f.out" ||
        fail "GET files of kt1 through b1 after the stall: HTTP $code $(cat "$work/f.out")"
    echo "fleet: the stall over, the task route through b1 reached b2 again"
    stop_all
    ;;
db503)
    # (added) PostgreSQL stopped: the API answers 503 with one line, at once;
    # started again: what was accepted finishes, new submits run
    conf b1 '"ci"'
    conf b2 '"ci", "agent"'
    sed -i 's/lease = 2;/lease = 8;/' "$work/b1/sbx.conf" "$work/b2/sbx.conf"
    for b in b1 b2; do start $b; done
    for b in b1 b2; do wait_socket $b; done
    ids=""
    for i in 1 2 3 4; do
        ids="$ids $(api b$((i % 2 + 1)) POST /v1/jobs '{"argv": ["sleep", "3500"], "pool": "ci"}' | jid)"
    done
    # running (or, on a slow machine, already done: a later one was still
    # being claimed while an earlier one ran its 3.5 s)
    for id in $ids; do wait_state "$id" "running|finished" 30; done
    $SBX_TEST_PG_CTL stop
    t0=$(date +%s%N)
    code=$(curl -sS -m 20 --unix-socket "$work/b1/runner.sock" -o "$work/s.out" -w '%{http_code}' \
        -d '{"argv": ["hello"]}' http://sbx/v1/jobs)
    [ "$code" = 503 ] || fail "a submit with the database down: HTTP $code ($(cat "$work/s.out"))"
    [ "$(wc -l <"$work/s.out")" = 1 ] || fail "a submit with the database down: not one line"
    grep -q '"error":"the database is unavailable' "$work/s.out" || fail "submit: $(cat "$work/s.out")"
    set -- $ids
    code=$(curl -sS -m 20 --unix-socket "$work/b2/runner.sock" -o "$work/g.out" -w '%{http_code}' \
        "http://sbx/v1/jobs/$1")
    [ "$code" = 503 ] || fail "a GET with the database down: HTTP $code ($(cat "$work/g.out"))"
    t1=$(date +%s%N)
    [ $(((t1 - t0) / 1000000)) -lt 5000 ] || fail "the 503s took $(((t1 - t0) / 1000000)) ms"
    # the running jobs end while the database is down
    wait_until 30 "jobs$ids to end (their end lines in the boxes' logs)" ended_in_logs $ids
    $SBX_TEST_PG_CTL start
    after=$(api b1 POST /v1/jobs '{"argv": ["hello"], "pool": "ci"}' | jid)
    for id in $ids $after; do wait_state "$id" finished 30; done
    echo "fleet: database down: submit and GET answered 503 in $(((t1 - t0) / 1000000)) ms; all 5 jobs finished"
    ;;
fwdbad)
    # (added) a client that reads slower than the owner sends: b1's relay
    # pauses once 1 MiB waits for it, and resumes. Then a hostile owner (b2's
    # row pointed at a fake server): a huge head, garbage, a stream cut short,
    # an endless body: b1 answers each with one bounded error and goes on
    conf b1 '"ci"'
    conf b2 '"ci", "agent"'
    SBX_LOG_LEVEL=debug "$sbx" --config "$work/b1/sbx.conf" serve >>"$work/b1/log" 2>&1 &
    pid[b1]=$!
    start b2
    for b in b1 b2; do wait_socket $b; done
    id=$(api b1 POST /v1/jobs '{"argv": ["fake-drip", "400000", "0"], "pool": "agent"}' | jid)
    got=$(python3 - "$work/b1/runner.sock" "$id" "$work/b1/log" <<'PY'
import socket, sys, time
s = socket.socket(socket.AF_UNIX)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/jobs/%s/output?follow=1&frames=1 HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2].encode())
# reads nothing until b1's relay paused for it (its log), 60 s at most
want = "forward of job %s from box b2 paused" % sys.argv[2]
end = time.monotonic() + 60
while want not in open(sys.argv[3], errors="replace").read():
    if time.monotonic() > end:
        sys.exit("waited 60 s for b1's log to say: " + want)
    time.sleep(0.1)
n = 0
tail = b""  # the stream's last bytes: the last chunk may come in a read of its own
s.settimeout(30)
while True:
    d = s.recv(65536)
    if not d:
        break
    n += len(d)
    tail = (tail + d)[-7:]
    if tail.endswith(b"\r\n0\r\n\r\n"):
        break
print(n)
PY
)
    [ "$got" -gt 1048576 ] || fail "the slow client got $got bytes"
    grep -q "forward of job $id from box b2 paused: [0-9]* bytes wait for the client" "$work/b1/log" ||
        fail "b1's relay did not pause for the slow client"
    grep -q "forward of job $id from box b2 resumed" "$work/b1/log" || fail "b1's relay did not resume"
    wait_state "$id" finished 60
    id=$(api b1 POST /v1/jobs '{"argv": ["fake-wait"], "pool": "agent"}' | jid)
    wait_state "$id" running 30
    # (added) a kept task on b2 for the relayed terminal and ports below
    api b1 POST /v1/jobs '{"argv": ["hello"], "pool": "agent", "task": "kt9"}' >/dev/null
    kt9_ready() { [ "$(sql "SELECT box FROM tasks WHERE id = 'kt9' AND state = 'ready'")" = b2 ]; }
    wait_until 60 "task kt9 to be ready on b2" kt9_ready
    python3 - "$work/evil.sock" <<'PY' &
import os, socket, sys, threading
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(sys.argv[1])
srv.listen(16)
def serve(c):
    try:
        head = b""
        while b"\r\n\r\n" not in head:
            d = c.recv(4096)
            if not d:
                return
            head += d
        line = head.split(b"\r\n")[0].decode()
        if "/terminal" in line:  # (added) an echo terminal: 101, then every byte back
            c.sendall(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: sbx-terminal.v2\r\n"
                      b"Connection: Upgrade\r\n\r\n" + head.split(b"\r\n\r\n", 1)[1])
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
        elif "/ports/1/refuse" in line:  # (added) an answer that is not a 101 or a page
            c.sendall(b'HTTP/1.1 403 Forbidden\r\nContent-Length: 17\r\n\r\n{"error":"no"}\n\n\n')
        elif "/ports/1/silent" in line:  # (added) closes without a byte
            pass
        elif "/ports/1/early" in line:  # (added, issue 31) an older owner's 103 before the page
            c.sendall(b"HTTP/1.1 103 Early Hints\r\nContent-Security-Policy: sandbox\r\n\r\n"
                      b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n<script>")
        elif "/ports/1/keep" in line:  # (added, issue 31) an older owner: no CSP, kept alive
            c.sendall(b"HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: timeout=9\r\n"
                      b"Content-Length: 2\r\n\r\nhi")
        elif "/ports/1/badhead" in line:  # (added, issue 31) a bare LF in the head
            c.sendall(b"HTTP/1.1 200 OK\nContent-Length: 2\n\nhi")
        elif "mode=head" in line:
            c.sendall(b"HTTP/1.1 200 OK\r\nX-A: " + b"a" * 200000 + b"\r\n\r\n")
        elif "mode=garbage" in line:
            c.sendall(b"\x00\xff\xfe garbage\r\n\r\n")
        elif "mode=cut" in line:
            c.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/vnd.sbx.output-frames\r\n"
                      b"Transfer-Encoding: chunked\r\n\r\nd\r\n\x01\x00\x00\x00\x00\x00\x00\x05hello\r\n")
        else:  # the cancel: a body without end
            c.sendall(b"HTTP/1.1 202 OK\r\nContent-Length: 999999999\r\n\r\n")
            for _ in range(400):
                c.sendall(b"x" * 8192)
    except OSError:
        pass
    finally:
        c.close()
# it ends once its socket file is gone (the case removes it; cleanup removes
# the work dir on any failure): $! may be a python3 wrapper that a kill leaves
# the server behind
srv.settimeout(1)
while os.path.exists(sys.argv[1]):
    try:
        c, _ = srv.accept()
    except socket.timeout:
        continue
    c.settimeout(None)
    threading.Thread(target=serve, args=(c,), daemon=True).start()
PY
evil=$!
wait_until 30 "the hostile owner's socket" test -S "$work/evil.sock"
sql "UPDATE boxes SET api = 'unix:$work/evil.sock' WHERE id = 'b2'"
get() { curl -sS -m 30 --unix-socket "$work/b1/runner.sock" -o "$work/bad.out" -w '%{http_code}' "$@"; }
code=$(get "http://sbx/v1/jobs/$id/output?mode=head")
[ "$code" = 502 ] && grep -q "larger than 16384 bytes" "$work/bad.out" ||
    fail "a huge head: HTTP $code $(head -c 300 "$work/bad.out")"
code=$(get "http://sbx/v1/jobs/$id/output?mode=garbage")
[ "$code" = 502 ] && grep -q "box b2 holds job $id and did not answer: the owner's reply does not start with an HTTP/1.x status line" "$work/bad.out" ||
    fail "garbage: HTTP $code $(head -c 300 "$work/bad.out")"
code=$(get "http://sbx/v1/jobs/$id/output?follow=1&frames=1&mode=cut")
[ "$code" = 200 ] && grep -aq "hello{\"error\":\"box b2 went away in the middle of the output of job $id" "$work/bad.out" ||
    fail "a cut stream: HTTP $code $(head -c 300 "$work/bad.out")"
code=$(get -X POST "http://sbx/v1/jobs/$id/cancel")
[ "$code" = 502 ] && grep -q "larger than 1 MiB" "$work/bad.out" ||
    fail "an endless body: HTTP $code $(head -c 300 "$work/bad.out")"
# (added) a terminal relayed through b1 to an echo owner: 8 MiB each way
# (b1 pauses reading one side while 1 MiB waits for the other), byte for byte
python3 - "$work/b1/runner.sock" <<'PY' || fail "the relayed echo terminal (above)"
import hashlib, os, socket, sys, threading
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(60)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/tasks/kt9/terminal HTTP/1.1\r\nHost: sbx\r\nConnection: Upgrade\r\n"
          b"Upgrade: sbx-terminal.v2\r\n\r\n")
head = b""
while b"\r\n\r\n" not in head:
    d = s.recv(1)
    if not d:
        sys.exit("no answer: %r" % head)
    head += d
if not head.startswith(b"HTTP/1.1 101"):
    sys.exit("not a 101: %r" % head)
data = os.urandom(8 << 20)
threading.Thread(target=s.sendall, args=(data,), daemon=True).start()
h = hashlib.sha256()
n = 0
while n < len(data):
    d = s.recv(1 << 16)
    if not d:
        sys.exit("the relay ended after %d of %d bytes" % (n, len(data)))
    h.update(d)
    n += len(d)
if h.digest() != hashlib.sha256(data).digest():
    sys.exit("the echo differs")
s.close()
print("fleet: 8 MiB through the relayed terminal and back, byte for byte")
PY
relay_ended() { grep -q "relay of the terminal of task kt9 to box b2 for client 'local' ended (8388608 bytes up, [0-9]* down): the client closed" "$work/b1/log"; }
wait_until 30 "b1 to end the terminal's relay when the client closed" relay_ended
code=$(get "http://sbx/v1/tasks/kt9/ports/1/refuse")
[ "$code" = 403 ] && grep -q '"error":"no"' "$work/bad.out" ||
    fail "an owner's 403 relayed: HTTP $code $(head -c 300 "$work/bad.out")"
code=$(get "http://sbx/v1/tasks/kt9/ports/1/silent")
[ "$code" = 502 ] && grep -q "box b2 holds task kt9 and did not answer: the owner closed the connection" "$work/bad.out" ||
    fail "an owner that closes at once: HTTP $code $(head -c 300 "$work/bad.out")"
# (added, issue 31) what an owner of an older sbx, or a bad one, may answer to
# a preview: an interim head is a 502 (its page would come without the CSP),
# a page without the CSP gets it and Connection: close from b1, a bad head is
# a 502 naming what
code=$(get "http://sbx/v1/tasks/kt9/ports/1/early")
[ "$code" = 502 ] && grep -q "the owner answered 'HTTP/1.1 103 Early Hints' to a preview (an interim answer)" "$work/bad.out" &&
    ! grep -q script "$work/bad.out" ||
    fail "an owner's 103 before a page: HTTP $code $(head -c 300 "$work/bad.out")"
code=$(get -D "$work/bad.head" "http://sbx/v1/tasks/kt9/ports/1/keep")
[ "$code" = 200 ] && [ "$(cat "$work/bad.out")" = hi ] &&
    [ "$(grep -ci '^Content-Security-Policy: sandbox allow-scripts' "$work/bad.head")" = 1 ] &&
    grep -qi '^Connection: close' "$work/bad.head" && ! grep -qi 'keep-alive' "$work/bad.head" ||
    fail "an owner's page without the CSP: HTTP $code $(cat "$work/bad.head")"
code=$(get "http://sbx/v1/tasks/kt9/ports/1/badhead")
[ "$code" = 502 ] && grep -q "the owner sent a bad reply head: a bare LF" "$work/bad.out" ||
    fail "an owner's head with a bare LF: HTTP $code $(head -c 300 "$work/bad.out")"
kill -0 "${pid[b1]}" || fail "b1 died"
# (added) b1 stops (SIGTERM) with a relayed terminal open: it ends the relay,
# exits 0, and frees everything (the sanitizer build checks its log)
python3 - "$work/b1/runner.sock" <<'PY' &
import socket, sys, time
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.connect(sys.argv[1])
s.sendall(b"GET /v1/tasks/kt9/terminal HTTP/1.1\r\nHost: sbx\r\nConnection: Upgrade\r\n"
          b"Upgrade: sbx-terminal.v2\r\n\r\n")
s.settimeout(60)
while s.recv(4096):  # until b1 closes it
    pass
PY
holder=$!
two_relays() { [ "$(grep -c "relay of the terminal of task kt9 from box b2 for client 'local': the owner answered 'HTTP/1.1 101" "$work/b1/log")" -ge 2 ]; }
wait_until 30 "a second relayed terminal on b1" two_relays
kill -TERM "${pid[b1]}"
rc=0
wait_pid "${pid[b1]}" 60 || rc=$?
unset "pid[b1]"
[ "$rc" = 0 ] || fail "b1 exited $rc after SIGTERM with a relayed terminal open"
grep -q "relay of the terminal of task kt9 to box b2 for client 'local' ended .*: the runner stopped" "$work/b1/log" ||
    fail "b1 stopped without ending the open relay"
wait_pid "$holder" 30 || fail "the terminal's client was not closed when b1 stopped"
rm -f "$work/evil.sock"
kill "$evil"
wait "$evil" 2>/dev/null || true
"$sbx" --config "$work/b2/sbx.conf" cancel "$id" >/dev/null || fail "cancel on b2"
wait_state "$id" cancelled 30
echo "fleet: a hostile owner: huge head, garbage, a cut stream and an endless body: one bounded error each; a relayed terminal and ports as said"
    ;;
fwdtcp)
    # (added) boxes on TCP: the caller's own bearer token goes to the owner,
    # which checks it; scopes hold across the hop; a request from the unix
    # socket has no token to forward to a TCP owner
    read -r p1 p2 < <(python3 -c 'import socket
s = [socket.socket() for _ in range(2)]
[x.bind(("127.0.0.1", 0)) for x in s]
print(*[x.getsockname()[1] for x in s])')
    export SBX_FWD_TOKEN_CI=ci-$RANDOM$RANDOM$RANDOM SBX_FWD_TOKEN_RO=ro-$RANDOM$RANDOM$RANDOM
    conf b1 '"ci"'
    conf b2 '"ci", "agent"'
    for b in b1 b2; do
        port=$p1
        [ $b = b2 ] && port=$p2
        sed -i "s|lease = 2; };|lease = 2; listen = \"tcp:127.0.0.1:$port\"; clients = ( { name = \"ci\"; token_env = \"SBX_FWD_TOKEN_CI\"; scopes = [\"submit\", \"read-own\", \"exec\"]; }, { name = \"ro\"; token_env = \"SBX_FWD_TOKEN_RO\"; scopes = [\"read-own\"]; } ); };|" "$work/$b/sbx.conf"
        start $b
    done
    for b in b1 b2; do wait_socket $b; done
    tcp() { # port token method path [body]
        curl -sS -m 60 -o "$work/tcp.out" -w '%{http_code}' -X "$3" -H "Authorization: Bearer $2" \
            ${5:+-H 'Content-Type: application/json' -d "$5"} "http://127.0.0.1:$1$4"
    }
    code=$(tcp $p1 "$SBX_FWD_TOKEN_CI" POST /v1/jobs '{"argv": ["fake-drip", "10", "100"], "pool": "agent"}')
    [ "$code" = 201 ] || fail "submit over TCP: HTTP $code $(cat "$work/tcp.out")"
    id=$(jid <"$work/tcp.out")
    wait_state "$id" 'running|finished' 30
    [ "$(sql "SELECT box || ' ' || client FROM jobs WHERE id = '$id'")" = "b2 ci" ] || fail "job $id: $(sql "SELECT box, client FROM jobs WHERE id = '$id'")"
    code=$(tcp $p1 "$SBX_FWD_TOKEN_CI" GET "/v1/jobs/$id/output?follow=1")
    [ "$code" = 200 ] || fail "follow through b1 over TCP: HTTP $code"
    cp "$work/tcp.out" "$work/t1.out"
    code=$(tcp $p2 "$SBX_FWD_TOKEN_CI" GET "/v1/jobs/$id/output")
    cmp "$work/t1.out" "$work/tcp.out" || fail "the output through b1 over TCP differs from b2's"
    [ "$(grep -c '^line' "$work/t1.out")" = 10 ] || fail "follow through b1 over TCP: $(cat "$work/t1.out")"
    grep -q "forwarding GET /v1/jobs/$id/output?follow=1 for client 'ci' to tcp:127.0.0.1:$p2" "$work/b1/log" ||
        fail "b1 did not forward over TCP"
    code=$(tcp $p1 "$SBX_FWD_TOKEN_RO" GET "/v1/jobs/$id/output")
    [ "$code" = 403 ] || fail "another client's output through b1: HTTP $code, want 403"
    code=$(tcp $p1 wrong-token GET "/v1/jobs/$id/output")
    [ "$code" = 401 ] || fail "a wrong token on b1: HTTP $code, want 401"
    code=$(curl -sS --unix-socket "$work/b1/runner.sock" -o "$work/u.out" -w '%{http_code}' "http://sbx/v1/jobs/$id/output")
    [ "$code" = 502 ] && grep -q "no bearer token to forward" "$work/u.out" ||
        fail "the unix socket to a TCP owner: HTTP $code $(cat "$work/u.out")"
    code=$(tcp $p1 "$SBX_FWD_TOKEN_CI" POST /v1/jobs '{"argv": ["fake-wait"], "pool": "agent"}')
    id2=$(jid <"$work/tcp.out")
    wait_state "$id2" running 30
    code=$(tcp $p1 "$SBX_FWD_TOKEN_RO" POST "/v1/jobs/$id2/cancel")
    [ "$code" = 403 ] || fail "another client's cancel through b1: HTTP $code, want 403"
    code=$(tcp $p1 "$SBX_FWD_TOKEN_CI" POST "/v1/jobs/$id2/cancel")
    [ "$code" = 202 ] || fail "cancel through b1 over TCP: HTTP $code $(cat "$work/tcp.out")"
    wait_state "$id2" cancelled 30
    # (added) a kept task's port through b1 over TCP: the caller's token goes
    # along (the owner wants one on TCP); a client without exec gets 403 at b1
    code=$(tcp $p1 "$SBX_FWD_TOKEN_CI" POST /v1/jobs '{"argv": ["hello"], "pool": "agent", "task": "kt2"}')
    [ "$code" = 201 ] || fail "submit of task kt2 over TCP: HTTP $code $(cat "$work/tcp.out")"
    kt2_ready() { [ "$(sql "SELECT box FROM tasks WHERE id = 'kt2' AND state = 'ready'")" = b2 ]; }
    wait_until 60 "task kt2 to be ready on b2" kt2_ready
    www_start
    code=$(tcp $p1 "$SBX_FWD_TOKEN_CI" GET "/v1/tasks/kt2/ports/$port/page.bin")
    cmp -s "$work/tcp.out" "$work/www/page.bin" ||
        fail "a port of kt2 through b1 over TCP: HTTP $code, $(wc -c <"$work/tcp.out") bytes"
    code=$(tcp $p1 "$SBX_FWD_TOKEN_RO" GET "/v1/tasks/kt2/ports/$port/page.bin")
    [ "$code" = 403 ] || fail "a port of kt2 through b1 for a client without exec: HTTP $code"
    www_stop
    if grep -q "$SBX_FWD_TOKEN_CI\|$SBX_FWD_TOKEN_RO" "$work"/b*/log; then fail "a token in a box's log"; fi
    echo "fleet: over TCP: follow, cancel and a port through b1 with the caller's token; 403, 401 and the unix socket's 502 as said"
    ;;
taskdup)
    read -r p1 < <(python3 -c 'import socket
s = socket.socket()
s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')
    export SBX_TD_ALICE=al-$RANDOM$RANDOM$RANDOM SBX_TD_MALLORY=ma-$RANDOM$RANDOM$RANDOM
    conf b1 '"ci", "agent"'
    sed -i "s|max_sandboxes = 8; };|max_sandboxes = 8; heavy_min_memory = \"1G\"; };|; s|lease = 2; };|lease = 2; listen = \"tcp:127.0.0.1:$p1\"; clients = ( { name = \"alice\"; token_env = \"SBX_TD_ALICE\"; scopes = [\"submit\", \"read-own\"]; }, { name = \"mallory\"; token_env = \"SBX_TD_MALLORY\"; scopes = [\"submit\", \"read-own\"]; } ); };|" "$work/b1/sbx.conf"
    start b1
    wait_socket b1
    tcp() { # token method path [body]
        curl -sS -m 60 -o "$work/tcp.out" -w '%{http_code}' -X "$2" -H "Authorization: Bearer $1" \
            ${4:+-H 'Content-Type: application/json' -d "$4"} "http://127.0.0.1:$p1$3"
    }
    # the ci pool's heavy slot busy until h is cancelled
    code=$(tcp "$SBX_TD_ALICE" POST /v1/jobs '{"argv": ["fake-wait"], "pool": "ci", "class": "heavy"}')
    [ "$code" = 201 ] || fail "submit h: HTTP $code $(cat "$work/tcp.out")"
    h=$(jid <"$work/tcp.out")
    wait_state "$h" running 30
    # alice's job in task alice-deploy waits behind it, unclaimed
    code=$(tcp "$SBX_TD_ALICE" POST /v1/jobs '{"argv": ["fake-wait"], "pool": "ci", "class": "heavy", "task": "alice-deploy"}')
    [ "$code" = 201 ] || fail "submit a: HTTP $code $(cat "$work/tcp.out")"
    a=$(jid <"$work/tcp.out")
    [ "$(sql "SELECT state || coalesce(box, '-') FROM jobs WHERE id = '$a'")" = "queued-" ] ||
        fail "job $a is not waiting in the shared queue: $(sql "SELECT state, box FROM jobs WHERE id = '$a'")"
    # a second job of the task, light, as two boxes' submits at once leave it
    # (neither saw the other's): it passes the parked heavy one, claimed and
    # running at once
    sql "INSERT INTO jobs (id, task, pool, class, argv, cpus, memory, disk, pids, idle, max_life, state, queued_at, client) SELECT 'race-b', task, 'ci', 'light', '[\"fake-wait\"]', cpus, memory, disk, pids, idle, max_life, 'queued', queued_at + 1, client FROM jobs WHERE id = '$a'; NOTIFY sbx_queue"
    wait_state race-b running 30
    # the heavy slot frees: a may start only once race-b's task is gone
    [ "$(tcp "$SBX_TD_ALICE" POST "/v1/jobs/$h/cancel")" = 202 ] || fail "cancel h: $(cat "$work/tcp.out")"
    wait_state "$h" cancelled 30
    # two of b1's beats (each renews, then claims) after h ended
    beat_after_h() { [ "$(sql "SELECT count(*) FROM boxes b, jobs j WHERE b.id = 'b1' AND j.id = '$h' AND b.heartbeat > j.finished_at + 1500")" = 1 ]; }
    wait_until 60 "two beats of b1 after $h ended" beat_after_h
    a_then=$(sql "SELECT state FROM jobs WHERE id = '$a'")
    # race-b's task ends first, then a runs and is cancelled (before the fix:
    # the first task end freed a's task, and its cancel used it)
    [ "$(tcp "$SBX_TD_ALICE" POST /v1/jobs/race-b/cancel)" = 202 ] || fail "cancel race-b: $(cat "$work/tcp.out")"
    wait_state race-b cancelled 30
    wait_state "$a" running 30
    [ "$(tcp "$SBX_TD_ALICE" POST "/v1/jobs/$a/cancel")" = 202 ] || fail "cancel a: $(cat "$work/tcp.out")"
    wait_state "$a" cancelled 30
    kill -0 "${pid[b1]}" 2>/dev/null || fail "b1 died"
    grep -q "AddressSanitizer" "$work/b1/log" && fail "a sanitizer report in b1's log"
    [ "$a_then" = queued ] || fail "job $a of task alice-deploy was $a_then while race-b of the task ran"
    overlap=$(sql "SELECT count(*) FROM jobs x, jobs y WHERE x.id = '$a' AND y.id = 'race-b' AND x.granted_at < y.finished_at AND y.granted_at < x.finished_at")
    [ "$overlap" = 0 ] || fail "two jobs of task alice-deploy ran at once on one box"
    # over the API: mallory naming alice's (ended) task: 403, nothing stored;
    # alice's own second job while her first one waits: 409
    code=$(tcp "$SBX_TD_MALLORY" POST /v1/jobs '{"argv": ["sleep", "10"], "pool": "agent", "task": "alice-deploy"}')
    [ "$code" = 403 ] && grep -q "task alice-deploy belongs to another client" "$work/tcp.out" ||
        fail "mallory in alice's task: HTTP $code $(cat "$work/tcp.out"), want 403"
    [ "$(sql "SELECT count(*) FROM jobs WHERE client = 'mallory'")" = 0 ] || fail "mallory's job was stored"
    code=$(tcp "$SBX_TD_ALICE" POST /v1/jobs '{"argv": ["fake-wait"], "pool": "ci", "class": "heavy"}')
    h2=$(jid <"$work/tcp.out")
    wait_state "$h2" running 30
    code=$(tcp "$SBX_TD_ALICE" POST /v1/jobs '{"argv": ["sleep", "10"], "pool": "ci", "class": "heavy", "task": "alice-2"}')
    [ "$code" = 201 ] || fail "submit alice-2: HTTP $code $(cat "$work/tcp.out")"
    code=$(tcp "$SBX_TD_ALICE" POST /v1/jobs '{"argv": ["sleep", "10"], "pool": "agent", "task": "alice-2"}')
    [ "$code" = 409 ] && grep -q "task alice-2 is still queued" "$work/tcp.out" ||
        fail "alice's second job while the first waits: HTTP $code $(cat "$work/tcp.out"), want 409"
    code=$(tcp "$SBX_TD_MALLORY" POST /v1/jobs '{"argv": ["sleep", "10"], "pool": "agent", "task": "alice-2"}')
    [ "$code" = 403 ] || fail "mallory in alice's queued task: HTTP $code, want 403"
    [ "$(tcp "$SBX_TD_ALICE" POST "/v1/jobs/$h2/cancel")" = 202 ] || fail "cancel h2: $(cat "$work/tcp.out")"
    wait_ended 5 30
    echo "fleet: one task id, two jobs: never at once, each ended once; mallory 403, alice 409"
    ;;
*)
    fail "unknown case '$case_'"
    ;;
esac
stop_all
