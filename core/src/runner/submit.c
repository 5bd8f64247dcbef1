/* submit.c - POST /v1/jobs (docs/api.md; docs/runner.md, "Task ids", "Several
 * boxes", "A slow or silent database"): a submit's three paths, each its own
 * function (issue 31 item 2):
 *
 *   direct  a command for a task live on this box: stored, then run in that
 *           task's sandbox at once (its slot is held already);
 *   local   one box (SQLite): the scheduler first (a refusal stores
 *           nothing), then the store;
 *   shared  a fleet box: checked against this box's shape, stored in the
 *           shared queue, where the box that can start it first claims it.
 *
 * The store part of direct and shared is one call of the store thread
 * (storeq.h) on a fleet box: the loop hands it over with what it decided
 * (the policy, the scheduler's check) and answers when the call comes back,
 * or 503 at the call's deadline. A submit answered 503 at its deadline whose
 * job was stored after all is withdrawn (cancelled while still unclaimed),
 * so the client's retry does not run it twice. Local runs at once: a local
 * file, no network. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "runner/runner.h"
#include "runner/jobstate.h"
#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/rtask.h"
#include "runner/rmetrics.h"
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/fleet.h"
#include "runner/forward.h"
#include "runner/jobs.h"
#include "runner/smallbox.h"
#include "runner/worker.h"
#include "runner/storeq.h"
#include "util/log.h"
#include "util/xalloc.h"

/* A submit's store call (direct and shared) and what it found. */
struct submit_call {
    struct rjob *j; /* the call's until linked (direct) or freed */
    json_t *labels, *argv;
    struct sbx_job_rec rec;   /* its strings are j's, labels' and argv's */
    struct runner_client who; /* name and scopes (no token) */
    int direct;
    int check_task;   /* an explicit task id not live here: forward and busy checks */
    int need_boxes;   /* shared, a pool this box does not serve: a live box must */
    sbx_error_t *pre; /* the loop's refusal, answered after the owner and task checks */
    /* the store thread's findings */
    int other; /* the task id belongs to another client: owner */
    char owner[128];
    int forward; /* the task lives on another box: o */
    struct sbx_store_owner o;
    int rc; /* 0 stored, -1 err (or other/forward), -2 pre */
    sbx_error_t *err;
    int down;
};

/* Policy decides a job when it is submitted (docs/architecture.md): its slot
 * class (unless the request names one) and its limits, which size its slot.
 * A policy error refuses the job (fail closed). Loop thread. */
static int decide_job(struct sbx_runner *r, struct rjob *j, json_t *labels,
                      struct sbx_limits *limits, sbx_error_t **err)
{
    const struct rjob_req *q = rjob_req(j);
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
    job.id = rjob_id(j);
    job.task = q->task;
    job.pool = sbx_pool_name(q->pool);
    job.workdir = q->worktree;
    job.provider = q->provider ? q->provider : r->cfg->provider;
    job.argv = (const char *const *)q->argv;
    pthread_mutex_lock(&r->mu);
    rc = sbx_policy_decide(r->policy, &job, &d, err);
    pthread_mutex_unlock(&r->mu);
    free(kv);
    if (rc < 0) {
        return sbx_error_wrap(err, "policy denied the job");
    }
    *limits = d.limits;
    if (!q->cls_given) {
        rjob_req_fill(j)->cls = (enum sbx_job_class)sbx_job_class_parse(d.slot_class);
    }
    sbx_policy_decision_fini(&d);
    return 0;
}

/* (changed) An explicit task id that is not live on this box: refused while
 * another job of it waits in the queue (this box's or the fleet's), runs, or
 * its sandbox lives on another box (a ready one there got the request
 * forwarded before this; docs/runner.md, "Task ids"). Any thread: st. */
