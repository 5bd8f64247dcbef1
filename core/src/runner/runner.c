/* runner.c - the runner's loop: create, messages from workers, grants,
 * task ends, stop ((changed, issue 31) a client's cancel is cancel.c's). */
#include <assert.h>
#include <errno.h>
#include <event2/thread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "egress/egress.h"
#include "policy/policy.h"
#include "runner/runner.h"
#include "runner/jobstate.h"
#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/rmetrics.h"
#include "runner/api_int.h"
#include "runner/api_limits.h"
#include "runner/auth.h"
#include "runner/fleet.h"
#include "runner/forward.h"
#include "runner/health.h"
#include "runner/hooks.h"
#include "runner/jobs.h"
#include "runner/recover.h"
#include "runner/roots.h"
#include "runner/smallbox.h"
#include "runner/rtask.h"
#include "runner/worker.h"
#include "runner/storeq.h"
#include "runner/status.h"
#include "runner/warm.h"
#include "sandbox/statedir.h"
#include "util/log.h"
#include "util/rlimit.h"
#include "util/xalloc.h"

/* A worker's message to the loop (runner_post). */
struct rmsg {
    enum rmsg_kind kind;
    char id[SBX_SCHED_ID_MAX]; /* the job (RMSG_JOB_DONE, RMSG_OUTPUT) */
    struct rtask *rt;          /* (changed) RMSG_TASK_ENDED: the task itself, never its id */
    enum sbx_job_result result;
    struct rmsg *next;
};

int64_t runner_now(struct sbx_runner *r)
{
    (void)r;
    return sbx_clock_real(NULL);
}

void runner_post(struct sbx_runner *r, enum rmsg_kind kind, const char *id,
                 enum sbx_job_result result)
{
    struct rmsg *m = xcalloc(1, sizeof(*m));

    m->kind = kind;
    m->result = result;
    snprintf(m->id, sizeof(m->id), "%s", id);
    pthread_mutex_lock(&r->mu);
    *r->msgs_tail = m;
    r->msgs_tail = &m->next;
    pthread_mutex_unlock(&r->mu);
    event_active(r->wake, EV_READ, 0);
}

void runner_post_task_ended(struct sbx_runner *r, struct rtask *t, enum sbx_job_result result)
{
    struct rmsg *m = xcalloc(1, sizeof(*m));

    m->kind = RMSG_TASK_ENDED;
    m->result = result;
    m->rt = t;
    pthread_mutex_lock(&r->mu);
    *r->msgs_tail = m;
    r->msgs_tail = &m->next;
    pthread_mutex_unlock(&r->mu);
    event_active(r->wake, EV_READ, 0);
}

static void task_remove(struct sbx_runner *r, struct rtask *t)
{
    sbx_error_t *err = NULL;

    if (rtask_holder(t)[0] != '\0' &&
        sbx_sched_release(r->sched, rtask_holder(t), rtask_holder_result(t), &err) < 0) {
        sbx_warn("runner: releasing the slot of task %s: %s", rtask_id(t), sbx_error_msg(err));
        sbx_error_free(&err);
    }
    pthread_mutex_lock(&r->mu);
    runner_jobtab_remove_task(&r->tab, t);
    pthread_mutex_unlock(&r->mu);
    rtask_free(t);
}

/* (added, issue 31) A stopping runner whose last worker, task and warm
 * sandbox are gone leaves its loop at once (a worker wakes it as it goes:
 * runner_worker_gone), not at the next tick. Loop thread. */
static void stop_if_done(struct sbx_runner *r)
{
    pthread_mutex_lock(&r->mu);
    if (r->stopping && r->workers == 0 && r->tab.tasks == NULL && runner_warm_idle(r)) {
        event_base_loopbreak(r->base);
    }
    pthread_mutex_unlock(&r->mu);
}

