/* api_http.c - the runner API's HTTP side (docs/api.md): who a request is
 * (the unix socket's local client, or a TCP client by its bearer token), what
 * its scopes allow, the queue view as that client may see it, the dispatch through
 * the route table (api_routes.c, route.h), and the
 * listeners with their caps on what an unauthenticated peer can make the
 * runner hold (api_limits.c); (changed) GET /healthz and /readyz (from
 * api_list.c). Loop thread only. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "runner/runner.h"
#include "runner/route.h"
#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/rmetrics.h"
#include "runner/api_int.h"
#include "runner/api_limits.h"
#include "runner/auth.h"
#include "runner/fleet.h"
#include "runner/forward.h"
#include "runner/health.h"
#include "runner/jobs.h"
#include "runner/rtask.h"
#include "runner/status.h"
#include "runner/warm.h"
#include "sandbox/backlog.h"
#include "sandbox/statedir.h"
#include "util/log.h"
#include "util/xalloc.h"

/* ---- queue, slots, metrics --------------------------------------------- */

/* The client a job, task or slot holder id belongs to ("" unknown). */
static const char *owner_of(struct sbx_runner *r, const char *id)
{
    struct rjob *j = id ? runner_job_find(r, id) : NULL;
    struct rtask *t;

    if (j != NULL) {
        return rjob_req(j)->owner;
    }
    t = id ? runner_task_find(r, id) : NULL;
    return t != NULL ? rtask_owner(t) : "";
}

/* Without read-all: other clients' queued jobs are left out, their slots show
 * as busy without job or task, their tasks are left out. */
static void queue_filter(struct sbx_runner *r, json_t *q, const struct runner_client *who)
{
    json_t *p;
    size_t i;

    if (who->scopes & SBX_SCOPE_READ_ALL) {
        return;
    }
    json_array_foreach(json_object_get(q, "pools"), i, p)
    {
        json_t *queued = json_object_get(p, "queued");
        json_t *slots = json_object_get(p, "slots");
        json_t *e;
        size_t k;

        for (k = json_array_size(queued); k-- > 0;) {
            e = json_array_get(queued, k);
            if (strcmp(owner_of(r, json_string_value(json_object_get(e, "id"))), who->name) != 0) {
                json_array_remove(queued, k);
            }
        }
        json_array_foreach(slots, k, e)
        {
            const char *id = json_string_value(json_object_get(e, "job"));

            if (id != NULL && strcmp(owner_of(r, id), who->name) != 0) {
                json_object_set_new(e, "job", json_null());
                json_object_set_new(e, "task", json_null());
            }
        }
    }
}

static json_t *queue_json(struct sbx_runner *r, const struct runner_client *who)
{
    struct sbx_sched_snapshot *snap = sbx_sched_snapshot(r->sched);
    char *text = sbx_sched_snapshot_json(snap);
    json_t *o = json_loads(text, 0, NULL);
    json_t *tasks = json_array();
    int all = (who->scopes & SBX_SCOPE_READ_ALL) != 0;

    free(text);
    sbx_sched_snapshot_free(snap);
    pthread_mutex_lock(&r->mu);
    for (struct rtask *t = r->tab.tasks; t != NULL; t = rtask_next(t)) {
        if (!all && !rtask_owned_by(t, who->name)) {
            continue;
        }
        json_array_append_new(tasks, rtask_json(t));
    }
    pthread_mutex_unlock(&r->mu);
    json_object_set_new(o, "tasks", tasks);
    json_object_set_new(o, "warm", runner_warm_json(r)); /* (added) warm.c */
    json_object_set_new(o, "orphan_sweeps", json_integer((json_int_t)runner_warm_sweeps(r)));
    { /* (added) the box's image before work (image_check.c) */
        char why[512];
        int ready = runner_image_ready(r->image, why, sizeof(why));

        json_object_set_new(json_object_get(o, "box"), "image",
                            json_pack("{s:s?, s:b, s:s?}", "ref", r->cfg->image, "ready", ready,
                                      "waiting_for", ready ? NULL : why));
    }
    queue_filter(r, o, who);
    return o;
}

