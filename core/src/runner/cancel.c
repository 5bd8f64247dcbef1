/* cancel.c - (added, issue 31, from runner.c) a client's cancel of a job
 * (POST /v1/jobs/ID/cancel, sbx cancel) and its end of a kept task (POST
 * /v1/tasks/ID/end, sbx task end): a queued job ends at once, a running one is ended by its
 * worker as cancelled, a job in the shared queue or on another box is
 * cancelled in the store; a task is asked to end and the loop's tick ends it
 * once it runs nothing. */
#include <errno.h>
#include <pthread.h>

#include "runner/api_int.h"
#include "runner/jobs.h"
#include "runner/jobstate.h"
#include "runner/rjob.h"
#include "runner/rtask.h"
#include "runner/state.h"
#include "runner/storeq.h"
#include "runner/worker.h"
#include "sandbox/task.h"
#include "store/store.h"

int runner_cancel(struct sbx_runner *r, const char *id, sbx_error_t **err)
{
    struct rjob *j = runner_job_find(r, id);

    if (j == NULL && r->fleet != NULL) { /* in the shared queue, or on another box */
        return sbx_store_job_cancel_queued(r->store, id, "cancelled by request", err);
    }
    if (j == NULL) {
        struct sbx_job_rec rec = {0};

        if (sbx_store_job_get(r->store, id, &rec, err) < 0) {
            return -1;
        }
        sbx_error_set(err, EINVAL, "job %s already ended (%s)", id, sbx_job_state_name(rec.state));
        sbx_job_rec_clear(&rec);
        return -1;
    }
    if (rjob_state(j) >= SBX_JOB_FINISHED) { /* (changed) its end is in memory: no store call */
        return sbx_error_set(err, EINVAL, "job %s already ended (%s)", id,
                             sbx_job_state_name((enum sbx_job_state)rjob_state(j)));
    }
    if (rjob_granting(j)) { /* (added) its grant is being written: it ends cancelled then */
        runner_job_cancel(j);
        return 0;
    }
    if (rjob_state(j) == SBX_JOB_QUEUED) {
        if (sbx_sched_cancel(r->sched, id, err) < 0) {
            return -1;
        }
        if (runner_sq_threaded(r)) { /* (added) a claimed job's end: written off the loop */
            runner_job_move(r, j, RJOB_CANCELLED,
                            &(struct rjob_move){.deferred = 1, .reason = "cancelled by request"},
                            NULL);
        }
        else if (runner_job_move(r, j, RJOB_CANCELLED,
                                 &(struct rjob_move){.strict = 1, .reason = "cancelled by request"},
                                 err) < 0) {
            return -1;
        }
        pthread_mutex_lock(&r->mu);
        rjob_release(j);
        pthread_mutex_unlock(&r->mu);
        runner_streams_flush(r, j, 1);
        runner_schedule(r);
        return 0;
    }
    /* running: the worker ends it as cancelled */
    pthread_mutex_lock(&r->mu);
    runner_job_cancel(j);
    rjob_cancel_exec(j);
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
    return 0;
}

int runner_task_end(struct sbx_runner *r, const char *id, sbx_error_t **err)
{
    struct rtask *t = runner_task_find(r, id);

    if (t == NULL) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "no task '%s' is running in the runner", id);
    }
    pthread_mutex_lock(&r->mu);
    rtask_request_end(t);
    /* (changed, issue 31) its ender now when nothing runs in it, not at the
     * next tick (up to 200 ms later); else the tick's, once it is idle */
    runner_task_end_if_due(r, t, r->stopping);
    pthread_mutex_unlock(&r->mu);
    return 0;
}
