/* backend_embedded.c - the MCP tools with no runner: tasks live in this
 * process (`sbx mcp`), through the one task implementation of
 * sandbox/task.h, like `sbx run`. A task named by the agent keeps its
 * sandbox across sandbox_run calls until sandbox_end, its idle time or its
 * maximum lifetime; every task still held is ended when the process ends.
 * Finished jobs stay in memory for sandbox_job (SBX_MCP_JOB_HISTORY). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "mcp/backend.h"
#include "sandbox/files.h"
#include "sandbox/snapshot.h"
#include "sandbox/statedir.h"
#include "sandbox/task.h"
#include "util/confine.h"
#include "util/log.h"
#include "util/xalloc.h"

struct etask {
    char id[80];
    struct sbx_task *t; /* NULL while starting */
    int starting;
    int users;   /* sandbox_run calls using it */
    int ending;  /* whoever sets this ends it */
    int oneshot; /* no task id was given: ends with its command */
    char pool[16];
    int64_t since;
    unsigned n_jobs;
    struct etask *next;
};

struct ejob {
    char id[32];
    char task[80];
    const char *state; /* starting, running, finished, failed, cancelled, timed_out */
    int exit_status;   /* -1: none */
    char *error;
    json_t *argv;
    struct sbx_mcp_outbuf out[2];
    int64_t started_at; /* wall clock */
    int64_t ended_at;
    int64_t deadline_ms; /* monotonic; 0: none yet */
    int64_t timeout;
    struct sbx_exec_slot slot;
    struct sbx_task *t;        /* while its command runs */
    struct sbx_mcp_call *call; /* while its sandbox_run call runs */
    const char *cancel_state;  /* "cancelled" or "timed_out" once asked */
    const char *cancel_why;    /* who cancelled it */
    int task_ended;
    int64_t egress_allowed;
    int64_t egress_denied;
    struct ejob *next;
};

struct tomb {
    char id[80];
    char reason[256];
};

struct emb {
    const struct sbx_config *cfg;
    const char *plugin_dir;
    char *state;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct etask *tasks;
    struct ejob *jobs; /* newest first */
    size_t n_jobs;
    struct tomb tombs[32]; /* tasks the core ended (idle, lifetime) */
    size_t n_tombs;
    int quitting;
    pthread_t house;
    volatile int house_quit;
};

static json_t *iso(int64_t t)
{
    char buf[32];
    struct tm tm;
    time_t tt = (time_t)t;

    if (t <= 0) {
        return json_null();
    }
    gmtime_r(&tt, &tm);
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_string(buf);
}

static struct etask *find_task(struct emb *e, const char *id)
{
    for (struct etask *t = e->tasks; t != NULL; t = t->next) {
        if (strcmp(t->id, id) == 0) {
            return t;
        }
    }
    return NULL;
}

static void remove_task(struct emb *e, struct etask *et)
{
    for (struct etask **pp = &e->tasks; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == et) {
            *pp = et->next;
            break;
        }
    }
    free(et);
    pthread_cond_broadcast(&e->cv);
}

static struct ejob *find_job(struct emb *e, const char *id)
{
    for (struct ejob *j = e->jobs; j != NULL; j = j->next) {
        if (strcmp(j->id, id) == 0) {
            return j;
        }
    }
    return NULL;
}

static int job_active(const struct ejob *j)
{
    return strcmp(j->state, "starting") == 0 || strcmp(j->state, "running") == 0;
}

static void free_job(struct ejob *j)
{
    sbx_mcp_outbuf_free(&j->out[0]);
    sbx_mcp_outbuf_free(&j->out[1]);
    json_decref(j->argv);
    free(j->error);
    free(j);
}

/* Drops the oldest finished jobs beyond the history size. Under mu. */
static void trim_jobs(struct emb *e)
{
    struct ejob **pp = &e->jobs;
    size_t kept = 0;

    while (*pp != NULL) {
        struct ejob *j = *pp;

        if (kept >= SBX_MCP_JOB_HISTORY && !job_active(j)) {
            *pp = j->next;
            free_job(j);
            e->n_jobs--;
            continue;
        }
        kept++;
        pp = &j->next;
    }
}

