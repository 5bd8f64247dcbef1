/* api.c - the runner's HTTP API (docs/api.md, docs/openapi.yaml): JSON in
 * and out, strict validation, one-line errors. Loop thread only. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <sbx/sbx_frame.h>

#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/fleet.h"
#include "runner/rtask.h"
#include "runner/forward.h"
#include "runner/jobs.h"
#include "runner/output.h"
#include "runner/storeq.h"
#include "util/log.h"
#include "util/xalloc.h"

void runner_reply_json(struct evhttp_request *req, int code, json_t *body)
{
    struct evbuffer *b = evbuffer_new();
    /* 15 significant digits: times in ms / 1000 and CPU counts print as given,
     * without %.17g noise (0.1, not 0.10000000000000001) */
    char *text = json_dumps(body, JSON_COMPACT | JSON_REAL_PRECISION(15));

    evbuffer_add_printf(b, "%s\n", text);
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_send_reply(req, code, code < 300 ? "OK" : "Error", b);
    evbuffer_free(b);
    free(text);
    json_decref(body);
}

void runner_reply_error(struct evhttp_request *req, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    runner_reply_json(req, code, json_pack("{s:s}", "error", msg));
}

int runner_http_code(const sbx_error_t *err)
{
    switch (err->code) {
    case SBX_E_POLICY:
        return 422;
    case SBX_E_NOTFOUND:
        return 404;
    case EPERM:
    case EACCES:
        return 403;
    case EEXIST:
    case EBUSY:
    case EINVAL:
        return 409;
    case SBX_E_USAGE:
    case SBX_E_CONFIG:
        return 400;
    default:
        return 500;
    }
}

/* (added) The box that holds a job or a live task, when it is another live
 * or dead box of the fleet: 1 and *o (clear it), else 0 (here, queued with no
 * box, or one box). A store failure: 0 (the local path answers it). st: the
 * caller's connection (the store thread's, or the loop's). */
int runner_elsewhere(struct sbx_runner *r, struct sbx_store *st, int task, const char *id,
                     struct sbx_store_owner *o)
{
    sbx_error_t *err = NULL;
    const char *me = runner_fleet_box(r);

    if (me == NULL || sbx_store_where(st, task, id, o, &err) <= 0) {
        sbx_error_free(&err);
        return 0;
    }
    if (strcmp(o->box, me) == 0) {
        sbx_store_owner_clear(o);
        return 0;
    }
    return 1;
}

/* ---- jobs ---------------------------------------------------------------- */

/* 403 unless who may read a job of owner. */
static int read_denied(struct evhttp_request *req, const struct runner_client *who,
                       const char *what, const char *owner)
{
    if (runner_may_read(who, owner)) {
        return 0;
    }
    if ((who->scopes & (SBX_SCOPE_READ_OWN | SBX_SCOPE_READ_ALL)) == 0) {
        runner_reply_error(req, 403, "client '%s' lacks scope 'read-own'", who->name);
    }
    else {
        runner_reply_error(req, 403,
                           "%s belongs to another client: client '%s' lacks scope 'read-all'", what,
                           who->name);
    }
    return 1;
}

/* (changed) GET /v1/jobs/ID: the record is read by the store thread on a
 * fleet box (storeq.h); the output counts come from the loop's job. */
struct job_get_call {
    char *id;
    struct runner_client who; /* name and scopes (no token) */
    struct sbx_job_rec rec;
    sbx_error_t *err;
    int rc, down;
};

static void job_get_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct job_get_call *c = arg;

    (void)r;
    c->rc = sbx_store_job_get(st, c->id, &c->rec, &c->err);
    c->down = c->rc < 0 && sbx_store_down(st);
}

