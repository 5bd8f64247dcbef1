/* files.c - a running task's files and its pause/resume (files.h; docs/tasks.md,
 * "Files", "Pause and resume"). The provider resolves every path inside the
 * sandbox (the Docker provider: the engine's archive API, chrooted in the
 * container's root); what comes back is a tar stream, read here as hostile data. */
#include "sandbox/files.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sandbox/tarx.h"
#include "sandbox/task_int.h"
#include "util/log.h"
#include "util/xalloc.h"

/* pause and resume of one process's tasks, one at a time */
static pthread_mutex_t pause_mu = PTHREAD_MUTEX_INITIALIZER;

static const struct sbx_provider_ops *ops(struct sbx_task *t)
{
    return sbx_instance_provider(t->prov);
}

int sbx_files_path_ok(const char *path, const char *what, sbx_error_t **err)
{
    if (path == NULL || path[0] != '/') {
        return sbx_error_set(err, SBX_E_USAGE,
                             "%s: a path in the sandbox must be absolute: '%.200s'", what,
                             path ? path : "");
    }
    if (strlen(path) > SBX_FILES_PATH_MAX) {
        return sbx_error_set(err, SBX_E_USAGE, "%s: path longer than %d bytes", what,
                             SBX_FILES_PATH_MAX);
    }
    for (const char *p = path; *p; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            return sbx_error_set(err, SBX_E_USAGE, "%s: control character in the path", what);
        }
    }
    return 0;
}

static void touch(struct sbx_task *t)
{
    pthread_mutex_lock(&t->mu);
    t->last_activity = time(NULL);
    pthread_mutex_unlock(&t->mu);
}

static int no_op(struct sbx_task *t, const char *op, sbx_error_t **err)
{
    return sbx_error_set(err, SBX_FILES_E_UNSUPPORTED, "task %s: provider '%s' cannot %s", t->id,
                         sbx_task_provider_name(t), op);
}

/* ---- pause and resume ----------------------------------------------------- */

int sbx_task_paused(struct sbx_task *t)
{
    int p;

    pthread_mutex_lock(&t->mu);
    p = t->paused;
    pthread_mutex_unlock(&t->mu);
    return p;
}

int sbx_task_paused_refuse(struct sbx_task *t, sbx_error_t **err)
{
    if (t->paused) {
        return sbx_error_set(err, SBX_FILES_E_PAUSED,
                             "task %s is paused: resume it first ('sbx task resume %s', or POST "
                             "/v1/tasks/%s/resume to a runner)",
                             t->id, t->id, t->id);
    }
    return 0;
}

int sbx_task_pause(struct sbx_task *t, int to_disk, sbx_error_t **err)
{
    int rc = 0;

    if (ops(t)->pause == NULL || !(ops(t)->flags & SBX_PROVIDER_PAUSE)) {
        return no_op(t, "pause a sandbox", err);
    }
    pthread_mutex_lock(&pause_mu);
    pthread_mutex_lock(&t->mu);
    if (t->stop) {
        rc = sbx_error_set(err, SBX_E_CANCELLED, "task %s is ending: %s", t->id, t->stop_reason);
    }
    pthread_mutex_unlock(&t->mu);
    if (rc == 0 && (to_disk || !sbx_task_paused(t))) { /* to disk: the provider says if it can */
        rc = ops(t)->pause(t->prov->ctx, t->sandbox, to_disk, err);
        if (rc == 0) {
            pthread_mutex_lock(&t->mu);
            t->paused = 1;
            t->paused_at = time(NULL);
            pthread_mutex_unlock(&t->mu);
            sbx_log(SBX_LOG_INFO, "task %s: paused", t->id);
            (void)sbx_task_record_write(t, "running", NULL);
        }
        else {
            sbx_error_wrap(err, "task %s", t->id);
        }
    }
    pthread_mutex_unlock(&pause_mu);
    return rc;
}

