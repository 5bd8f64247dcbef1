/* backend_runner.c - the MCP tools when `runner.listen` is set: every call
 * goes to `sbx serve` over its API (docs/api.md), so pools, caps and policy
 * always apply (docs/architecture.md, One implementation). A runner that does not
 * answer fails the call with the reason; nothing falls back to running in
 * this process. Output is read in frames (stdout and stderr apart) into the
 * same capped buffers as the embedded backend, and the job object has the
 * embedded backend's keys (docs/mcp.md, "Embedded and runner mode"). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "http/http.h"
#include "mcp/backend.h"
#include "runner/runner.h"
#include "sbx/sbx_util.h"
#include "util/monowait.h"
#include "util/log.h"
#include "util/xalloc.h"

/* After cancelling a job, how long sandbox_run waits for the runner to end it. */
#define CANCEL_WAIT_MS 30000

struct runner {
    const struct sbx_config *cfg;
};

/* A call whose reply is a JSON object. */
static json_t *call_json(struct runner *r, const char *method, const char *path, const char *body,
                         sbx_error_t **err)
{
    struct sbx_http_response resp = {0};
    json_t *j;

    if (sbx_runner_call(r->cfg, method, path, body, NULL, NULL, &resp, err) < 0) {
        return NULL;
    }
    j = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL);
    sbx_http_response_free(&resp);
    if (!json_is_object(j)) {
        json_decref(j);
        sbx_error_set(err, SBX_E_PROTOCOL, "runner: %s %s: the reply is not a JSON object", method,
                      path);
        return NULL;
    }
    return j;
}

static json_t *get_record(struct runner *r, const char *id, sbx_error_t **err)
{
    char *path = xasprintf("/v1/jobs/%s", id);
    json_t *rec = call_json(r, "GET", path, NULL, err);

    free(path);
    return rec;
}

/* A job's output, stdout and stderr apart, as the embedded backend keeps it. */
struct capture {
    struct sbx_mcp_outbuf out[2];
    char *error; /* the output could not be read (no longer kept, runner gone) */
};

static int on_output(void *ud, int stream, const char *data, size_t len)
{
    struct capture *c = ud;

    sbx_mcp_outbuf_add(&c->out[stream == 2 ? 1 : 0], data, len);
    return 0;
}

static void capture_clear(struct capture *c)
{
    sbx_mcp_outbuf_free(&c->out[0]);
    sbx_mcp_outbuf_free(&c->out[1]);
    free(c->error);
    c->error = NULL;
}

/* The output kept so far (follow 0) or until the job ends (follow 1). */
static void read_output(struct runner *r, const char *id, int follow, const volatile int *cancel,
                        struct capture *c)
{
    sbx_error_t *e = NULL;

    if (sbx_runner_output(r->cfg, id, follow, on_output, c, cancel, NULL, &e) < 0 &&
        !(cancel != NULL && *cancel)) { /* a stop we asked for is no error */
        free(c->error);
        c->error = xstrdup(sbx_error_msg(e));
    }
    sbx_error_free(&e);
}

static int job_active(const char *st)
{
    return st != NULL && (strcmp(st, "queued") == 0 || strcmp(st, "running") == 0);
}

