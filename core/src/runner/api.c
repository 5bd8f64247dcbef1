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
#include "runner/records.h"
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/fleet.h"
#include "runner/rtask.h"
#include "runner/forward.h"
#include "runner/jobs.h"
#include "runner/output.h"
#include "runner/storeq.h"
#include "sandbox/statedir.h"
#include "util/envname.h"
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

/* ---- submit ------------------------------------------------------------ */

static const char *const submit_fields[] = {"argv",   "task",     "pool",     "class",
                                            "labels", "worktree", "provider", "credentials",
                                            "env",    "from",     NULL};

static int opt_string(json_t *o, const char *key, const char **out, char *msg, size_t len)
{
    json_t *v = json_object_get(o, key);

    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_string(v)) {
        snprintf(msg, len, "field '%s' must be a string", key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

static int labels_ok(json_t *labels, char *msg, size_t len)
{
    const char *k;
    json_t *v;

    if (!json_is_object(labels)) {
        snprintf(msg, len, "field 'labels' must be an object of strings");
        return -1;
    }
    if (json_object_size(labels) > 64) {
        snprintf(msg, len, "field 'labels': at most 64 labels");
        return -1;
    }
    json_object_foreach(labels, k, v)
    {
        size_t n = strlen(k);

        if (n == 0 || n > 63 ||
            strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/-") != n) {
            snprintf(msg, len, "label '%.80s': names are 1-63 of [A-Za-z0-9._/-]", k);
            return -1;
        }
        if (!json_is_string(v) || strlen(json_string_value(v)) > 256) {
            snprintf(msg, len, "label '%s' must be a string of at most 256 bytes", k);
            return -1;
        }
    }
    return 0;
}

/* The command's variables: names as `sbx run --env` takes them
 * (util/envname.h), string values. */
static int env_ok(json_t *env, char *msg, size_t len)
{
    const char *k;
    json_t *v;

    if (!json_is_object(env)) {
        snprintf(msg, len, "field 'env' must be an object of NAME: \"value\" strings");
        return -1;
    }
    json_object_foreach(env, k, v)
    {
        if (!sbx_env_name_valid(k, strlen(k))) {
            snprintf(msg, len, "env.%.80s: invalid variable name (" SBX_ENV_NAME_RULE ")", k);
            return -1;
        }
        if (!json_is_string(v)) {
            snprintf(msg, len, "env.%.80s: the value must be a string", k);
            return -1;
        }
    }
    return 0;
}

/* Parses and checks a submit body into *j: 0, or the HTTP status with the
 * reason in msg. The worktree is confined below runner.worktree_roots and
 * kept resolved (docs/runner.md, "Worktree roots"). */
int runner_parse_submit(struct sbx_runner *r, const char *body, size_t len, struct rjob *j,
                        json_t **labels, char *msg, size_t mlen)
{
    char *real_wt = NULL;
    int code = 400;
    json_error_t jerr;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    json_t *argv;
    const char *k;
    json_t *v;
    const char *task, *pool, *cls, *wt, *prov, *cred, *from;
    json_t *env = NULL;
    int rc = -1;

    if (o == NULL) {
        snprintf(msg, mlen, "malformed JSON at line %d column %d: %s", jerr.line, jerr.column,
                 jerr.text);
        return 400;
    }
    if (!json_is_object(o)) {
        snprintf(msg, mlen, "the body must be a JSON object");
        goto out;
    }
    json_object_foreach(o, k, v)
    {
        size_t i = 0;

        while (submit_fields[i] != NULL && strcmp(submit_fields[i], k) != 0) {
            i++;
        }
        if (submit_fields[i] == NULL) {
            snprintf(msg, mlen,
                     "unknown field '%.80s' (allowed: argv, task, pool, class, "
                     "labels, worktree, provider, credentials, env, from)",
                     k);
            goto out;
        }
    }
    argv = json_object_get(o, "argv");
    if (argv == NULL) {
        snprintf(msg, mlen, "field 'argv' is required (the command, an array of strings)");
        goto out;
    }
    if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 4096) {
        snprintf(msg, mlen, "field 'argv' must be a non-empty array of at most 4096 strings");
        goto out;
    }
    for (size_t i = 0; i < json_array_size(argv); i++) {
        if (!json_is_string(json_array_get(argv, i))) {
            snprintf(msg, mlen, "field 'argv': element %zu must be a string", i);
            goto out;
        }
    }
    if (json_string_value(json_array_get(argv, 0))[0] == '\0') {
        snprintf(msg, mlen, "field 'argv': the command name is empty");
        goto out;
    }
    if (opt_string(o, "task", &task, msg, mlen) < 0 ||
        opt_string(o, "pool", &pool, msg, mlen) < 0 ||
        opt_string(o, "class", &cls, msg, mlen) < 0 ||
        opt_string(o, "worktree", &wt, msg, mlen) < 0 ||
        opt_string(o, "provider", &prov, msg, mlen) < 0 ||
        opt_string(o, "credentials", &cred, msg, mlen) < 0 ||
        opt_string(o, "from", &from, msg, mlen) < 0) {
        goto out;
    }
    if (task != NULL && (!sbx_id_valid(task, SBX_ID_TASK) || strlen(task) >= SBX_SCHED_ID_MAX)) {
        snprintf(msg, mlen,
                 "field 'task' '%.80s': use 1-63 letters, digits, '-', '_' or '.', "
                 "starting with a letter or digit",
                 task);
        goto out;
    }
    if (pool != NULL && sbx_pool_parse(pool) < 0) {
        snprintf(msg, mlen, "field 'pool' '%.40s': use ci or agent", pool);
        goto out;
    }
    if (cls != NULL && sbx_job_class_parse(cls) < 0) {
        snprintf(msg, mlen, "field 'class' '%.40s': use light or heavy", cls);
        goto out;
    }
    if (wt != NULL && (wt[0] != '/' || strlen(wt) > 4096)) {
        snprintf(msg, mlen, "field 'worktree' must be an absolute path");
        goto out;
    }
    if (wt != NULL) {
        code = sbx_confine_dir(&r->confine, wt, &real_wt, msg, mlen);
        if (code != 0) {
            goto out;
        }
        code = 400;
    }
    if (prov != NULL && sbx_config_instance(r->cfg, prov, SBX_PLUGIN_PROVIDER) == NULL) {
        snprintf(msg, mlen,
                 "field 'provider': no provider instance '%.80s' in the "
                 "configuration",
                 prov);
        goto out;
    }
    if (cred != NULL && sbx_config_instance(r->cfg, cred, SBX_PLUGIN_CREDENTIAL) == NULL) {
        snprintf(msg, mlen,
                 "field 'credentials': no credential instance '%.80s' in the "
                 "configuration",
                 cred);
        goto out;
    }
    *labels = json_object_get(o, "labels");
    if (*labels != NULL && labels_ok(*labels, msg, mlen) < 0) {
        goto out;
    }
    env = json_object_get(o, "env");
    if (json_is_null(env)) {
        env = NULL;
    }
    if (env != NULL && env_ok(env, msg, mlen) < 0) {
        goto out;
    }
    json_incref(*labels);
    j->env = env != NULL && json_object_size(env) > 0 ? json_incref(env) : NULL;
    sbx_task_id_new(j->id, sizeof(j->id));
    j->id[0] = 'j'; /* "j-" and 12 hex digits */
    snprintf(j->task, sizeof(j->task), "%s", task ? task : j->id);
    j->pool = pool ? (enum sbx_pool)sbx_pool_parse(pool) : SBX_POOL_CI;
    j->cls = cls ? (enum sbx_job_class)sbx_job_class_parse(cls) : SBX_CLASS_LIGHT;
    j->cls_given = cls != NULL;
    j->argv = xcalloc(json_array_size(argv) + 1, sizeof(char *));
    for (size_t i = 0; i < json_array_size(argv); i++) {
        j->argv[i] = xstrdup(json_string_value(json_array_get(argv, i)));
    }
    j->worktree = real_wt;
    real_wt = NULL;
    j->provider = prov ? xstrdup(prov) : NULL;
    j->credentials = cred ? xstrdup(cred) : NULL;
    j->from = from ? xstrdup(from) : NULL; /* checked with the client (runner_submit_from) */
    rc = 0;
out:
    free(real_wt);
    json_decref(o);
    return rc == 0 ? 0 : code;
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
        json_object_set_new(o, "output_bytes", json_integer((json_int_t)j->out_total));
        json_object_set_new(o, "output_truncated", json_boolean(j->out_total > j->out_len));
        if (j->wt_events != NULL) { /* (added, issue 31) */
            json_object_set_new(o, "worktree_events", json_deep_copy(j->wt_events));
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

/* A follow of a job's output (j->streams; loop only). */
struct runner_stream {
    struct evhttp_request *req;
    struct rjob *job;
    struct sbx_runner *r; /* (added, issue 31) */
    size_t sent;          /* in out_total terms */
    size_t acked;         /* (added, issue 31) written out to the client (output_wait) */
    int frames;           /* ?frames=1: stdout and stderr kept apart in frames */
    struct runner_stream *next;
};

void runner_streams_free(struct rjob *j)
{
    while (j->streams != NULL) {
        struct runner_stream *s = j->streams;

        j->streams = s->next;
        free(s);
    }
}

/* (added, issue 31) output_wait: j's lowest written-out offset and its
 * followers, for a worker waiting in runner_output_wait. Loop thread (it owns
 * j->streams). */
static void acked_update(struct sbx_runner *r, struct rjob *j)
{
    size_t low = SIZE_MAX;
    int n = 0;

    if (!r->output_wait) {
        return;
    }
    pthread_mutex_lock(&r->mu);
    for (struct runner_stream *s = j->streams; s != NULL; s = s->next) {
        low = s->acked < low ? s->acked : low;
        n++;
    }
    j->out_acked = n > 0 ? low : j->out_total;
    j->followers = n;
    j->followed |= n > 0;
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
    for (struct runner_stream **pp = &s->job->streams; *pp != NULL; pp = &(*pp)->next) {
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

/* The output from absolute offset from on, as frames (docs/api.md): the
 * header of sbx/sbx_frame.h {stream (1 stdout, 2 stderr), 0, 0, 0, length
 * u32 BE} then the bytes, at most SBX_FRAME_MAX a frame. Under r->mu. */
static void add_frames(struct evbuffer *b, struct rjob *j, size_t from, size_t start)
{
    while (from < j->out_total) {
        size_t end;
        int stream = runner_output_stream_at(j, from, &end);
        size_t n = end - from < SBX_FRAME_MAX ? end - from : SBX_FRAME_MAX;
        unsigned char hdr[SBX_FRAME_HDR];

        sbx_frame_encode(hdr, (unsigned char)stream, (uint32_t)n);
        evbuffer_add(b, hdr, sizeof(hdr));
        evbuffer_add(b, runner_output_bytes(j) + (from - start), n);
        from += n;
    }
}

void runner_streams_flush(struct sbx_runner *r, struct rjob *j, int final)
{
    struct runner_stream *s = j->streams;

    while (s != NULL) {
        struct runner_stream *next = s->next;
        struct evbuffer *b = evbuffer_new();
        size_t start;

        pthread_mutex_lock(&r->mu);
        start = j->out_total - j->out_len;
        if (s->sent < start) {
            s->sent = start; /* older output was dropped (bounded buffer) */
        }
        if (s->frames) {
            add_frames(b, j, s->sent, start);
        }
        else {
            evbuffer_add(b, runner_output_bytes(j) + (s->sent - start), j->out_total - s->sent);
        }
        s->sent = j->out_total;
        final = final || j->state >= SBX_JOB_FINISHED;
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
    if (read_denied(req, who, what, j->owner)) {
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
    s->acked = j->out_total - j->out_len; /* (added, issue 31) older bytes are gone */
    pthread_mutex_unlock(&r->mu);
    s->next = j->streams;
    j->streams = s;
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
    if (!runner_may_cancel(who, j->owner)) {
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