int sbx_task_resume(struct sbx_task *t, sbx_error_t **err)
{
    int rc = 0;

    if (ops(t)->resume == NULL) {
        return no_op(t, "resume a sandbox", err);
    }
    pthread_mutex_lock(&pause_mu);
    if (sbx_task_paused(t)) {
        rc = ops(t)->resume(t->prov->ctx, t->sandbox, err);
        if (rc == 0) {
            pthread_mutex_lock(&t->mu);
            t->paused = 0;
            t->paused_total += time(NULL) - t->paused_at;
            t->last_activity = time(NULL);
            pthread_mutex_unlock(&t->mu);
            sbx_log(SBX_LOG_INFO, "task %s: resumed", t->id);
            if (!t->stop) {
                (void)sbx_task_record_write(t, "running", NULL);
            }
        }
        else {
            sbx_error_wrap(err, "task %s", t->id);
        }
    }
    pthread_mutex_unlock(&pause_mu);
    return rc;
}

void sbx_task_thaw_for_stop(struct sbx_task *t)
{
    sbx_error_t *e = NULL;

    if (sbx_task_paused(t) && sbx_task_resume(t, &e) < 0) {
        sbx_log(SBX_LOG_WARN, "task %s: resuming it to end it: %s", t->id, sbx_error_msg(e));
        sbx_error_free(&e);
    }
}

/* ---- archives --------------------------------------------------------------- */

struct bounded {
    int (*sink)(void *ud, const char *data, size_t len);
    void *ud;
    int64_t max, got;
    int over;
};

static int bounded_sink(void *ud, const char *data, size_t len)
{
    struct bounded *b = ud;

    b->got += (int64_t)len;
    if (b->got > b->max) {
        b->over = 1;
        return 1;
    }
    return b->sink(b->ud, data, len);
}

static void size_text(int64_t v, char *buf, size_t len)
{
    if (v >= (1LL << 20) && v % (1LL << 20) == 0) {
        snprintf(buf, len, "%lld MiB", (long long)(v >> 20));
    }
    else {
        snprintf(buf, len, "%lld bytes", (long long)v);
    }
}

int sbx_task_files_get(struct sbx_task *t, const char *path, int64_t max,
                       int (*sink)(void *ud, const char *data, size_t len), void *ud,
                       sbx_error_t **err)
{
    struct bounded b = {.sink = sink, .ud = ud, .max = max};
    sbx_error_t *e = NULL;
    int rc;

    if (sbx_files_path_ok(path, "read", err) < 0) {
        return -1;
    }
    if (ops(t)->files_get == NULL) {
        return no_op(t, "read files of a sandbox", err);
    }
    touch(t);
    rc = ops(t)->files_get(t->prov->ctx, t->sandbox, path, bounded_sink, &b, &e);
    if (rc < 0 && b.over) {
        char m[32];

        sbx_error_free(&e);
        size_text(max, m, sizeof(m));
        return sbx_error_set(err, SBX_FILES_E_TOOBIG,
                             "task %s: %.300s: the archive is larger than %s (the bound of one "
                             "copy): refused",
                             t->id, path, m);
    }
    if (rc < 0) {
        if (err != NULL && *err == NULL) {
            *err = e;
            e = NULL;
        }
        sbx_error_free(&e);
        return sbx_error_wrap(err, "task %s", t->id);
    }
    return 0;
}

int sbx_task_files_put(struct sbx_task *t, const char *dir, const char *tar, size_t len,
                       sbx_error_t **err)
{
    if (sbx_files_path_ok(dir, "write", err) < 0) {
        return -1;
    }
    if (ops(t)->files_put == NULL) {
        return no_op(t, "write files into a sandbox", err);
    }
    if ((int64_t)len > SBX_FILES_CP_MAX) {
        return sbx_error_set(err, SBX_FILES_E_TOOBIG,
                             "task %s: the archive is larger than %lld MiB: refused", t->id,
                             (long long)(SBX_FILES_CP_MAX >> 20));
    }
    touch(t);
    if (ops(t)->files_put(t->prov->ctx, t->sandbox, dir, tar, len, err) < 0) {
        return sbx_error_wrap(err, "task %s", t->id);
    }
    return 0;
}

