/* task_port.c - a connection to a port inside a task's sandbox (docs/tasks.md,
 * "Ports"): the provider's port_connect op, and one log line per connection,
 * like the egress log's: a JSON object appended with one write(2) to
 * <state>/logs/ports.log, and an info line in the owner's log. */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/statedir.h"
#include "sandbox/task_int.h"
#include "sandbox/task_port.h"
#include "util/log.h"
#include "util/xalloc.h"

/* (changed) A connection's line, written when it ends (or at once when it failed):
 * what the task was then, so that the task may end meanwhile. */
struct sbx_port_conn {
    char *path; /* <state>/logs/ports.log */
    char *logs;
    char task[80];
    char job[80];
    char sandbox[256];
    char peer[128];
    char via[96];
    int port;
    time_t start;     /* wall clock, for "time" */
    int64_t start_ms; /* monotonic, for "duration" */
};

static void port_log(struct sbx_port_conn *c, int64_t in, int64_t out, const char *error,
                     int failed)
{
    char when[32];
    struct tm tm;
    json_t *j;
    char *line;
    int fd;
    double dur = (double)(sbx_mono_ms() - c->start_ms) / 1000.0;

    gmtime_r(&c->start, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s?}", "time", when, "task", c->task,
                  "job", c->job, "sandbox", c->sandbox, "port", c->port, "peer", c->peer, "via",
                  c->via, "decision", failed ? "failed" : "allow", "reason", error);
    /* (added) what went through, counted by whoever copied it; -1: not told */
    json_object_set_new(j, "bytes_in", in >= 0 ? json_integer(in) : json_null());
    json_object_set_new(j, "bytes_out", out >= 0 ? json_integer(out) : json_null());
    json_object_set_new(j, "duration", json_real(dur < 0 ? 0 : dur));
    line = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(j);
    {
        sbx_error_t *e = NULL;

        if (sbx_mkdirs(c->logs, 0700, &e) < 0) {
            sbx_error_free(&e);
        }
    }
    fd = open(c->path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd >= 0) {
        size_t n = strlen(line);

        line[n] = '\n'; /* one write: lines of concurrent connections never mix */
        if (write(fd, line, n + 1) != (ssize_t)(n + 1)) {
            sbx_warn("task %s: writing %s: %s", c->task, c->path, strerror(errno));
        }
        line[n] = '\0';
        close(fd);
    }
    else {
        sbx_warn("task %s: opening %s: %s", c->task, c->path, strerror(errno));
    }
    free(line);
}

static void conn_free(struct sbx_port_conn *c)
{
    free(c->path);
    free(c->logs);
    free(c);
}

void sbx_port_conn_end(struct sbx_port_conn *c, int64_t bytes_in, int64_t bytes_out,
                       const char *reason)
{
    if (c == NULL) {
        return;
    }
    port_log(c, bytes_in, bytes_out, reason, 0);
    conn_free(c);
}

int sbx_task_port_connect(struct sbx_task *t, int port, const char *peer, const char *via, int *fd,
                          struct sbx_port_conn **conn, sbx_error_t **err)
{
    const struct sbx_provider_ops *ops = sbx_instance_provider(t->prov);
    struct sbx_port_conn *c;
    int r;

    *fd = -1;
    *conn = NULL;
    if (port < 1 || port > 65535) {
        return sbx_error_set(err, SBX_E_USAGE, "port %d: use 1-65535", port);
    }
    if (ops->port_connect == NULL) {
        return sbx_error_set(err, SBX_E_ENGINE, "provider '%s' cannot forward ports",
                             t->prov->cfg->name);
    }
    pthread_mutex_lock(&t->mu);
    if (t->stop || t->sandbox[0] == '\0') {
        pthread_mutex_unlock(&t->mu);
        return sbx_error_set(err, SBX_E_CANCELLED, "task %s is not running", t->id);
    }
    /* a preview being looked at is activity: the idle limit counts from here */
    t->last_activity = time(NULL);
    pthread_mutex_unlock(&t->mu);
    c = xcalloc(1, sizeof(*c));
    c->path = xasprintf("%s/logs/ports.log", t->state);
    c->logs = xasprintf("%s/logs", t->state);
    snprintf(c->task, sizeof(c->task), "%s", t->id);
    sbx_task_job(t, c->job, sizeof(c->job));
    snprintf(c->sandbox, sizeof(c->sandbox), "%s", t->sandbox);
    snprintf(c->peer, sizeof(c->peer), "%s", peer ? peer : "");
    snprintf(c->via, sizeof(c->via), "%s", via);
    c->port = port;
    c->start = time(NULL);
    c->start_ms = sbx_mono_ms();
    r = ops->port_connect(t->prov->ctx, t->sandbox, port, fd, err);
    sbx_info("task %s: port %d: connection from %s (%s)%s%s", t->id, port, peer ? peer : "?", via,
             r < 0 ? ": " : "", r < 0 ? sbx_error_msg(*err) : "");
    if (r < 0) { /* a failed connection's line now */
        port_log(c, 0, 0, sbx_error_msg(*err), 1);
        conn_free(c);
        return r;
    }
    *conn = c;
    return r;
}