static void handle_slots(struct sbx_runner *r, struct evhttp_request *req,
                         const struct runner_client *who)
{
    json_t *q = queue_json(r, who);
    json_t *out = json_array();
    json_t *p;
    size_t i;

    json_array_foreach(json_object_get(q, "pools"), i, p)
    {
        json_array_append_new(out, json_pack("{s:O, s:O, s:O}", "pool", json_object_get(p, "pool"),
                                             "heavy_slot", json_object_get(p, "heavy_slot"),
                                             "slots", json_object_get(p, "slots")));
    }
    json_decref(q);
    runner_reply_json(req, 200, json_pack("{s:o}", "pools", out));
}

static void handle_metrics(struct sbx_runner *r, struct evhttp_request *req)
{
    struct sbx_sched_snapshot *snap = sbx_sched_snapshot(r->sched);
    char *text = sbx_sched_metrics(snap);
    struct evbuffer *b = evbuffer_new();
    int served[SBX_POOL_COUNT];
    char *more = NULL;
    size_t more_len = 0;
    FILE *f = open_memstream(&more, &more_len);

    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        served[i] = snap->pools[i].served;
    }
    sbx_sched_snapshot_free(snap);
    evbuffer_add(b, text, strlen(text));
    if (f != NULL) {
        rm_write(r->metrics, f, served);
        runner_fleet_metrics(r, f);
        runner_warm_metrics(r, f);
        /* (added) docs/operations.md, "Removal in the background" */
        fprintf(f,
                "# HELP sbx_removal_backlog Sandboxes killed and waiting for the engine's removal "
                "(-1: unknown).\n# TYPE sbx_removal_backlog gauge\nsbx_removal_backlog %d\n",
                runner_health_backlog(r->health));
        if (fclose(f) == 0) {
            evbuffer_add(b, more, more_len);
        }
        free(more);
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      SBX_METRICS_CONTENT_TYPE);
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
    free(text);
}

/* ---- routing ------------------------------------------------------------- */

/* 403 unless who has scope. */
static int lacks(struct evhttp_request *req, const struct runner_client *who, unsigned scope)
{
    if (who->scopes & scope) {
        return 0;
    }
    runner_reply_error(req, 403, "client '%s' lacks scope '%s'", who->name, sbx_scope_name(scope));
    return 1;
}

static int header_lines(struct evhttp_request *req)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    struct evkeyval *kv;
    int n = 0;

    TAILQ_FOREACH(kv, h, next)
    {
        n++;
    }
    return n;
}

/* The route table's handlers for what lives here. */
void runner_api_metrics(const struct runner_route_call *c)
{
    handle_metrics(c->r, c->req);
}

void runner_api_queue(const struct runner_route_call *c)
{
    /* (changed) a fleet box adds the fleet, read by the store thread */
    runner_fleet_queue(c->r, c->req, queue_json(c->r, c->who));
}

void runner_api_slots(const struct runner_route_call *c)
{
    handle_slots(c->r, c->req, c->who);
}

/* ---- health ------------------------------------------------------------- */

