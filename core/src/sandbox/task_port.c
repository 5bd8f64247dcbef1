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

static void port_log(struct sbx_task *t, int port, const char *peer, const char *via,
                     const char *error)
{
    char when[32];
    time_t now = time(NULL);
    struct tm tm;
    char job[80];
    json_t *j;
    char *line;
    char *path = xasprintf("%s/logs/ports.log", t->state);
    int fd;

    gmtime_r(&now, &tm);
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
    sbx_task_job(t, job, sizeof(job));
    j = json_pack("{s:s, s:s, s:s, s:s, s:i, s:s, s:s, s:s, s:s?}", "time", when, "task", t->id,
                  "job", job, "sandbox", t->sandbox, "port", port, "peer", peer ? peer : "", "via",
                  via, "decision", error ? "failed" : "allow", "reason", error);
    line = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    {
        char *logs = xasprintf("%s/logs", t->state);
        sbx_error_t *e = NULL;

        if (sbx_mkdirs(logs, 0700, &e) < 0) {
            sbx_error_free(&e);
        }
        free(logs);
    }
    fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
    if (fd >= 0) {
        size_t n = strlen(line);

        line[n] = '\n'; /* one write: lines of concurrent connections never mix */
        if (write(fd, line, n + 1) != (ssize_t)(n + 1)) {
            sbx_warn("task %s: writing %s: %s", t->id, path, strerror(errno));
        }
        line[n] = '\0';
        close(fd);
    }
    else {
        sbx_warn("task %s: opening %s: %s", t->id, path, strerror(errno));
    }
    sbx_info("task %s: port %d: connection from %s (%s)%s%s", t->id, port, peer ? peer : "?", via,
             error ? ": " : "", error ? error : "");
    free(line);
    free(path);
}

int sbx_task_port_connect(struct sbx_task *t, int port, const char *peer, const char *via, int *fd,
                          sbx_error_t **err)
{
    const struct sbx_provider_ops *ops = sbx_instance_provider(t->prov);
    int r;

    *fd = -1;
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
    r = ops->port_connect(t->prov->ctx, t->sandbox, port, fd, err);
    port_log(t, port, peer, via, r < 0 ? sbx_error_msg(*err) : NULL);
    return r;
}