static const char *tomb_take(struct emb *e, const char *id, char *reason, size_t len)
{
    for (size_t i = 0; i < e->n_tombs; i++) {
        if (strcmp(e->tombs[i].id, id) == 0) {
            snprintf(reason, len, "%s", e->tombs[i].reason);
            e->tombs[i] = e->tombs[--e->n_tombs];
            return reason;
        }
    }
    return NULL;
}

static void tomb_add(struct emb *e, const char *id, const char *reason)
{
    if (e->n_tombs == sizeof(e->tombs) / sizeof(e->tombs[0])) {
        memmove(&e->tombs[0], &e->tombs[1], (e->n_tombs - 1) * sizeof(e->tombs[0]));
        e->n_tombs--;
    }
    snprintf(e->tombs[e->n_tombs].id, sizeof(e->tombs[0].id), "%s", id);
    snprintf(e->tombs[e->n_tombs].reason, sizeof(e->tombs[0].reason), "%s", reason);
    e->n_tombs++;
}

/* The job as the tools show it. Under mu. */
static json_t *job_json(const struct ejob *j)
{
    json_t *o = json_object();
    int trunc[2];
    char *text[2];
    int64_t end = j->ended_at > 0 ? j->ended_at : (int64_t)time(NULL);

    for (int i = 0; i < 2; i++) {
        text[i] = sbx_mcp_outbuf_text(&j->out[i], &trunc[i]);
    }
    json_object_set_new(o, "job", json_string(j->id));
    json_object_set_new(o, "task", json_string(j->task));
    json_object_set_new(o, "state", json_string(j->state));
    json_object_set_new(o, "exit_status",
                        j->exit_status >= 0 ? json_integer(j->exit_status) : json_null());
    json_object_set_new(o, "command", json_deep_copy(j->argv));
    json_object_set_new(o, "stdout", json_string(text[0]));
    json_object_set_new(o, "stderr", json_string(text[1]));
    json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)j->out[0].total));
    json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)j->out[1].total));
    json_object_set_new(o, "stdout_truncated", json_boolean(trunc[0]));
    json_object_set_new(o, "stderr_truncated", json_boolean(trunc[1]));
    json_object_set_new(o, "started_at", iso(j->started_at));
    json_object_set_new(o, "ended_at", iso(j->ended_at));
    json_object_set_new(o, "duration_seconds",
                        json_integer(j->started_at > 0 ? end - j->started_at : 0));
    json_object_set_new(o, "timeout_seconds", json_integer(j->timeout));
    json_object_set_new(o, "egress",
                        json_pack("{s:I, s:I, s:s}", "allowed", (json_int_t)j->egress_allowed,
                                  "denied", (json_int_t)j->egress_denied, "scope", "task"));
    json_object_set_new(o, "task_ended", json_boolean(j->task_ended));
    if (j->error != NULL) {
        json_object_set_new(o, "error", json_string(j->error));
    }
    json_object_set_new(o, "mode", json_string("embedded"));
    free(text[0]);
    free(text[1]);
    return o;
}

/* The output callback: the job's buffers are read by sandbox_job meanwhile. */
struct out_ctx {
    struct emb *e;
    struct ejob *j;
};

static int on_output_locked(void *ud, int stream, const char *data, size_t len)
{
    struct out_ctx *c = ud;

    pthread_mutex_lock(&c->e->mu);
    sbx_mcp_outbuf_add(&c->j->out[stream == 2 ? 1 : 0], data, len);
    pthread_mutex_unlock(&c->e->mu);
    return 0;
}

static struct ejob *new_job(struct emb *e, const struct sbx_mcp_run *r, struct sbx_mcp_call *call)
{
    struct ejob *j = xcalloc(1, sizeof(*j));
    char id[32];