void runner_worker_gone(struct sbx_runner *r)
{
    pthread_mutex_lock(&r->mu);
    r->workers--;
    if (r->stopping && r->workers == 0) {
        /* under r->mu: the loop cannot leave (and the runner go) before this */
        event_active(r->wake, EV_READ, 0);
    }
    pthread_mutex_unlock(&r->mu);
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_runner *r = arg;
    struct rmsg *m;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&r->mu);
    m = r->msgs;
    r->msgs = NULL;
    r->msgs_tail = &r->msgs;
    pthread_mutex_unlock(&r->mu);
    while (m != NULL) {
        struct rmsg *next = m->next;
        struct rjob *j = m->kind == RMSG_TASK_ENDED ? NULL : runner_job_find(r, m->id);
        struct rtask *t = m->kind == RMSG_TASK_ENDED ? m->rt : NULL;

        if (j != NULL) {
            if (m->kind == RMSG_JOB_DONE) {
                rjob_release(j);
            }
            runner_streams_flush(r, j, m->kind == RMSG_JOB_DONE);
        }
        if (t != NULL) {
            task_remove(r, t);
        }
        free(m);
        m = next;
    }
    runner_schedule(r);
    runner_fleet_claim(r);
    stop_if_done(r); /* (added, issue 31) */
}

/* (added) A job's end written by the store thread on a fleet box (at once on
 * one box): the loop does not wait for it. */
struct end_call {
    char id[SBX_SCHED_ID_MAX];
    int64_t token;
    enum sbx_job_state end_state;
    char why[256];
};

static void end_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct end_call *c = arg;
    sbx_error_t *err = NULL;

    (void)r;
    if (sbx_store_job_move(st,
                           &(struct sbx_job_move){
                               .id = c->id,
                               .token = c->token,
                               .step = SBX_JOB_STEP_END,
                               .end = {.state = c->end_state, .exit_status = -1, .reason = c->why}},
                           &err) < 0) {
        sbx_error_log("runner: %s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
}

static void end_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    (void)r;
    (void)req;
    (void)late;
    free(arg);
}

void runner_job_end_write(struct sbx_runner *r, const char *id, int64_t token,
                          enum sbx_job_state state, const char *why)
{
    struct end_call *c = xcalloc(1, sizeof(*c));

    snprintf(c->id, sizeof(c->id), "%s", id);
    c->token = token;
    c->end_state = state;
    snprintf(c->why, sizeof(c->why), "%s", why);
    runner_sq_write(r, end_work, end_done, c);
}

/* (added) A granted job that must not start: it ends cancelled, its slot goes. */
static void refuse_grant(struct sbx_runner *r, struct rjob *j, const char *why)
{
    sbx_error_log("runner: job %s (task %s): %s", rjob_id(j), rjob_req(j)->task, why);
    sbx_sched_release(r->sched, rjob_id(j), SBX_RESULT_FAILED, NULL);
    runner_job_move(r, j, RJOB_CANCELLED, &(struct rjob_move){.deferred = 1, .reason = why}, NULL);
    pthread_mutex_lock(&r->mu);
    rjob_release(j);
    pthread_mutex_unlock(&r->mu);
    runner_streams_flush(r, j, 1);
}

/* (added) 1 when the job's table lets it be granted (it is queued); else its
 * slot goes and it does not start. Checked before the grant's fenced write
 * (runner_schedule); when a fleet's write is back, grant_done checks the
 * state again (a cancel or a lost lease may have moved it meanwhile). */
static int grant_ok(struct sbx_runner *r, struct rjob *j)
{
    int ok;

    pthread_mutex_lock(&r->mu);
    ok = runner_job_event_ok(rjob_state(j), RJOB_GRANTED);
    pthread_mutex_unlock(&r->mu);
    if (!ok) {
        sbx_error_log("runner: job %s: event 'granted' refused: a %s job does not start",
                      rjob_id(j), sbx_job_state_name(rjob_state(j)));
        sbx_sched_release(r->sched, rjob_id(j), SBX_RESULT_FAILED, NULL);
    }
    return ok;
}

/* A granted job whose grant is stored (its table checked before, grant_ok):
 * its task, its warm sandbox, its worker. 1 when it was granted (started,
 * or its start failed). */
