/* api_snap.c - (added) the runner's snapshot and egress-change endpoints (docs/api.md,
 * "Snapshots" and "Egress changes"): POST /v1/tasks/{id}/snapshot, GET /v1/snapshots,
 * DELETE /v1/snapshots/{id} (scope `snapshot`) and POST /v1/tasks/{id}/egress (scope
 * `egress`; rows of runner_api_routes[], api_routes.c). A client acts on the tasks it started
 * and the snapshots it made, or on any with `cancel-any`. Loop thread only, but for the snapshot
 * itself: it is made on a thread of its own (the task held, running++) and answered from the loop
 * when done, at most SNAPS_MAX at a time per box (docs/api.md, "Snapshots"). */
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/route.h"
#include "runner/jobstate.h"
#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/rmetrics.h"
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/forward.h"
#include "runner/jobs.h"
#include "runner/rtask.h"
#include "runner/worker.h"
#include "sandbox/egress_change.h"
#include "sandbox/snapshot.h"
#include "sandbox/statedir.h"
#include "util/log.h"
#include "util/xalloc.h"

#define EGRESS_BODY_MAX 4096
#define SNAPS_MAX 2
#define SNAPS_RETRY_S "5"

/* A snapshot being made: the thread's until it posts snap_done, then the loop's. */
struct snap_op {
    struct sbx_runner *r;
    struct rtask *rt;           /* held (rtask_enter) until snap_done */
    struct evhttp_request *req; /* NULL: libevent freed it with its connection */
    struct evhttp_connection *conn;
    int gone;     /* the client went away: nobody to answer */
    int for_fork; /* (added) ?fork=1: the record says "fork": true */
    char client[64];
    json_t *rec;
    sbx_error_t *err;
};

static int snaps; /* in flight; loop thread only */

static int code_for(const sbx_error_t *e)
{
    switch (e->code) {
    case SBX_E_POLICY:
        return 422;
    case SBX_E_NOTFOUND:
        return 404;
    case SBX_E_USAGE:
        return 400;
    default:
        return 500;
    }
}

/* (added) No other box holds the task either (forward.h). */
static void not_running(struct evhttp_request *req, const char *id)
{
    runner_reply_error(req, 404, "no running task '%s' on this runner", id);
}

/* (added) A snapshot of a task no other box holds while SNAPS_MAX are made here. */
static void snaps_full(struct evhttp_request *req, const char *id)
{
    (void)id;
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", SNAPS_RETRY_S);
    runner_reply_error(req, 429, "%d snapshots are being made on this box: try again later",
                       SNAPS_MAX);
}

/* The running task id of this client (under r->mu), or NULL having replied
 * (or, another box's task, being answered: forward.h). With
 * hold: the task is held (rtask_enter, not ended under the caller) and *hold set. */
static struct sbx_task *own_task(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                                 const struct runner_client *who, struct rtask **hold, unsigned fwd)
{
    struct rtask *t;
    struct sbx_task *st = NULL;
    int mine = 0;
    int ready = 0;

    pthread_mutex_lock(&r->mu);
    t = runner_task_find(r, id);
    if (t != NULL) {
        mine = (who->scopes & SBX_SCOPE_CANCEL_ANY) != 0 || rtask_owned_by(t, who->name);
        ready = rtask_ready(t);
        st = rtask_sandbox(t);
        if (hold != NULL && mine && ready) {
            rtask_enter(t);
            *hold = t;
        }
    }
    pthread_mutex_unlock(&r->mu);
    if (t == NULL) {
        /* (added) another box of the fleet holds it: the request goes there */
        runner_forward_task(r, req, who, id, fwd, not_running);
        return NULL;
    }
    if (!mine) {
        runner_reply_error(req, 403,
                           "task %s belongs to another client: client '%s' lacks scope "
                           "'cancel-any'",
                           id, who->name);
        return NULL;
    }
    if (!ready) {
        runner_reply_error(req, 409, "task %s is not running (starting or ending)", id);
        return NULL;
    }
    return st;
}

/* The client of a snapshot went away: libevent frees its connection, and the
 * request too unless it was detached (then it is ours to free). */