    sbx_task_id_new(id, sizeof(id));
    snprintf(j->id, sizeof(j->id), "j-%s", id + 2);
    j->state = "starting";
    j->exit_status = -1;
    j->argv = json_array();
    for (size_t i = 0; r->argv[i] != NULL; i++) {
        json_array_append_new(j->argv, json_string(r->argv[i]));
    }
    j->timeout = r->timeout > 0 ? r->timeout : SBX_MCP_DEFAULT_TIMEOUT;
    j->started_at = (int64_t)time(NULL);
    j->call = call;
    j->next = e->jobs;
    e->jobs = j;
    e->n_jobs++;
    return j;
}

/* Ends a task outside the lock; the caller set et->ending. */
static void end_task(struct emb *e, struct etask *et, const char *reason, json_t **rec)
{
    sbx_error_t *err = NULL;
    struct sbx_task *t = et->t;

    et->t = NULL; /* freed below, outside the lock: nobody may look at it */
    pthread_mutex_unlock(&e->mu);
    if (t != NULL && sbx_task_end(t, reason, rec, &err) < 0) {
        sbx_warn("mcp: ending task %s: %s", et->id, sbx_error_msg(err));
        sbx_error_free(&err);
    }
    pthread_mutex_lock(&e->mu);
    remove_task(e, et);
}

/* Finds or starts the task for a run; counts the run as a user. Under mu;
 * unlocks while a sandbox is created. NULL and *err on failure. */
static struct etask *task_for_run(struct emb *e, const struct sbx_mcp_run *r, const char *image,
                                  struct ejob *j, struct sbx_mcp_call *call, sbx_error_t **err)
{
    struct sbx_task_opts o = {0};
    struct etask *et;
    struct sbx_task *t = NULL;
    int rc;

    while (r->task != NULL && (et = find_task(e, r->task)) != NULL) {
        if (et->ending) {
            sbx_error_set(err, SBX_E_CANCELLED, "task %s is ending", r->task);
            return NULL;
        }
        if (r->from != NULL) { /* (added) as the API's 409 */
            sbx_error_set(err, SBX_E_USAGE,
                          "'from': task %s is already running; 'from' starts a new task", r->task);
            return NULL;
        }
        if (!et->starting) {
            et->users++;
            et->n_jobs++;
            return et;
        }
        pthread_cond_wait(&e->cv, &e->mu); /* another call is creating its sandbox */
    }
    et = xcalloc(1, sizeof(*et));
    if (r->task != NULL) {
        snprintf(et->id, sizeof(et->id), "%s", r->task);
    }
    else {
        sbx_task_id_new(et->id, sizeof(et->id));
        et->oneshot = 1;
    }
    et->starting = 1;
    et->users = 1;
    et->n_jobs = 1;
    et->since = (int64_t)time(NULL);
    et->next = e->tasks;
    e->tasks = et;
    snprintf(j->task, sizeof(j->task), "%s", et->id);

    o.task_id = et->id;
    o.job_id = j->id;
    o.provider = r->provider;
    o.image = image; /* (added) `from` a snapshot, or NULL */
    o.worktree = r->worktree;
    o.pool = r->pool;
    o.argv = r->argv;
    o.cancel = call != NULL ? &call->cancelled : NULL;
    o.ephemeral = 1; /* the record lives in this process; none is left behind */
    pthread_mutex_unlock(&e->mu);
    rc = sbx_task_start(e->cfg, e->plugin_dir, &o, &t, err);
    pthread_mutex_lock(&e->mu);
    if (rc < 0) {
        remove_task(e, et);
        return NULL;
    }
    et->t = t;
    snprintf(et->pool, sizeof(et->pool), "%s", sbx_task_pool(t));
    et->starting = 0;
    pthread_cond_broadcast(&e->cv);
    return et;
}

