/* keeper_files.c - the keeper's files requests of `sbx cp`, both sides (keeper_files.h;
 * docs/tasks.md, "Files"). The keeper holds the task, so these count as activity and
 * see whether it is paused; the bytes pass through it as frames, bounded by
 * SBX_FILES_CP_MAX. (changed, issue 31) `sbx task files`, pause and resume go to the
 * keeper's runner (its API) instead. */
#include "sandbox/keeper_files.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/files.h"
#include "sandbox/keeper.h"
#include "sandbox/proto.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

#define CHUNK (1u << 20)

static const char *kind_of(const sbx_error_t *e)
{
    switch (e ? e->code : 0) {
    case SBX_E_NOTFOUND:
        return "notfound";
    case SBX_FILES_E_TOOBIG:
        return "toobig";
    case SBX_FILES_E_PAUSED:
        return "paused";
    case SBX_FILES_E_NOTFILE:
        return "notfile";
    case SBX_FILES_E_UNSUPPORTED:
        return "unsupported";
    case SBX_E_USAGE:
        return "usage";
    default:
        return "failed";
    }
}

static int code_of(const char *kind)
{
    static const struct {
        const char *k;
        int code;
    } map[] = {{"notfound", SBX_E_NOTFOUND},
               {"toobig", SBX_FILES_E_TOOBIG},
               {"paused", SBX_FILES_E_PAUSED},
               {"notfile", SBX_FILES_E_NOTFILE},
               {"unsupported", SBX_FILES_E_UNSUPPORTED},
               {"usage", SBX_E_USAGE}};

    for (size_t i = 0; kind != NULL && i < sizeof(map) / sizeof(map[0]); i++) {
        if (strcmp(map[i].k, kind) == 0) {
            return map[i].code;
        }
    }
    return SBX_E_ENGINE;
}

static void reply(int fd, json_t *ok, const sbx_error_t *e)
{
    json_t *j = e != NULL ? json_pack("{s:s, s:i, s:s}", "error", sbx_error_msg(e), "code", 125,
                                      "kind", kind_of(e))
                          : ok;
    char *s = json_dumps(j, JSON_COMPACT);

    (void)sbx_frame_write(fd, 'X', s, strlen(s));
    free(s);
    json_decref(j);
    if (e != NULL) {
        json_decref(ok);
    }
}

static int out_sink(void *ud, const char *data, size_t len)
{
    int fd = *(int *)ud;

    return sbx_frame_write(fd, 'O', data, len) < 0 ? 1 : 0;
}

/* (changed) 'I' frames up to an empty one, read as the provider takes them
 * (sbx_task_files_put_stream counts them against SBX_FILES_CP_MAX) */
struct in_src {
    int fd;
    char *data; /* the frame being read */
    size_t len, off;
    int ended; /* the empty frame came */
    int bad;   /* not an 'I' frame, or the connection failed */
};

static int in_read(void *ud, char *buf, size_t cap, size_t *n)
{
    struct in_src *s = ud;

    *n = 0;
    while (s->off == s->len) {
        char type = 0;
        sbx_error_t *e = NULL;

        if (s->ended) {
            return 0;
        }
        free(s->data);
        s->data = NULL;
        s->len = s->off = 0;
        if (sbx_frame_read(s->fd, &type, &s->data, &s->len, &e) != 0 || type != 'I') {
            sbx_error_free(&e);
            s->bad = 1;
            return 1;
        }
        if (s->len == 0) {
            s->ended = 1;
            return 0;
        }
    }
    *n = s->len - s->off < cap ? s->len - s->off : cap;
    memcpy(buf, s->data + s->off, *n);
    s->off += *n;
    return 0;
}

/* The rest of the archive when the copy stopped early, unread (a copy refused past the
 * bound: the client is still sending). */
static void in_drain(struct in_src *s)
{
    char buf[65536];
    size_t n = 0;

    while (!s->ended && !s->bad) {
        s->off = s->len;
        (void)in_read(s, buf, sizeof(buf), &n);
    }
}

int sbx_keeper_files_op(struct sbx_task *t, int fd, const char *op, json_t *req)
{
    const char *path = json_string_value(json_object_get(req, "path"));
    sbx_error_t *e = NULL;
    json_t *ok = json_pack("{s:i}", "status", 0);

    if (strcmp(op, "files_get") == 0) {
        (void)sbx_task_files_get(t, path, SBX_FILES_CP_MAX, out_sink, &fd, &e);
    }
    else if (strcmp(op, "files_put") == 0) { /* (changed) streamed to the provider */
        const char *dir = json_string_value(json_object_get(req, "dir"));
        struct in_src src = {.fd = fd};
        int64_t bytes = 0;

        if (sbx_task_files_put_stream(t, dir, in_read, &src, &bytes, &e) < 0 && src.bad) {
            sbx_error_free(&e);
            sbx_error_set(&e, SBX_E_PROTOCOL, "the archive did not arrive whole");
        }
        in_drain(&src); /* so that the client reads the reason, not a reset */
        free(src.data);
    }
    else if (strcmp(op, "files_stat") == 0) {
        int d = sbx_task_files_is_dir(t, path, &e);

        json_object_set_new(ok, "dir", json_boolean(d == 1));
    }
    else {
        json_decref(ok);
        return 0;
    }
    reply(fd, ok, e);
    sbx_error_free(&e);
    return 1;
}

