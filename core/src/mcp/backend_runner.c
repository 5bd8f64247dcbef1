/* backend_runner.c - the MCP tools over the runner's API (docs/api.md): the
 * one backend of `sbx mcp` (backend.h). With `runner.listen` set the runner is
 * `sbx serve` (mode "runner"); without, a private one-box runner this process
 * starts (runner/private.h, mode "embedded"), stopped at exit with every task
 * it holds. A runner that does not answer fails the call with the reason;
 * nothing falls back. Output is read in frames (stdout and stderr apart) into
 * capped buffers; the job's state and history are the runner's records. This
 * process remembers only what the runner cannot know: each call's timeout and
 * who cancelled its job (a note per job), and the tasks it ran in (so that a
 * task the runner ended is reported once, docs/mcp.md). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/http.h"
#include "mcp/backend.h"
#include "runner/private.h"
#include "runner/runner.h"
#include "sbx/sbx_util.h"
#include "util/log.h"
#include "util/xalloc.h"

/* After cancelling a job, how long sandbox_run waits for the runner to end it. */
#define CANCEL_WAIT_MS 30000
/* How long sandbox_end waits for the runner to end the task. */
#define END_WAIT_MS 120000
/* Tasks this process remembers having run in (oldest dropped first). */
#define KEPT_MAX 256

struct runner {
    const struct sbx_config *cfg;
    struct sbx_runner_private *priv; /* NULL: runner.listen's runner */
    const char *mode;                /* "embedded" (priv) or "runner" */
    char *where;                     /* sandbox_queue's "runner" text */
    pthread_mutex_t mu;
    int quitting;
    struct sbx_mcp_note notes[SBX_MCP_JOB_HISTORY]; /* a ring */
    size_t notes_next;
    char kept[KEPT_MAX][80]; /* tasks run in and not ended by sandbox_end */
    size_t n_kept;
};

/* ---- the runner's API ---------------------------------------------------- */

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

/* The records of the runner's jobs in state st (queued, running), appended to out. */
static int jobs_in(struct runner *r, const char *st, json_t *out, sbx_error_t **err)
{
    char *path = xasprintf("/v1/jobs?state=%s&limit=500", st);
    json_t *rep = call_json(r, "GET", path, NULL, err);

    free(path);
    if (rep == NULL) {
        return -1;
    }
    json_array_extend(out, json_object_get(rep, "jobs"));
    json_decref(rep);
    return 0;
}

/* Whether the runner holds task id now: 1, 0, or -1 and *err. */
static int runner_holds(struct runner *r, const char *id, sbx_error_t **err)
{
    json_t *q = call_json(r, "GET", "/v1/queue", NULL, err);
    json_t *t;
    size_t i;
    int found = 0;

    if (q == NULL) {
        return -1;
    }
    json_array_foreach(json_object_get(q, "tasks"), i, t)
    {
        const char *tid = json_string_value(json_object_get(t, "id"));

        found |= tid != NULL && strcmp(tid, id) == 0;
    }
    json_decref(q);
    return found;
}

/* Waits (at most END_WAIT_MS) until the runner no longer holds the task; 1
 * when it is gone. */
static int wait_task_gone(struct runner *r, const char *task)
{
    int held = runner_holds(r, task, NULL);

    for (int waited = 0; waited < END_WAIT_MS && held > 0; waited += 20) {
        usleep(20 * 1000);
        held = runner_holds(r, task, NULL);
    }
    return held == 0;
}

/* ---- what this process remembers ---------------------------------------- */

/* The job's note, or NULL. Under mu. */
static struct sbx_mcp_note *note_find(struct runner *r, const char *job)
{
    for (size_t i = 0; i < SBX_MCP_JOB_HISTORY; i++) {
        if (r->notes[i].job[0] != '\0' && strcmp(r->notes[i].job, job) == 0) {
            return &r->notes[i];
        }
    }
    return NULL;
}

static void note_new(struct runner *r, const char *job, int64_t timeout)
{
    struct sbx_mcp_note *n;

    pthread_mutex_lock(&r->mu);
    n = &r->notes[r->notes_next++ % SBX_MCP_JOB_HISTORY];
    memset(n, 0, sizeof(*n));
    snprintf(n->job, sizeof(n->job), "%s", job);
    n->timeout = timeout;
    pthread_mutex_unlock(&r->mu);
}