/* (added) the source of a streamed put, counted against SBX_FILES_CP_MAX */
struct counted {
    int (*source)(void *ud, char *buf, size_t cap, size_t *n);
    void *ud;
    int64_t total;
    int too_big;
    int failed;
};

static int counted_read(void *ud, char *buf, size_t cap, size_t *n)
{
    struct counted *c = ud;

    *n = 0;
    if (c->source(c->ud, buf, cap, n) != 0) {
        c->failed = 1;
        return 1;
    }
    c->total += (int64_t)*n;
    if (c->total > SBX_FILES_CP_MAX) {
        c->too_big = 1;
        return 1;
    }
    return 0;
}

int sbx_task_files_put_stream(struct sbx_task *t, const char *dir,
                              int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                              int64_t *bytes, sbx_error_t **err)
{
    struct counted c = {.source = source, .ud = ud};
    sbx_error_t *e = NULL;
    int rc;

    *bytes = 0;
    if (sbx_files_path_ok(dir, "write", err) < 0) {
        return -1;
    }
    if (ops(t)->files_put_stream == NULL) { /* a provider before ABI 1.10: whole */
        char *buf = NULL;
        size_t len = 0;
        size_t cap = 0;
        size_t n = 0;

        if (ops(t)->files_put == NULL) {
            return no_op(t, "write files into a sandbox", err);
        }
        do {
            if (cap - len < 65536) {
                cap = cap ? cap * 2 : 1u << 20;
                buf = xrealloc(buf, cap);
            }
            rc = counted_read(&c, buf + len, cap - len, &n);
            len += n;
        } while (rc == 0 && n > 0);
        rc = rc == 0 ? sbx_task_files_put(t, dir, buf, len, &e) : -1;
        free(buf);
    }
    else {
        touch(t);
        rc = ops(t)->files_put_stream(t->prov->ctx, t->sandbox, dir, counted_read, &c, &e);
    }
    *bytes = c.total;
    if (c.too_big) {
        sbx_error_free(&e);
        return sbx_error_set(err, SBX_FILES_E_TOOBIG,
                             "task %s: the archive is larger than %lld MiB (the bound of one "
                             "copy): refused",
                             t->id, (long long)(SBX_FILES_CP_MAX >> 20));
    }
    if (c.failed) { /* the source's own reason is the caller's */
        sbx_error_free(&e);
        return sbx_error_set(err, SBX_E_CANCELLED, "task %s: the archive did not arrive whole",
                             t->id);
    }
    if (rc < 0) {
        if (err != NULL && *err == NULL) {
            *err = e;
            e = NULL;
        }
        sbx_error_free(&e);
        return sbx_error_wrap(err, "task %s", t->id);
    }
    return 0;
}

/* the first member of an archive, then stop */
struct first {
    struct sbx_tar_reader rd;
    struct sbx_tar_entry e;
    int have;
    /* reading one file's content */
    int want_data;
    char *data;
    size_t len;
    int64_t max;
    int over;
};

static int first_entry(void *ud, const struct sbx_tar_entry *e)
{
    struct first *f = ud;

    if (f->have) {
        return 1; /* a second member: done */
    }
    f->e = *e;
    f->have = 1;
    if (!f->want_data || e->type != '0') {
        return 1;
    }
    if (e->size > f->max) {
        f->over = 1;
        return 1;
    }
    f->data = xmalloc((size_t)e->size + 1);
    return 0;
}

static int first_data(void *ud, const char *data, size_t len)
{
    struct first *f = ud;

    if (f->data == NULL || (int64_t)(f->len + len) > f->max) {
        return 1;
    }
    memcpy(f->data + f->len, data, len);
    f->len += len;
    return 0;
}

static int first_sink(void *ud, const char *data, size_t len)
{
    struct first *f = ud;

    if (sbx_tar_feed(&f->rd, data, len) < 0 || f->rd.done) {
        return 1;
    }
    return 0;
}