static int task_busy(struct sbx_store *st, const struct rjob *j, sbx_error_t **err)
{
    struct sbx_task_busy b;
    int rc = sbx_store_task_busy(st, rjob_req(j)->task, rjob_id(j), &b, err);

    if (rc <= 0) {
        return rc;
    }
    if (b.queued && b.box[0] == '\0') {
        return sbx_error_set(err, EBUSY,
                             "task %s is still queued (job %s); submit its next command once it "
                             "runs",
                             rjob_req(j)->task, b.job);
    }
    if (b.queued) {
        return sbx_error_set(err, EBUSY,
                             "task %s is still queued (job %s, claimed by box %s); submit its "
                             "next command once it runs",
                             rjob_req(j)->task, b.job, b.box);
    }
    return sbx_error_set(err, EBUSY,
                         "task %s is starting%s%s; submit its next command once it runs",
                         rjob_req(j)->task, b.box[0] ? " on box " : "", b.box);
}

/* The task id belongs to another client (store): 1 with its owner. A store
 * that cannot tell: 0 (the submit's own transaction checks again). */
static int task_of_another(struct sbx_store *st, const struct rjob *j, char *owner, size_t len)
{
    sbx_error_t *err = NULL;
    int rc = sbx_store_task_owner(st, rjob_req(j)->task, owner, len, &err);

    sbx_error_free(&err);
    return rc == 1 && !sbx_store_owner_ok(owner, rjob_req(j)->owner);
}

/* The answer to a task id of another client: 403 when who may not see that
 * client's work, else 409 naming it. */
static void reply_other(struct sbx_runner *r, struct evhttp_request *req, const struct rjob *j,
                        const struct runner_client *who, const char *owner)
{
    rm_refused(r->metrics, rm_refusal_of(403));
    sbx_warn("runner: client '%s' named task %s, which belongs to another client: refused",
             who->name, rjob_req(j)->task);
    if (!runner_may_read(who, owner)) {
        runner_reply_error(req, 403, "task %s belongs to another client; use another task id",
                           rjob_req(j)->task);
    }
    else {
        runner_reply_error(req, 409, "task %s belongs to client '%s'; use another task id",
                           rjob_req(j)->task, owner[0] ? owner : "(from before clients)");
    }
}

static void reply_refused(struct sbx_runner *r, struct evhttp_request *req, int down,
                          const sbx_error_t *err)
{
    int code = runner_http_code(err);

    rm_refused(r->metrics, rm_refusal_of(code));
    if (!runner_reply_unavailable(req, down, err)) {
        runner_reply_error(req, code, "%s", sbx_error_msg(err));
    }
}

static void reply_accepted(struct evhttp_request *req, const struct rjob *j)
{
    runner_reply_json(req, 201,
                      json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", rjob_id(j), "task",
                                rjob_req(j)->task, "pool", sbx_pool_name(rjob_req(j)->pool),
                                "class", sbx_job_class_name(rjob_req(j)->cls), "state",
                                sbx_job_state_name((enum sbx_job_state)rjob_state(j))));
}

/* The record a submit stores; its strings are j's, argv's and labels'. */
static json_t *submit_rec(struct sbx_runner *r, const struct rjob *j, json_t *labels,
                          struct sbx_job_rec *rec)
{
    const struct rjob_req *q = rjob_req(j);
    json_t *argv = json_array();

    for (size_t i = 0; q->argv[i] != NULL; i++) {
        json_array_append_new(argv, json_string(q->argv[i]));
    }
    memset(rec, 0, sizeof(*rec));
    rec->id = (char *)rjob_id(j);
    rec->task = (char *)q->task;
    rec->pool = (char *)sbx_pool_name(q->pool);
    rec->cls = (char *)sbx_job_class_name(q->cls);
    rec->argv = argv;
    rec->labels = labels;
    rec->worktree = q->worktree;
    rec->env = q->env;
    rec->client = (char *)q->owner;
    rec->provider = q->provider ? q->provider : r->cfg->provider;
    rec->image = rjob_image(j) ? (char *)rjob_image(j) /* (added) a snapshot's (`from`) */
                               : (char *)sbx_config_image(r->cfg, sbx_pool_name(q->pool),
                                                          rec->provider); /* (changed) */
    rec->limits = r->cfg->limits;
    return argv;
}