/* Who cancels the job, unless someone already did; 1 when this set it. */
static int note_why(struct runner *r, const char *job, const char *why)
{
    struct sbx_mcp_note *n;
    int set = 0;

    pthread_mutex_lock(&r->mu);
    n = note_find(r, job);
    if (n == NULL) { /* a job of another process (runner mode) */
        n = &r->notes[r->notes_next++ % SBX_MCP_JOB_HISTORY];
        memset(n, 0, sizeof(*n));
        snprintf(n->job, sizeof(n->job), "%s", job);
    }
    if (n->why == NULL && !n->timed_out) {
        n->why = why;
        set = 1;
    }
    pthread_mutex_unlock(&r->mu);
    return set;
}

static void note_unwhy(struct runner *r, const char *job)
{
    struct sbx_mcp_note *n;

    pthread_mutex_lock(&r->mu);
    if ((n = note_find(r, job)) != NULL) {
        n->why = NULL;
    }
    pthread_mutex_unlock(&r->mu);
}

static void note_timed_out(struct runner *r, const char *job)
{
    struct sbx_mcp_note *n;

    pthread_mutex_lock(&r->mu);
    if ((n = note_find(r, job)) != NULL && n->why == NULL) {
        n->timed_out = 1;
    }
    pthread_mutex_unlock(&r->mu);
}

static struct sbx_mcp_note note_get(struct runner *r, const char *job)
{
    struct sbx_mcp_note out = {0};
    struct sbx_mcp_note *n;

    pthread_mutex_lock(&r->mu);
    if ((n = note_find(r, job)) != NULL) {
        out = *n;
    }
    pthread_mutex_unlock(&r->mu);
    return out;
}

/* The kept tasks this process ran in. Under mu. */
static ssize_t kept_index(struct runner *r, const char *task)
{
    for (size_t i = 0; i < r->n_kept; i++) {
        if (strcmp(r->kept[i], task) == 0) {
            return (ssize_t)i;
        }
    }
    return -1;
}

static void kept_remove_locked(struct runner *r, ssize_t i)
{
    if (i >= 0) {
        memmove(r->kept[i], r->kept[i + 1], (r->n_kept - (size_t)i - 1) * sizeof(r->kept[0]));
        r->n_kept--;
    }
}

static void kept_add(struct runner *r, const char *task)
{
    pthread_mutex_lock(&r->mu);
    if (kept_index(r, task) < 0) {
        if (r->n_kept == KEPT_MAX) {
            kept_remove_locked(r, 0);
        }
        snprintf(r->kept[r->n_kept++], sizeof(r->kept[0]), "%s", task);
    }
    pthread_mutex_unlock(&r->mu);
}

/* Forgets the task; 1 when it was remembered. */
static int kept_remove(struct runner *r, const char *task)
{
    ssize_t i;

    pthread_mutex_lock(&r->mu);
    i = kept_index(r, task);
    kept_remove_locked(r, i);
    pthread_mutex_unlock(&r->mu);
    return i >= 0;
}

/* ---- the job object ------------------------------------------------------ */

/* A job's output, stdout and stderr apart. */
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
        /* (changed, issue 31) an atomic read: the server's thread sets it */
        !(cancel != NULL &&
          __atomic_load_n(cancel, __ATOMIC_ACQUIRE))) { /* a stop we asked for is no error */
        free(c->error);
        c->error = xstrdup(sbx_error_msg(e));
    }
    sbx_error_free(&e);
}

/* ---- sandbox_run ---------------------------------------------------------- */

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

/* submit, but a call on a task whose sandbox another call is creating (the
 * runner's 409 "... submit its next command once it runs") waits for it, as
 * docs/mcp.md says, until the call is cancelled or its timeout passes. */
static char *submit_when_ready(struct runner *r, const struct sbx_mcp_run *req,
                               struct sbx_mcp_call *call, int64_t timeout, sbx_error_t **err)
{
    int64_t until = sbx_mono_ms() + timeout * 1000;