static void snap_closed(struct evhttp_connection *c, void *arg)
{
    struct snap_op *op = arg;

    (void)c;
    op->gone = 1;
    op->conn = NULL;
    if (evhttp_request_get_connection(op->req) != NULL) {
        op->req = NULL; /* freed with the connection */
    }
}

/* Loop thread: the snapshot is made; answer (if anyone waits) and let the task go. */
static void snap_done(evutil_socket_t fd, short what, void *arg)
{
    struct snap_op *op = arg;
    struct sbx_runner *r = op->r;
    struct rtask *t = op->rt;

    (void)fd;
    (void)what;
    runner_task_let_go(r, t);
    snaps--;
    if (op->gone) {
        sbx_info("runner: snapshot for client '%s': the client went away before the reply",
                 op->client);
        if (op->req != NULL) {
            evhttp_request_free(op->req);
        }
        json_decref(op->rec);
    }
    else {
        evhttp_connection_set_closecb(op->conn, NULL, NULL);
        if (op->rec != NULL) {
            runner_reply_json(op->req, 201, op->rec);
        }
        else {
            runner_reply_error(op->req, code_for(op->err), "%s", sbx_error_msg(op->err));
        }
    }
    sbx_error_free(&op->err);
    free(op);
}

/* (api_int.h) the hold of a snapshot or a file request ends */
void runner_task_let_go(struct sbx_runner *r, struct rtask *t)
{
    pthread_mutex_lock(&r->mu);
    rtask_leave(t);
    /* a task ended by its job while held: it ends now (as a kept task's idle end does
     * at the next tick) */
    if (!rtask_keep(t) && rtask_running(t) == 0 && rtask_state(t) == RT_READY) {
        runner_task_move_held(r, t, RTASK_ENDING);
        if (runner_task_ender_start(r, t) < 0) {
            runner_task_move_held(r, t, RTASK_KEPT);
            sbx_warn("runner: task %s: no thread to end it after its snapshot or file request",
                     rtask_id(t));
        }
    }
    pthread_mutex_unlock(&r->mu);
}

static void *snap_main(void *arg)
{
    struct snap_op *op = arg;

    if (sbx_task_snapshot(rtask_sandbox(op->rt), op->client, op->for_fork, &op->rec, &op->err) <
        0) {
        op->rec = NULL;
    }
    /* thread-safe with evthread_use_pthreads() (runner.c); the task stays held,
     * so the loop does not stop before snap_done ran */
    if (event_base_once(op->r->base, -1, EV_TIMEOUT, snap_done, op, NULL) < 0) {
        sbx_warn("runner: snapshot for client '%s': cannot reach the loop", op->client);
    }
    return NULL;
}

static void task_snapshot(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          const struct runner_client *who, int for_fork)
{
    struct rtask *rt = NULL;
    struct snap_op *op;
    pthread_t th;

    if (snaps >= SNAPS_MAX) {
        struct rtask *here;

        pthread_mutex_lock(&r->mu);
        here = runner_task_find(r, id);
        pthread_mutex_unlock(&r->mu);
        /* (added) another box's task: that box's snapshots count, not ours */
        if (here == NULL) {
            runner_forward_task(r, req, who, id, RUNNER_FWD_SLOW, snaps_full);
            return;
        }
        snaps_full(req, id);
        return;
    }
    if (own_task(r, req, id, who, &rt, RUNNER_FWD_SLOW) == NULL) {
        return;
    }
    op = xcalloc(1, sizeof(*op));
    op->r = r;
    op->rt = rt;
    op->req = req;
    op->for_fork = for_fork;
    op->conn = evhttp_request_get_connection(req);
    snprintf(op->client, sizeof(op->client), "%s", who->name);
    snaps++;
    evhttp_connection_set_closecb(op->conn, snap_closed, op);
    if (pthread_create(&th, NULL, snap_main, op) != 0) {
        evhttp_connection_set_closecb(op->conn, NULL, NULL);
        snaps--;
        pthread_mutex_lock(&r->mu);
        rtask_leave(rt);
        pthread_mutex_unlock(&r->mu);
        free(op);
        runner_reply_error(req, 503, "no thread for the snapshot of task %s: try again later", id);
        return;
    }
    pthread_detach(th);
}