static void health_reply(struct sbx_runner *r, struct evhttp_request *req, int ready)
{
    char store[512] = "";
    double store_age = 0;
    /* (added) the probe's last answer: never a call on the loop */
    int store_ok = runner_storeprobe_state(r->storeprobe, store, sizeof(store), &store_age) == 0;
    char engine[512] = "";
    int engine_ok = runner_health_engine(r->health, engine, sizeof(engine)) == 0;
    json_t *o = json_object();
    json_t *down = json_array();
    int draining = 0;
    int backlog;

    json_object_set_new(o, "store", json_string(store_ok ? "ok" : store));
    json_object_set_new(o, "store_checked", json_real(store_age));
    json_object_set_new(o, "engine", json_string(engine_ok ? "ok" : engine));
    if (!store_ok) {
        json_array_append_new(down, json_string("store"));
    }
    if (!engine_ok) {
        json_array_append_new(down, json_string("engine"));
    }
    backlog = runner_health_backlog(r->health);
    json_object_set_new(o, "removal_backlog", backlog < 0 ? json_null() : json_integer(backlog));
    if (backlog > SBX_REMOVAL_BACKLOG_MAX) {
        json_array_append_new(down, json_string("removal-backlog"));
    }
    if (ready) { /* (added) the image before work (image_check.c) */
        char why[512];

        if (!runner_image_ready(r->image, why, sizeof(why))) {
            json_object_set_new(o, "image", json_string(why));
            json_array_append_new(down, json_string("image"));
        }
    }
    if (ready) {
        struct sbx_sched_snapshot *snap = sbx_sched_snapshot(r->sched);
        int stopping;

        pthread_mutex_lock(&r->mu);
        stopping = r->stopping;
        pthread_mutex_unlock(&r->mu);
        draining = snap->draining;
        sbx_sched_snapshot_free(snap);
        json_object_set_new(o, "draining", json_boolean(draining || stopping));
        if (draining || stopping) {
            json_array_append_new(down, json_string(stopping ? "stopping" : "draining"));
        }
    }
    json_object_set_new(o, "status", json_string(json_array_size(down) == 0 ? "ok" : "down"));
    json_object_set_new(o, "down", down);
    runner_reply_json(req, json_array_size(down) == 0 ? 200 : 503, o);
}

void runner_handle_health(struct sbx_runner *r, struct evhttp_request *req, int ready)
{
    health_reply(r, req, ready);
}

/* One request through the table (api_routes.c, route.h): 404, 405, 400 on an id,
 * 403 on a scope, else the row's handler. */
static void dispatch(struct runner_listener *l, struct evhttp_request *req, const char *path,
                     const struct runner_client *who)
{
    struct sbx_runner *r = l->r;
    struct runner_route_call c;
    const struct runner_route *hit;
    char msg[200] = "";
    int allowed;

    memset(&c, 0, sizeof(c));
    c.r = r;
    c.l = l;
    c.tcp = l->tcp;
    c.req = req;
    c.who = who;
    c.path = path;
    c.query = evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req));
    switch (runner_route_find(runner_api_routes, runner_api_routes_n,
                              (int)evhttp_request_get_command(req), path, &c, &hit, &allowed, msg,
                              sizeof(msg))) {
    case RUNNER_ROUTE_NOT_FOUND:
        runner_reply_error(req, 404, "no endpoint %s (see docs/api.md)", path);
        return;
    case RUNNER_ROUTE_METHOD:
        runner_route_allowed(runner_api_routes, runner_api_routes_n, path, msg, sizeof(msg));
        runner_reply_error(req, 405, "%s: %s", path, msg);
        return;
    case RUNNER_ROUTE_BAD_ID:
        runner_reply_error(req, 400, "%s", msg);
        return;
    case RUNNER_ROUTE_FOUND:
        break;
    }
    if (hit->scope != 0 && (who->scopes & hit->scope) == 0) {
        if (hit->method == EVHTTP_REQ_POST && strcmp(hit->pattern, "/v1/jobs") == 0) {
            rm_refused(r->metrics, RM_REFUSED_FORBIDDEN); /* a refused job */
        }
        lacks(req, who, hit->scope & -hit->scope); /* names the first of them */
        return;
    }
    hit->handler(&c);
}