    for (;;) {
        sbx_error_t *e = NULL;
        char *id = submit(r, req, &e);

        if (id != NULL ||
            strstr(sbx_error_msg(e), "submit its next command once it runs") == NULL ||
            sbx_mcp_call_cancelled(call) || sbx_mono_ms() >= until) {
            if (e != NULL && err != NULL && *err == NULL) {
                *err = e; /* the caller's error */
            }
            else {
                sbx_error_free(&e);
            }
            return id;
        }
        sbx_error_free(&e);
        usleep(50 * 1000);
    }
}

/* POST /v1/jobs/ID/cancel; 0, or -1 and *err (409: it had ended). */
static int cancel_job(struct runner *r, const char *id, sbx_error_t **err)
{
    char *path = xasprintf("/v1/jobs/%s/cancel", id);
    json_t *rep = call_json(r, "POST", path, "{}", err);

    free(path);
    json_decref(rep);
    return rep != NULL ? 0 : -1;
}

/* Cancels the job and waits (at most CANCEL_WAIT_MS) for the runner to end it. */
static void cancel_and_wait(struct runner *r, const char *id)
{
    sbx_error_t *e = NULL;

    if (cancel_job(r, id, &e) < 0) { /* 409: it had ended meanwhile */
        sbx_debug("mcp: cancelling job %s: %s", id, sbx_error_msg(e));
        sbx_error_free(&e);
    }
    for (int waited = 0; waited < CANCEL_WAIT_MS; waited += 20) {
        json_t *rec = get_record(r, id, NULL);
        int active =
            rec == NULL || sbx_mcp_job_active(json_string_value(json_object_get(rec, "state")));

        json_decref(rec);
        if (!active) {
            return;
        }
        usleep(20 * 1000);
    }
    sbx_warn("mcp: job %s: still running %d s after it was cancelled", id, CANCEL_WAIT_MS / 1000);
}

/* The arguments the runner would refuse, with the tool's texts; 0 or -1. */
static int validate_run(const struct runner *r, const struct sbx_mcp_run *req, sbx_error_t **err)
{
    if (req->argv == NULL || req->argv[0] == NULL || req->argv[0][0] == '\0') {
        return sbx_error_set(err, SBX_E_USAGE,
                             "argv: give the command as a non-empty array of strings, e.g. "
                             "[\"make\", \"test\"]");
    }
    if (req->task != NULL && (!sbx_id_valid(req->task, SBX_ID_TASK) || strlen(req->task) > 63)) {
        return sbx_error_set(err, SBX_E_USAGE,
                             "task '%.80s': use 1-63 letters, digits, '-', '_' or '.', starting "
                             "with a letter or digit",
                             req->task);
    }
    if (req->pool != NULL && strcmp(req->pool, "ci") != 0 && strcmp(req->pool, "agent") != 0) {
        return sbx_error_set(err, SBX_E_USAGE, "pool '%.32s': use ci or agent", req->pool);
    }
    if (r->priv != NULL && req->pool != NULL && strcmp(req->pool, "agent") != 0) {
        return sbx_error_set(err, SBX_E_USAGE,
                             "pool '%s': with no runner configured (runner.listen) sbx mcp's own "
                             "runner serves the agent pool only, with the whole box",
                             req->pool);
    }
    if (req->timeout < 0 || (r->cfg->limits.max > 0 && req->timeout > r->cfg->limits.max)) {
        return sbx_error_set(err, SBX_E_USAGE,
                             "timeout %" PRId64 ": use 1 to %" PRId64 " seconds (limits.max)",
                             req->timeout, r->cfg->limits.max);
    }
    return 0;
}

/* A kept task this process ran in that the runner no longer holds (idle,
 * lifetime, ended elsewhere): said once, and nothing is run (docs/mcp.md). */
static int task_gone(struct runner *r, const char *task, sbx_error_t **err)
{
    int held;
    int known;

    pthread_mutex_lock(&r->mu);
    known = kept_index(r, task) >= 0;
    pthread_mutex_unlock(&r->mu);
    if (!known || (held = runner_holds(r, task, err)) < 0) {
        return known ? -1 : 0;
    }
    if (held || !kept_remove(r, task)) {
        return 0;
    }
    return sbx_error_set(err, SBX_E_CANCELLED,
                         "task %s had ended (the runner no longer holds it: idle for %" PRId64
                         "s, past its lifetime of %" PRId64 "s, or ended elsewhere): its "
                         "sandbox and files are gone. Nothing was run; call sandbox_run again "
                         "to start a fresh sandbox under this task id",
                         task, r->cfg->limits.idle, r->cfg->limits.max);
}