static void job_get_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct job_get_call *c = arg;
    struct rjob *j;
    char what[96];
    json_t *o;

    if (late) {
        goto out;
    }
    if (c->rc < 0) {
        if (!runner_reply_unavailable(req, c->down, c->err)) {
            runner_reply_error(req, c->err->code == SBX_E_NOTFOUND ? 404 : 500, "%s",
                               sbx_error_msg(c->err));
        }
        goto out;
    }
    snprintf(what, sizeof(what), "job %s", c->id);
    if (read_denied(req, &c->who, what, c->rec.client)) {
        goto out;
    }
    o = sbx_job_rec_to_json(&c->rec);
    j = runner_job_find(r, c->id);
    if (j != NULL) {
        pthread_mutex_lock(&r->mu);
        json_object_set_new(o, "output_bytes",
                            json_integer((json_int_t)runner_output_total(rjob_output(j))));
        json_object_set_new(o, "output_truncated",
                            json_boolean(runner_output_first(rjob_output(j)) > 0));
        if (rjob_wt_events(j) != NULL) { /* (added, issue 31) */
            json_object_set_new(o, "worktree_events", json_deep_copy(rjob_wt_events(j)));
        }
        pthread_mutex_unlock(&r->mu);
    }
    runner_reply_json(req, 200, o);
out:
    sbx_job_rec_clear(&c->rec);
    sbx_error_free(&c->err);
    free(c->id);
    free(c);
}

void runner_handle_job_get(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                           const struct runner_client *who)
{
    struct job_get_call *c = xcalloc(1, sizeof(*c));

    c->id = xstrdup(id);
    snprintf(c->who.name, sizeof(c->who.name), "%s", who->name);
    c->who.scopes = who->scopes;
    runner_sq_read(r, req, job_get_work, job_get_done, c);
}

/* A follow of a job's output (*rjob_streams(j); loop only). */
struct runner_stream {
    struct evhttp_request *req;
    struct rjob *job;
    struct sbx_runner *r; /* (added, issue 31) */
    size_t sent;          /* in runner_output_total terms */
    size_t acked;         /* (added, issue 31) written out to the client (output_wait) */
    int frames;           /* ?frames=1: stdout and stderr kept apart in frames */
    struct runner_stream *next;
};

void runner_streams_free(struct rjob *j)
{
    while (*rjob_streams(j) != NULL) {
        struct runner_stream *s = *rjob_streams(j);

        *rjob_streams(j) = s->next;
        free(s);
    }
}

/* (added, issue 31) output_wait: j's lowest written-out offset and its
 * followers, for a worker waiting in runner_output_wait. Loop thread (it owns
 * rjob_streams(j)). */
static void acked_update(struct sbx_runner *r, struct rjob *j)
{
    size_t low = SIZE_MAX;
    int n = 0;

    if (!r->output_wait) {
        return;
    }
    pthread_mutex_lock(&r->mu);
    for (struct runner_stream *s = *rjob_streams(j); s != NULL; s = s->next) {
        low = s->acked < low ? s->acked : low;
        n++;
    }
    rjob_set_follows(j, n > 0 ? low : runner_output_total(rjob_output(j)), n);
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
}

/* (added, issue 31) The connection wrote out all it was given: what was sent
 * on s is with its client. */
static void stream_drained(struct evhttp_connection *c, void *arg)
{
    struct runner_stream *s = arg;

    (void)c;
    pthread_mutex_lock(&s->r->mu);
    s->acked = s->sent;
    pthread_mutex_unlock(&s->r->mu);
    acked_update(s->r, s->job);
}

static void stream_closed(struct evhttp_connection *c, void *arg)
{
    struct runner_stream *s = arg;

    /* The client went away in the middle of the reply: libevent detached the
     * request from its connection and left it to us (evhttp_send_reply_end
     * frees a request that has no connection). */
    if (c != NULL && evhttp_request_get_connection(s->req) == NULL) {
        evhttp_send_reply_end(s->req);
    }
    for (struct runner_stream **pp = rjob_streams(s->job); *pp != NULL; pp = &(*pp)->next) {
        if (*pp == s) {
            struct sbx_runner *r = s->r;
            struct rjob *j = s->job;

            *pp = s->next;
            free(s);
            acked_update(r, j); /* (added, issue 31) a follower gone stops the wait */
            return;
        }
    }
}

/* A run of the output as frames (docs/api.md; runner_output_runs): the
 * header of sbx/sbx_frame.h {stream (1 stdout, 2 stderr), 0, 0, 0, length
 * u32 BE} then the bytes, at most SBX_FRAME_MAX a frame. Under r->mu. */