static int read_first(struct sbx_task *t, const char *path, struct first *f, sbx_error_t **err)
{
    sbx_error_t *e = NULL;
    int rc;

    sbx_tar_reader_init(&f->rd);
    f->rd.on_entry = first_entry;
    f->rd.on_data = first_data;
    f->rd.ud = f;
    rc = sbx_task_files_get(t, path, INT64_MAX, first_sink, f, &e);
    sbx_tar_reader_fini(&f->rd);
    if (!f->have) {
        if (rc < 0) {
            if (err != NULL && *err == NULL) {
                *err = e;
                e = NULL;
            }
            sbx_error_free(&e);
            return -1;
        }
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "task %s: %.300s: the sandbox sent no archive%s%s", t->id, path,
                             f->rd.err[0] ? ": " : "", f->rd.err);
    }
    sbx_error_free(&e); /* stopped on purpose after the first member */
    return 0;
}

int sbx_task_files_is_dir(struct sbx_task *t, const char *path, sbx_error_t **err)
{
    struct first f = {0};

    if (read_first(t, path, &f, err) < 0) {
        return -1;
    }
    return f.e.type == '5';
}

int sbx_task_file_read(struct sbx_task *t, const char *path, int64_t max, char **data, size_t *len,
                       sbx_error_t **err)
{
    struct first f = {.want_data = 1, .max = max};

    *data = NULL;
    *len = 0;
    if (read_first(t, path, &f, err) < 0) {
        free(f.data);
        return -1;
    }
    if (f.e.type != '0') {
        free(f.data);
        return sbx_error_set(err, SBX_FILES_E_NOTFILE, "task %s: %.300s: not a regular file (%s)",
                             t->id, path,
                             f.e.type == '5'   ? "a directory"
                             : f.e.type == '2' ? "a symlink: read its target's path instead"
                                               : "a special file");
    }
    if (f.over) {
        char m[32];

        free(f.data);
        size_text(max, m, sizeof(m));
        return sbx_error_set(err, SBX_FILES_E_TOOBIG,
                             "task %s: %.300s: %lld bytes, more than %s: refused (use 'sbx cp')",
                             t->id, path, (long long)f.e.size, m);
    }
    if ((int64_t)f.len != f.e.size) {
        free(f.data);
        return sbx_error_set(err, SBX_E_PROTOCOL, "task %s: %.300s: the archive ended early", t->id,
                             path);
    }
    f.data[f.len] = '\0';
    *data = f.data;
    *len = f.len;
    return 0;
}

int sbx_task_file_write(struct sbx_task *t, const char *path, const char *data, size_t len,
                        sbx_error_t **err)
{
    char *dir;
    const char *base;
    char *tar = NULL;
    size_t tlen = 0;
    int rc;

    if (sbx_files_path_ok(path, "write", err) < 0) {
        return -1;
    }
    if ((int64_t)len > SBX_FILES_ONE_MAX) {
        return sbx_error_set(err, SBX_FILES_E_TOOBIG,
                             "task %s: %.300s: %zu bytes, more than %lld MiB: refused (use 'sbx "
                             "cp')",
                             t->id, path, len, (long long)(SBX_FILES_ONE_MAX >> 20));
    }
    base = strrchr(path, '/') + 1;
    if (*base == '\0' || strcmp(base, ".") == 0 || strcmp(base, "..") == 0) {
        return sbx_error_set(err, SBX_E_USAGE, "write: '%.300s' does not name a file", path);
    }
    dir = base - 1 == path ? xstrdup("/") : xstrndup(path, (size_t)(base - 1 - path));
    if (sbx_tar_one_file(base, data, len, 0644, time(NULL), &tar, &tlen) < 0) {
        free(dir);
        return sbx_error_set(err, SBX_E_USAGE, "write: '%.300s': name too long", path);
    }
    rc = sbx_task_files_put(t, dir, tar, tlen, err);
    free(tar);
    free(dir);
    return rc;
}