/* ---- the client ------------------------------------------------------------- */

static int read_reply(int fd, const char *task, int (*sink)(void *ud, const char *data, size_t len),
                      void *ud, json_t **result, sbx_error_t **err);

/* Connects to the task's keeper and sends req: the connection, or -1 with err. */
static int call_open(const char *state, const char *task, json_t *req, sbx_error_t **err)
{
    cleanup_free char *sock = NULL;
    cleanup_free char *target = NULL;
    char *s;
    int fd;

    if (!sbx_id_valid(task, SBX_ID_TASK)) {
        return sbx_error_set(err, SBX_E_USAGE, "'%s' is not a valid task id", task);
    }
    /* (changed, issue 31) the runner that hosts the task (its keeper's): its API's
     * archive stream, then the same frames as the keeper's socket spoke */
    sock = sbx_keeper_runner_socket(state, task);
    if (sock == NULL) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "no running task '%s' (sbx task list)", task);
    }
    target = xasprintf("/v1/tasks/%s/archive", task);
    if ((fd = sbx_unix_upgrade(sock, target, "sbx-archive.v1", NULL, err)) < 0) {
        return sbx_error_wrap(err, "task '%s'", task);
    }
    s = json_dumps(req, JSON_COMPACT);
    if (sbx_frame_write(fd, 'R', s, strlen(s)) < 0) {
        free(s);
        close(fd);
        return sbx_error_set(err, SBX_E_ENGINE, "sending to the task's keeper: %s",
                             strerror(errno));
    }
    free(s);
    return fd;
}

int sbx_keeper_files_call(const char *state, const char *task, json_t *req, const char *in,
                          size_t len, int (*sink)(void *ud, const char *data, size_t len), void *ud,
                          json_t **result, sbx_error_t **err)
{
    int fd;

    if (result != NULL) {
        *result = NULL;
    }
    if ((fd = call_open(state, task, req, err)) < 0) {
        return -1;
    }
    for (size_t off = 0; in != NULL && off <= len;) {
        size_t n = len - off < CHUNK ? len - off : CHUNK;

        if (sbx_frame_write(fd, 'I', in + off, n) < 0) {
            break; /* the keeper refused early: its reply says why */
        }
        if (n == 0) {
            break;
        }
        off += n;
        if (off == len) {
            (void)sbx_frame_write(fd, 'I', "", 0);
            break;
        }
    }
    return read_reply(fd, task, sink, ud, result, err);
}

/* The 'O' frames to sink, then the 'X' reply; closes fd. */
static int read_reply(int fd, const char *task, int (*sink)(void *ud, const char *data, size_t len),
                      void *ud, json_t **result, sbx_error_t **err)
{
    int rc = -1;

    for (;;) {
        char type = 0;
        char *data = NULL;
        size_t n = 0;
        int r = sbx_frame_read(fd, &type, &data, &n, err);

        if (r != 0) {
            free(data);
            if (r == 1) {
                sbx_error_set(err, SBX_E_PROTOCOL, "task '%s': the keeper closed the connection",
                              task);
            }
            break;
        }
        if (type == 'O' && sink != NULL) {
            if (sink(ud, data, n) != 0) {
                free(data);
                if (err != NULL && *err == NULL) {
                    sbx_error_set(err, SBX_E_CANCELLED, "task '%s': copy stopped", task);
                }
                break;
            }
        }
        else if (type == 'X') {
            json_t *j = json_loadb(data, n, 0, NULL);
            const char *msg = json_string_value(json_object_get(j, "error"));

            if (j == NULL) {
                sbx_error_set(err, SBX_E_PROTOCOL, "task '%s': malformed reply from the keeper",
                              task);
            }
            else if (msg != NULL) {
                sbx_error_set(err, code_of(json_string_value(json_object_get(j, "kind"))), "%s",
                              msg);
                json_decref(j);
            }
            else {
                rc = 0;
                if (result != NULL) {
                    *result = j;
                }
                else {
                    json_decref(j);
                }
            }
            free(data);
            break;
        }
        free(data);
    }
    close(fd);
    return rc;
}

int sbx_keeper_files_put_begin(const char *state, const char *task, const char *dir,
                               sbx_error_t **err)
{
    json_t *req = json_pack("{s:s, s:s}", "op", "files_put", "dir", dir);
    int fd = call_open(state, task, req, err);

    json_decref(req);
    return fd;
}

int sbx_keeper_files_put_data(int fd, const char *data, size_t len)
{
    while (len > 0) {
        size_t n = len < CHUNK ? len : CHUNK;

        if (sbx_frame_write(fd, 'I', data, n) < 0) {
            return -1;
        }
        data += n;
        len -= n;
    }
    return 0;
}

int sbx_keeper_files_put_end(int fd, const char *task, int failed, sbx_error_t **err)
{
    if (failed) { /* the keeper sees the archive cut short and writes nothing more */
        close(fd);
        return -1;
    }
    (void)sbx_frame_write(fd, 'I', "", 0); /* a keeper that stopped reading replies why */
    return read_reply(fd, task, NULL, NULL, NULL, err);
}
