/* records.h - a job as the runner holds it in memory (struct rjob);
 * (changed) a follow of a job's output is api.c's, its kept output
 * output.c's (opaque, output.h), (changed, issue 31) a task (struct rtask)
 * rtask.c's, opaque (rtask.h). States change in jobstate.c alone
 * (jobstate.h). */
#ifndef SBX_RUNNER_RECORDS_H
#define SBX_RUNNER_RECORDS_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "runner/runner.h"
#include "sandbox/task.h"
#include "store/store.h"

struct sbx_task;
struct runner_stream;
struct runner_output;
struct rtask;

/* A job the runner knows in memory (queued, running, or recently ended). */
struct rjob {
    char id[SBX_SCHED_ID_MAX];
    char task[SBX_SCHED_ID_MAX];
    char owner[64]; /* the client that submitted it ("": from before clients) */
    enum sbx_pool pool;
    enum sbx_job_class cls;
    int cls_given; /* the request named the class (an override of the policy) */
    char **argv;
    char *worktree, *provider, *credentials;
    /* (added, issue 30) `from`: the snapshot id the request named, and its image
     * ref once checked (api_snap.c); NULL: the configured image */
    char *from, *image;
    json_t *env;   /* the command's variables (object NAME -> value), or NULL */
    int state;     /* enum sbx_job_state, under r->mu; changed by runner_job_move alone */
    int has_state; /* 0: new, before its first move (jobstate.h) */
    int cancel;    /* atomic: runner_job_cancel / runner_job_cancelled (jobstate.h) */
    int executing; /* exec in flight: slot is valid */
    int released;  /* loop only: no worker refers to it any more */
    int granting;  /* (added) loop only: its grant is with the store thread (runner.c) */
    struct sbx_exec_slot slot;
    struct rtask *rt;
    struct sbx_task *warm; /* (added) a warm sandbox taken at the grant, for the worker */
    /* (changed, issue 31) its kept output (output.h, opaque): made and freed
     * with the job (runner_job_new, runner_job_free), under r->mu */
    struct runner_output *output;
    int exit_status;
    /* (added) a fleet box's claim token: every store write about the job is
     * fenced by it (0: one box, unfenced); lost: the box lost it to a reap */
    int64_t token;
    int lost;                      /* under r->mu */
    struct rjob *next;             /* r->jobs, newest first */
    struct rjob *hnext;            /* r->buckets */
    struct runner_stream *streams; /* loop only; the follows (api.c, opaque) */
    /* (added, issue 31) what its task's worktree checks found by the end of its
     * command (sbx_task_worktree_events), under r->mu; NULL: none. In memory
     * only: GET /v1/jobs/ID adds it as "worktree_events" while the job is held */
    json_t *wt_events;
    /* (added, issue 31) sbx_runner_opts.output_wait, under r->mu, set by the loop:
     * the lowest offset (runner_output_total terms) every follow stream has
     * written out, how many follow it, and whether one ever did: the follows'
     * (api.c) and the worker's (worker.c) concern, not the output's */
    size_t out_acked;
    int followers;
    int followed;
};

/* (added) The scheduler's view of j: its policy limits and when it was
 * queued (0: now). One shape for a submit, a claim and a recovered job. */
static inline struct sbx_sched_job runner_sched_job(const struct rjob *j, double cpus,
                                                    int64_t memory, int64_t enqueued_at)
{
    return (struct sbx_sched_job){
        .id = j->id,
        .task = j->task,
        .pool = j->pool,
        .cls = j->cls,
        .cpus = cpus,
        .memory = memory,
        .enqueued_at = enqueued_at,
    };
}

#endif