static const char *validate_run(const struct emb *e, const struct sbx_mcp_run *r, sbx_error_t **err)
{
    if (r->argv == NULL || r->argv[0] == NULL || r->argv[0][0] == '\0') {
        sbx_error_set(err, SBX_E_USAGE,
                      "argv: give the command as a non-empty array of "
                      "strings, e.g. [\"make\", \"test\"]");
        return NULL;
    }
    if (r->task != NULL && !sbx_id_valid(r->task, SBX_ID_TASK)) {
        sbx_error_set(err, SBX_E_USAGE,
                      "task '%.80s': use 1-64 letters, digits, '-', '_' or "
                      "'.', starting with a letter or digit",
                      r->task);
        return NULL;
    }
    if (r->pool != NULL && strcmp(r->pool, "ci") != 0 && strcmp(r->pool, "agent") != 0) {
        sbx_error_set(err, SBX_E_USAGE, "pool '%.32s': use ci or agent", r->pool);
        return NULL;
    }
    if (r->timeout < 0 || (e->cfg->limits.max > 0 && r->timeout > e->cfg->limits.max)) {
        sbx_error_set(err, SBX_E_USAGE,
                      "timeout %" PRId64 ": use 1 to %" PRId64 " seconds "
                      "(limits.max)",
                      r->timeout, e->cfg->limits.max);
        return NULL;
    }
    return "ok";
}

/* (added, issue 30) `from`: the snapshot's image, of the run's provider instance
 * (as `sbx task start --from`). */
static int snapshot_image(const struct emb *e, const struct sbx_mcp_run *r, char *image, size_t len,
                          sbx_error_t **err)
{
    const char *prov = r->provider ? r->provider : e->cfg->provider;
    json_t *rec = sbx_snapshot_get(e->state, r->from, err);
    const char *rp;
    const char *ref;
    int rc = -1;

    if (rec == NULL) {
        return sbx_error_wrap(err, "'from'");
    }
    rp = json_string_value(json_object_get(rec, "provider"));
    ref = json_string_value(json_object_get(rec, "ref"));
    if (rp == NULL || prov == NULL || strcmp(rp, prov) != 0) {
        sbx_error_set(err, SBX_E_USAGE,
                      "'from': snapshot %s is of provider '%s', the task's is '%s'", r->from,
                      rp ? rp : "?", prov ? prov : "?");
    }
    else if (ref == NULL || ref[0] == '\0' || strlen(ref) >= len) {
        sbx_error_set(err, SBX_E_GENERIC, "'from': snapshot %s has no image in its record",
                      r->from);
    }
    else {
        snprintf(image, len, "%s", ref);
        rc = 0;
    }
    json_decref(rec);
    return rc;
}

