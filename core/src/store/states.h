/* states.h - the transitions of a job's record and of a task's, one table
 * each. The store refuses a write the table does not allow (move.c, task.c:
 * their SQL names the same states, from the macros below) and the runner
 * checks its records in memory against the same rows (runner/jobstate.c).
 * docs/architecture.md, "One state machine per record". */
#ifndef SBX_STORE_STATES_H
#define SBX_STORE_STATES_H

#include "store/store.h"

#define SBX_STATE_BIT(s) (1u << (unsigned)(s))

/* The states a write leaves, as its SQL says them; tests/unit/test_states.c
 * checks that each names exactly the states of its row's `from`. */
#define SBX_FROM_QUEUED_SQL "state = 'queued'"
#define SBX_FROM_RUNNING_SQL "state = 'running'"
#define SBX_FROM_JOB_LIVE_SQL "state IN ('queued', 'running')"
#define SBX_FROM_TASK_LIVE_SQL "state IN ('starting', 'ready')"

/* A job's record: each step of sbx_store_job_move(), the states it leaves
 * and those it may enter. A record is created queued (sbx_store_job_insert)
 * and its end is final. */
struct sbx_job_edge {
    enum sbx_job_step step;
    const char *name;
    unsigned from;        /* SBX_STATE_BIT of each state the step leaves */
    unsigned to;          /* ... and of each state it may enter */
    const char *from_sql; /* `from` in the step's WHERE */
    const char *want;     /* `from` in its error: "job J is S, not WANT" */
};

static const struct sbx_job_edge sbx_job_edges[] = {
    {SBX_JOB_STEP_GRANTED, "granted", SBX_STATE_BIT(SBX_JOB_QUEUED), SBX_STATE_BIT(SBX_JOB_RUNNING),
     SBX_FROM_QUEUED_SQL, "queued"},
    {SBX_JOB_STEP_READY, "ready", SBX_STATE_BIT(SBX_JOB_RUNNING), SBX_STATE_BIT(SBX_JOB_RUNNING),
     SBX_FROM_RUNNING_SQL, "running"},
    {SBX_JOB_STEP_END, "end", SBX_STATE_BIT(SBX_JOB_QUEUED) | SBX_STATE_BIT(SBX_JOB_RUNNING),
     SBX_STATE_BIT(SBX_JOB_FINISHED) | SBX_STATE_BIT(SBX_JOB_CANCELLED) |
         SBX_STATE_BIT(SBX_JOB_INTERRUPTED),
     SBX_FROM_JOB_LIVE_SQL, "queued or running"},
};
#define SBX_JOB_EDGES (sizeof(sbx_job_edges) / sizeof(sbx_job_edges[0]))

/* The row of step, or NULL for an unknown step. */
static inline const struct sbx_job_edge *sbx_job_edge_of(enum sbx_job_step step)
{
    for (size_t i = 0; i < SBX_JOB_EDGES; i++) {
        if (sbx_job_edges[i].step == step) {
            return &sbx_job_edges[i];
        }
    }
    return NULL;
}

/* 1 when step may move a job's record from `from` to `to`. */
static inline int sbx_job_step_ok(enum sbx_job_step step, int from, int to)
{
    const struct sbx_job_edge *e = sbx_job_edge_of(step);

    return e != NULL && from >= SBX_JOB_QUEUED && from <= SBX_JOB_INTERRUPTED &&
           to >= SBX_JOB_QUEUED && to <= SBX_JOB_INTERRUPTED &&
           (e->from & SBX_STATE_BIT(from)) != 0 && (e->to & SBX_STATE_BIT(to)) != 0;
}

/* A task's record: created by sbx_store_task_put() (starting, or ready for a
 * warm sandbox claimed at once; a put replaces the row), then these. */
enum sbx_task_step {
    SBX_TASK_STEP_READY, /* starting -> ready: its sandbox is up (a put) */
    SBX_TASK_STEP_EXEC,  /* starting|ready: an exec starts or ends (sbx_store_task_exec) */
    SBX_TASK_STEP_END,   /* starting|ready -> ended|interrupted (sbx_store_task_end) */
};

struct sbx_task_edge {
    enum sbx_task_step step;
    const char *name;
    unsigned from, to;
    const char *from_sql; /* NULL: the write is a put, not conditional */
};

static const struct sbx_task_edge sbx_task_edges[] = {
    {SBX_TASK_STEP_READY, "ready", SBX_STATE_BIT(SBX_TASK_STARTING), SBX_STATE_BIT(SBX_TASK_READY),
     NULL},
    {SBX_TASK_STEP_EXEC, "exec", SBX_STATE_BIT(SBX_TASK_STARTING) | SBX_STATE_BIT(SBX_TASK_READY),
     SBX_STATE_BIT(SBX_TASK_STARTING) | SBX_STATE_BIT(SBX_TASK_READY), SBX_FROM_TASK_LIVE_SQL},
    {SBX_TASK_STEP_END, "end", SBX_STATE_BIT(SBX_TASK_STARTING) | SBX_STATE_BIT(SBX_TASK_READY),
     SBX_STATE_BIT(SBX_TASK_ENDED) | SBX_STATE_BIT(SBX_TASK_INTERRUPTED), SBX_FROM_TASK_LIVE_SQL},
};
#define SBX_TASK_EDGES (sizeof(sbx_task_edges) / sizeof(sbx_task_edges[0]))

static inline const struct sbx_task_edge *sbx_task_edge_of(enum sbx_task_step step)
{
    for (size_t i = 0; i < SBX_TASK_EDGES; i++) {
        if (sbx_task_edges[i].step == step) {
            return &sbx_task_edges[i];
        }
    }
    return NULL;
}

/* 1 when step may move a task's record from `from` to `to`. */
static inline int sbx_task_step_ok(enum sbx_task_step step, int from, int to)
{
    const struct sbx_task_edge *e = sbx_task_edge_of(step);

    return e != NULL && from >= SBX_TASK_STARTING && from <= SBX_TASK_INTERRUPTED &&
           to >= SBX_TASK_STARTING && to <= SBX_TASK_INTERRUPTED &&
           (e->from & SBX_STATE_BIT(from)) != 0 && (e->to & SBX_STATE_BIT(to)) != 0;
}

#endif
