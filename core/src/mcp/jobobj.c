/* jobobj.c - the tool's job object (docs/mcp.md) from the runner's job record
 * and the output read from it, and sandbox_run's timeout (backend.h). */
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mcp/backend.h"
#include "util/monowait.h"
#include "util/xalloc.h"

int sbx_mcp_job_active(const char *st)
{
    return st != NULL && (strcmp(st, "queued") == 0 || strcmp(st, "running") == 0);
}

/* Unix seconds (the record's reals) as an ISO time. */
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

/* The error text of a job that did not finish, or NULL. */
static char *job_error(const char *state, const char *st, const char *reason,
                       const struct sbx_mcp_note *n)
{
    if (strcmp(state, "timed_out") == 0) {
        return xasprintf("timed out after %" PRId64 "s: the command was killed", n->timeout);
    }
    if (strcmp(state, "cancelled") == 0) {
        return xasprintf("%s; the command was killed", n->why   ? n->why
                                                       : reason ? reason
                                                                : "cancelled");
    }
    if (strcmp(state, "failed") == 0) {
        return xasprintf("%s", reason ? reason : st ? st : "the record has no state");
    }
    return NULL;
}

json_t *sbx_mcp_job_object(json_t *rec, const struct sbx_mcp_outbuf out[2], const char *out_error,
                           struct sbx_mcp_note n, const char *mode)
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
    char *error;
    char *text[2];
    int trunc[2];
    uint64_t got;
    json_int_t kept = json_integer_value(json_object_get(rec, "output_bytes"));
    double end_s;

    /* runner finished with a reason: sbx failed (no sandbox, 126, 127) */
    if (sbx_mcp_job_active(st)) {
        state = "running";
    }
    else if (st != NULL && strcmp(st, "finished") == 0) {
        state = reason == NULL ? "finished" : "failed";
    }
    else if (st != NULL && strcmp(st, "cancelled") == 0) {
        state = n.timed_out ? "timed_out" : "cancelled";
    }
    else {
        state = "failed"; /* interrupted (the runner died), or unknown */
    }
    error = job_error(state, st, reason, &n);
    for (int i = 0; i < 2; i++) {
        text[i] = sbx_mcp_outbuf_text(&out[i], &trunc[i]);
    }
    got = out[0].total + out[1].total;
    json_object_set_new(o, "job", id ? json_string(id) : json_null());
    json_object_set_new(o, "task", task ? json_string(task) : json_null());
    json_object_set_new(o, "state", json_string(state));
    json_object_set_new(o, "exit_status",
                        json_is_integer(exit_status) ? json_incref(exit_status) : json_null());
    json_object_set_new(o, "command", json_is_array(argv) ? json_deep_copy(argv) : json_array());
    json_object_set_new(o, "stdout", json_string(text[0]));
    json_object_set_new(o, "stderr", json_string(text[1]));
    json_object_set_new(o, "stdout_bytes", json_integer((json_int_t)out[0].total));
    json_object_set_new(o, "stderr_bytes", json_integer((json_int_t)out[1].total));
    json_object_set_new(o, "stdout_truncated", json_boolean(trunc[0]));
    json_object_set_new(o, "stderr_truncated", json_boolean(trunc[1]));
    if (kept > 0 && (uint64_t)kept > got) {
        /* the runner keeps the last 1 MiB: older output was gone when read */
        json_object_set_new(o, "output_dropped_bytes", json_integer(kept - (json_int_t)got));
    }
    if (out_error != NULL) {
        json_object_set_new(o, "output_error", json_string(out_error));
    }
    json_object_set_new(o, "started_at", iso(started));
    json_object_set_new(o, "ended_at", iso(ended));
    end_s = json_is_number(ended) ? json_number_value(ended) : (double)time(NULL);
    json_object_set_new(o, "duration_seconds",
                        json_integer(json_is_number(started) && end_s > json_number_value(started)
                                         ? (json_int_t)(end_s - json_number_value(started))
                                         : 0));
    json_object_set_new(o, "timeout_seconds",
                        n.timeout > 0 ? json_integer(n.timeout) : json_null());
    json_object_set_new(o, "egress",
                        json_pack("{s:I, s:I, s:s}", "allowed",
                                  json_integer_value(json_object_get(egress, "allowed")), "denied",
                                  json_integer_value(json_object_get(egress, "denied")), "scope",
                                  "job"));
    /* the runner keeps an agent job's own task (docs/api.md, Tasks); every
     * other job is a one-command task that ends with it */
    json_object_set_new(o, "task_ended",
                        json_boolean(!sbx_mcp_job_active(st) &&
                                     !(pool != NULL && strcmp(pool, "agent") == 0 && task != NULL &&
                                       id != NULL && strcmp(task, id) != 0)));
    if (error != NULL) {
        json_object_set_new(o, "error", json_string(error));
    }
    json_object_set_new(o, "mode", json_string(mode));
    json_object_set_new(o, "record", json_incref(rec));
    free(text[0]);
    free(text[1]);
    free(error);
    return o;
}

static void *timer_main(void *arg)
{
    struct sbx_mcp_timer *t = arg;
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

int sbx_mcp_timer_start(struct sbx_mcp_timer *t, struct sbx_mcp_call *call, int64_t seconds)
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

int sbx_mcp_timer_stop(struct sbx_mcp_timer *t)
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
