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

#include "runner/runner_int.h"
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

static int http_code_for(const sbx_error_t *err)
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
 * box, or one box). A store failure: 0 (the local path answers it). */
static int elsewhere(struct sbx_runner *r, int task, const char *id, struct sbx_store_owner *o)
{
    sbx_error_t *err = NULL;
    const char *me = runner_fleet_box(r);

    if (me == NULL || sbx_store_where(r->store, task, id, o, &err) <= 0) {
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

/* (added) The task id belongs to another client (docs/runner.md, "Task
 * ids"): 403 when who may not see that client's work, else 409 naming it; 1
 * when answered. A store that cannot tell: 0 (the submit's own transaction
 * checks again). */
static int task_of_another(struct sbx_runner *r, struct evhttp_request *req, const struct rjob *j,
                           const struct runner_client *who)
{
    char owner[128];
    sbx_error_t *err = NULL;
    int rc = sbx_store_task_owner(r->store, j->task, owner, sizeof(owner), &err);

    sbx_error_free(&err);
    if (rc != 1 || sbx_store_owner_ok(owner, j->owner)) {
        return 0;
    }
    rm_refused(&r->metrics, rm_refusal_of(403));
    sbx_warn("runner: client '%s' named task %s, which belongs to another client: refused",
             who->name, j->task);
    if (!runner_may_read(who, owner)) {
        runner_reply_error(req, 403, "task %s belongs to another client; use another task id",
                           j->task);
    }
    else {
        runner_reply_error(req, 409, "task %s belongs to client '%s'; use another task id", j->task,
                           owner[0] ? owner : "(from before clients)");
    }
    return 1;
}

void runner_handle_submit(struct sbx_runner *r, struct evhttp_request *req,
                          const struct runner_client *who)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    struct rjob *j;
    json_t *labels = NULL;
    sbx_error_t *err = NULL;
    char msg[512];
    char *body;
    int code;

    if (len > SBX_RUNNER_MAX_BODY) {
        rm_refused(&r->metrics, RM_REFUSED_TOO_LARGE);
        runner_reply_error(req, 413,
                           "request body of %zu bytes is larger than the limit of %u bytes", len,
                           SBX_RUNNER_MAX_BODY);
        return;
    }
    body = xmalloc(len + 1);
    evbuffer_copyout(in, body, len);
    body[len] = '\0';
    j = xcalloc(1, sizeof(*j));
    code = runner_parse_submit(r, body, len, j, &labels, msg, sizeof(msg));
    if (code != 0) {
        free(body);
        runner_job_free(j);
        rm_refused(&r->metrics, rm_refusal_of(code));
        runner_reply_error(req, code, "%s", msg);
        return;
    }
    snprintf(j->owner, sizeof(j->owner), "%s", who->name);
    free(body);
    if (j->credentials != NULL && !runner_may_use_credentials(r, who->name, j->credentials)) {
        /* (added, issue 25) before anything is stored or leased */
        rm_refused(&r->metrics, rm_refusal_of(403));
        sbx_warn("runner: client '%s' may not use credential instance '%s': refused", who->name,
                 j->credentials);
        runner_reply_error(req, 403,
                           "client '%s' may not use credential instance '%s' (runner.clients "
                           "credentials)",
                           who->name, j->credentials);
        json_decref(labels);
        runner_job_free(j);
        return;
    }
    if (task_of_another(r, req, j, who) ||
        (j->from != NULL && runner_submit_from(r, req, who, j) < 0)) {
        json_decref(labels);
        runner_job_free(j);
        return;
    }
    if (strcmp(j->task, j->id) != 0 && runner_task_find(r, j->task) == NULL) {
        struct sbx_store_owner o;

        /* (added) a command for a kept task that lives on another box runs
         * there: the box that holds the task gets the request */
        if (elsewhere(r, 1, j->task, &o)) {
            char what[96];

            snprintf(what, sizeof(what), "task %s", j->task);
            json_decref(labels);
            runner_job_free(j);
            runner_forward(r, req, who, &o, what, 0, 0);
            sbx_store_owner_clear(&o);
            return;
        }
    }
    code = runner_submit(r, j, labels, &err);
    if (code < 0 && sbx_store_down(r->store)) {
        /* (added) a connection the server dropped (a restart of the
         * database) is opened again before the next statement: one more try;
         * nothing was stored by the first */
        sbx_error_free(&err);
        code = runner_submit(r, j, labels, &err);
    }
    if (code < 0) {
        code = http_code_for(err);

        json_decref(labels);
        runner_job_free(j);
        rm_refused(&r->metrics, rm_refusal_of(code));
        if (!runner_reply_store_down(r, req, err)) {
            runner_reply_error(req, code, "%s", sbx_error_msg(err));
        }
        sbx_error_free(&err);
        return;
    }
    json_decref(labels);
    if (code == 0 && runner_fleet_box(r) != NULL) {
        /* (added) a command run at once in a kept task of this box: its
         * record names the box, for the others' forwards */
        if (sbx_store_job_own(r->store, j->id, &err) < 0) {
            sbx_error_log("runner: %s", sbx_error_msg(err));
            sbx_error_free(&err);
        }
    }
    runner_reply_json(req, 201,
                      json_pack("{s:s, s:s, s:s, s:s, s:s}", "id", j->id, "task", j->task, "pool",
                                sbx_pool_name(j->pool), "class", sbx_job_class_name(j->cls),
                                "state", sbx_job_state_name((enum sbx_job_state)j->state)));
    if (code == 1) { /* in the shared queue: a box's claim makes its own */
        runner_job_free(j);
    }
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

void runner_handle_job_get(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                           const struct runner_client *who)
{
    struct sbx_job_rec rec = {0};
    sbx_error_t *err = NULL;
    struct rjob *j = runner_job_find(r, id);
    json_t *o;

    if (sbx_store_job_get(r->store, id, &rec, &err) < 0) {
        if (!runner_reply_store_down(r, req, err)) {
            runner_reply_error(req, err->code == SBX_E_NOTFOUND ? 404 : 500, "%s",
                               sbx_error_msg(err));
        }
        sbx_error_free(&err);
        return;
    }
    {
        char what[96];

        snprintf(what, sizeof(what), "job %s", id);
        if (read_denied(req, who, what, rec.client)) {
            sbx_job_rec_clear(&rec);
            return;
        }
    }
    o = sbx_job_rec_to_json(&rec);
    if (j != NULL) {
        pthread_mutex_lock(&r->mu);
        json_object_set_new(o, "output_bytes", json_integer((json_int_t)j->out_total));
        json_object_set_new(o, "output_truncated", json_boolean(j->out_total > j->out_len));
        pthread_mutex_unlock(&r->mu);
    }
    sbx_job_rec_clear(&rec);
    runner_reply_json(req, 200, o);
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
            *pp = s->next;
            free(s);
            return;
        }
    }
}

