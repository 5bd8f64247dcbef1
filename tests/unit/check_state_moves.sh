#!/usr/bin/env bash
# check_state_moves.sh SOURCE_DIR - one state machine per record
# (docs/architecture.md): a job's or a task's state in the runner is assigned
# in runner_job_move and runner_task_move alone (core/src/runner/jobstate.c).
# Fails, naming file and line, on any other `->state =` in the code that sees
# those records (core/src/runner and every file including runner/rjob.h or
# runner/state.h; (changed, issue 31) struct rjob is rjob.c's and struct
# rtask rtask.c's, both opaque, their states written through rjob_fsm() and
# rtask_fsm() by runner_job_move and runner_task_move alone).
set -euo pipefail
case "${1:-}" in
-h | --help)
    echo "usage: check_state_moves.sh SOURCE_DIR"
    exit 0
    ;;
"")
    echo "usage: check_state_moves.sh SOURCE_DIR" >&2
    exit 2
    ;;
esac
cd "$1"
# Not a record's state: the GET /v1/jobs filter (struct sbx_job_filter).
allowed='^core/src/runner/api_list\.c:[0-9]+:[[:space:]]*f->state = '
files=$( (ls core/src/runner/*.c core/src/runner/*.h; grep -rlE 'runner/(rjob|state)\.h' core fuzz) |
    sort -u | grep -v '^core/src/runner/jobstate\.c$')
bad=$(grep -nE -- '->state[[:space:]]*=([^=]|$)' $files | grep -vE "$allowed" || true)
if [ -n "$bad" ]; then
    echo "check_state_moves: a state assigned outside runner_job_move/runner_task_move" \
        "(core/src/runner/jobstate.h):" >&2
    echo "$bad" >&2
    exit 1
fi
# ... and in jobstate.c, only by the two setters the moves call
n=$(grep -cE -- '->state[[:space:]]*=([^=]|$)' core/src/runner/jobstate.c)
setters=$(grep -nE -- '->state[[:space:]]*=([^=]|$)' core/src/runner/jobstate.c |
    grep -cE '(f->state = \(int\)job_rows|f->state = \(enum rtask_state\)task_rows)' || true)
if [ "$n" != 2 ] || [ "$setters" != 2 ]; then
    echo "check_state_moves: core/src/runner/jobstate.c assigns a state $n times; only job_set" \
        "and task_set may" >&2
    exit 1
fi
echo "check_state_moves: no state assigned outside the two move functions" >&2