static json_t *emb_run(void *ctx, const struct sbx_mcp_run *r, struct sbx_mcp_call *call,
                       sbx_error_t **err)
{
    struct emb *e = ctx;
    struct ejob *j;
    struct etask *et;
    struct out_ctx oc;
    sbx_error_t *xe = NULL;
    char reason[256];
    char image[512];
    int status = 0;
    int rc;
    json_t *res;

    image[0] = '\0';
    if (validate_run(e, r, err) == NULL ||
        (r->from != NULL && snapshot_image(e, r, image, sizeof(image), err) < 0)) {
        return NULL;
    }
    if (r->worktree != NULL) {
        char why[512];

        if (sbx_confine_forbidden(r->worktree, e->state, why, sizeof(why)) < 0) {
            sbx_error_set(err, SBX_E_USAGE, "'worktree': %s", why);
            return NULL;
        }
    }
    pthread_mutex_lock(&e->mu);
    if (e->quitting) {
        pthread_mutex_unlock(&e->mu);
        sbx_error_set(err, SBX_E_CANCELLED, "sbx mcp is shutting down");
        return NULL;
    }
    if (r->task != NULL && find_task(e, r->task) == NULL &&
        tomb_take(e, r->task, reason, sizeof(reason)) != NULL) {
        pthread_mutex_unlock(&e->mu);
        sbx_error_set(err, SBX_E_CANCELLED,
                      "task %s had ended (%s): its sandbox and files are "
                      "gone. Nothing was run; call sandbox_run again to start a fresh sandbox "
                      "under this task id",
                      r->task, reason);
        return NULL;
    }
    if (r->from != NULL && r->task != NULL && find_task(e, r->task) != NULL) {
        pthread_mutex_unlock(&e->mu); /* (added) as the API's 409: no job is made */
        sbx_error_set(err, SBX_E_USAGE,
                      "'from': task %s is already running; 'from' starts a new task", r->task);
        return NULL;
    }
    j = new_job(e, r, call);
    if (r->task != NULL) {
        snprintf(j->task, sizeof(j->task), "%s", r->task);
    }
    et = task_for_run(e, r, image[0] ? image : NULL, j, call, &xe);
    if (et == NULL) {
        j->state = sbx_mcp_call_cancelled(call) ? "cancelled" : "failed";
        j->error = xstrdup(sbx_error_msg(xe));
        j->task_ended = 1; /* no sandbox was made for it */
        sbx_error_free(&xe);
        goto done;
    }
    if (j->cancel_state != NULL || sbx_mcp_call_cancelled(call)) {
        j->state = j->cancel_state ? j->cancel_state : "cancelled";
        j->error =
            xasprintf("%s before the command started", j->cancel_why ? j->cancel_why : "cancelled");
    }
    else {
        j->t = et->t;
        j->state = "running";
        j->deadline_ms = sbx_mono_ms() + j->timeout * 1000;
        oc.e = e;
        oc.j = j;
        pthread_mutex_unlock(&e->mu);
        rc = sbx_task_exec(et->t, r->argv, NULL, 0, on_output_locked, &oc, &j->slot, &status, &xe);
        pthread_mutex_lock(&e->mu);
        j->t = NULL;
        if (rc == 0) {
            j->exit_status = status;
            j->state = j->cancel_state ? j->cancel_state : "finished";
        }
        else {
            j->exit_status = xe && xe->code == SBX_E_NOEXEC  ? 126
                             : xe && xe->code == SBX_E_NOCMD ? 127
                                                             : -1;
            j->state = j->cancel_state ? j->cancel_state : "failed";
            j->error = xstrdup(sbx_error_msg(xe));
            sbx_error_free(&xe);
        }
        if (strcmp(j->state, "timed_out") == 0) {
            free(j->error);
            j->error =
                xasprintf("timed out after %" PRId64 "s: the command was killed", j->timeout);
        }
        else if (strcmp(j->state, "cancelled") == 0) {
            free(j->error);
            j->error = xasprintf("%s; the command was killed",
                                 j->cancel_why ? j->cancel_why : "cancelled");
        }
    }
    sbx_task_egress_counts(et->t, &j->egress_allowed, &j->egress_denied);
    et->users--;
    pthread_cond_broadcast(&e->cv);
    if (et->oneshot && !et->ending) {
        et->ending = 1;
        j->task_ended = 1;
        end_task(e, et, "command finished", NULL);
    }
    else if (et->oneshot) {
        j->task_ended = 1; /* sandbox_end is ending it */
    }
done:
    j->call = NULL;
    j->ended_at = (int64_t)time(NULL);
    res = job_json(j);
    trim_jobs(e);
    pthread_mutex_unlock(&e->mu);
    return res;
}

