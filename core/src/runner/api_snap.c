/* api_snap.c - (added) the runner's snapshot and egress-change endpoints (docs/api.md,
 * "Snapshots" and "Egress changes"): POST /v1/tasks/{id}/snapshot, GET /v1/snapshots,
 * DELETE /v1/snapshots/{id} (scope `snapshot`) and POST /v1/tasks/{id}/egress (scope
 * `egress`; rows of runner_api_routes[], api_routes.c). A client acts on the tasks it started and
 * the snapshots it made, or on any with `cancel-any`. Loop thread only: a snapshot is made while
 * the request waits (see docs/api.md for what that costs the other requests). */
#include <event2/buffer.h>
#include <event2/http.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/route.h"
#include "runner/runner_int.h"
#include "sandbox/egress_change.h"
#include "sandbox/snapshot.h"
#include "sandbox/statedir.h"
#include "util/xalloc.h"

#define EGRESS_BODY_MAX 4096

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

/* The running task id of this client (under r->mu), or NULL having replied. */
static struct sbx_task *own_task(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                                 const struct runner_client *who)
{
    struct rtask *t;
    struct sbx_task *st = NULL;
    int mine = 0;
    int ready = 0;

    pthread_mutex_lock(&r->mu);
    t = runner_task_find(r, id);
    if (t != NULL) {
        mine = (who->scopes & SBX_SCOPE_CANCEL_ANY) != 0 || strcmp(t->owner, who->name) == 0;
        ready = t->state == RT_READY && t->t != NULL;
        st = t->t;
    }
    pthread_mutex_unlock(&r->mu);
    if (t == NULL) {
        runner_reply_error(req, 404, "no running task '%s' on this runner", id);
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

static void task_snapshot(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          const struct runner_client *who)
{
    struct sbx_task *t = own_task(r, req, id, who);
    sbx_error_t *err = NULL;
    json_t *rec = NULL;

    if (t == NULL) {
        return;
    }
    if (sbx_task_snapshot(t, who->name, 0, &rec, &err) < 0) {
        runner_reply_error(req, code_for(err), "%s", sbx_error_msg(err));
        sbx_error_free(&err);
        return;
    }
    runner_reply_json(req, 201, rec);
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
    t = own_task(r, req, id, who);
    if (t != NULL && sbx_task_egress_change(t, op, rule, who->name, "api", &res, &err) < 0) {
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

/* The route table's rows (api_routes.c): the router has checked the method, the
 * task id and the scope (snapshot, egress). */
void runner_api_task_snapshot(const struct runner_route_call *c)
{
    task_snapshot(c->r, c->req, c->arg[0], c->who);
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