/* Unix seconds (the record's reals) as the embedded backend's ISO time. */
static json_t *iso(json_t *secs)
{
    char buf[32];
    struct tm tm;
    time_t t = (time_t)json_number_value(secs);

    if (!json_is_number(secs) || t <= 0) {
        return json_null();
    }
    gmtime_r(&t, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

/* What sandbox_run knows beyond the record. */
struct run_info {
    int64_t timeout;    /* seconds; 0: not known (sandbox_job) */
    int timed_out;      /* this call's timeout cancelled the job */
    int call_cancelled; /* the client cancelled this call */
};

/* The runner's record and output as the embedded backend's job object
 * (backend_embedded.c, job_json), plus mode "runner" and the record. */
static json_t *job_object(json_t *rec, const struct capture *c, const struct run_info *ri)
{
    const char *st = json_string_value(json_object_get(rec, "state"));
    const char *reason = json_string_value(json_object_get(rec, "reason"));
    const char *id = json_string_value(json_object_get(rec, "id"));
    const char *task = json_string_value(json_object_get(rec, "task"));
    const char *pool = json_string_value(json_object_get(rec, "pool"));
    json_t *exit_status = json_object_get(rec, "exit_status");
    json_t *started = json_object_get(rec, "started_at");
    json_t *ended = json_object_get(rec, "ended_at");
    json_t *egress = json_object_get(rec, "egress");
    json_t *argv = json_object_get(rec, "argv");
    json_t *o = json_object();
    const char *state;
    char *error = NULL;
    char *text[2];
    int trunc[2];
    uint64_t got;
    json_int_t kept = json_integer_value(json_object_get(rec, "output_bytes"));
    double end_s;

    /* runner finished with a reason: sbx failed (no sandbox, 126, 127) */
    if (job_active(st)) {
        state = "running";
    }
    else if (st != NULL && strcmp(st, "finished") == 0) {
        state = reason == NULL ? "finished" : "failed";
    }
    else if (st != NULL && strcmp(st, "cancelled") == 0) {
        state = ri != NULL && ri->timed_out ? "timed_out" : "cancelled";
    }
    else {
        state = "failed"; /* interrupted (the runner died), or unknown */
    }
    if (strcmp(state, "timed_out") == 0) {
        error = xasprintf("timed out after %" PRId64 "s: the command was killed", ri->timeout);
    }
    else if (strcmp(state, "cancelled") == 0 && ri != NULL && ri->call_cancelled) {
        error = xstrdup("the client cancelled the request; the command was killed");
    }
    else if (strcmp(state, "cancelled") == 0) {
        error = xasprintf("%s; the command was killed", reason ? reason : "cancelled");
    }
    else if (strcmp(state, "failed") == 0) {
        error = xasprintf("%s", reason ? reason : st ? st : "the record has no state");
    }
    for (int i = 0; i < 2; i++) {
        text[i] = sbx_mcp_outbuf_text(&c->out[i], &trunc[i]);
    }
    got = c->out[0].total + c->out[1].total;
    json_object_set_new(o, "job", id ? json_string(id) : json_null());
    json_object_set_new(o, "task", task ? json_string(task) : json_null());
    json_object_set_new(o, "state", json_string(state));
    json_object_set_new(o, "exit_status",
                        json_is_integer(exit_status) ? json_incref(exit_status) : json_null());
    json_object_set_new(o, "command", json_is_array(argv) ? json_deep_copy(argv) : json_array());
    json_object_set_new(o, "stdout", json_string(text[0]));
    json_object_set_new(o, "stderr", json_string(text[1]));
    json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)c->out[0].total));
    json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)c->out[1].total));
    json_object_set_new(o, "stdout_truncated", json_boolean(trunc[0]));
    json_object_set_new(o, "stderr_truncated", json_boolean(trunc[1]));
    if (kept > 0 && (uint64_t)kept > got) {
        /* the runner keeps the last 1 MiB: older output was gone when read */
        json_object_set_new(o, "output_dropped_bytes", json_integer(kept - (json_int_t)got));
    }
    if (c->error != NULL) {
        json_object_set_new(o, "output_error", json_string(c->error));
    }
    json_object_set_new(o, "started_at", iso(started));
    json_object_set_new(o, "ended_at", iso(ended));
    end_s = json_is_number(ended) ? json_number_value(ended) : (double)time(NULL);
    json_object_set_new(o, "duration_seconds",
                        json_integer(json_is_number(started) && end_s > json_number_value(started)
                                         ? (json_int_t)(end_s - json_number_value(started))
                                         : 0));
    json_object_set_new(o, "timeout_seconds",
                        ri != NULL && ri->timeout > 0 ? json_integer(ri->timeout) : json_null());
    json_object_set_new(o, "egress",
                        json_pack("{s:I, s:I, s:s}", "allowed",
                                  json_integer_value(json_object_get(egress, "allowed")), "denied",
                                  json_integer_value(json_object_get(egress, "denied")), "scope",
                                  "job"));
    /* the runner keeps an agent job's own task (docs/api.md, Tasks); every
     * other job is a one-command task that ends with it */
    json_object_set_new(
        o, "task_ended",
        json_boolean(!job_active(st) && !(pool != NULL && strcmp(pool, "agent") == 0 &&
                                          task != NULL && id != NULL && strcmp(task, id) != 0)));
    if (error != NULL) {
        json_object_set_new(o, "error", json_string(error));
    }
    json_object_set_new(o, "mode", json_string("runner"));
    json_object_set_new(o, "record", json_incref(rec));
    free(text[0]);
    free(text[1]);
    free(error);
    return o;
}