static json_t *emb_end(void *ctx, const char *task, sbx_error_t **err)
{
    struct emb *e = ctx;
    struct etask *et;
    json_t *rec = NULL;
    char reason[256];

    pthread_mutex_lock(&e->mu);
    while ((et = find_task(e, task)) != NULL && et->starting) {
        pthread_cond_wait(&e->cv, &e->mu);
    }
    if (et == NULL) {
        if (tomb_take(e, task, reason, sizeof(reason)) != NULL) {
            pthread_mutex_unlock(&e->mu);
            return json_pack("{s:s, s:s, s:s, s:s}", "task", task, "state", "ended", "reason",
                             reason, "mode", "embedded");
        }
        pthread_mutex_unlock(&e->mu);
        sbx_error_set(err, SBX_E_NOTFOUND,
                      "no task '%.80s' is held by this sbx mcp process "
                      "(tasks started with 'sbx task start' end with 'sbx task end')",
                      task);
        return NULL;
    }
    if (et->ending) {
        pthread_mutex_unlock(&e->mu);
        sbx_error_set(err, SBX_E_CANCELLED, "task %s is already ending", task);
        return NULL;
    }
    et->ending = 1;
    sbx_task_stop(et->t, "ended by sandbox_end"); /* cancels its running commands */
    for (struct ejob *j = e->jobs; j != NULL; j = j->next) {
        if (strcmp(j->task, task) == 0 && job_active(j) && j->cancel_state == NULL) {
            j->cancel_state = "cancelled";
            j->cancel_why = "its task was ended by sandbox_end";
        }
    }
    while (et->users > 0) {
        pthread_cond_wait(&e->cv, &e->mu);
    }
    end_task(e, et, "ended by sandbox_end", &rec);
    pthread_mutex_unlock(&e->mu);
    return json_pack("{s:s, s:s, s:o, s:s}", "task", task, "state", "ended", "record",
                     rec ? rec : json_null(), "mode", "embedded");
}

static json_t *emb_job(void *ctx, const char *id, sbx_error_t **err)
{
    struct emb *e = ctx;
    struct ejob *j;
    json_t *res;

    pthread_mutex_lock(&e->mu);
    j = find_job(e, id);
    if (j == NULL) {
        pthread_mutex_unlock(&e->mu);
        sbx_error_set(err, SBX_E_NOTFOUND,
                      "no job '%.80s' (this sbx mcp process remembers "
                      "its last %d jobs)",
                      id, SBX_MCP_JOB_HISTORY);
        return NULL;
    }
    res = job_json(j);
    pthread_mutex_unlock(&e->mu);
    return res;
}

static json_t *emb_cancel(void *ctx, const char *id, sbx_error_t **err)
{
    struct emb *e = ctx;
    struct ejob *j;

    pthread_mutex_lock(&e->mu);
    j = find_job(e, id);
    if (j == NULL || !job_active(j)) {
        if (j != NULL) {
            sbx_error_set(err, SBX_E_USAGE, "job %s is not running (state %s)", id, j->state);
        }
        else {
            sbx_error_set(err, SBX_E_NOTFOUND, "no job '%.80s'", id);
        }
        pthread_mutex_unlock(&e->mu);
        return NULL;
    }
    if (j->cancel_state == NULL) {
        j->cancel_state = "cancelled";
        j->cancel_why = "sandbox_cancel asked for it";
    }
    if (j->t != NULL) {
        sbx_task_exec_cancel(j->t, &j->slot);
    }
    pthread_mutex_unlock(&e->mu);
    return json_pack("{s:s, s:s, s:s}", "job", id, "state", "cancelling", "mode", "embedded");
}

static json_t *emb_queue(void *ctx, sbx_error_t **err)
{
    struct emb *e = ctx;
    json_t *tasks = json_array();
    json_t *running = json_array();
    int max = e->cfg->box.max_sandboxes;

    (void)err;
    pthread_mutex_lock(&e->mu);
    for (struct etask *t = e->tasks; t != NULL; t = t->next) {
        json_array_append_new(
            tasks,
            json_pack("{s:s, s:s, s:s, s:o, s:i, s:I, s:b}", "task", t->id, "state",
                      t->starting ? "starting"
                      : t->ending ? "ending"
                                  : "running",
                      "pool", t->pool[0] ? t->pool : "?", "since", iso(t->since), "running_jobs",
                      t->users, "jobs", (json_int_t)t->n_jobs, "ends_with_command", t->oneshot));
    }
    for (struct ejob *j = e->jobs; j != NULL; j = j->next) {
        if (job_active(j)) {
            json_array_append_new(running,
                                  json_pack("{s:s, s:s, s:s, s:O}", "job", j->id, "task", j->task,
                                            "state", j->state, "command", j->argv));
        }
    }
    pthread_mutex_unlock(&e->mu);
    return json_pack("{s:s, s:s, s:o, s:o, s:o, s:o}", "mode", "embedded", "runner",
                     "none configured (runner.listen is not set): tasks run in this sbx mcp "
                     "process; there is no queue, a call waits for a free slot",
                     "tasks", tasks, "running_jobs", running, "slots",
                     sbx_mcp_box_slots(e->state, max), "queued", json_array());
}