/* The output from absolute offset from on, as frames (docs/api.md): 8 bytes
 * {stream (1 stdout, 2 stderr), 0, 0, 0, length as 32-bit big-endian} then
 * the bytes. Under r->mu. */
static void add_frames(struct evbuffer *b, struct rjob *j, size_t from, size_t start)
{
    while (from < j->out_total) {
        size_t end;
        int stream = runner_output_stream_at(j, from, &end);
        size_t n = end - from;
        unsigned char hdr[8] = {(unsigned char)stream,
                                0,
                                0,
                                0,
                                (unsigned char)(n >> 24),
                                (unsigned char)(n >> 16),
                                (unsigned char)(n >> 8),
                                (unsigned char)n};

        evbuffer_add(b, hdr, sizeof(hdr));
        evbuffer_add(b, runner_output_bytes(j) + (from - start), n);
        from = end;
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
        if (evbuffer_get_length(b) > 0) {
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

void runner_handle_output(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          int follow, int frames, const struct runner_client *who)
{
    struct rjob *j = runner_job_find(r, id);
    struct runner_stream *s;
    struct sbx_job_rec rec = {0};
    char what[96];

    snprintf(what, sizeof(what), "job %s", id);
    if (j == NULL) {
        sbx_error_t *err = NULL;

        struct sbx_store_owner o;

        if (sbx_store_job_get(r->store, id, &rec, &err) < 0) {
            if (!runner_reply_store_down(r, req, err)) {
                runner_reply_error(req, err->code == SBX_E_NOTFOUND ? 404 : 500, "%s",
                                   sbx_error_msg(err));
            }
            sbx_error_free(&err);
            return;
        }
        int unclaimed;

        if (read_denied(req, who, what, rec.client)) {
            sbx_job_rec_clear(&rec);
            return;
        }
        unclaimed = rec.box == NULL; /* never claimed: queued, or cancelled there */
        follow = follow && rec.state == SBX_JOB_QUEUED;
        sbx_job_rec_clear(&rec);
        if (elsewhere(r, 0, id, &o)) { /* (added) its output is on the box that ran it */
            runner_forward(r, req, who, &o, what, 1, frames);
            sbx_store_owner_clear(&o);
            return;
        }
        if (unclaimed && runner_fleet_box(r) != NULL) {
            /* (added) never claimed: no output; a follow of a job still in
             * the shared queue waits for the box that claims it (forward.c) */
            if (follow) {
                runner_forward_wait(r, req, who, id, frames);
                return;
            }
            evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                              frames ? "application/vnd.sbx.output-frames"
                                     : "text/plain; charset=utf-8");
            evhttp_send_reply(req, 200, "OK", NULL);
            return;
        }
        runner_reply_error(req, 410, "the output of job %s is no longer kept (see its record)", id);
        return;
    }
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
    s->next = j->streams;
    j->streams = s;
    evhttp_connection_set_closecb(evhttp_request_get_connection(req), stream_closed, s);
    runner_streams_flush(r, j, !follow);
}

void runner_handle_cancel(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          const struct runner_client *who)
{
    sbx_error_t *err = NULL;
    struct rjob *j = runner_job_find(r, id);
    struct sbx_job_rec rec = {0};
    int mine;

    if (j != NULL) {
        mine = runner_may_cancel(who, j->owner);
    }
    else if (sbx_store_job_get(r->store, id, &rec, &err) == 0) {
        mine = runner_may_cancel(who, rec.client);
        if (mine && rec.state < SBX_JOB_FINISHED) {
            struct sbx_store_owner o;

            if (elsewhere(r, 0, id, &o)) { /* (added) the box that holds it cancels it */
                char what[96];

                snprintf(what, sizeof(what), "job %s", id);
                sbx_job_rec_clear(&rec);
                runner_forward(r, req, who, &o, what, 0, 0);
                sbx_store_owner_clear(&o);
                return;
            }
        }
        sbx_job_rec_clear(&rec);
    }
    else if (runner_reply_store_down(r, req, err)) {
        sbx_error_free(&err);
        return;
    }
    else {
        mine = 1; /* not found: runner_cancel says so */
        sbx_error_free(&err);
    }
    if (!mine) {
        runner_reply_error(req, 403,
                           "job %s belongs to another client: client '%s' lacks scope "
                           "'cancel-any'",
                           id, who->name);
        return;
    }

    if (runner_cancel(r, id, &err) < 0) {
        if (!runner_reply_store_down(r, req, err)) {
            runner_reply_error(req, http_code_for(err), "%s", sbx_error_msg(err));
        }
        sbx_error_free(&err);
        return;
    }
    runner_reply_json(req, 202, json_pack("{s:s, s:s}", "id", id, "state", "cancelling"));
}

void runner_handle_task_end(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                            const struct runner_client *who)
{
    sbx_error_t *err = NULL;
    struct rtask *t;
    int mine = 1;

    pthread_mutex_lock(&r->mu);
    t = runner_task_find(r, id);
    if (t != NULL) {
        mine = runner_may_cancel(who, t->owner);
    }
    pthread_mutex_unlock(&r->mu);
    if (!mine) {
        runner_reply_error(req, 403,
                           "task %s belongs to another client: client '%s' lacks scope "
                           "'cancel-any'",
                           id, who->name);
        return;
    }

    if (t == NULL) {
        struct sbx_store_owner o;

        if (elsewhere(r, 1, id, &o)) { /* (added) the box that holds the task ends it */
            char what[96];

            snprintf(what, sizeof(what), "task %s", id);
            runner_forward(r, req, who, &o, what, 0, 0);
            sbx_store_owner_clear(&o);
            return;
        }
    }
    if (runner_task_end(r, id, &err) < 0) {
        runner_reply_error(req, http_code_for(err), "%s", sbx_error_msg(err));
        sbx_error_free(&err);
        return;
    }
    runner_reply_json(req, 202, json_pack("{s:s, s:s}", "task", id, "state", "ending"));
}

/* ---- queue, slots, metrics --------------------------------------------- */