/* sandbox_run's timeout: cancels the call (as the client would) when it expires. */
struct timer {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sbx_mcp_call *call;
    int64_t seconds;
    int done;
    int fired;
    pthread_t th;
};

static void *timer_main(void *arg)
{
    struct timer *t = arg;
    struct timespec until;

    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += (time_t)t->seconds;
    pthread_mutex_lock(&t->mu);
    while (!t->done) {
        if (pthread_cond_timedwait(&t->cv, &t->mu, &until) == ETIMEDOUT && !t->done) {
            t->fired = !sbx_mcp_call_cancelled(t->call);
            sbx_mcp_call_cancel(t->call);
            break;
        }
    }
    pthread_mutex_unlock(&t->mu);
    return NULL;
}

static int timer_start(struct timer *t, struct sbx_mcp_call *call, int64_t seconds)
{
    memset(t, 0, sizeof(*t));
    t->call = call;
    t->seconds = seconds;
    pthread_mutex_init(&t->mu, NULL);
    sbx_cond_init_mono(&t->cv);
    if (pthread_create(&t->th, NULL, timer_main, t) != 0) {
        pthread_cond_destroy(&t->cv);
        pthread_mutex_destroy(&t->mu);
        return -1;
    }
    return 0;
}

/* Stops the timer; 1 when it had fired. */
static int timer_stop(struct timer *t)
{
    pthread_mutex_lock(&t->mu);
    t->done = 1;
    pthread_cond_signal(&t->cv);
    pthread_mutex_unlock(&t->mu);
    pthread_join(t->th, NULL);
    pthread_cond_destroy(&t->cv);
    pthread_mutex_destroy(&t->mu);
    return t->fired;
}

/* POST /v1/jobs; the new job's id (caller frees) or NULL. */
static char *submit(struct runner *r, const struct sbx_mcp_run *req, sbx_error_t **err)
{
    json_t *body = json_object();
    json_t *argv = json_array();
    json_t *rep;
    const char *id;
    char *text;
    char *out = NULL;

    for (size_t i = 0; req->argv[i] != NULL; i++) {
        json_array_append_new(argv, json_string(req->argv[i]));
    }
    json_object_set_new(body, "argv", argv);
    json_object_set_new(body, "pool", json_string(req->pool ? req->pool : "agent"));
    if (req->task != NULL) {
        json_object_set_new(body, "task", json_string(req->task));
    }
    if (req->worktree != NULL) {
        json_object_set_new(body, "worktree", json_string(req->worktree));
    }
    if (req->provider != NULL) {
        json_object_set_new(body, "provider", json_string(req->provider));
    }
    if (req->from != NULL) { /* (added) the runner checks it (scope snapshot) */
        json_object_set_new(body, "from", json_string(req->from));
    }
    text = json_dumps(body, JSON_COMPACT);
    json_decref(body);
    if (text == NULL) { /* an argv string that is not UTF-8 */
        sbx_error_set(err, SBX_E_USAGE, "argv: every element must be valid UTF-8");
        return NULL;
    }
    rep = call_json(r, "POST", "/v1/jobs", text, err);
    free(text);
    if (rep == NULL) {
        return NULL;
    }
    id = json_string_value(json_object_get(rep, "id"));
    if (id == NULL || id[0] == '\0' || strchr(id, '/') != NULL || strlen(id) > 64) {
        sbx_error_set(err, SBX_E_PROTOCOL, "runner: POST /v1/jobs: the reply has no job id");
    }
    else {
        out = xstrdup(id);
    }
    json_decref(rep);
    return out;
}