static json_t *runner_run(void *ctx, const struct sbx_mcp_run *req, struct sbx_mcp_call *call,
                          sbx_error_t **err)
{
    struct runner *r = ctx;
    struct sbx_mcp_call own = {0};
    struct capture c = {0};
    struct sbx_mcp_timer tm;
    int64_t timeout;
    int have_timer;
    int quitting;
    json_t *rec;
    json_t *out;
    char *id;

    if (validate_run(r, req, err) < 0) {
        return NULL;
    }
    pthread_mutex_lock(&r->mu);
    quitting = r->quitting;
    pthread_mutex_unlock(&r->mu);
    if (quitting) {
        sbx_error_set(err, SBX_E_CANCELLED, "sbx mcp is shutting down");
        return NULL;
    }
    if (req->task != NULL && req->from == NULL && task_gone(r, req->task, err) < 0) {
        return NULL;
    }
    if (call == NULL) {
        call = &own;
    }
    timeout = req->timeout > 0 ? req->timeout : SBX_MCP_DEFAULT_TIMEOUT;
    id = submit_when_ready(r, req, call, timeout, err);
    if (id == NULL) {
        return NULL;
    }
    note_new(r, id, timeout);
    /* the call's flag stops the follow at once, even if the command is silent */
    have_timer = sbx_mcp_timer_start(&tm, call, timeout) == 0;
    if (!have_timer) {
        sbx_warn("mcp: job %s: cannot start its timeout thread: no timeout", id);
    }
    read_output(r, id, 1, &call->cancelled, &c);
    if (have_timer && sbx_mcp_timer_stop(&tm)) {
        note_timed_out(r, id);
    }
    if (sbx_mcp_call_cancelled(call)) {
        pthread_mutex_lock(&r->mu);
        quitting = r->quitting;
        pthread_mutex_unlock(&r->mu);
        note_why(r, id, quitting ? "sbx mcp is exiting" : "the client cancelled the request");
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
    out = sbx_mcp_job_object(rec, c.out, c.error,
                             note_get(r, json_string_value(json_object_get(rec, "id"))), r->mode);
    if (req->task != NULL && !json_is_true(json_object_get(out, "task_ended"))) {
        kept_add(r, req->task);
    }
    else if (req->task == NULL) {
        /* task_ended: the runner has ended its task when the call returns */
        wait_task_gone(r, id);
    }
    json_decref(rec);
    capture_clear(&c);
    free(id);
    return out;
}

/* ---- the other tools ------------------------------------------------------ */

/* sandbox_end: the task's queued and running jobs are cancelled (their calls
 * return cancelled), then the task is ended; returns once the runner ended it. */
static json_t *runner_end(void *ctx, const char *task, sbx_error_t **err)
{
    struct runner *r = ctx;
    char *t = sbx_url_escape(task);
    char *path = xasprintf("/v1/tasks/%s/end", t ? t : "");
    json_t *jobs = json_array();
    json_t *rep;
    json_t *j;
    size_t i;
    int gone;

    free(t);
    if (jobs_in(r, "running", jobs, NULL) == 0 && jobs_in(r, "queued", jobs, NULL) == 0) {
        json_array_foreach(jobs, i, j)
        {
            const char *id = json_string_value(json_object_get(j, "id"));
            const char *jt = json_string_value(json_object_get(j, "task"));

            if (id != NULL && jt != NULL && strcmp(jt, task) == 0 &&
                note_why(r, id, "its task was ended by sandbox_end")) {
                cancel_job(r, id, NULL);
            }
        }
    }
    json_decref(jobs);
    rep = call_json(r, "POST", path, "{}", err);
    free(path);
    if (rep == NULL) {
        return NULL;
    }
    json_decref(rep);
    kept_remove(r, task);
    gone = wait_task_gone(r, task);
    return json_pack("{s:s, s:s, s:s}", "task", task, "state", gone ? "ended" : "ending", "mode",
                     r->mode);
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
    out = sbx_mcp_job_object(rec, c.out, c.error,
                             note_get(r, json_string_value(json_object_get(rec, "id"))), r->mode);
    json_decref(rec);
    capture_clear(&c);
    return out;
}

static json_t *runner_cancel(void *ctx, const char *job, sbx_error_t **err)
{
    struct runner *r = ctx;
    int set = note_why(r, job, "sandbox_cancel asked for it");

    if (cancel_job(r, job, err) < 0) {
        if (set) {
            note_unwhy(r, job);
        }
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s}", "job", job, "state", "cancelling", "mode", r->mode);
}

static json_t *runner_queue(void *ctx, sbx_error_t **err)
{
    struct runner *r = ctx;
    json_t *q = call_json(r, "GET", "/v1/queue", NULL, err);
    json_t *jobs = json_array();

    if (q == NULL || jobs_in(r, "running", jobs, err) < 0 || jobs_in(r, "queued", jobs, err) < 0) {
        json_decref(q);
        json_decref(jobs);
        return NULL;
    }
    return sbx_mcp_queue_view(q, jobs, r->mode, r->where);
}

static void runner_shutdown(void *ctx)
{
    struct runner *r = ctx;

    /* the server then cancels every call in flight: each cancels its job */
    pthread_mutex_lock(&r->mu);
    r->quitting = 1;
    pthread_mutex_unlock(&r->mu);
}

static void runner_destroy(void *ctx)
{
    struct runner *r = ctx;

    if (r->priv != NULL) {
        sbx_info("mcp: stopping the private runner (its tasks end)");
        sbx_runner_private_stop(r->priv);
    }
    pthread_mutex_destroy(&r->mu);
    free(r->where);
    free(r);
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

#define OPS(name, mode_text)                                                                       \
    static const struct sbx_mcp_backend_ops name = {                                               \
        .mode = mode_text,                                                                         \
        .run = runner_run,                                                                         \
        .end = runner_end,                                                                         \
        .job = runner_job,                                                                         \
        .cancel = runner_cancel,                                                                   \
        .queue = runner_queue,                                                                     \
        .shutdown = runner_shutdown,                                                               \
        .destroy = runner_destroy,                                                                 \
        .read_file = runner_read_file,                                                             \
        .write_file = runner_write_file,                                                           \
        .snapshot = runner_snapshot,                                                               \
    }
OPS(runner_ops, "runner");
OPS(private_ops, "embedded");

static struct runner *runner_new(const struct sbx_config *cfg, const char *mode)
{
    struct runner *r = xcalloc(1, sizeof(*r));

    r->cfg = cfg;
    r->mode = mode;
    pthread_mutex_init(&r->mu, NULL);
    return r;
}

void sbx_mcp_backend_runner(const struct sbx_config *cfg, struct sbx_mcp_backend *out)
{
    struct runner *r = runner_new(cfg, "runner");

    r->where = xasprintf("the runner at %s", cfg->runner.listen ? cfg->runner.listen : "?");
    out->ops = &runner_ops;
    out->ctx = r;
}

int sbx_mcp_backend_open(struct sbx_config *cfg, const char *plugin_dir,
                         struct sbx_mcp_backend *out, sbx_error_t **err)
{
    struct sbx_runner_private_opts po = {0};
    struct sbx_runner_private *p;
    struct runner *r;
    char *cwd;

    if (cfg->runner.listen != NULL && cfg->runner.listen[0] != '\0') {
        sbx_mcp_backend_runner(cfg, out);
        return 0;
    }
    /* a worktree is the directory sbx mcp runs in or below it (docs/mcp.md) */
    cwd = realpath(".", NULL);
    if (cwd == NULL) {
        return sbx_error_set(err, SBX_E_GENERIC, "mcp: the current directory: %s", strerror(errno));
    }
    po.worktree_roots = (const char *const[]){cwd};
    po.n_worktree_roots = 1;
    po.pool = "agent"; /* the whole box for the agent pool (docs/mcp.md) */
    po.slot_lock = 1;  /* its tasks count in the box's slots beside other sbx processes' */
    p = sbx_runner_private_start(cfg, plugin_dir, &po, err);
    free(cwd);
    if (p == NULL) {
        return sbx_error_wrap(err, "mcp");
    }
    r = runner_new(cfg, "embedded");
    r->priv = p;
    r->where = xstrdup("none configured (runner.listen is not set): a private runner in this "
                       "sbx mcp process, whose tasks end with it");
    out->ops = &private_ops;
    out->ctx = r;
    return 0;
}
