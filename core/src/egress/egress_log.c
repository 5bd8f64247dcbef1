/* egress_log.c - one JSON line per proxied connection (jansson), appended with a
 * single write(2) to a file opened O_APPEND, so lines from several processes do not
 * interleave. A failed write marks the log not ready: the proxy then refuses new
 * connections until a line can be written again (fail closed). */
#include "egress/egress_log.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/log.h"
#include "util/xalloc.h"

static int open_fd(const char *path)
{
    return open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOCTTY, 0640);
}

int sbx_egress_log_open(struct sbx_egress_log *l, const char *path, sbx_error_t **err)
{
    memset(l, 0, sizeof(*l));
    l->fd = -1;
    if (path == NULL || path[0] == '\0') {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "egress: 'egress.log' is not set; the proxy "
                             "needs a log file (it fails closed without one)");
    }
    l->fd = open_fd(path);
    if (l->fd < 0) {
        return sbx_error_set(err, SBX_E_CONFIG, "egress: cannot open log '%s': %s", path,
                             strerror(errno));
    }
    l->path = xstrdup(path);
    l->ok = 1;
    return 0;
}

int sbx_egress_log_ready(struct sbx_egress_log *l)
{
    struct stat st;

    if (l->fd >= 0 && l->ok && fstat(l->fd, &st) == 0 && st.st_nlink > 0) {
        return 0;
    }
    if (l->fd >= 0) {
        close(l->fd);
    }
    l->fd = open_fd(l->path);
    if (l->fd < 0) {
        if (l->ok) {
            sbx_log(SBX_LOG_ERROR, "egress: cannot reopen log '%s': %s; refusing connections",
                    l->path, strerror(errno));
        }
        l->ok = 0;
        return -1;
    }
    /* Reopened: the next write decides whether it works. Allowed connections still
     * need a healthy log, so report ready only if nothing failed before. */
    return l->ok ? 0 : -1;
}

static json_t *str_or_null(const char *s)
{
    return s != NULL ? json_string(s) : json_null();
}

static char *format_time(const struct timespec *ts)
{
    struct tm tm;

    gmtime_r(&ts->tv_sec, &tm);
    return xasprintf("%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ts->tv_nsec / 1000000);
}

int sbx_egress_log_write(struct sbx_egress_log *l, const struct sbx_egress_record *r)
{
    char *time = format_time(&r->start);
    json_t *o = json_object();
    char *line;
    size_t len;
    size_t off = 0;
    int rc = 0;

    json_object_set_new(o, "time", json_string(time));
    json_object_set_new(o, "job", str_or_null(r->job));
    json_object_set_new(o, "task", str_or_null(r->task));
    json_object_set_new(o, "sandbox", str_or_null(r->sandbox));
    json_object_set_new(o, "exec", str_or_null(r->exec));
    json_object_set_new(o, "pid", r->pid > 0 ? json_integer(r->pid) : json_null());
    json_object_set_new(o, "method", str_or_null(r->method));
    json_object_set_new(o, "host", str_or_null(r->host));
    json_object_set_new(o, "port", r->port ? json_integer(r->port) : json_null());
    json_object_set_new(o, "address", str_or_null(r->address));
    json_object_set_new(o, "sni", str_or_null(r->sni));
    json_object_set_new(o, "opaque", json_boolean(r->opaque));
    json_object_set_new(o, "decision", json_string(r->decision));
    json_object_set_new(o, "rule", str_or_null(r->rule));
    json_object_set_new(o, "private", str_or_null(r->priv));
    json_object_set_new(o, "reason", str_or_null(r->reason));
    json_object_set_new(o, "status", json_integer(r->status));
    json_object_set_new(o, "bytes_up", json_integer((json_int_t)r->bytes_up));
    json_object_set_new(o, "bytes_down", json_integer((json_int_t)r->bytes_down));
    json_object_set_new(o, "duration", json_real(r->duration));
    free(time);
    line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
    json_decref(o);
    if (line == NULL) {
        abort();
    }
    len = strlen(line);
    line[len++] = '\n'; /* replaces the NUL; line is not used as a string again */
    while (l->fd >= 0 && off < len) {
        ssize_t n = write(l->fd, line + off, len - off);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            rc = -1;
            break;
        }
        off += (size_t)n;
    }
    if (l->fd < 0) {
        rc = -1;
        errno = EBADF;
    }
    if (rc < 0) {
        if (l->ok) {
            sbx_log(SBX_LOG_ERROR,
                    "egress: cannot write log '%s': %s; refusing connections "
                    "until it can be written",
                    l->path, strerror(errno ? errno : EIO));
        }
        l->ok = 0;
        l->errors++;
    }
    else if (!l->ok) {
        sbx_log(SBX_LOG_INFO, "egress: log '%s' is writable again", l->path);
        l->ok = 1;
    }
    free(line);
    return rc;
}

void sbx_egress_log_close(struct sbx_egress_log *l)
{
    if (l->fd >= 0) {
        close(l->fd);
    }
    l->fd = -1;
    free(l->path);
    l->path = NULL;
}