/* Timeouts, cancellation by the client, and tasks the core stopped (idle,
 * maximum lifetime): checked every 100 ms. */
static void *house_main(void *arg)
{
    struct emb *e = arg;

    while (!__atomic_load_n(&e->house_quit, __ATOMIC_ACQUIRE)) {
        int64_t now = sbx_mono_ms();
        struct etask *et;

        pthread_mutex_lock(&e->mu);
        for (struct ejob *j = e->jobs; j != NULL; j = j->next) {
            if (!job_active(j)) {
                continue;
            }
            if (j->cancel_state == NULL && sbx_mcp_call_cancelled(j->call)) {
                j->cancel_state = "cancelled";
                j->cancel_why = "the client cancelled the request";
            }
            if (j->cancel_state == NULL && j->deadline_ms > 0 && now >= j->deadline_ms) {
                j->cancel_state = "timed_out";
            }
            if (j->cancel_state != NULL && j->t != NULL) {
                sbx_task_exec_cancel(j->t, &j->slot);
            }
        }
        do {
            char reason[256] = "";

            for (et = e->tasks; et != NULL; et = et->next) {
                int stopped = 0;

                if (et->t == NULL || et->users > 0 || et->ending || et->oneshot) {
                    continue;
                }
                /* the task's timer sets stop */
                stopped = sbx_task_stopped(et->t, reason, sizeof(reason));
                if (stopped) {
                    break;
                }
            }
            if (et != NULL) {
                sbx_info("mcp: task %s: %s: ending it", et->id, reason);
                et->ending = 1;
                tomb_add(e, et->id, reason);
                end_task(e, et, reason, NULL);
            }
        } while (et != NULL);
        pthread_mutex_unlock(&e->mu);
        usleep(100 * 1000);
    }
    return NULL;
}

static void emb_shutdown(void *ctx)
{
    struct emb *e = ctx;

    pthread_mutex_lock(&e->mu);
    e->quitting = 1;
    for (struct ejob *j = e->jobs; j != NULL; j = j->next) {
        if (job_active(j) && j->cancel_state == NULL) {
            j->cancel_state = "cancelled";
            j->cancel_why = "sbx mcp is exiting";
            if (j->t != NULL) {
                sbx_task_exec_cancel(j->t, &j->slot);
            }
        }
    }
    pthread_mutex_unlock(&e->mu);
}

static void emb_destroy(void *ctx)
{
    struct emb *e = ctx;

    __atomic_store_n(&e->house_quit, 1, __ATOMIC_RELEASE);
    pthread_join(e->house, NULL);
    pthread_mutex_lock(&e->mu);
    while (e->tasks != NULL) {
        struct etask *et = e->tasks;

        if (et->ending || et->starting || et->users > 0) {
            pthread_cond_wait(&e->cv, &e->mu); /* a call still finishing */
            continue;
        }
        et->ending = 1;
        sbx_info("mcp: ending task %s (sbx mcp is exiting)", et->id);
        end_task(e, et, "sbx mcp exited", NULL);
    }
    while (e->jobs != NULL) {
        struct ejob *j = e->jobs;

        e->jobs = j->next;
        free_job(j);
    }
    pthread_mutex_unlock(&e->mu);
    pthread_mutex_destroy(&e->mu);
    pthread_cond_destroy(&e->cv);
    free(e->state);
    free(e);
}