/* ---- direct and shared: the store call ----------------------------------- */

static int submit_store(struct sbx_runner *r, struct sbx_store *st, struct submit_call *c)
{
    struct rjob *j = c->j;

    if (task_of_another(st, j, c->owner, sizeof(c->owner))) {
        c->other = 1;
        return -1;
    }
    if (c->check_task) {
        /* (added) a command for a kept task that lives on another box runs
         * there: the box that holds the task gets the request */
        if (runner_elsewhere(r, st, 1, rjob_req(j)->task, &c->o)) {
            c->forward = 1;
            return -1;
        }
        if (task_busy(st, j, &c->err) < 0) {
            return -1;
        }
    }
    if (c->pre != NULL) {
        return -2;
    }
    if (c->need_boxes) {
        int n = sbx_store_pool_boxes(st, sbx_pool_name(rjob_req(j)->pool), &c->err);

        if (n < 0) {
            return -1;
        }
        if (n == 0) {
            return sbx_error_set(&c->err, SBX_E_POLICY,
                                 "refused: job %s: no live box of the fleet serves pool '%s' "
                                 "(box.pools)",
                                 rjob_id(j), sbx_pool_name(rjob_req(j)->pool));
        }
    }
    if (sbx_store_job_insert(st, &c->rec, &c->err) < 0) {
        return sbx_error_wrap(&c->err, "storing job %s", rjob_id(j));
    }
    if (c->direct) {
        sbx_error_t *e = NULL;

        sbx_store_job_granted(st, rjob_id(j), 0, NULL);
        /* (added) a command run at once in a kept task of this box: its
         * record names the box, for the others' forwards */
        if (runner_fleet_box(r) != NULL && sbx_store_job_own(st, rjob_id(j), &e) < 0) {
            sbx_error_log("runner: %s", sbx_error_msg(e));
            sbx_error_free(&e);
        }
    }
    else {
        sbx_error_t *e = NULL;

        if (sbx_store_notify(st, &e) < 0) { /* the boxes' beat claims it anyway */
            sbx_error_log("runner: %s", sbx_error_msg(e));
            sbx_error_free(&e);
        }
    }
    return 0;
}

static void submit_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct submit_call *c = arg;

    c->rc = submit_store(r, st, c);
    if (c->rc == -1 && !c->other && !c->forward && sbx_store_down(st)) {
        /* (added) a connection the server dropped (a restart of the
         * database) is opened again before the next statement: one more
         * try; nothing was stored by the first */
        sbx_error_free(&c->err);
        c->rc = submit_store(r, st, c);
    }
    c->down = c->rc == -1 && sbx_store_down(st);
}

static void submit_call_free(struct submit_call *c)
{
    if (c->j != NULL) {
        runner_job_free(c->j);
    }
    json_decref(c->labels);
    json_decref(c->argv);
    sbx_error_free(&c->pre);
    sbx_error_free(&c->err);
    sbx_store_owner_clear(&c->o);
    free(c);
}

/* A job stored for a submit that was answered 503 (its call came back after
 * the deadline, or the task ended meanwhile): it must not run. */
struct withdraw {
    char id[SBX_SCHED_ID_MAX];
    int direct;
    char why[160];
};

static void withdraw_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct withdraw *w = arg;
    sbx_error_t *err = NULL;
    int rc;

    (void)r;
    rc = w->direct
             ? sbx_store_job_end(
                   st, w->id, &(struct sbx_job_end){SBX_JOB_CANCELLED, -1, w->why, 0, 0, 0}, &err)
             : sbx_store_job_cancel_queued(st, w->id, w->why, &err);
    if (rc < 0) {
        sbx_warn("runner: job %s was stored for a submit answered 503 and could not be "
                 "withdrawn: %s",
                 w->id, sbx_error_msg(err));
        sbx_error_free(&err);
        return;
    }
    sbx_warn("runner: job %s was stored for a submit answered 503: cancelled (%s)", w->id, w->why);
}

