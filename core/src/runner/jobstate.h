/* jobstate.h - one state machine per record (docs/architecture.md, "One
 * state machine per record"): a job's state and a task's change only in
 * runner_job_move() and runner_task_move(), under r->mu, checked against the
 * store's table (store/states.h), with the store write of the transition.
 * An illegal transition is refused and logged, never made. */
#ifndef SBX_RUNNER_JOBSTATE_H
#define SBX_RUNNER_JOBSTATE_H

#include <stdint.h>

#include "store/store.h"
#include "util/error.h"

struct sbx_runner;
struct rjob;
struct rtask;

/* A job with no state yet: before its first move (a new struct rjob). */
#define RJOB_NEW (-1)

enum rjob_event {
    RJOB_QUEUED,    /* new -> queued: submitted (the insert is the caller's), claimed, recovered */
    RJOB_ADOPTED,   /* new -> running: recovery runs it in its re-adopted task */
    RJOB_GRANTED,   /* queued -> running: a slot (store step granted) */
    RJOB_READY,     /* running -> running: its sandbox is up (store step ready) */
    RJOB_FINISHED,  /* queued|running -> finished (store step end) */
    RJOB_CANCELLED, /* queued|running -> cancelled (store step end) */
    RJOB_INTERRUPTED, /* queued|running -> interrupted (store step end) */
};
#define RJOB_EVENTS (RJOB_INTERRUPTED + 1)

/* What a move writes. NULL (or all zero): the step's write on the loop's
 * connection, fenced by the job's claim token; a failed write is logged and
 * the job moves anyway (its state in memory is what this box knows). */
struct rjob_move {
    struct sbx_store *st; /* the connection (a worker's own); NULL: r->store */
    int memory;           /* 1: no write (the record moved already, or a store call
                           * that is not a step wrote it: insert, claim, reap) */
    int strict;           /* 1: a failed write leaves the job as it was */
    /* (added, issue 31) 1: an end's write handed to the store thread after
     * the move (runner_sq_write; at once on one box), for the loop, which
     * never waits for a fleet's database; its failure is logged. Ends only
     * (RJOB_FINISHED with no exit status, RJOB_CANCELLED, RJOB_INTERRUPTED)
     * and their reason alone: with st, strict, retry, at, the egress counts
     * or the exec's fields the move is refused (EINVAL). */
    int deferred;
    int64_t at;                          /* ms of the step, 0: now */
    const char *task, *provider, *image; /* RJOB_READY (NULL keeps) */
    int exit_status;                     /* RJOB_FINISHED: -1 none (the others have none) */
    const char *reason;
    int64_t egress_allowed, egress_denied;
    /* an end written in one transaction with the exec's end (worker.c): the
     * task's exec in flight cleared (exec_task), how it ran (exec_path), all
     * of it written again while the database is down (runner_store_retry) */
    int retry;
    const char *exec_task;
    const char *exec_path;
};

/* 0: moved (and written); 1: moved, but the write failed (*err says why, or
 * it is logged when err is NULL); -1: refused, nothing written nor changed
 * (an illegal transition, logged, EINVAL; or a strict write that failed). */
int runner_job_move(struct sbx_runner *r, struct rjob *j, enum rjob_event ev,
                    const struct rjob_move *m, sbx_error_t **err);
/* The same with r->mu held by the caller: memory only (its write, if any,
 * is the caller's). 0 or -1 (refused, logged). */
int runner_job_move_held(struct sbx_runner *r, struct rjob *j, enum rjob_event ev);

/* The table, for tests and logs: 1 when ev may move a job in state from
 * (RJOB_NEW or enum sbx_job_state); the state it enters; the store step it
 * writes (-1: none). */
int runner_job_event_ok(int from, enum rjob_event ev);
enum sbx_job_state runner_job_event_to(enum rjob_event ev);
int runner_job_event_step(enum rjob_event ev);
const char *runner_job_event_name(enum rjob_event ev);

/* A task's states in memory (struct rtask, rtask.h): RT_STARTING,
 * RT_READY, RT_FAILED, RT_ENDING, or RTASK_NEW before its first move. */
#define RTASK_NEW (-1)

enum rtask_event {
    RTASK_CREATED, /* new -> starting: a grant made it (its row: the creator's put) */
    RTASK_ADOPTED, /* new -> ready: recovery re-adopted its sandbox */
    RTASK_READY,   /* starting -> ready: its sandbox is up (row: the job's ready batch) */
    RTASK_FAILED,  /* starting -> failed: the start failed (row: ended, written here) */
    RTASK_ENDING,  /* starting|ready|failed -> ending: its sandbox goes */
    RTASK_KEPT,    /* ending -> ready: no thread could end it; tried again later */
    RTASK_GONE,    /* ending -> ending: its sandbox is gone (row: ended, written here) */
};
#define RTASK_EVENTS (RTASK_GONE + 1)

struct sbx_task;
struct rtask_move {
    struct sbx_store *st; /* RTASK_FAILED, RTASK_GONE: the connection (NULL: no write) */
    const char *reason;   /* RTASK_FAILED (kept as its fail reason), RTASK_GONE */
    struct sbx_task *t;   /* RTASK_READY, RTASK_ADOPTED: the sandbox */
};

/* As runner_job_move, for a task; wakes the jobs waiting for it (r->cond). */
int runner_task_move(struct sbx_runner *r, struct rtask *t, enum rtask_event ev,
                     const struct rtask_move *m, sbx_error_t **err);
int runner_task_move_held(struct sbx_runner *r, struct rtask *t, enum rtask_event ev);

/* The task table, for tests: legal from state `from`; the state it enters;
 * the task row's step it stands for (-1: none) and the row's states before
 * and after (enum sbx_task_state). */
int runner_task_event_ok(int from, enum rtask_event ev);
int runner_task_event_to(enum rtask_event ev);
int runner_task_event_row(enum rtask_event ev, int *row_from, int *row_to);
const char *runner_task_event_name(enum rtask_event ev);

/* Flags the worker, the loop and the fleet share: atomic, so that a thread
 * reads them without r->mu (the sandbox's start polls cancel too). */
void runner_job_cancel(struct rjob *j);
int runner_job_cancelled(const struct rjob *j);

#endif
