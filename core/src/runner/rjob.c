/* rjob.c - (added, issue 31) a job in the runner (rjob.h): its request, its
 * state's place (written by runner_job_move alone), its flags and links. The
 * caller holds the runner's lock where rjob.h says so; nothing here locks. */
#include <stdlib.h>

#include "runner/hooks.h"
#include "runner/jobstate.h"
#include "runner/output.h"
#include "runner/rjob.h"
#include "runner/rtask.h"
#include "util/xalloc.h"

struct rjob {
    struct rjob_req req;
    char *image;         /* (added, issue 30) the `from` snapshot's image ref, or NULL */
    struct rjob_fsm fsm; /* changed by runner_job_move alone (jobstate.h) */
    int cancel;          /* atomic: runner_job_cancel / runner_job_cancelled */
    int executing;       /* exec in flight: slot is valid */
    int released;        /* loop only: no worker refers to it any more */
    int granting;        /* (added) loop only: its grant is with the store thread */
    struct sbx_exec_slot slot;
    struct rtask *rt;
    struct sbx_task *warm; /* (added) a warm sandbox taken at the grant, for the worker */
    struct runner_output *output;
    int exit_status;
    int64_t token;
    int lost;                      /* under r->mu */
    struct rjob *next;             /* the table's list, newest first */
    struct rjob *hnext;            /* the table's hash bucket */
    struct runner_stream *streams; /* loop only; the follows (api.c, opaque) */
    json_t *wt_events;
    size_t out_acked;
    int followers;
    int followed;
};

struct rjob *runner_job_new(void)
{
    struct rjob *j = xcalloc(1, sizeof(*j));

    j->output = runner_output_new();
    return j;
}

void runner_job_free(struct rjob *j)
{
    runner_strv_free(j->req.argv);
    free(j->req.worktree);
    free(j->req.provider);
    free(j->req.credentials);
    free(j->req.from);
    free(j->image);
    json_decref(j->req.env);
    json_decref(j->wt_events);
    runner_output_free(j->output);
    free(j);
}

const struct rjob_req *rjob_req(const struct rjob *j)
{
    return &j->req;
}

struct rjob_req *rjob_req_fill(struct rjob *j)
{
    return &j->req;
}

const char *rjob_id(const struct rjob *j)
{
    return j->req.id;
}

const char *rjob_image(const struct rjob *j)
{
    return j->image;
}

void rjob_set_image(struct rjob *j, char *image)
{
    free(j->image);
    j->image = image;
}

struct sbx_sched_job runner_sched_job(const struct rjob *j, double cpus, int64_t memory,
                                      int64_t enqueued_at)
{
    return (struct sbx_sched_job){
        .id = j->req.id,
        .task = j->req.task,
        .pool = j->req.pool,
        .cls = j->req.cls,
        .cpus = cpus,
        .memory = memory,
        .enqueued_at = enqueued_at,
    };
}

int rjob_state(const struct rjob *j)
{
    return j->fsm.state;
}

int rjob_has_state(const struct rjob *j)
{
    return j->fsm.has_state;
}

int rjob_exit_status(const struct rjob *j)
{
    return j->exit_status;
}

void runner_job_cancel(struct rjob *j)
{
    __atomic_store_n(&j->cancel, 1, __ATOMIC_RELEASE);
}

int runner_job_cancelled(const struct rjob *j)
{
    return __atomic_load_n(&j->cancel, __ATOMIC_ACQUIRE);
}

const volatile int *rjob_cancel_flag(const struct rjob *j)
{
    return &j->cancel;
}

int rjob_executing(const struct rjob *j)
{
    return j->executing;
}

void rjob_set_executing(struct rjob *j, int executing)
{
    j->executing = executing;
}

struct sbx_exec_slot *rjob_slot(struct rjob *j)
{
    return &j->slot;
}

void rjob_cancel_exec(struct rjob *j)
{
    if (j->executing && j->rt != NULL && rtask_sandbox(j->rt) != NULL) {
        sbx_task_exec_cancel(rtask_sandbox(j->rt), &j->slot);
    }
}

int rjob_released(const struct rjob *j)
{
    return j->released;
}

void rjob_release(struct rjob *j)
{
    j->released = 1;
}

int rjob_granting(const struct rjob *j)
{
    return j->granting;
}

void rjob_set_granting(struct rjob *j, int granting)
{
    j->granting = granting;
}

struct rtask *rjob_rtask(const struct rjob *j)
{
    return j->rt;
}

void rjob_set_rtask(struct rjob *j, struct rtask *t)
{
    j->rt = t;
}

struct sbx_task *rjob_warm(const struct rjob *j)
{
    return j->warm;
}

void rjob_set_warm(struct rjob *j, struct sbx_task *warm)
{
    j->warm = warm;
}

struct sbx_task *rjob_take_warm(struct rjob *j)
{
    struct sbx_task *warm = j->warm;

    j->warm = NULL;
    return warm;
}

int64_t rjob_token(const struct rjob *j)
{
    return j->token;
}

void rjob_set_token(struct rjob *j, int64_t token)
{
    j->token = token;
}

int rjob_lost(const struct rjob *j)
{
    return j->lost;
}

void rjob_mark_lost(struct rjob *j)
{
    j->lost = 1;
}

struct runner_output *rjob_output(const struct rjob *j)
{
    return j->output;
}

struct runner_stream **rjob_streams(struct rjob *j)
{
    return &j->streams;
}

json_t *rjob_wt_events(const struct rjob *j)
{
    return j->wt_events;
}

void rjob_set_wt_events(struct rjob *j, json_t *events)
{
    json_decref(j->wt_events);
    j->wt_events = events;
}

void rjob_set_follows(struct rjob *j, size_t acked, int followers)
{
    j->out_acked = acked;
    j->followers = followers;
    j->followed |= followers > 0;
}

size_t rjob_output_acked(const struct rjob *j)
{
    if (j->followers > 0) {
        return j->out_acked;
    }
    return j->followed ? runner_output_total(j->output) : 0;
}

struct rjob_fsm *rjob_fsm(struct rjob *j)
{
    return &j->fsm;
}

void rjob_set_exit_status(struct rjob *j, int exit_status)
{
    j->exit_status = exit_status;
}

struct rjob *rjob_next(const struct rjob *j)
{
    return j->next;
}

struct rjob **rjob_list_link(struct rjob *j)
{
    return &j->next;
}

struct rjob **rjob_hash_link(struct rjob *j)
{
    return &j->hnext;
}