static int grant_start(struct sbx_runner *r, struct rjob *j, const struct sbx_sched_grant *g)
{
    const struct rjob_req *q = rjob_req(j);
    struct rtask *t;

    if (runner_task_find(r, q->task) != NULL) {
        /* (added) two live tasks of one id on one box must not exist:
         * the store's claim and the submit's checks keep it so
         * (docs/runner.md, "Task ids"); should one slip through, its job
         * ends here rather than share or free the other's task */
        assert(!"two live tasks of one id on one box");
        refuse_grant(r, j, "refused: its task is live on this box already");
        return 0;
    }
    t = rtask_new(&(struct rtask_init){
        .id = q->task,
        .holder = rjob_id(j),
        .owner = q->owner,
        .pool = q->pool,
        .keep = q->pool == SBX_POOL_AGENT && strcmp(q->task, rjob_id(j)) != 0,
        .holder_result = SBX_RESULT_FAILED,
    });
    runner_task_move(r, t, RTASK_CREATED, NULL, NULL);
    rtask_enter(t); /* its holder job */
    /* (added) a warm sandbox to claim: only a job that can use one
     * (docs/runner.md, Warm pool); without one the tick below evicts
     * warm sandboxes this job needs the room of */
    rjob_set_warm(j, rjob_image(j) == NULL && /* (added) a snapshot's image: never a warm one */
                             (q->provider == NULL || strcmp(q->provider, r->cfg->provider) == 0)
                         ? runner_warm_take(r, q->pool)
                         : NULL);
    pthread_mutex_lock(&r->mu);
    runner_jobtab_add_task(&r->tab, t);
    rjob_set_rtask(j, t);
    runner_job_move_held(r, j, RJOB_GRANTED); /* its grant: written before this */
    pthread_mutex_unlock(&r->mu);
    sbx_info("runner: job %s granted a %s slot in pool %s after %.1fs", rjob_id(j),
             sbx_job_class_name(q->cls), sbx_pool_name(q->pool), (double)g->wait_ms / 1000.0);
    if (runner_worker_start(r, j) < 0) {
        runner_job_move(r, j, RJOB_FINISHED,
                        &(struct rjob_move){.deferred = 1,
                                            .exit_status = -1,
                                            .reason = "runner: cannot start a worker thread"},
                        NULL);
        rjob_release(j);
        if (rjob_warm(j) != NULL) {
            runner_warm_end(r, rjob_take_warm(j));
        }
        task_remove(r, t);
    }
    return 1;
}

/* (added) A fleet job's grant is a fenced write of the store thread: the
 * job starts when it comes back (docs/runner.md, "A slow or silent
 * database"); meanwhile it is `granting` (a cancel marks it, a lost lease
 * interrupts it). */
struct grant_call {
    char id[SBX_SCHED_ID_MAX];
    int64_t token;
    struct sbx_sched_grant g;
    int rc, stale;
};

static void grant_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct grant_call *c = arg;
    sbx_error_t *err = NULL;

    (void)r;
    c->rc = sbx_store_job_move(
        st,
        &(struct sbx_job_move){
            .id = c->id, .token = c->token, .step = SBX_JOB_STEP_GRANTED, .at = c->g.granted_at},
        &err);
    if (c->rc < 0) {
        c->stale = err->code == ESTALE;
        sbx_error_log("runner: %s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
}

static void grant_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct grant_call *c = arg;
    struct rjob *j = late ? NULL : runner_job_find(r, c->id);

    (void)req;
    if (late) { /* the runner stops: a job granted in the store did not start */
        if (c->rc == 0) {
            runner_job_end_write(r, c->id, c->token, SBX_JOB_INTERRUPTED,
                                 "the box stopped before the job started");
        }
        free(c);
        return;
    }
    if (j == NULL) { /* cannot happen: it stays in memory while its slot is held */
        sbx_sched_release(r->sched, c->id, SBX_RESULT_FAILED, NULL);
    }
    else if (c->stale || rjob_state(j) != SBX_JOB_QUEUED) {
        /* another box holds it now, or this box lost its lease meanwhile:
         * it does not start here */
        sbx_sched_release(r->sched, rjob_id(j), SBX_RESULT_INTERRUPTED, NULL);
        rjob_set_granting(j, 0);
        if (rjob_state(j) == SBX_JOB_QUEUED) { /* a lost lease may have interrupted it */
            runner_job_move(r, j, RJOB_INTERRUPTED, &(struct rjob_move){.memory = 1}, NULL);
        }
        rjob_release(j);
        runner_streams_flush(r, j, 1);
    }
    else if (r->stopping) { /* it does not start: its recovery at the next start */
        sbx_sched_release(r->sched, rjob_id(j), SBX_RESULT_INTERRUPTED, NULL);
        rjob_set_granting(j, 0);
    }
    else if (runner_job_cancelled(j)) {
        rjob_set_granting(j, 0);
        refuse_grant(r, j, "cancelled by request before it started");
    }
    else {
        rjob_set_granting(j, 0);
        if (grant_start(r, j, &c->g)) {
            runner_warm_tick(r);
        }
    }
    free(c);
    runner_schedule(r);
}