static void task_egress(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                        const struct runner_client *who)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    char body[EGRESS_BODY_MAX + 1];
    json_t *j;
    json_t *res = NULL;
    const char *op = NULL;
    const char *rule = NULL;
    sbx_error_t *err = NULL;
    struct sbx_task *t;

    if (len > EGRESS_BODY_MAX) {
        runner_reply_error(req, 413, "request body of %zu bytes is larger than %d bytes", len,
                           EGRESS_BODY_MAX);
        return;
    }
    evbuffer_copyout(in, body, len);
    body[len] = '\0';
    j = json_loadb(body, len, 0, NULL);
    if (json_is_object(j) && json_object_size(j) == 1) {
        op = json_object_get(j, "allow") ? "allow" : json_object_get(j, "deny") ? "deny" : NULL;
        rule = op ? json_string_value(json_object_get(j, op)) : NULL;
    }
    if (op == NULL || rule == NULL) {
        json_decref(j);
        runner_reply_error(req, 400,
                           "body: {\"allow\": \"HOST[:PORT]\"} or {\"deny\": \"HOST[:PORT]\"} "
                           "expected");
        return;
    }
    t = own_task(r, req, id, who, NULL, 0);
    /* (added, issue 31) a keeper's runner: its client is `sbx task allow|deny` */
    if (t != NULL && sbx_task_egress_change(t, op, rule, who->name, r->adopted_only ? "cli" : "api",
                                            &res, &err) < 0) {
        runner_reply_error(req, code_for(err), "%s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    else if (t != NULL) {
        runner_reply_json(req, 200, res);
    }
    json_decref(j);
}

