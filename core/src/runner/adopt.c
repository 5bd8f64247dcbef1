/* adopt.c - (added, issue 31) a task started by the runner's own process handed to
 * it, and its holder's view of that task (runner.h, "The keeper's task"). The
 * keeper (sandbox/keeper.c) starts its task with every option of `sbx task start`,
 * then gives it to its private runner, which from then on is the only place the
 * task lives: its execs, files, terminal, ports, snapshots, pause and egress go
 * through the runner's API, and the runner ends it (its idle and maximum
 * lifetime are the task's own timer, seen by the runner's tick). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/adopt.h"
#include "runner/auth.h"
#include "runner/jobs.h"
#include "runner/jobstate.h"
#include "runner/rtask.h"
#include "runner/state.h"
#include "runner/storepool.h"
#include "runner/worker.h"
#include "sched/sched.h"
#include "util/log.h"
#include "util/xalloc.h"

int sbx_runner_task_adopt(struct sbx_runner *r, struct sbx_task *task, sbx_error_t **err)
{
    const char *id = sbx_task_id(task);
    int pool = sbx_pool_parse(sbx_task_pool(task));
    struct sbx_sched_job sj = {.id = id,
                               .task = id,
                               .cls = SBX_CLASS_LIGHT,
                               /* admitted already (the box's slots, task_start.c):
                                * here it only holds this runner's one slot */
                               .cpus = 0.001,
                               .memory = 1};
    struct sbx_task_rec tr = {.id = (char *)id,
                              .sandbox_id = (char *)sbx_task_sandbox(task),
                              .provider = (char *)sbx_task_provider_name(task),
                              .pool = (char *)sbx_task_pool(task),
                              .state = SBX_TASK_READY};
    struct sbx_store *st;
    struct rtask *t;

    if (strlen(id) >= SBX_SCHED_ID_MAX) {
        return sbx_error_set(err, SBX_E_USAGE, "runner: task id '%s' is too long", id);
    }
    sj.pool = pool < 0 ? SBX_POOL_AGENT : (enum sbx_pool)pool;
    if (runner_task_find(r, id) != NULL) {
        return sbx_error_set(err, SBX_E_USAGE, "runner: task '%s' is live here already", id);
    }
    if (sbx_sched_adopt(r->sched, &sj, runner_now(r), err) < 0) {
        return sbx_error_wrap(err, "runner: task %s", id);
    }
    st = runner_store_get(r, err);
    if (st == NULL || sbx_store_task_put(st, &tr, err) < 0) {
        if (st != NULL) {
            runner_store_put(r, st);
        }
        sbx_sched_release(r->sched, id, SBX_RESULT_CANCELLED, NULL);
        return sbx_error_wrap(err, "runner: task %s: its row", id);
    }
    runner_store_put(r, st);
    t = rtask_new(&(struct rtask_init){
        .id = id,
        .holder = id,
        .owner = runner_local_client(r->auth)->name,
        .pool = sj.pool,
        .keep = 1,
        .holder_result = SBX_RESULT_OK,
    });
    runner_task_move(r, t, RTASK_ADOPTED, &(struct rtask_move){.t = task}, NULL);
    r->adopted_only = 1; /* a submit for another task is refused (submit.c) */
    pthread_mutex_lock(&r->mu);
    runner_jobtab_add_task(&r->tab, t);
    pthread_mutex_unlock(&r->mu);
    sbx_info("runner: task %s adopted", id);
    return 0;
}

int sbx_runner_task_live(struct sbx_runner *r, const char *id)
{
    struct rtask *t;
    int live;

    pthread_mutex_lock(&r->mu);
    t = runner_task_find(r, id);
    live = t != NULL && rtask_state(t) == RT_READY ? (rtask_end_requested(t) ? 2 : 1) : 0;
    pthread_mutex_unlock(&r->mu);
    return live;
}

int sbx_runner_task_stop(struct sbx_runner *r, const char *id, const char *reason)
{
    struct rtask *t;
    int done = 0;

    pthread_mutex_lock(&r->mu);
    t = runner_task_find(r, id);
    if (t != NULL && rtask_ready(t)) {
        /* under r->mu: the ender takes the sandbox under it too, so it is not
         * ended under us; the stop cancels its commands, so the tick ends it */
        sbx_task_stop(rtask_sandbox(t), reason);
        rtask_request_end(t);
        done = 1;
        runner_task_end_if_due(r, t, 0); /* not a tick later when nothing runs in it */
    }
    pthread_mutex_unlock(&r->mu);
    return done;
}

struct sbx_task *sbx_runner_task_hold(struct sbx_runner *r, const char *id)
{
    struct sbx_task *task = NULL;
    struct rtask *t;

    pthread_mutex_lock(&r->mu);
    t = runner_task_find(r, id);
    if (t != NULL && rtask_ready(t)) {
        rtask_enter(t); /* not ended under the holder (as api_files.c holds it) */
        task = rtask_sandbox(t);
    }
    pthread_mutex_unlock(&r->mu);
    return task;
}

void sbx_runner_task_unhold(struct sbx_runner *r, const char *id)
{
    struct rtask *t;

    pthread_mutex_lock(&r->mu);
    t = runner_task_find(r, id);
    if (t != NULL && rtask_running(t) > 0) {
        rtask_leave(t);
    }
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
}