/* Cancels the job and waits (at most CANCEL_WAIT_MS) for the runner to end it. */
static void cancel_and_wait(struct runner *r, const char *id)
{
    char *path = xasprintf("/v1/jobs/%s/cancel", id);
    sbx_error_t *e = NULL;

    json_decref(call_json(r, "POST", path, "{}", &e));
    free(path);
    if (e != NULL) { /* 409: it had ended meanwhile */
        sbx_debug("mcp: cancelling job %s: %s", id, sbx_error_msg(e));
        sbx_error_free(&e);
    }
    for (int waited = 0; waited < CANCEL_WAIT_MS; waited += 20) {
        json_t *rec = get_record(r, id, NULL);
        int active = rec == NULL || job_active(json_string_value(json_object_get(rec, "state")));

        json_decref(rec);
        if (!active) {
            return;
        }
        usleep(20 * 1000);
    }
    sbx_warn("mcp: job %s: still running %d s after it was cancelled", id, CANCEL_WAIT_MS / 1000);
}

static json_t *runner_run(void *ctx, const struct sbx_mcp_run *req, struct sbx_mcp_call *call,
                          sbx_error_t **err)
{
    struct runner *r = ctx;
    struct sbx_mcp_call own = {0};
    struct run_info ri = {0};
    struct capture c = {0};
    struct timer tm;
    int have_timer;
    json_t *rec;
    json_t *out;
    char *id;

    if (req->argv == NULL || req->argv[0] == NULL || req->argv[0][0] == '\0') {
        sbx_error_set(err, SBX_E_USAGE, "argv: give the command as a non-empty array of strings");
        return NULL;
    }
    if (req->timeout < 0 || (r->cfg->limits.max > 0 && req->timeout > r->cfg->limits.max)) {
        sbx_error_set(err, SBX_E_USAGE,
                      "timeout %" PRId64 ": use 1 to %" PRId64 " seconds (limits.max)",
                      req->timeout, r->cfg->limits.max);
        return NULL;
    }
    if (call == NULL) {
        call = &own;
    }
    ri.timeout = req->timeout > 0 ? req->timeout : SBX_MCP_DEFAULT_TIMEOUT;
    id = submit(r, req, err);
    if (id == NULL) {
        return NULL;
    }
    /* the call's flag stops the follow at once, even if the command is silent */
    have_timer = timer_start(&tm, call, ri.timeout) == 0;
    if (!have_timer) {
        sbx_warn("mcp: job %s: cannot start its timeout thread: no timeout", id);
    }
    read_output(r, id, 1, &call->cancelled, &c);
    ri.timed_out = have_timer && timer_stop(&tm);
    if (sbx_mcp_call_cancelled(call)) {
        ri.call_cancelled = !ri.timed_out;
        cancel_and_wait(r, id);
        /* the whole output again, with what came after the follow stopped */
        capture_clear(&c);
        read_output(r, id, 0, NULL, &c);
    }
    rec = get_record(r, id, err);
    if (rec == NULL) {
        capture_clear(&c);
        free(id);
        return NULL;
    }
    out = job_object(rec, &c, &ri);
    json_decref(rec);
    capture_clear(&c);
    free(id);
    return out;
}

static json_t *runner_end(void *ctx, const char *task, sbx_error_t **err)
{
    char *path = xasprintf("/v1/tasks/%s/end", task);
    json_t *j = call_json(ctx, "POST", path, "{}", err);

    free(path);
    return j;
}

/* sandbox_job: the record and the output kept so far; never waits for the job. */
static json_t *runner_job(void *ctx, const char *job, sbx_error_t **err)
{
    struct runner *r = ctx;
    struct capture c = {0};
    json_t *rec = get_record(r, job, err);
    json_t *out;

    if (rec == NULL) {
        return NULL;
    }
    read_output(r, job, 0, NULL, &c);
    out = job_object(rec, &c, NULL);
    json_decref(rec);
    capture_clear(&c);
    return out;
}

