/* records.h - a job as the runner holds it in memory (struct rjob);
 * (changed) a follow of a job's output is api.c's, (changed, issue 31) a task
 * (struct rtask) is rtask.c's, opaque (rtask.h). States change in jobstate.c
 * alone (jobstate.h). */
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
    /* output: the last SBX_RUNNER_MAX_OUTPUT bytes, at out + out_off (read them
     * with runner_output_bytes); total counts all. The allocation (out_cap)
     * grows to twice the maximum, so dropping old bytes moves the kept ones only
     * once per maximum appended: amortised O(1) per byte, however small the
     * pieces (out_moved counts what compaction copied). */
    char *out;
    size_t out_off;
    size_t out_cap;
    size_t out_len;
    size_t out_total;
    size_t out_moved;
    /* which stream each byte came from: runs of one stream, alternating
     * stdout/stderr; seg[i] is the absolute (out_total terms) start of run i,
     * runs before seg_head are gone; run 0 is stream seg_first (1 or 2) */
    size_t *seg;
    size_t n_seg, seg_head, seg_cap;
    int seg_first;
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
     * the lowest offset (out_total terms) every follow stream has written out,
     * how many follow it, and whether one ever did */
    size_t out_acked;
    int followers;
    int followed;
};

/* A job's kept output: its bytes start here (worker.c). */
static inline const char *runner_output_bytes(const struct rjob *j)
{
    return j->out + j->out_off;
}

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