static void withdraw_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    (void)r;
    (void)req;
    (void)late;
    free(arg);
}

static void withdraw(struct sbx_runner *r, const struct rjob *j, int direct, const char *why)
{
    struct withdraw *w = xcalloc(1, sizeof(*w));

    snprintf(w->id, sizeof(w->id), "%s", rjob_id(j));
    snprintf(w->why, sizeof(w->why), "%s", why);
    w->direct = direct;
    runner_sq_write(r, withdraw_work, withdraw_done, w);
}

/* The loop, once the store call is back: the answers common to both paths.
 * 1 when answered (or late), 0 when the job was stored and req waits. */
static int submit_answered(struct sbx_runner *r, struct evhttp_request *req, struct submit_call *c,
                           int late)
{
    if (late) {
        if (c->rc == 0) {
            withdraw(r, c->j, c->direct, "its submit was answered 503 at the store's deadline");
        }
        return 1;
    }
    if (c->other) {
        reply_other(r, req, c->j, &c->who, c->owner);
        return 1;
    }
    if (c->forward) {
        char what[96];

        snprintf(what, sizeof(what), "task %s", rjob_req(c->j)->task);
        runner_forward(r, req, &c->who, &c->o, what, 0, 0);
        return 1;
    }
    if (c->rc == -2) {
        reply_refused(r, req, 0, c->pre);
        return 1;
    }
    if (c->rc < 0) {
        reply_refused(r, req, c->down, c->err);
        return 1;
    }
    return 0;
}

/* ---- direct: a command for a task live on this box ----------------------- */

/* A command runs in a task's sandbox only for the client that started it; a
 * task re-adopted after a restart (owner unknown) only for the unix socket. */
static int direct_owner_ok(const struct rtask *t, const struct rjob *j)
{
    return rtask_owned_by(t, rjob_req(j)->owner) ||
           (rtask_owner(t)[0] == '\0' && strcmp(rjob_req(j)->owner, "local") == 0);
}

static void direct_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct submit_call *c = arg;
    struct rjob *j = c->j;
    struct rtask *t;

    if (submit_answered(r, req, c, late)) {
        submit_call_free(c);
        return;
    }
    t = runner_task_find(r, rjob_req(j)->task);
    if (t == NULL || !rtask_takes_jobs(t) || !direct_owner_ok(t, j)) {
        /* the task ended while the store call ran (another of its id may
         * live here now): the command must not run */
        withdraw(r, j, 1, "its task ended before the command started");
        rm_refused(r->metrics, rm_refusal_of(409));
        runner_reply_error(req, 409, "task %s is ending; start a new task", rjob_req(j)->task);
        submit_call_free(c);
        return;
    }
    c->j = NULL; /* the runner's now */
    pthread_mutex_lock(&r->mu);
    runner_job_move_held(r, j, RJOB_QUEUED); /* its insert: written */
    runner_job_link(r, j);
    pthread_mutex_unlock(&r->mu);
    sbx_info("runner: job %s accepted from client '%s' (task %s, pool %s, %s)", rjob_id(j),
             rjob_req(j)->owner, rjob_req(j)->task, sbx_pool_name(rjob_req(j)->pool),
             sbx_job_class_name(rjob_req(j)->cls));
    /* a command for a running task: its sandbox and slot are already held */
    pthread_mutex_lock(&r->mu);
    rjob_set_rtask(j, t);
    rtask_enter(t);
    runner_job_move_held(r, j, RJOB_GRANTED);
    pthread_mutex_unlock(&r->mu);
    if (runner_worker_start(r, j) < 0) {
        pthread_mutex_lock(&r->mu);
        rtask_leave(t);
        pthread_mutex_unlock(&r->mu);
        runner_job_move(r, j, RJOB_FINISHED,
                        &(struct rjob_move){.deferred = 1,
                                            .exit_status = -1,
                                            .reason = "runner: cannot start a worker thread"},
                        NULL);
        pthread_mutex_lock(&r->mu);
        rjob_release(j);
        pthread_mutex_unlock(&r->mu);
    }
    reply_accepted(req, j);
    submit_call_free(c);
}