static void route(struct evhttp_request *req, void *arg)
{
    struct runner_listener *l = arg;
    struct sbx_runner *r = l->r;
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = evhttp_uri_get_path(uri);
    const struct runner_client *who;
    struct runner_client fwd_who;
    const char *authz;
    char why[256] = "";
    int lines = header_lines(req);

    runner_conn_request_done(l, req);
    if (lines > SBX_RUNNER_MAX_HEADERS) {
        sbx_warn("runner: a request with %d header lines refused (limit %d)", lines,
                 SBX_RUNNER_MAX_HEADERS);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        runner_reply_error(req, 431, "%d header lines, more than the limit of %d", lines,
                           SBX_RUNNER_MAX_HEADERS);
        return;
    }
    if (path != NULL && runner_status_route(r->status, l->tcp, req, path)) {
        return; /* the status page (status.c) */
    }
    authz = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    /* (changed) on the unix socket, a request another box forwarded acts for
     * the client it names, with that client's scopes (forward.c) */
    who = l->tcp ? runner_authenticate(r->auth, authz)
                 : runner_forwarded_client(r, req, &fwd_who, why, sizeof(why));
    if (who == NULL && why[0] != '\0') {
        /* (added) forged or malformed forwarding headers: refused, logged */
        sbx_warn("runner: a request on the unix socket refused: %s", why);
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        runner_reply_error(req, 400, "%s", why);
        return;
    }
    if (who == NULL && authz == NULL && path != NULL) {
        who = runner_status_session(r->status, req, path); /* the page's GETs, by its cookie */
    }
    if (who == NULL) {
        struct evkeyvalq *out = evhttp_request_get_output_headers(req);

        /* no second request on this connection without a token */
        evhttp_add_header(out, "WWW-Authenticate", "Bearer");
        evhttp_add_header(out, "Connection", "close");
        rm_refused(r->metrics, RM_REFUSED_UNAUTHORIZED);
        runner_reply_error(req, 401, "missing or wrong bearer token (Authorization: Bearer ...)");
        return;
    }
    if (path == NULL) {
        runner_reply_error(req, 400, "bad request path");
        return;
    }
    dispatch(l, req, path, who);
}

static int bind_unix(struct sbx_runner *r, sbx_error_t **err)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    evutil_socket_t fd;
    char *dir = xstrdup(r->ep.unix_path);
    char *slash = strrchr(dir, '/');

    if (strlen(r->ep.unix_path) >= sizeof(sa.sun_path)) {
        free(dir);
        return sbx_error_set(err, SBX_E_CONFIG, "runner socket path %s is too long",
                             r->ep.unix_path);
    }
    if (slash != NULL && slash != dir) {
        *slash = '\0';
        if (sbx_mkdirs(dir, 0755, err) < 0) {
            free(dir);
            return -1;
        }
    }
    free(dir);
    strcpy(sa.sun_path, r->ep.unix_path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        return sbx_error_set(err, errno, "socket: %s", strerror(errno));
    }
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EAGAIN) {
        close(fd);
        return sbx_error_set(err, EADDRINUSE, "runner: another runner listens on %s",
                             r->ep.unix_path);
    }
    unlink(r->ep.unix_path); /* a stale socket of a dead runner */
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || chmod(sa.sun_path, 0660) < 0 ||
        listen(fd, 128) < 0) {
        int e = errno;

        close(fd);
        return sbx_error_set(err, e, "runner: listening on %s: %s", r->ep.unix_path, strerror(e));
    }
    r->lis[0].r = r;
    r->http_unix = evhttp_new(r->base);
    runner_api_limits(&r->lis[0], r->http_unix, r->base);
    evhttp_set_allowed_methods(r->http_unix, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                                 EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(r->http_unix, route, &r->lis[0]);
    if (evhttp_accept_socket(r->http_unix, fd) < 0) {
        close(fd);
        return sbx_error_set(err, SBX_E_GENERIC, "runner: evhttp cannot accept on %s",
                             r->ep.unix_path);
    }
    return 0;
}

int runner_api_bind(struct sbx_runner *r, sbx_error_t **err)
{
    if (bind_unix(r, err) < 0) {
        return -1;
    }
    if (r->ep.tcp_host != NULL) {
        r->lis[1].r = r;
        r->lis[1].tcp = 1;
        r->http_tcp = evhttp_new(r->base);
        runner_api_limits(&r->lis[1], r->http_tcp, r->base);
        evhttp_set_gencb(r->http_tcp, route, &r->lis[1]);
        if (evhttp_bind_socket(r->http_tcp, r->ep.tcp_host, (ev_uint16_t)r->ep.tcp_port) < 0) {
            return sbx_error_set(err, EADDRINUSE, "runner: cannot listen on tcp:%s:%d",
                                 r->ep.tcp_host, r->ep.tcp_port);
        }
    }
    sbx_info("runner: listening on unix:%s%s", r->ep.unix_path, r->ep.tcp_host ? " and TCP" : "");
    return 0;
}