/* Starts every job the scheduler grants now. Loop thread. */
void runner_schedule(struct sbx_runner *r)
{
    struct sbx_sched_grant g;
    int granted = 0;

    if (r->stopping || !runner_image_ready(r->image, NULL, 0)) {
        return; /* (added) no grant before the image is there (image_check.c) */
    }
    while (sbx_sched_next_grant(r->sched, &g)) {
        struct rjob *j = runner_job_find(r, g.id);
        sbx_error_t *err = NULL;

        if (j == NULL) { /* cannot happen: every sched job has an rjob */
            sbx_error_log("runner: granted job %s is unknown", g.id);
            sbx_sched_release(r->sched, g.id, SBX_RESULT_FAILED, NULL);
            continue;
        }
        if (!grant_ok(r, j)) { /* (added) the table first: no grant written for it */
            continue;
        }
        if (runner_sq_threaded(r)) {
            struct grant_call *c = xcalloc(1, sizeof(*c));

            c->rc = -1; /* not written until the call says so */
            snprintf(c->id, sizeof(c->id), "%s", rjob_id(j));
            c->token = rjob_token(j);
            c->g = g;
            rjob_set_granting(j, 1);
            runner_sq_call(r, NULL, grant_work, grant_done, c);
            continue;
        }
        if (sbx_store_job_move(r->store,
                               &(struct sbx_job_move){.id = rjob_id(j),
                                                      .token = rjob_token(j),
                                                      .step = SBX_JOB_STEP_GRANTED,
                                                      .at = g.granted_at},
                               &err) < 0) {
            int taken = err->code == ESTALE;

            sbx_error_log("runner: %s", sbx_error_msg(err));
            sbx_error_free(&err);
            if (taken) { /* another box holds it now: it does not start here */
                sbx_sched_release(r->sched, rjob_id(j), SBX_RESULT_INTERRUPTED, NULL);
                runner_job_move(r, j, RJOB_INTERRUPTED, &(struct rjob_move){.memory = 1}, NULL);
                rjob_release(j);
                continue;
            }
        }
        granted |= grant_start(r, j, &g);
    }
    if (granted) {
        runner_warm_tick(r);
    }
}

int sbx_runner_reload_policy(struct sbx_runner *r, sbx_error_t **err)
{
    struct sbx_policy *p = sbx_policy_load(r->policy_dir, r->cfg, err);
    struct sbx_policy *old;

    if (p == NULL) {
        /* a bad new policy is refused; the old one stays */
        return sbx_error_wrap(err, "policy reload refused, the previous policy stays");
    }
    pthread_mutex_lock(&r->mu);
    old = r->policy;
    r->policy = p;
    pthread_mutex_unlock(&r->mu);
    sbx_policy_destroy(old);
    return 0;
}