static int add_frames(void *ud, int stream, const char *data, size_t len)
{
    struct evbuffer *b = ud;

    while (len > 0) {
        size_t n = len < SBX_FRAME_MAX ? len : SBX_FRAME_MAX;
        unsigned char hdr[SBX_FRAME_HDR];

        sbx_frame_encode(hdr, (unsigned char)stream, (uint32_t)n);
        evbuffer_add(b, hdr, sizeof(hdr));
        evbuffer_add(b, data, n);
        data += n;
        len -= n;
    }
    return 0;
}

void runner_streams_flush(struct sbx_runner *r, struct rjob *j, int final)
{
    struct runner_stream *s = *rjob_streams(j);

    while (s != NULL) {
        struct runner_stream *next = s->next;
        struct evbuffer *b = evbuffer_new();
        size_t start, total;

        pthread_mutex_lock(&r->mu);
        start = runner_output_first(rjob_output(j));
        total = runner_output_total(rjob_output(j));
        if (s->sent < start) {
            s->sent = start; /* older output was dropped (bounded buffer) */
        }
        if (s->frames) {
            runner_output_runs(rjob_output(j), s->sent, add_frames, b);
        }
        else {
            evbuffer_add(b, runner_output_at(rjob_output(j), s->sent), total - s->sent);
        }
        s->sent = total;
        final = final || rjob_state(j) >= SBX_JOB_FINISHED;
        pthread_mutex_unlock(&r->mu);
        if (evbuffer_get_length(b) > 0 && r->output_wait) {
            /* (added, issue 31) told when the client has it (stream_drained) */
            evhttp_send_reply_chunk_with_cb(s->req, b, stream_drained, s);
        }
        else if (evbuffer_get_length(b) > 0) {
            evhttp_send_reply_chunk(s->req, b);
        }
        evbuffer_free(b);
        if (final) {
            struct evhttp_connection *c = evhttp_request_get_connection(s->req);

            evhttp_connection_set_closecb(c, NULL, NULL);
            evhttp_send_reply_end(s->req);
            stream_closed(NULL, s);
        }
        s = next;
    }
}

/* (changed) A job or task this box does not hold in memory: its record and
 * the box that holds it are read by the store thread on a fleet box
 * (storeq.h), and the answer is made when they come back. */
enum lookup_kind { LOOKUP_OUTPUT, LOOKUP_CANCEL, LOOKUP_TASK_END };

struct lookup_call {
    enum lookup_kind kind;
    char *id;
    struct runner_client who; /* name and scopes (no token) */
    int follow, frames;       /* the output */
    /* the store thread's findings */
    int rc; /* the record: 0 read, -1 err */
    struct sbx_job_rec rec;
    sbx_error_t *err;
    int down;
    int mine;    /* cancel: who may cancel it */
    int forward; /* another box holds it: o */
    struct sbx_store_owner o;
    int cancel_rc; /* cancel: the shared queue's cancel (fleet) */
    sbx_error_t *cancel_err;
    int cancel_down;
};

/* A task end for this box: the task lives here (who may end it), or it is
 * nowhere (404). */
static void task_end_here(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          const struct runner_client *who)
{
    sbx_error_t *err = NULL;
    struct rtask *t;
    int mine = 1;

    pthread_mutex_lock(&r->mu);
    t = runner_task_find(r, id);
    if (t != NULL) {
        mine = runner_may_cancel(who, rtask_owner(t));
    }
    pthread_mutex_unlock(&r->mu);
    if (!mine) {
        runner_reply_error(req, 403,
                           "task %s belongs to another client: client '%s' lacks scope "
                           "'cancel-any'",
                           id, who->name);
        return;
    }
    if (runner_task_end(r, id, &err) < 0) {
        runner_reply_error(req, runner_http_code(err), "%s", sbx_error_msg(err));
        sbx_error_free(&err);
        return;
    }
    runner_reply_json(req, 202, json_pack("{s:s, s:s}", "task", id, "state", "ending"));
}

