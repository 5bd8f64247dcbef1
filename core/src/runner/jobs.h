/* jobs.h - the runner's jobs and tasks in memory and the loop's messages
 * (runner.c, jobtab.c). */
#ifndef SBX_RUNNER_JOBS_H
#define SBX_RUNNER_JOBS_H

#include <stdint.h>

#include "sched/sched.h"
#include "store/store.h"

struct sbx_runner;
struct rjob;
struct rtask;
struct event_base;

/* (changed) The job table (jobtab.c): the jobs in memory, newest first, with
 * a hash of them by id (O(1) lookups with long queues), and the tasks. The
 * runner's is under its lock (runner_lock); the table takes none itself. */
#define RUNNER_BUCKETS 4096
struct runner_jobtab {
    struct rjob *jobs; /* newest first, linked by next */
    size_t n_jobs;
    struct rjob *buckets[RUNNER_BUCKETS]; /* linked by hnext */
    struct rtask *tasks;                  /* (changed, issue 31) a list of rtask.h */
};

struct rjob *runner_jobtab_find(const struct runner_jobtab *tab, const char *id);
void runner_jobtab_link(struct runner_jobtab *tab, struct rjob *j);
struct rtask *runner_jobtab_task(const struct runner_jobtab *tab, const char *id);
void runner_jobtab_add_task(struct runner_jobtab *tab, struct rtask *t);
/* (added, issue 31) Takes t (by its address) out of the table; 0: not in it. */
int runner_jobtab_remove_task(struct runner_jobtab *tab, struct rtask *t);
/* Frees the ended jobs (released by the workers, followed by no stream) past
 * the newest keep; returns how many went. */
size_t runner_jobtab_trim(struct runner_jobtab *tab, size_t keep);

/* A worker's message to the loop. */
enum rmsg_kind { RMSG_JOB_DONE, RMSG_TASK_ENDED, RMSG_OUTPUT };

/* (added) jobtab.c: for the modules that do not see struct sbx_runner. The
 * lock of the jobs and tasks in memory (and of what rjob.h says is under
 * it); whether the runner stops (read under the lock); the loop's base. */
void runner_lock(struct sbx_runner *r);
void runner_unlock(struct sbx_runner *r);
int runner_stopping(struct sbx_runner *r);
struct event_base *runner_base(struct sbx_runner *r);

/* runner.c */
struct rjob *runner_job_find(struct sbx_runner *r, const char *id);
/* Adds a job to the list and the table (caller holds r->mu or is the loop
 * before workers exist). */
void runner_job_link(struct sbx_runner *r, struct rjob *j);
/* The task of id on this box: at most one exists (runner_schedule refuses a
 * second, docs/runner.md "Task ids"). */
struct rtask *runner_task_find(struct sbx_runner *r, const char *id);
void runner_post(struct sbx_runner *r, enum rmsg_kind kind, const char *id,
                 enum sbx_job_result result);
/* (added) RMSG_TASK_ENDED for t: the loop removes that task, found by its
 * address (two tasks of one id never live on one box, and a message must
 * not meet the wrong one if they did). */
void runner_post_task_ended(struct sbx_runner *r, struct rtask *t, enum sbx_job_result result);
void runner_schedule(struct sbx_runner *r);
int64_t runner_now(struct sbx_runner *r);
int runner_cancel(struct sbx_runner *r, const char *id, sbx_error_t **err);
int runner_task_end(struct sbx_runner *r, const char *id, sbx_error_t **err);
/* (added) Writes a job's end (fenced by token) on the store thread of a
 * fleet box, at once on one box; the loop does not wait for it. (changed,
 * issue 31) A job in memory ends by runner_job_move with .deferred, which
 * calls this after its check; called alone only for a record with no move
 * here: a claim this box refused, a grant written as the box stops. */
void runner_job_end_write(struct sbx_runner *r, const char *id, int64_t token,
                          enum sbx_job_state state, const char *why);
/* Drops the output of ended jobs past the newest 1000 (jobtab.c). Loop thread. */
void runner_trim_finished(struct sbx_runner *r);

#endif