/* Every 200 ms: ends kept tasks that were asked to end or went idle. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_runner *r = arg;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&r->mu);
    for (struct rtask *t = r->tab.tasks; t != NULL; t = rtask_next(t)) {
        runner_task_end_if_due(r, t, r->stopping);
    }
    if (r->stopping && r->workers == 0 && r->tab.tasks == NULL && runner_warm_idle(r)) {
        event_base_loopbreak(r->base);
    }
    pthread_mutex_unlock(&r->mu);
    if (runner_image_ready(r->image, NULL, 0)) {
        runner_warm_tick(r);
    }
    runner_trim_finished(r);
}

/* The task of a job in an alert: its own, or its id (a job not in memory). */
static const char *alert_task(void *arg, const char *job)
{
    struct rjob *j = runner_job_find(arg, job);

    return j != NULL ? rjob_req(j)->task : job;
}

static void on_alert_timer(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_runner *r = arg;

    (void)fd;
    (void)what;
    if (runner_fleet_box(r) == NULL) { /* a fleet's leader alerts and scales (fleetlead.c) */
        runner_alerts_tick(r->sched, r->cfg, alert_task, r);
    }
    __atomic_add_fetch(&r->alert_ticks, 1, __ATOMIC_RELEASE);
}

unsigned long sbx_runner_alert_ticks(struct sbx_runner *r)
{
    return __atomic_load_n(&r->alert_ticks, __ATOMIC_ACQUIRE);
}

/* One egress proxy for the whole box, on its own thread: every task's socket is on it
 * (docs/egress.md). Its log is egress.log, else <state dir>/egress.log, as for
 * embedded tasks. */
static int runner_egress_start(struct sbx_runner *r, sbx_error_t **err)
{
    char *state;
    char *log;

    if (r->cfg->egress.log != NULL) {
        log = xstrdup(r->cfg->egress.log);
    }
    else {
        state = sbx_state_dir(r->cfg->state_dir, err);
        if (state == NULL) {
            return -1;
        }
        log = xasprintf("%s/egress.log", state);
        free(state);
    }
    r->egress = sbx_egress_start_log(r->cfg, log, err);
    free(log);
    return r->egress != NULL ? 0 : sbx_error_wrap(err, "runner");
}

/* The image check's thread: the image is in the engine, the loop schedules. */
static void image_ready(void *arg)
{
    runner_post(arg, RMSG_OUTPUT, "", SBX_RESULT_OK);
}

/* A new runner with its options, metrics and policy; NULL (nothing left to
 * free) when the policy does not load. */
static struct sbx_runner *runner_new(const struct sbx_runner_opts *opts, sbx_error_t **err)
{
    struct sbx_runner *r = xcalloc(1, sizeof(*r));
    static int threads_on;

    if (!threads_on) {
        evthread_use_pthreads();
        threads_on = 1;
    }
    sbx_raise_nofile("runner"); /* the shared egress proxy: sockets and pipes per sandbox */
    r->metrics = rm_new();
    r->cfg = opts->cfg;
    r->plugin_dir = xstrdup(opts->plugin_dir);
    r->policy_dir = sbx_policy_dir_resolve(opts->cfg->policy_dir, err);
    r->policy = r->policy_dir ? sbx_policy_load(r->policy_dir, opts->cfg, err) : NULL;
    if (r->policy == NULL) {
        sbx_error_wrap(err, "runner: policy");
        free(r->policy_dir);
        free(r->plugin_dir);
        rm_free(r->metrics);
        free(r);
        return NULL;
    }
    r->alert_interval_ms = opts->alert_interval_ms > 0 ? opts->alert_interval_ms : 1000;
    r->slot_lock = opts->slot_lock;
    r->one_shot = opts->one_shot;
    r->output_wait = opts->output_wait;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->msgs_tail = &r->msgs;
    return r;
}

/* The clients, the worktree roots, the status page's sessions, where the
 * runner listens (TCP only with a bearer token) and its store. */