/* (added, issue 30) one file of a held task (files.h), the task held in use meanwhile */
static struct sbx_task *use_task(struct emb *e, const char *task, sbx_error_t **err)
{
    struct etask *et;

    pthread_mutex_lock(&e->mu);
    while ((et = find_task(e, task)) != NULL && et->starting) {
        pthread_cond_wait(&e->cv, &e->mu);
    }
    if (et == NULL || et->ending || et->oneshot) {
        pthread_mutex_unlock(&e->mu);
        sbx_error_set(err, SBX_E_NOTFOUND,
                      "no task '%.80s' is held by this sbx mcp process (start one with "
                      "sandbox_run and a task id)",
                      task);
        return NULL;
    }
    et->users++;
    pthread_mutex_unlock(&e->mu);
    return et->t;
}

static void unuse_task(struct emb *e, const char *task)
{
    struct etask *et;

    pthread_mutex_lock(&e->mu);
    if ((et = find_task(e, task)) != NULL) {
        et->users--;
        pthread_cond_broadcast(&e->cv);
    }
    pthread_mutex_unlock(&e->mu);
}

static int emb_read_file(void *ctx, const char *task, const char *path, char **data, size_t *len,
                         sbx_error_t **err)
{
    struct sbx_task *t = use_task(ctx, task, err);
    int rc;

    if (t == NULL) {
        return -1;
    }
    rc = sbx_task_file_read(t, path, SBX_FILES_ONE_MAX, data, len, err);
    unuse_task(ctx, task);
    return rc;
}

static int emb_write_file(void *ctx, const char *task, const char *path, const char *data,
                          size_t len, sbx_error_t **err)
{
    struct sbx_task *t = use_task(ctx, task, err);
    int rc;

    if (t == NULL) {
        return -1;
    }
    rc = sbx_task_file_write(t, path, data, len, err);
    unuse_task(ctx, task);
    return rc;
}

/* (added, issue 30) sandbox_snapshot: a held task's snapshot, made by "local" (this
 * box's user, as `sbx task snapshot`) */
static json_t *emb_snapshot(void *ctx, const char *task, int for_fork, sbx_error_t **err)
{
    struct sbx_task *t = use_task(ctx, task, err);
    json_t *rec = NULL;

    if (t == NULL) {
        return NULL;
    }
    if (sbx_task_snapshot(t, "local", for_fork, &rec, err) < 0) {
        rec = NULL;
    }
    unuse_task(ctx, task);
    return rec;
}

static const struct sbx_mcp_backend_ops embedded_ops = {
    .mode = "embedded",
    .run = emb_run,
    .end = emb_end,
    .job = emb_job,
    .cancel = emb_cancel,
    .queue = emb_queue,
    .shutdown = emb_shutdown,
    .destroy = emb_destroy,
    .read_file = emb_read_file,
    .write_file = emb_write_file,
    .snapshot = emb_snapshot,
};

int sbx_mcp_backend_embedded(const struct sbx_config *cfg, const char *plugin_dir,
                             struct sbx_mcp_backend *out, sbx_error_t **err)
{
    struct emb *e = xcalloc(1, sizeof(*e));

    e->state = sbx_state_dir(cfg->state_dir, err);
    if (e->state == NULL) {
        free(e);
        return -1;
    }
    e->cfg = cfg;
    e->plugin_dir = plugin_dir;
    pthread_mutex_init(&e->mu, NULL);
    pthread_cond_init(&e->cv, NULL);
    if (pthread_create(&e->house, NULL, house_main, e) != 0) {
        free(e->state);
        free(e);
        return sbx_error_set(err, SBX_E_GENERIC, "mcp: cannot start a thread");
    }
    out->ops = &embedded_ops;
    out->ctx = e;
    return 0;
}