static void lookup_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct lookup_call *c = arg;

    if (c->kind == LOOKUP_TASK_END) {
        c->forward = runner_elsewhere(r, st, 1, c->id, &c->o);
        return;
    }
    c->rc = sbx_store_job_get(st, c->id, &c->rec, &c->err);
    c->down = c->rc < 0 && sbx_store_down(st);
    if (c->down) {
        return;
    }
    if (c->kind == LOOKUP_OUTPUT) {
        if (c->rc == 0 && runner_may_read(&c->who, c->rec.client)) {
            /* (added) its output is on the box that ran it */
            c->forward = runner_elsewhere(r, st, 0, c->id, &c->o);
        }
        return;
    }
    c->mine = c->rc < 0 || runner_may_cancel(&c->who, c->rec.client); /* not found: said below */
    if (!c->mine) {
        return;
    }
    if (c->rc == 0 && c->rec.state < SBX_JOB_FINISHED &&
        runner_elsewhere(r, st, 0, c->id, &c->o)) { /* (added) the box that holds it cancels it */
        c->forward = 1;
        return;
    }
    if (r->fleet != NULL) { /* in the shared queue, or on another box */
        c->cancel_rc =
            sbx_store_job_cancel_queued(st, c->id, "cancelled by request", &c->cancel_err);
        c->cancel_down = c->cancel_rc < 0 && sbx_store_down(st);
    }
    else if (c->rc == 0) {
        c->cancel_rc = sbx_error_set(&c->cancel_err, EINVAL, "job %s already ended (%s)", c->id,
                                     sbx_job_state_name(c->rec.state));
    }
    else {
        c->cancel_rc = -1;
        c->cancel_err = c->err;
        c->err = NULL;
    }
}

static void output_done(struct sbx_runner *r, struct evhttp_request *req, struct lookup_call *c)
{
    char what[96];
    int unclaimed;

    snprintf(what, sizeof(what), "job %s", c->id);
    if (c->rc < 0) {
        if (!runner_reply_unavailable(req, c->down, c->err)) {
            runner_reply_error(req, c->err->code == SBX_E_NOTFOUND ? 404 : 500, "%s",
                               sbx_error_msg(c->err));
        }
        return;
    }
    if (read_denied(req, &c->who, what, c->rec.client)) {
        return;
    }
    unclaimed = c->rec.box == NULL; /* never claimed: queued, or cancelled there */
    if (c->forward) {
        runner_forward(r, req, &c->who, &c->o, what, 1, c->frames);
        return;
    }
    if (unclaimed && runner_fleet_box(r) != NULL) {
        /* (added) never claimed: no output; a follow of a job still in
         * the shared queue waits for the box that claims it (forward.c) */
        if (c->follow && c->rec.state == SBX_JOB_QUEUED) {
            runner_forward_wait(r, req, &c->who, c->id, c->frames);
            return;
        }
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          c->frames ? "application/vnd.sbx.output-frames"
                                    : "text/plain; charset=utf-8");
        evhttp_send_reply(req, 200, "OK", NULL);
        return;
    }
    runner_reply_error(req, 410, "the output of job %s is no longer kept (see its record)", c->id);
}

static void cancel_done(struct sbx_runner *r, struct evhttp_request *req, struct lookup_call *c)
{
    if (c->rc < 0 && runner_reply_unavailable(req, c->down, c->err)) {
        return;
    }
    if (!c->mine) {
        runner_reply_error(req, 403,
                           "job %s belongs to another client: client '%s' lacks scope "
                           "'cancel-any'",
                           c->id, c->who.name);
        return;
    }
    if (c->forward) {
        char what[96];

        snprintf(what, sizeof(what), "job %s", c->id);
        runner_forward(r, req, &c->who, &c->o, what, 0, 0);
        return;
    }
    if (c->cancel_rc < 0) {
        if (!runner_reply_unavailable(req, c->cancel_down, c->cancel_err)) {
            runner_reply_error(req, runner_http_code(c->cancel_err), "%s",
                               sbx_error_msg(c->cancel_err));
        }
        return;
    }
    runner_reply_json(req, 202, json_pack("{s:s, s:s}", "id", c->id, "state", "cancelling"));
}