static int open_store(struct sbx_runner *r, sbx_error_t **err)
{
    if ((r->auth = runner_clients_load(r->cfg, err)) == NULL ||
        runner_roots_init(&r->confine, r->cfg, err) < 0) {
        return -1;
    }
    r->status = runner_status_new(r->auth, r->metrics);
    if (sbx_runner_endpoint(r->cfg, &r->ep, err) < 0) {
        return -1;
    }
    if (r->ep.tcp_host != NULL && runner_auth_n_clients(r->auth) == 0) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "runner.listen is TCP but runner.token_env %s%s%s and runner.clients "
                             "is empty: a TCP listener needs a bearer token",
                             r->cfg->runner.token_env ? "names an unset variable (" : "is not set",
                             r->cfg->runner.token_env ? r->cfg->runner.token_env : "",
                             r->cfg->runner.token_env ? ")" : "");
    }
    r->store_path = sbx_runner_state_path(r->cfg, err);
    if (r->store_path == NULL) {
        return -1;
    }
    sbx_store_pg_limits((int)r->cfg->runner.database_timeout * 1000,
                        (int)r->cfg->runner.database_keepalive);
    r->store = sbx_store_open_ex(r->store_path, r->cfg->runner.database_password_env, err);
    if (r->store == NULL) {
        return -1;
    }
    runner_roots_deny(&r->confine, r->cfg,
                      &(struct runner_roots_paths){.store = r->store_path,
                                                   .socket = r->ep.unix_path,
                                                   .policy_dir = r->policy_dir,
                                                   .plugin_dir = r->plugin_dir});
    return 0;
}

/* The scheduler, and the pools' limits clamped to this box. */
static int sched_start(struct sbx_runner *r, const struct sbx_runner_opts *opts, sbx_error_t **err)
{
    struct sbx_sched_opts so = {
        .cfg = opts->cfg,
        .capacity = opts->capacity,
        .clock = opts->clock,
        .clock_ctx = opts->clock_ctx,
    };
    struct sbx_sched_snapshot *snap;

    r->sched = sbx_sched_create(&so, err);
    if (r->sched == NULL) {
        return -1;
    }
    snap = sbx_sched_snapshot(r->sched);
    r->pools.quiet = r->one_shot; /* (added, issue 31) */
    runner_small_box(&r->pools, &r->cfg->limits, snap);
    sbx_sched_snapshot_free(snap);
    return 0;
}

/* The event loop and its events: the workers' wake-up, the tick, the alerts. */
static int loop_start(struct sbx_runner *r, sbx_error_t **err)
{
    struct timeval tick = {0, 200 * 1000};
    struct timeval alert;

    r->base = event_base_new();
    if (r->base == NULL) {
        return sbx_error_set(err, SBX_E_GENERIC, "runner: cannot create the event loop");
    }
    r->wake = event_new(r->base, -1, EV_PERSIST | EV_READ, on_wake, r);
    r->tick = event_new(r->base, -1, EV_PERSIST, on_tick, r);
    r->alert_ev = event_new(r->base, -1, EV_PERSIST, on_alert_timer, r);
    alert.tv_sec = r->alert_interval_ms / 1000;
    alert.tv_usec = (r->alert_interval_ms % 1000) * 1000;
    event_add(r->tick, &tick);
    event_add(r->alert_ev, &alert);
    return 0;
}

/* The fleet, recovery, the warm pool and the image check, then the probes,
 * the store thread and the API. */
static int services_start(struct sbx_runner *r, int probe_ms, sbx_error_t **err)
{
    if (runner_fleet_start(r, err) < 0 || runner_recover(r, err) < 0 ||
        runner_warm_init(r, err) < 0 ||
        (!r->one_shot && /* (added, issue 31) one_shot: no image check */
         (r->image = runner_image_start(r->cfg, r->plugin_dir, image_ready, r, err)) == NULL)) {
        return -1;
    }
    /* the API listens last: "listening" means every connection the box needs
     * is open (a store thread's connection opened after it could fail the
     * start of a box that clients already reach) */
    if ((!r->one_shot && /* (added, issue 31) one_shot: no engine health probe */
         (r->health = runner_health_start(r->cfg, r->plugin_dir, probe_ms, err)) == NULL) ||
        (r->storeprobe = runner_storeprobe_start(r->cfg, r->store_path, r->store, probe_ms, err)) ==
            NULL ||
        runner_sq_start(r, err) < 0 || /* (added) after the probe: its gate */
        runner_api_bind(r, err) < 0) {
        return -1;
    }
    return 0;
}