/* The state directory (its snapshots/), or NULL having replied. */
static char *state_of(struct sbx_runner *r, struct evhttp_request *req)
{
    sbx_error_t *err = NULL;
    char *s = sbx_state_dir(r->cfg->state_dir, &err);

    if (s == NULL) {
        runner_reply_error(req, 500, "%s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    return s;
}

static int may_see(const struct runner_client *who, json_t *rec, unsigned any)
{
    const char *by = json_string_value(json_object_get(rec, "by"));

    return (who->scopes & any) != 0 || (by != NULL && strcmp(by, who->name) == 0);
}

static void snapshots_list(struct sbx_runner *r, struct evhttp_request *req,
                           const struct runner_client *who)
{
    char *state = state_of(r, req);
    json_t *all;
    json_t *out;
    json_t *rec;
    size_t i;

    if (state == NULL) {
        return;
    }
    all = sbx_snapshot_list(state, NULL);
    out = json_array();
    free(state);
    json_array_foreach(all, i, rec)
    {
        if (may_see(who, rec, SBX_SCOPE_READ_ALL)) {
            json_array_append(out, rec);
        }
    }
    json_decref(all);
    runner_reply_json(req, 200, json_pack("{s:o}", "snapshots", out));
}

static void snapshot_rm(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                        const struct runner_client *who)
{
    sbx_error_t *err = NULL;
    char *state = state_of(r, req);
    json_t *rec = state ? sbx_snapshot_get(state, id, &err) : NULL;
    int rc;

    if (state == NULL) {
        return;
    }
    if (rec == NULL) {
        free(state);
        runner_reply_error(req, code_for(err), "%s", sbx_error_msg(err));
        sbx_error_free(&err);
        return;
    }
    if (!may_see(who, rec, SBX_SCOPE_CANCEL_ANY)) {
        json_decref(rec);
        free(state);
        runner_reply_error(req, 403,
                           "snapshot %s was made by another client: client '%s' lacks scope "
                           "'cancel-any'",
                           id, who->name);
        return;
    }
    json_decref(rec);
    rc = sbx_snapshot_remove(r->cfg, r->plugin_dir, state, id, &err);
    free(state);
    if (rc < 0) {
        runner_reply_error(req, err->code == SBX_E_ENGINE ? 409 : code_for(err), "%s",
                           sbx_error_msg(err));
        sbx_error_free(&err);
        return;
    }
    runner_reply_json(req, 200, json_pack("{s:s, s:b}", "snapshot", id, "removed", 1));
}

/* (added) POST /v1/jobs with `from` (api_int.h) */
int runner_submit_from(struct sbx_runner *r, struct evhttp_request *req,
                       const struct runner_client *who, struct rjob *j)
{
    const struct rjob_req *q = rjob_req(j);
    const char *prov = q->provider ? q->provider : r->cfg->provider;
    const char *rp;
    const char *ref;
    sbx_error_t *err = NULL;
    char *state;
    json_t *rec;
    int code = 0;
    int running;

    if ((who->scopes & SBX_SCOPE_SNAPSHOT) == 0) {
        code = 403;
        runner_reply_error(req, code, "field 'from': client '%s' lacks scope 'snapshot'",
                           who->name);
        goto out;
    }
    if (r->fleet != NULL) {
        code = 400;
        runner_reply_error(req, code,
                           "field 'from': a fleet box (runner.database) cannot start a job from "
                           "a snapshot yet: the snapshot is in one box's engine only");
        goto out;
    }
    pthread_mutex_lock(&r->mu);
    running = strcmp(q->task, rjob_id(j)) != 0 && runner_task_find(r, q->task) != NULL;
    pthread_mutex_unlock(&r->mu);
    if (running) {
        code = 409;
        runner_reply_error(req, code,
                           "field 'from': task %s is already running; 'from' starts a new task",
                           q->task);
        goto out;
    }
    if ((state = state_of(r, req)) == NULL) {
        code = 500;
        goto out;
    }
    rec = sbx_snapshot_get(state, q->from, &err);
    free(state);
    if (rec == NULL) {
        code = code_for(err);
        runner_reply_error(req, code, "field 'from': %s", sbx_error_msg(err));
        sbx_error_free(&err);
        goto out;
    }
    rp = json_string_value(json_object_get(rec, "provider"));
    ref = json_string_value(json_object_get(rec, "ref"));
    if (!may_see(who, rec, SBX_SCOPE_READ_ALL)) {
        code = 403;
        runner_reply_error(req, code,
                           "field 'from': snapshot %s was made by another client: client '%s' "
                           "lacks scope 'read-all'",
                           q->from, who->name);
    }
    else if (rp == NULL || strcmp(rp, prov) != 0) {
        code = 400;
        runner_reply_error(req, code,
                           "field 'from': snapshot %s is of provider '%s', the job's is '%s'",
                           q->from, rp ? rp : "?", prov);
    }
    else if (ref == NULL || ref[0] == '\0') {
        code = 500;
        runner_reply_error(req, code, "field 'from': snapshot %s has no image in its record",
                           q->from);
    }
    else {
        rjob_set_image(j, xstrdup(ref));
    }
    json_decref(rec);
out:
    if (code != 0) {
        rm_refused(r->metrics, rm_refusal_of(code));
        sbx_warn("runner: client '%s': job from snapshot %s refused (HTTP %d)", who->name, q->from,
                 code);
    }
    return code == 0 ? 0 : -1;
}

/* The route table's rows (api_routes.c): the router has checked the method, the
 * task id and the scope (snapshot, egress). */
void runner_api_task_snapshot(const struct runner_route_call *c)
{
    task_snapshot(c->r, c->req, c->arg[0], c->who, runner_query_flag(c->query, "fork"));
}

void runner_api_task_egress(const struct runner_route_call *c)
{
    task_egress(c->r, c->req, c->arg[0], c->who);
}

void runner_api_snapshots_list(const struct runner_route_call *c)
{
    snapshots_list(c->r, c->req, c->who);
}

/* {snap} is any segment of at most 64 bytes: sbx_snapshot_get says what a
 * snapshot id is (400 "not a snapshot id") */
void runner_api_snapshot_rm(const struct runner_route_call *c)
{
    snapshot_rm(c->r, c->req, c->arg[0], c->who);
}