static void lookup_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct lookup_call *c = arg;

    if (late) {
        goto out;
    }
    if (c->kind == LOOKUP_TASK_END) {
        if (c->forward) { /* (added) the box that holds the task ends it */
            char what[96];

            snprintf(what, sizeof(what), "task %s", c->id);
            runner_forward(r, req, &c->who, &c->o, what, 0, 0);
        }
        else {
            task_end_here(r, req, c->id, &c->who); /* here now, or nowhere */
        }
    }
    else if (c->kind == LOOKUP_OUTPUT) {
        if (runner_job_find(r, c->id) != NULL) { /* claimed by this box meanwhile */
            runner_handle_output(r, req, c->id, c->follow, c->frames, &c->who);
        }
        else {
            output_done(r, req, c);
        }
    }
    else {
        if (runner_job_find(r, c->id) != NULL) { /* claimed by this box meanwhile */
            runner_handle_cancel(r, req, c->id, &c->who);
        }
        else {
            cancel_done(r, req, c);
        }
    }
out:
    sbx_job_rec_clear(&c->rec);
    sbx_error_free(&c->err);
    sbx_error_free(&c->cancel_err);
    sbx_store_owner_clear(&c->o);
    free(c->id);
    free(c);
}

static void lookup(struct sbx_runner *r, struct evhttp_request *req, enum lookup_kind kind,
                   const char *id, const struct runner_client *who, int follow, int frames)
{
    struct lookup_call *c = xcalloc(1, sizeof(*c));

    c->kind = kind;
    c->id = xstrdup(id);
    snprintf(c->who.name, sizeof(c->who.name), "%s", who->name);
    c->who.scopes = who->scopes;
    c->follow = follow;
    c->frames = frames;
    if (kind == LOOKUP_CANCEL) { /* it may cancel a queued job: a write */
        runner_sq_call(r, req, lookup_work, lookup_done, c);
    }
    else {
        runner_sq_read(r, req, lookup_work, lookup_done, c);
    }
}

void runner_handle_output(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          int follow, int frames, const struct runner_client *who)
{
    struct rjob *j = runner_job_find(r, id);
    struct runner_stream *s;
    char what[96];

    if (j == NULL) {
        lookup(r, req, LOOKUP_OUTPUT, id, who, follow, frames);
        return;
    }
    snprintf(what, sizeof(what), "job %s", id);
    if (read_denied(req, who, what, rjob_req(j)->owner)) {
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      frames ? "application/vnd.sbx.output-frames" : "text/plain; charset=utf-8");
    evhttp_send_reply_start(req, 200, "OK");
    s = xcalloc(1, sizeof(*s));
    s->frames = frames;
    s->req = req;
    s->job = j;
    s->r = r;
    pthread_mutex_lock(&r->mu);
    s->acked = runner_output_first(rjob_output(j)); /* (added, issue 31) older bytes are gone */
    pthread_mutex_unlock(&r->mu);
    s->next = *rjob_streams(j);
    *rjob_streams(j) = s;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, s);
    acked_update(r, j);
    runner_streams_flush(r, j, !follow);
}

void runner_handle_cancel(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          const struct runner_client *who)
{
    sbx_error_t *err = NULL;
    struct rjob *j = runner_job_find(r, id);

    if (j == NULL) {
        lookup(r, req, LOOKUP_CANCEL, id, who, 0, 0);
        return;
    }
    if (!runner_may_cancel(who, rjob_req(j)->owner)) {
        runner_reply_error(req, 403,
                           "job %s belongs to another client: client '%s' lacks scope "
                           "'cancel-any'",
                           id, who->name);
        return;
    }
    if (runner_cancel(r, id, &err) < 0) {
        if (!runner_reply_store_down(r, req, err)) {
            runner_reply_error(req, runner_http_code(err), "%s", sbx_error_msg(err));
        }
        sbx_error_free(&err);
        return;
    }
    runner_reply_json(req, 202, json_pack("{s:s, s:s}", "id", id, "state", "cancelling"));
}

void runner_handle_task_end(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                            const struct runner_client *who)
{
    if (runner_task_find(r, id) == NULL && runner_fleet_box(r) != NULL) {
        lookup(r, req, LOOKUP_TASK_END, id, who, 0, 0);
        return;
    }
    task_end_here(r, req, id, who);
}

/* ---- queue, slots, metrics --------------------------------------------- */
