/* rjob.h - (added, issue 31) a job as the runner holds it in memory (queued,
 * running, or recently ended): struct rjob, opaque (rjob.c). It replaces
 * records.h, where its fields were public. A follow of a job's output is
 * api.c's, its kept output output.c's (output.h), a task rtask.c's
 * (rtask.h), the table of jobs jobtab.c's (jobs.h).
 *
 * Locking: nothing here locks. The request (struct rjob_req) is filled by the
 * code that makes the job, before the job is linked into the table or handed
 * to a worker, and never changes after: read it anywhere. Everything else is
 * under the runner's lock (runner_lock, r->mu) unless its comment says
 * otherwise: "loop only" (the loop thread alone reads and writes it), or
 * atomic (any thread, no lock). A job's state changes in runner_job_move
 * alone (jobstate.h). */
#ifndef SBX_RUNNER_RJOB_H
#define SBX_RUNNER_RJOB_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "sandbox/task.h"
#include "sched/sched.h"
#include "store/store.h"

struct rjob;
struct rtask;
struct sbx_task;
struct runner_stream;
struct runner_output;

/* What the job was asked to run: set when it is made, never changed after. */
struct rjob_req {
    char id[SBX_SCHED_ID_MAX];
    char task[SBX_SCHED_ID_MAX];
    char owner[64]; /* the client that submitted it ("": from before clients) */
    enum sbx_pool pool;
    enum sbx_job_class cls;
    int cls_given; /* the request named the class (an override of the policy) */
    char **argv;
    char *worktree, *provider, *credentials;
    /* (added, issue 30) the snapshot id the request named, or NULL */
    char *from;
    json_t *env; /* the command's variables (object NAME -> value), or NULL */
};

/* A new job: an empty request, no state (its first move is RJOB_QUEUED or
 * RJOB_ADOPTED), its empty output (output.h). runner_job_free frees the job,
 * its request's strings, its output and its worktree events. */
struct rjob *runner_job_new(void);
void runner_job_free(struct rjob *j);

/* Its request (no lock). */
const struct rjob_req *rjob_req(const struct rjob *j);
/* The same, to fill: for the code that makes the job alone (api_submit.c's
 * parse, submit.c's owner and class, recover.c's record), before it is
 * linked (runner_job_link) or granted. Its pointers are the job's: freed by
 * runner_job_free. */
struct rjob_req *rjob_req_fill(struct rjob *j);
/* Its id (rjob_req(j)->id). */
const char *rjob_id(const struct rjob *j);

/* (added, issue 30) The image ref of the snapshot its request names
 * (`from`), once checked (api_snap.c) or recovered (recover.c): set before
 * the job is linked, NULL: the configured image. rjob_set_image takes image
 * (malloc'd) and frees the one before. */
const char *rjob_image(const struct rjob *j);
void rjob_set_image(struct rjob *j, char *image);

/* The scheduler's view of j: its policy limits and when it was queued (0:
 * now). One shape for a submit, a claim and a recovered job. */
struct sbx_sched_job runner_sched_job(const struct rjob *j, double cpus, int64_t memory,
                                      int64_t enqueued_at);

/* Its state (enum sbx_job_state), under r->mu; before its first move (see
 * rjob_fsm) it reads as a zeroed job's did. */
int rjob_state(const struct rjob *j);
/* 0: new, before its first move (jobstate.h's RJOB_NEW), under r->mu. */
int rjob_has_state(const struct rjob *j);
/* Its command's exit status once finished (-1: none), under r->mu. */
int rjob_exit_status(const struct rjob *j);

/* The cancel flag: atomic, runner_job_cancel / runner_job_cancelled
 * (jobstate.h). Its address, for sbx_task_start's poll (struct
 * sbx_task_opts.cancel), which reads it while the sandbox starts. */
const volatile int *rjob_cancel_flag(const struct rjob *j);

