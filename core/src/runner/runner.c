/* runner.c - the runner's loop: create, messages from workers, grants,
 * submit, cancel, task ends, stop. */
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
#include "runner/runner_int.h"
#include "runner/status.h"
#include "runner/warm.h"
#include "sandbox/statedir.h"
#include "util/log.h"
#include "util/rlimit.h"
#include "util/xalloc.h"

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

    if (t->holder[0] != '\0' &&
        sbx_sched_release(r->sched, t->holder, t->holder_result, &err) < 0) {
        sbx_warn("runner: releasing the slot of task %s: %s", t->id, sbx_error_msg(err));
        sbx_error_free(&err);
    }
    pthread_mutex_lock(&r->mu);
    for (struct rtask **pp = &r->tasks; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    }
    pthread_mutex_unlock(&r->mu);
    free(t);
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
            j->released |= m->kind == RMSG_JOB_DONE;
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
}

/* (added) A granted job that must not start: it ends cancelled, its slot goes. */
static void refuse_grant(struct sbx_runner *r, struct rjob *j, const char *why)
{
    sbx_error_t *err = NULL;

    sbx_error_log("runner: job %s (task %s): %s", j->id, j->task, why);
    sbx_sched_release(r->sched, j->id, SBX_RESULT_FAILED, NULL);
    if (sbx_store_job_move(
            r->store,
            &(struct sbx_job_move){
                .id = j->id,
                .token = j->token,
                .step = SBX_JOB_STEP_END,
                .end = {.state = SBX_JOB_CANCELLED, .exit_status = -1, .reason = why}},
            &err) < 0) {
        sbx_error_log("runner: %s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    pthread_mutex_lock(&r->mu);
    j->state = SBX_JOB_CANCELLED;
    j->released = 1;
    pthread_mutex_unlock(&r->mu);
    runner_streams_flush(r, j, 1);
}

/* Starts every job the scheduler grants now. Loop thread. */
void runner_schedule(struct sbx_runner *r)
{
    struct sbx_sched_grant g;
    int granted = 0;

    if (r->stopping || !runner_image_ready(r, NULL, 0)) {
        return; /* (added) no grant before the image is there (image_check.c) */
    }
    while (sbx_sched_next_grant(r->sched, &g)) {
        struct rjob *j = runner_job_find(r, g.id);
        sbx_error_t *err = NULL;
        struct rtask *t;

        if (j == NULL) { /* cannot happen: every sched job has an rjob */
            sbx_error_log("runner: granted job %s is unknown", g.id);
            sbx_sched_release(r->sched, g.id, SBX_RESULT_FAILED, NULL);
            continue;
        }
        if (sbx_store_job_move(r->store,
                               &(struct sbx_job_move){.id = j->id,
                                                      .token = j->token,
                                                      .step = SBX_JOB_STEP_GRANTED,
                                                      .at = g.granted_at},
                               &err) < 0) {
            int taken = err->code == ESTALE;

            sbx_error_log("runner: %s", sbx_error_msg(err));
            sbx_error_free(&err);
            if (taken) { /* another box holds it now: it does not start here */
                sbx_sched_release(r->sched, j->id, SBX_RESULT_INTERRUPTED, NULL);
                j->state = SBX_JOB_INTERRUPTED;
                j->released = 1;
                continue;
            }
        }
        if (runner_task_find(r, j->task) != NULL) {
            /* (added) two live tasks of one id on one box must not exist:
             * the store's claim and the submit's checks keep it so
             * (docs/runner.md, "Task ids"); should one slip through, its job
             * ends here rather than share or free the other's task */
            assert(!"two live tasks of one id on one box");
            refuse_grant(r, j, "refused: its task is live on this box already");
            continue;
        }
        t = xcalloc(1, sizeof(*t));
        snprintf(t->id, sizeof(t->id), "%s", j->task);
        snprintf(t->holder, sizeof(t->holder), "%s", j->id);
        snprintf(t->owner, sizeof(t->owner), "%s", j->owner);
        t->pool = j->pool;
        t->keep = j->pool == SBX_POOL_AGENT && strcmp(j->task, j->id) != 0;
        t->state = RT_STARTING;
        t->running = 1;
        t->holder_result = SBX_RESULT_FAILED;
        /* (added) a warm sandbox to claim: only a job that can use one
         * (docs/runner.md, Warm pool); without one the tick below evicts
         * warm sandboxes this job needs the room of */
        j->warm = j->image == NULL && /* (added) a snapshot's image: never a warm one */
                          (j->provider == NULL || strcmp(j->provider, r->cfg->provider) == 0)
                      ? runner_warm_take(r, j->pool)
                      : NULL;
        pthread_mutex_lock(&r->mu);
        t->next = r->tasks;
        r->tasks = t;
        j->rt = t;
        j->state = SBX_JOB_RUNNING;
        pthread_mutex_unlock(&r->mu);
        sbx_info("runner: job %s granted a %s slot in pool %s after %.1fs", j->id,
                 sbx_job_class_name(j->cls), sbx_pool_name(j->pool), (double)g.wait_ms / 1000.0);
        if (runner_worker_start(r, j) < 0) {
            sbx_store_job_end(r->store, j->id,
                              &(struct sbx_job_end){SBX_JOB_FINISHED, -1,
                                                    "runner: cannot start a "
                                                    "worker thread",
                                                    0, 0, 0},
                              NULL);
            j->state = SBX_JOB_FINISHED;
            j->released = 1;
            if (j->warm != NULL) {
                runner_warm_end(r, j->warm);
                j->warm = NULL;
            }
            task_remove(r, t);
        }
        granted = 1;
    }
    if (granted) {
        runner_warm_tick(r);
    }
}

/* Policy decides a job when it is submitted (docs/architecture.md): its slot class
 * (unless the request names one) and its limits, which size its slot. A
 * policy error refuses the job (fail closed). */
static int decide_job(struct sbx_runner *r, struct rjob *j, json_t *labels,
                      struct sbx_limits *limits, sbx_error_t **err)
{
    struct sbx_policy_decision d = {0};
    struct sbx_job_desc job = {0};
    struct sbx_kv *kv = xcalloc(json_object_size(labels) + 1, sizeof(*kv));
    const char *k;
    json_t *v;
    int rc;

    json_object_foreach(labels, k, v)
    {
        kv[job.n_labels].name = k;
        kv[job.n_labels].value = json_string_value(v) ? json_string_value(v) : "";
        job.n_labels++;
    }
    job.labels = kv;
    job.id = j->id;
    job.task = j->task;
    job.pool = sbx_pool_name(j->pool);
    job.workdir = j->worktree;
    job.provider = j->provider ? j->provider : r->cfg->provider;
    job.argv = (const char *const *)j->argv;
    pthread_mutex_lock(&r->mu);
    rc = sbx_policy_decide(r->policy, &job, &d, err);
    pthread_mutex_unlock(&r->mu);
    free(kv);
    if (rc < 0) {
        return sbx_error_wrap(err, "policy denied the job");
    }
    *limits = d.limits;
    if (!j->cls_given) {
        j->cls = (enum sbx_job_class)sbx_job_class_parse(d.slot_class);
    }
    sbx_policy_decision_fini(&d);
    return 0;
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

/* (changed) An explicit task id that is not live on this box: refused while
 * another job of it waits in the queue (this box's or the fleet's), runs, or
 * its sandbox lives on another box (a ready one there got the request
 * forwarded before this; docs/runner.md, "Task ids"). */
static int task_busy(struct sbx_runner *r, const struct rjob *j, sbx_error_t **err)
{
    struct sbx_task_busy b;
    int rc = sbx_store_task_busy(r->store, j->task, j->id, &b, err);

    if (rc <= 0) {
        return rc;
    }
    if (b.queued && b.box[0] == '\0') {
        return sbx_error_set(err, EBUSY,
                             "task %s is still queued (job %s); submit its next command once it "
                             "runs",
                             j->task, b.job);
    }
    if (b.queued) {
        return sbx_error_set(err, EBUSY,
                             "task %s is still queued (job %s, claimed by box %s); submit its "
                             "next command once it runs",
                             j->task, b.job, b.box);
    }
    return sbx_error_set(err, EBUSY,
                         "task %s is starting%s%s; submit its next command once it runs", j->task,
                         b.box[0] ? " on box " : "", b.box);
}

int runner_submit(struct sbx_runner *r, struct rjob *j, json_t *labels, sbx_error_t **err)
{
    struct sbx_job_rec rec = {0};
    struct rtask *t = runner_task_find(r, j->task);
    json_t *argv = json_array();
    int direct = 0;

    if (t != NULL && t->state != RT_STARTING && t->state != RT_READY) {
        json_decref(argv);
        return sbx_error_set(err, EBUSY, "task %s is ending; start a new task", j->task);
    }
    /* a command runs in a task's sandbox only for the client that started it; a
     * task re-adopted after a restart (owner unknown) only for the unix socket */
    if (t != NULL && strcmp(t->owner, j->owner) != 0 &&
        !(t->owner[0] == '\0' && strcmp(j->owner, "local") == 0)) {
        json_decref(argv);
        return sbx_error_set(err, EPERM, "task %s belongs to another client", j->task);
    }
    direct = t != NULL;
    if (!direct && strcmp(j->task, j->id) != 0 && task_busy(r, j, err) < 0) {
        json_decref(argv);
        return -1;
    }
    for (size_t i = 0; j->argv[i] != NULL; i++) {
        json_array_append_new(argv, json_string(j->argv[i]));
    }
    rec.id = j->id;
    rec.task = j->task;
    rec.pool = (char *)sbx_pool_name(j->pool);
    rec.cls = (char *)sbx_job_class_name(j->cls);
    rec.argv = argv;
    rec.labels = labels;
    rec.worktree = j->worktree;
    rec.env = j->env;
    rec.client = j->owner;
    rec.provider = j->provider ? j->provider : r->cfg->provider;
    rec.image = j->image ? j->image /* (added) a snapshot's (`from`) */
                         : (char *)sbx_config_image(r->cfg, sbx_pool_name(j->pool),
                                                    rec.provider); /* (changed) */
    rec.limits = r->cfg->limits;
    if (!direct && decide_job(r, j, labels, &rec.limits, err) < 0) {
        json_decref(argv);
        return -1;
    }
    rec.cls = (char *)sbx_job_class_name(j->cls);
    if (!direct) {
        runner_fit_limits(r, j->pool, &rec.limits);
    }
    if (!direct) {
        struct sbx_sched_job sj = runner_sched_job(j, rec.limits.cpus, rec.limits.memory, 0);

        /* docs/runner.md: sched first (a refusal stores nothing), then the store;
         * a fleet box checks the job against its shape and queues it in the
         * shared queue, where the box that can start it first claims it */
        if ((r->fleet != NULL ? runner_fleet_check(r, &sj, err)
                              : sbx_sched_submit(r->sched, &sj, err)) < 0) {
            json_decref(argv);
            return -1;
        }
    }
    if (!direct && r->fleet != NULL) {
        if (sbx_store_job_insert(r->store, &rec, err) < 0) {
            json_decref(argv);
            return sbx_error_wrap(err, "storing job %s", j->id);
        }
        json_decref(argv);
        j->state = SBX_JOB_QUEUED;
        sbx_info("runner: job %s accepted from client '%s' into the shared queue (task %s, pool "
                 "%s, %s)",
                 j->id, j->owner, j->task, sbx_pool_name(j->pool), sbx_job_class_name(j->cls));
        {
            sbx_error_t *e = NULL;

            if (sbx_store_notify(r->store, &e) < 0) { /* the boxes' beat claims it anyway */
                sbx_error_log("runner: %s", sbx_error_msg(e));
                sbx_error_free(&e);
            }
        }
        runner_fleet_claim(r);
        return 1;
    }
    if (sbx_store_job_insert(r->store, &rec, err) < 0) {
        if (!direct) {
            sbx_sched_cancel(r->sched, j->id, NULL);
        }
        json_decref(argv);
        return sbx_error_wrap(err, "storing job %s", j->id);
    }
    json_decref(argv);
    pthread_mutex_lock(&r->mu);
    j->state = SBX_JOB_QUEUED;
    runner_job_link(r, j);
    pthread_mutex_unlock(&r->mu);
    sbx_info("runner: job %s accepted from client '%s' (task %s, pool %s, %s)", j->id, j->owner,
             j->task, sbx_pool_name(j->pool), sbx_job_class_name(j->cls));
    if (direct) {
        /* a command for a running task: its sandbox and slot are already held */
        sbx_store_job_granted(r->store, j->id, 0, NULL);
        pthread_mutex_lock(&r->mu);
        j->rt = t;
        t->running++;
        j->state = SBX_JOB_RUNNING;
        pthread_mutex_unlock(&r->mu);
        if (runner_worker_start(r, j) < 0) {
            pthread_mutex_lock(&r->mu);
            t->running--;
            j->state = SBX_JOB_FINISHED;
            j->released = 1;
            pthread_mutex_unlock(&r->mu);
            sbx_store_job_end(r->store, j->id,
                              &(struct sbx_job_end){SBX_JOB_FINISHED, -1,
                                                    "runner: cannot start a worker thread", 0, 0,
                                                    0},
                              NULL);
        }
        return 0;
    }
    runner_schedule(r);
    return 0;
}

int runner_cancel(struct sbx_runner *r, const char *id, sbx_error_t **err)
{
    struct rjob *j = runner_job_find(r, id);

    if (j == NULL && r->fleet != NULL) { /* in the shared queue, or on another box */
        return sbx_store_job_cancel_queued(r->store, id, "cancelled by request", err);
    }
    if (j == NULL || j->state >= SBX_JOB_FINISHED) {
        struct sbx_job_rec rec = {0};

        if (sbx_store_job_get(r->store, id, &rec, err) < 0) {
            return -1;
        }
        sbx_error_set(err, EINVAL, "job %s already ended (%s)", id, sbx_job_state_name(rec.state));
        sbx_job_rec_clear(&rec);
        return -1;
    }
    if (j->state == SBX_JOB_QUEUED) {
        if (sbx_sched_cancel(r->sched, id, err) < 0 ||
            sbx_store_job_end(
                r->store, id,
                &(struct sbx_job_end){SBX_JOB_CANCELLED, -1, "cancelled by request", 0, 0, 0},
                err) < 0) {
            return -1;
        }
        pthread_mutex_lock(&r->mu);
        j->state = SBX_JOB_CANCELLED;
        j->released = 1;
        pthread_mutex_unlock(&r->mu);
        runner_streams_flush(r, j, 1);
        runner_schedule(r);
        return 0;
    }
    /* running: the worker ends it as cancelled */
    pthread_mutex_lock(&r->mu);
    j->cancel = 1;
    if (j->executing && j->rt != NULL && j->rt->t != NULL) {
        sbx_task_exec_cancel(j->rt->t, &j->slot);
    }
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
    t->end_requested = 1;
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* Every 200 ms: ends kept tasks that were asked to end or went idle. */
static void on_tick(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_runner *r = arg;

    (void)fd;
    (void)what;
    pthread_mutex_lock(&r->mu);
    for (struct rtask *t = r->tasks; t != NULL; t = t->next) {
        if (t->keep && t->state == RT_READY && t->running == 0 &&
            (t->end_requested || r->stopping ||
             (t->t != NULL && sbx_task_stopped(t->t, NULL, 0)))) {
            t->state = RT_ENDING;
            if (runner_task_ender_start(r, t) < 0) {
                t->state = RT_READY; /* retried at the next tick */
            }
        }
    }
    if (r->stopping && r->workers == 0 && r->tasks == NULL && runner_warm_idle(r)) {
        event_base_loopbreak(r->base);
    }
    pthread_mutex_unlock(&r->mu);
    if (runner_image_ready(r, NULL, 0)) {
        runner_warm_tick(r);
    }
    runner_trim_finished(r);
}

static void on_alert_timer(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_runner *r = arg;

    (void)fd;
    (void)what;
    runner_alerts_tick(r);
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

/* runner.worktree_roots resolved against the state directory (docs/runner.md,
 * "Worktree roots"): each must exist, none inside the state directory. */
struct sbx_runner *sbx_runner_create(const struct sbx_runner_opts *opts, sbx_error_t **err)
{
    struct sbx_runner *r = xcalloc(1, sizeof(*r));
    struct sbx_sched_opts so = {
        .cfg = opts->cfg,
        .capacity = opts->capacity,
        .clock = opts->clock,
        .clock_ctx = opts->clock_ctx,
    };
    struct timeval tick = {0, 200 * 1000};
    struct timeval alert;
    static int threads_on;

    if (!threads_on) {
        evthread_use_pthreads();
        threads_on = 1;
    }
    sbx_raise_nofile("runner"); /* the shared egress proxy: sockets and pipes per sandbox */
    rm_init(&r->metrics);
    r->cfg = opts->cfg;
    r->plugin_dir = xstrdup(opts->plugin_dir);
    r->policy_dir = sbx_policy_dir_resolve(opts->cfg->policy_dir, err);
    r->policy = r->policy_dir ? sbx_policy_load(r->policy_dir, opts->cfg, err) : NULL;
    if (r->policy == NULL) {
        sbx_error_wrap(err, "runner: policy");
        free(r->policy_dir);
        free(r->plugin_dir);
        rm_destroy(&r->metrics);
        free(r);
        return NULL;
    }
    r->alert_interval_ms = opts->alert_interval_ms > 0 ? opts->alert_interval_ms : 1000;
    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->msgs_tail = &r->msgs;
    if (runner_clients_load(r, err) < 0 || runner_roots_init(r, err) < 0) {
        goto fail;
    }
    if (sbx_runner_endpoint(r->cfg, &r->ep, err) < 0) {
        goto fail;
    }
    if (r->ep.tcp_host != NULL && r->n_clients == 0) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "runner.listen is TCP but runner.token_env %s%s%s and runner.clients is "
                      "empty: a TCP listener needs a bearer token",
                      r->cfg->runner.token_env ? "names an unset variable (" : "is not set",
                      r->cfg->runner.token_env ? r->cfg->runner.token_env : "",
                      r->cfg->runner.token_env ? ")" : "");
        goto fail;
    }
    r->store_path = sbx_runner_state_path(r->cfg, err);
    if (r->store_path == NULL) {
        goto fail;
    }
    sbx_store_pg_limits((int)r->cfg->runner.database_timeout * 1000,
                        (int)r->cfg->runner.database_keepalive);
    r->store = sbx_store_open_ex(r->store_path, r->cfg->runner.database_password_env, err);
    if (r->store == NULL) {
        goto fail;
    }
    runner_roots_deny(r);
    r->sched = sbx_sched_create(&so, err);
    if (r->sched == NULL) {
        goto fail;
    }
    runner_small_box(r);
    if (runner_egress_start(r, err) < 0) {
        goto fail;
    }
    r->base = event_base_new();
    if (r->base == NULL) {
        sbx_error_set(err, SBX_E_GENERIC, "runner: cannot create the event loop");
        goto fail;
    }
    r->wake = event_new(r->base, -1, EV_PERSIST | EV_READ, on_wake, r);
    r->tick = event_new(r->base, -1, EV_PERSIST, on_tick, r);
    r->alert_ev = event_new(r->base, -1, EV_PERSIST, on_alert_timer, r);
    alert.tv_sec = r->alert_interval_ms / 1000;
    alert.tv_usec = (r->alert_interval_ms % 1000) * 1000;
    event_add(r->tick, &tick);
    event_add(r->alert_ev, &alert);
    if (runner_fleet_start(r, err) < 0 || runner_recover(r, err) < 0 ||
        runner_warm_init(r, err) < 0 || runner_image_start(r, err) < 0) {
        goto fail;
    }
    if (runner_api_bind(r, err) < 0 ||
        runner_health_start(r, opts->health_interval_ms > 0 ? opts->health_interval_ms : 5000,
                            err) < 0 ||
        runner_storeprobe_start(r, opts->health_interval_ms > 0 ? opts->health_interval_ms : 5000,
                                err) < 0) {
        goto fail;
    }
    return r;

fail:
    sbx_runner_destroy(r);
    return NULL;
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
    for (struct rjob *j = r->jobs; j != NULL; j = j->next) {
        if (j->state == SBX_JOB_RUNNING) {
            j->cancel = 1;
            if (j->executing && j->rt != NULL && j->rt->t != NULL) {
                sbx_task_exec_cancel(j->rt->t, &j->slot);
            }
        }
    }
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
    runner_task_io_stop(r); /* (added) open terminals (api_term.c) */
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
    runner_image_free(r); /* (added) before the loop its thread posts to */
    sbx_policy_destroy(r->policy);
    free(r->policy_dir);
    if (r->http_unix != NULL) {
        evhttp_free(r->http_unix);
    }
    if (r->http_tcp != NULL) {
        evhttp_free(r->http_tcp);
    }
    runner_api_limits_free(&r->lis[0]);
    runner_api_limits_free(&r->lis[1]);
    if (r->ep.unix_path != NULL && r->base != NULL) {
        unlink(r->ep.unix_path);
    }
    if (r->wake != NULL) {
        event_free(r->wake);
        event_free(r->tick);
        event_free(r->alert_ev);
    }
    while (r->jobs != NULL) {
        struct rjob *j = r->jobs;

        r->jobs = j->next;
        while (j->streams != NULL) { /* their requests went with evhttp_free */
            struct runner_stream *s = j->streams;

            j->streams = s->next;
            free(s);
        }
        runner_job_free(j);
    }
    while (r->tasks != NULL) {
        struct rtask *t = r->tasks;

        r->tasks = t->next;
        free(t);
    }
    while (r->msgs != NULL) {
        struct rmsg *m = r->msgs;

        r->msgs = m->next;
        free(m);
    }
    runner_fleet_free(r);
    if (r->base != NULL) {
        event_base_free(r->base);
    }
    runner_health_free(r);
    runner_storeprobe_free(r);
    runner_status_free(r);
    runner_warm_free(r);        /* before the proxy its sandboxes' sockets are on */
    sbx_egress_stop(r->egress); /* closes what kept tasks still had open, each logged */
    sbx_sched_destroy(r->sched);
    sbx_store_close(r->store);
    sbx_runner_endpoint_clear(&r->ep);
    runner_clients_free(r);
    sbx_confine_clear(&r->confine);
    free(r->store_path);
    free(r->plugin_dir);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    rm_destroy(&r->metrics);
    free(r);
}