struct sbx_runner *sbx_runner_create(const struct sbx_runner_opts *opts, sbx_error_t **err)
{
    int probe_ms = opts->health_interval_ms > 0 ? opts->health_interval_ms : 5000;
    struct sbx_runner *r = runner_new(opts, err);

    if (r == NULL) {
        return NULL;
    }
    if (open_store(r, err) < 0 || sched_start(r, opts, err) < 0 ||
        runner_egress_start(r, err) < 0 || loop_start(r, err) < 0 ||
        services_start(r, probe_ms, err) < 0) {
        sbx_runner_destroy(r);
        return NULL;
    }
    return r;
}

int sbx_runner_run(struct sbx_runner *r, sbx_error_t **err)
{
    runner_schedule(r);
    runner_fleet_claim(r);
    if (event_base_dispatch(r->base) < 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "runner: the event loop failed");
    }
    return 0;
}

static void on_stop(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_runner *r = arg;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&r->mu);
    r->stopping = 1;
    for (struct rjob *j = r->tab.jobs; j != NULL; j = rjob_next(j)) {
        if (rjob_state(j) == SBX_JOB_RUNNING) {
            runner_job_cancel(j);
            rjob_cancel_exec(j);
        }
    }
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
    runner_task_io_stop(r); /* (added) open terminals (api_term.c) */
    stop_if_done(r);        /* (added, issue 31) nothing running: at once */
}

void sbx_runner_stop(struct sbx_runner *r)
{
    /* event_base_once is thread-safe with evthread_use_pthreads() */
    event_base_once(r->base, -1, EV_TIMEOUT, on_stop, r, NULL);
}

void sbx_runner_destroy(struct sbx_runner *r)
{
    if (r == NULL) {
        return;
    }
    runner_image_free(r->image); /* (added) before the loop its thread posts to */
    r->image = NULL;
    sbx_policy_destroy(r->policy);
    free(r->policy_dir);
    if (r->http_unix != NULL) {
        evhttp_free(r->http_unix);
    }
    if (r->http_tcp != NULL) {
        evhttp_free(r->http_tcp);
    }
    runner_sq_free(r); /* (added) after evhttp_free (the requests are gone), before the forwards */
    runner_api_limits_free(&r->lis[0]);
    if (r->lis[0].r != NULL) {
        runner_forward_drop_all(r); /* (added) forward.c */
    }
    runner_api_limits_free(&r->lis[1]);
    if (r->ep.unix_path != NULL && r->base != NULL) {
        unlink(r->ep.unix_path);
    }
    if (r->wake != NULL) {
        event_free(r->wake);
        event_free(r->tick);
        event_free(r->alert_ev);
    }
    while (r->tab.jobs != NULL) {
        struct rjob *j = r->tab.jobs;

        r->tab.jobs = rjob_next(j);
        runner_streams_free(j); /* their requests went with evhttp_free */
        runner_job_free(j);
    }
    rtask_list_free(&r->tab.tasks);
    while (r->msgs != NULL) {
        struct rmsg *m = r->msgs;

        r->msgs = m->next;
        free(m);
    }
    runner_fleet_free(r);
    if (r->base != NULL) {
        event_base_free(r->base);
    }
    runner_health_free(r->health);
    r->health = NULL;
    runner_storeprobe_free(r->storeprobe);
    r->storeprobe = NULL;
    runner_status_free(r->status);
    r->status = NULL;
    runner_warm_free(r);        /* before the proxy its sandboxes' sockets are on */
    sbx_egress_stop(r->egress); /* closes what kept tasks still had open, each logged */
    sbx_sched_destroy(r->sched);
    sbx_store_close(r->store);
    sbx_runner_endpoint_clear(&r->ep);
    runner_clients_free(r->auth);
    sbx_confine_clear(&r->confine);
    free(r->store_path);
    free(r->plugin_dir);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    rm_free(r->metrics);
    free(r);
}