static json_t *runner_cancel(void *ctx, const char *job, sbx_error_t **err)
{
    char *path = xasprintf("/v1/jobs/%s/cancel", job);
    json_t *j = call_json(ctx, "POST", path, "{}", err);

    free(path);
    return j;
}

static json_t *runner_queue(void *ctx, sbx_error_t **err)
{
    json_t *q = call_json(ctx, "GET", "/v1/queue", NULL, err);

    if (q != NULL) {
        json_object_set_new(q, "mode", json_string("runner"));
    }
    return q;
}

static void runner_shutdown(void *ctx)
{
    /* the server cancels every call in flight: each cancels its job */
    (void)ctx;
}

static void runner_destroy(void *ctx)
{
    free(ctx);
}

/* (added, issue 30) GET/PUT /v1/tasks/T/files?path= (docs/api.md) */
static char *files_path(const char *task, const char *path)
{
    char *t = sbx_url_escape(task);
    char *p = sbx_url_escape(path);
    char *u = xasprintf("/v1/tasks/%s/files?path=%s", t ? t : "", p ? p : "");

    free(t);
    free(p);
    return u;
}

static int runner_read_file(void *ctx, const char *task, const char *path, char **data, size_t *len,
                            sbx_error_t **err)
{
    struct runner *r = ctx;
    struct sbx_http_response resp = {0};
    char *u = files_path(task, path);
    int rc = sbx_runner_call(r->cfg, "GET", u, NULL, NULL, NULL, &resp, err);

    free(u);
    if (rc < 0) {
        return -1;
    }
    *data = xmalloc(resp.body_len + 1);
    memcpy(*data, resp.body ? resp.body : "", resp.body_len);
    (*data)[resp.body_len] = '\0';
    *len = resp.body_len;
    sbx_http_response_free(&resp);
    return 0;
}

static int runner_write_file(void *ctx, const char *task, const char *path, const char *data,
                             size_t len, sbx_error_t **err)
{
    struct runner *r = ctx;
    struct sbx_http_response resp = {0};
    char *u = files_path(task, path);
    int rc = sbx_runner_call_body(r->cfg, "PUT", u, data, len, "application/octet-stream", NULL,
                                  NULL, &resp, err);

    free(u);
    if (rc == 0) {
        sbx_http_response_free(&resp);
    }
    return rc;
}

/* (added, issue 30) POST /v1/tasks/T/snapshot[?fork=1] (scope snapshot) */
static json_t *runner_snapshot(void *ctx, const char *task, int for_fork, sbx_error_t **err)
{
    char *t = sbx_url_escape(task);
    char *path = xasprintf("/v1/tasks/%s/snapshot%s", t ? t : "", for_fork ? "?fork=1" : "");
    json_t *j = call_json(ctx, "POST", path, "{}", err);

    free(t);
    free(path);
    return j;
}

static const struct sbx_mcp_backend_ops runner_ops = {
    .mode = "runner",
    .run = runner_run,
    .end = runner_end,
    .job = runner_job,
    .cancel = runner_cancel,
    .queue = runner_queue,
    .shutdown = runner_shutdown,
    .destroy = runner_destroy,
    .read_file = runner_read_file,
    .write_file = runner_write_file,
    .snapshot = runner_snapshot,
};

void sbx_mcp_backend_runner(const struct sbx_config *cfg, struct sbx_mcp_backend *out)
{
    struct runner *r = xcalloc(1, sizeof(*r));

    r->cfg = cfg;
    out->ops = &runner_ops;
    out->ctx = r;
}

int sbx_mcp_backend_open(const struct sbx_config *cfg, const char *plugin_dir,
                         struct sbx_mcp_backend *out, sbx_error_t **err)
{
    if (cfg->runner.listen != NULL && cfg->runner.listen[0] != '\0') {
        sbx_mcp_backend_runner(cfg, out);
        return 0;
    }
    return sbx_mcp_backend_embedded(cfg, plugin_dir, out, err);
}