static void submit_direct(struct sbx_runner *r, struct evhttp_request *req, struct submit_call *c,
                          struct rtask *t)
{
    struct rjob *j = c->j;

    if (!rtask_takes_jobs(t)) {
        sbx_error_set(&c->pre, EBUSY, "task %s is ending; start a new task", rjob_req(j)->task);
    }
    else if (!direct_owner_ok(t, j)) {
        sbx_error_set(&c->pre, EPERM, "task %s belongs to another client", rjob_req(j)->task);
    }
    c->direct = 1;
    c->argv = submit_rec(r, j, c->labels, &c->rec);
    runner_sq_call(r, req, submit_work, direct_done, c);
}

/* ---- shared: the fleet's queue ------------------------------------------ */

static void shared_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct submit_call *c = arg;
    struct rjob *j = c->j;

    if (submit_answered(r, req, c, late)) {
        submit_call_free(c);
        return;
    }
    runner_job_move(r, j, RJOB_QUEUED, &(struct rjob_move){.memory = 1}, NULL);
    sbx_info("runner: job %s accepted from client '%s' into the shared queue (task %s, pool "
             "%s, %s)",
             rjob_id(j), rjob_req(j)->owner, rjob_req(j)->task, sbx_pool_name(rjob_req(j)->pool),
             sbx_job_class_name(rjob_req(j)->cls));
    reply_accepted(req, j);
    submit_call_free(c); /* a box's claim makes its own */
    runner_fleet_claim(r);
}

static void submit_shared(struct sbx_runner *r, struct evhttp_request *req, struct submit_call *c)
{
    struct rjob *j = c->j;
    struct sbx_sched_snapshot *snap;
    int served;

    c->check_task = strcmp(rjob_req(j)->task, rjob_id(j)) != 0;
    c->argv = submit_rec(r, j, c->labels, &c->rec);
    if (decide_job(r, j, c->labels, &c->rec.limits, &c->pre) == 0) {
        c->rec.cls = (char *)sbx_job_class_name(rjob_req(j)->cls);
        runner_fit_limits(&r->pools, rjob_req(j)->pool, &c->rec.limits);
        /* a fleet box checks the job against its shape (a pool it serves),
         * else a live box of the fleet must serve the pool */
        snap = sbx_sched_snapshot(r->sched);
        served = snap->pools[rjob_req(j)->pool].served;
        sbx_sched_snapshot_free(snap);
        if (served) {
            struct sbx_sched_job sj =
                runner_sched_job(j, c->rec.limits.cpus, c->rec.limits.memory, 0);

            sbx_sched_check(r->sched, &sj, &c->pre);
        }
        c->need_boxes = !served;
    }
    runner_sq_call(r, req, submit_work, shared_done, c);
}

/* ---- local: one box --------------------------------------------------- */