/* Its exec in flight (its worker, under r->mu): rjob_slot is valid. */
int rjob_executing(const struct rjob *j);
void rjob_set_executing(struct rjob *j, int executing);
/* The exec's slot, for sbx_task_exec and sbx_task_exec_cancel. */
struct sbx_exec_slot *rjob_slot(struct rjob *j);
/* Under r->mu: cancels its exec in flight, if any (executing, in a task with
 * its sandbox): sbx_task_exec_cancel of its slot. */
void rjob_cancel_exec(struct rjob *j);

/* Loop only: no worker refers to it any more (set once, never cleared). */
int rjob_released(const struct rjob *j);
void rjob_release(struct rjob *j);
/* (added) Loop only: its grant is with the store thread (runner.c). */
int rjob_granting(const struct rjob *j);
void rjob_set_granting(struct rjob *j, int granting);

/* The task it runs in, set at its grant (or recovery), under r->mu. */
struct rtask *rjob_rtask(const struct rjob *j);
void rjob_set_rtask(struct rjob *j, struct rtask *t);

/* (added) A warm sandbox taken at its grant, for its worker, or NULL.
 * rjob_take_warm hands it over (the job holds none after). */
struct sbx_task *rjob_warm(const struct rjob *j);
void rjob_set_warm(struct rjob *j, struct sbx_task *warm);
struct sbx_task *rjob_take_warm(struct rjob *j);

/* (added) A fleet box's claim token: every store write about the job is
 * fenced by it (0: one box, unfenced). Set when the claim makes the job,
 * before it is linked. */
int64_t rjob_token(const struct rjob *j);
void rjob_set_token(struct rjob *j, int64_t token);
/* (added) The box lost its claim to a reap, under r->mu (set once). */
int rjob_lost(const struct rjob *j);
void rjob_mark_lost(struct rjob *j);

/* (changed, issue 31) Its kept output (output.h, opaque): made and freed
 * with the job, under r->mu. */
struct runner_output *rjob_output(const struct rjob *j);

/* Loop only: the head of its follows' list (api.c's, opaque). */
struct runner_stream **rjob_streams(struct rjob *j);

/* (added, issue 31) What its task's worktree checks found by the end of its
 * command (sbx_task_worktree_events), under r->mu; NULL: none. In memory
 * only: GET /v1/jobs/ID adds it as "worktree_events" while the job is held.
 * rjob_set_wt_events takes the reference (and drops the one before). */
json_t *rjob_wt_events(const struct rjob *j);
void rjob_set_wt_events(struct rjob *j, json_t *events);

/* (added, issue 31) sbx_runner_opts.output_wait, under r->mu: the loop sets
 * how many follow its output (followers) and the lowest offset
 * (runner_output_total terms) they all wrote out (acked); the worker asks
 * how much of the output is written out: acked while followed, all of it
 * once every follow went, 0 before one came. The follows' (api.c) and the
 * worker's (worker.c) concern, not the output's. */
void rjob_set_follows(struct rjob *j, size_t acked, int followers);
size_t rjob_output_acked(const struct rjob *j);

/* For runner_job_move alone (jobstate.c): its place in the state machine,
 * written there and nowhere else (tests/unit/check_state_moves.sh), and what
 * a move sets with it. */
struct rjob_fsm {
    int state;     /* enum sbx_job_state */
    int has_state; /* 0: new, before its first move (jobstate.h) */
};
struct rjob_fsm *rjob_fsm(struct rjob *j);
void rjob_set_exit_status(struct rjob *j, int exit_status);

/* The table's list (jobs.h, struct runner_jobtab.jobs), newest first: the
 * job after j, under r->mu. */
struct rjob *rjob_next(const struct rjob *j);
/* For the table (jobtab.c) alone: the links of its list and of its hash's
 * bucket, to link and unlink j. */
struct rjob **rjob_list_link(struct rjob *j);
struct rjob **rjob_hash_link(struct rjob *j);

#endif
