/* rtask.h - (added, issue 31) a task in the runner: one sandbox, shared by the
 * jobs that name it (struct rtask, opaque: rtask.c), and the job table's list
 * of tasks (jobs.h, struct runner_jobtab.tasks).
 *
 * Locking: nothing here locks. A task's id, holder, owner, pool and keep are
 * set by rtask_new and never change: read them anywhere. Everything else (its
 * state, sandbox, running count, end request, fail reason, holder's result)
 * and the list are read and written under the runner's lock (runner_lock,
 * r->mu), as rjob.h says of a job's; the exceptions are named
 * below. A task's state changes in runner_task_move alone (jobstate.h). */
#ifndef SBX_RUNNER_RTASK_H
#define SBX_RUNNER_RTASK_H

#include <jansson.h>

#include "sched/sched.h"

struct rtask;
struct sbx_task;

enum rtask_state { RT_STARTING, RT_READY, RT_FAILED, RT_ENDING };

/* What a task is created with. */
struct rtask_init {
    const char *id;
    const char *holder; /* the job whose sched slot the task holds */
    const char *owner;  /* the client of the job that started it (NULL, "": unknown) */
    enum sbx_pool pool;
    int keep; /* agent task: kept after its command */
    /* the result its slot is released with until its holder job ends
     * (rtask_job_ended): failed for a granted job, ok for an adopted task */
    enum sbx_job_result holder_result;
};

/* A new task: no state yet (its first move is RTASK_CREATED or RTASK_ADOPTED),
 * no sandbox, nothing running. Ids longer than SBX_SCHED_ID_MAX - 1 bytes
 * are cut, as they were. */
struct rtask *rtask_new(const struct rtask_init *in);
void rtask_free(struct rtask *t);

/* Set at creation: no lock. */
const char *rtask_id(const struct rtask *t);
const char *rtask_holder(const struct rtask *t);
const char *rtask_owner(const struct rtask *t);
int rtask_owned_by(const struct rtask *t, const char *client);
enum sbx_pool rtask_pool(const struct rtask *t);
int rtask_keep(const struct rtask *t);

/* Its state (RT_STARTING before its first move, as a zeroed task was). */
enum rtask_state rtask_state(const struct rtask *t);
/* Starting or ready: a new command for it may run in it. */
int rtask_takes_jobs(const struct rtask *t);
/* Ready with its sandbox: a request may hold it (rtask_enter) and use the
 * sandbox. */
int rtask_ready(const struct rtask *t);
/* The job `job` is the one to start t's sandbox: t is starting, has none yet,
 * and job holds its slot. */
int rtask_starts_for(const struct rtask *t, const char *job);
/* A kept task, ready, that runs nothing and is due to end: asked to
 * (rtask_request_end), the runner stopping, or its sandbox stopped (its own
 * idle or lifetime timer). */
int rtask_due_to_end(const struct rtask *t, int stopping);
const char *rtask_fail_reason(const struct rtask *t);

/* Its sandbox once ready (NULL: none, or taken). A thread that holds the
 * task (rtask_enter) may read it without the lock: it is not ended under it. */
struct sbx_task *rtask_sandbox(const struct rtask *t);
/* Takes the sandbox from t for its ender (nobody else reaches it after). */
struct sbx_task *rtask_take_sandbox(struct rtask *t);

/* The jobs executing or waiting in it, and the requests holding it (a
 * terminal, a snapshot, a file request): the task is not ended while any is
 * in. rtask_leave of a task nobody is in is a bug, as running-- was. */
void rtask_enter(struct rtask *t);
void rtask_leave(struct rtask *t);
int rtask_running(const struct rtask *t);

/* `sbx task end`: the tick ends it once nothing runs in it. */
void rtask_request_end(struct rtask *t);
int rtask_end_requested(const struct rtask *t);

/* The job `job` ended with result: kept as the slot's result when it is
 * the holder. */
void rtask_job_ended(struct rtask *t, const char *job, enum sbx_job_result result);
enum sbx_job_result rtask_holder_result(const struct rtask *t);

/* GET /v1/queue's entry for t: id, holder, pool, state, kept, running,
 * client. */
json_t *rtask_json(const struct rtask *t);

/* For runner_task_move alone (jobstate.c): its place in the state machine,
 * written there and nowhere else (tests/unit/check_state_moves.sh), and what
 * a move sets with it. */
struct rtask_fsm {
    enum rtask_state state;
    int has_state; /* 0: new, before its first move */
};
struct rtask_fsm *rtask_fsm(struct rtask *t);
void rtask_set_sandbox(struct rtask *t, struct sbx_task *sandbox);
void rtask_set_fail_reason(struct rtask *t, const char *reason);

/* The table's tasks: a list linked through them, newest first. */
struct rtask *rtask_next(const struct rtask *t);
void rtask_list_push(struct rtask **head, struct rtask *t);
/* The task of id in the list, or NULL. */
struct rtask *rtask_list_find(struct rtask *head, const char *id);
/* Takes t out of the list (by its address); 0 when it was not in it. */
int rtask_list_unlink(struct rtask **head, struct rtask *t);
/* Frees every task of the list (the runner's end; their sandboxes are not
 * ended here). */
void rtask_list_free(struct rtask **head);

#endif