static void submit_local(struct sbx_runner *r, struct evhttp_request *req, struct submit_call *c)
{
    struct rjob *j = c->j;
    const struct rjob_req *q = rjob_req(j);
    sbx_error_t *err = NULL;

    c->argv = submit_rec(r, j, c->labels, &c->rec);
    if (task_of_another(r->store, j, c->owner, sizeof(c->owner))) {
        reply_other(r, req, j, &c->who, c->owner);
        goto out;
    }
    if (strcmp(q->task, rjob_id(j)) != 0 && task_busy(r->store, j, &err) < 0) {
        goto refused;
    }
    if (decide_job(r, j, c->labels, &c->rec.limits, &err) < 0) {
        goto refused;
    }
    c->rec.cls = (char *)sbx_job_class_name(q->cls);
    runner_fit_limits(&r->pools, q->pool, &c->rec.limits);
    {
        struct sbx_sched_job sj = runner_sched_job(j, c->rec.limits.cpus, c->rec.limits.memory, 0);

        /* docs/runner.md: sched first (a refusal stores nothing), then the store */
        if (sbx_sched_submit(r->sched, &sj, &err) < 0) {
            goto refused;
        }
    }
    if (sbx_store_job_insert(r->store, &c->rec, &err) < 0) {
        sbx_sched_cancel(r->sched, rjob_id(j), NULL);
        sbx_error_wrap(&err, "storing job %s", rjob_id(j));
        goto refused;
    }
    c->j = NULL; /* the runner's now */
    pthread_mutex_lock(&r->mu);
    runner_job_move_held(r, j, RJOB_QUEUED); /* its insert: written */
    runner_job_link(r, j);
    pthread_mutex_unlock(&r->mu);
    sbx_info("runner: job %s accepted from client '%s' (task %s, pool %s, %s)", rjob_id(j),
             q->owner, q->task, sbx_pool_name(q->pool), sbx_job_class_name(q->cls));
    runner_schedule(r);
    reply_accepted(req, j);
    goto out;
refused:
    reply_refused(r, req, 0, err);
    sbx_error_free(&err);
out:
    submit_call_free(c);
}

/* ---- the handler ---------------------------------------------------------- */

void runner_handle_submit(struct sbx_runner *r, struct evhttp_request *req,
                          const struct runner_client *who)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    struct submit_call *c;
    struct rjob *j;
    struct rtask *t;
    char msg[512];
    char *body;
    int code;

    if (len > SBX_RUNNER_MAX_BODY) {
        rm_refused(r->metrics, RM_REFUSED_TOO_LARGE);
        runner_reply_error(req, 413,
                           "request body of %zu bytes is larger than the limit of %u bytes", len,
                           SBX_RUNNER_MAX_BODY);
        return;
    }
    body = xmalloc(len + 1);
    evbuffer_copyout(in, body, len);
    body[len] = '\0';
    c = xcalloc(1, sizeof(*c));
    c->rc = -1; /* nothing stored until the store call says so */
    c->j = j = runner_job_new();
    code = runner_parse_submit(r, body, len, j, &c->labels, msg, sizeof(msg));
    free(body);
    if (code != 0) {
        c->labels = NULL; /* a refused body's labels are not the call's (borrowed, freed) */
        submit_call_free(c);
        rm_refused(r->metrics, rm_refusal_of(code));
        runner_reply_error(req, code, "%s", msg);
        return;
    }
    snprintf(rjob_req_fill(j)->owner, sizeof(rjob_req(j)->owner), "%s", who->name);
    snprintf(c->who.name, sizeof(c->who.name), "%s", who->name);
    c->who.scopes = who->scopes;
    if (rjob_req(j)->credentials != NULL &&
        !runner_may_use_credentials(r->auth, who->name, rjob_req(j)->credentials)) {
        /* (added, issue 25) before anything is stored or leased */
        rm_refused(r->metrics, rm_refusal_of(403));
        sbx_warn("runner: client '%s' may not use credential instance '%s': refused", who->name,
                 rjob_req(j)->credentials);
        runner_reply_error(req, 403,
                           "client '%s' may not use credential instance '%s' (runner.clients "
                           "credentials)",
                           who->name, rjob_req(j)->credentials);
        submit_call_free(c);
        return;
    }
    if (rjob_req(j)->from != NULL && runner_submit_from(r, req, who, j) < 0) {
        submit_call_free(c); /* (added, issue 30) answered: the snapshot refused */
        return;
    }
    t = runner_task_find(r, rjob_req(j)->task);
    if (t != NULL) {
        submit_direct(r, req, c, t);
    }
    else if (r->adopted_only) {
        /* (added, issue 31) a keeper's runner hosts its one task, never a new one */
        rm_refused(r->metrics, rm_refusal_of(404));
        runner_reply_error(req, 404, "no running task '%s' (sbx task list)", rjob_req(j)->task);
        submit_call_free(c);
    }
    else if (r->fleet != NULL) {
        submit_shared(r, req, c);
    }
    else {
        submit_local(r, req, c);
    }
}
