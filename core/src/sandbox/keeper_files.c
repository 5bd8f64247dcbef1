/* keeper_files.c - the keeper's files and pause requests, both sides
 * (keeper_files.h; docs/tasks.md, "Files", "Pause and resume"). The keeper holds
 * the task, so these count as activity and see whether it is paused; the bytes
 * pass through it as frames, bounded by SBX_FILES_CP_MAX. */
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

/* 'I' frames up to an empty one, at most SBX_FILES_CP_MAX bytes */
static int read_input(int fd, char **buf, size_t *len, sbx_error_t **err)
{
    size_t cap = 0;

    *buf = NULL;
    *len = 0;
    for (;;) {
        char type = 0;
        char *data = NULL;
        size_t n = 0;

        if (sbx_frame_read(fd, &type, &data, &n, err) != 0 || type != 'I') {
            free(data);
            free(*buf);
            *buf = NULL;
            return sbx_error_set(err, SBX_E_PROTOCOL, "the archive did not arrive whole");
        }
        if (n == 0) {
            free(data);
            return 0;
        }
        if ((int64_t)(*len + n) > SBX_FILES_CP_MAX) {
            free(data);
            free(*buf);
            *buf = NULL;
            return sbx_error_set(err, SBX_FILES_E_TOOBIG,
                                 "the archive is larger than %lld MiB (the bound of one copy): "
                                 "refused",
                                 (long long)(SBX_FILES_CP_MAX >> 20));
        }
        if (*len + n > cap) { /* doubling: each byte is moved O(1) times */
            cap = cap ? cap * 2 : 4u << 20;
            while (cap < *len + n) {
                cap *= 2;
            }
            *buf = xrealloc(*buf, cap);
        }
        memcpy(*buf + *len, data, n);
        *len += n;
        free(data);
    }
}

int sbx_keeper_files_op(struct sbx_task *t, int fd, const char *op, json_t *req)
{
    const char *path = json_string_value(json_object_get(req, "path"));
    sbx_error_t *e = NULL;
    json_t *ok = json_pack("{s:i}", "status", 0);

    if (strcmp(op, "pause") == 0) {
        if (sbx_task_pause(t, json_is_true(json_object_get(req, "to_disk")), &e) == 0) {
            json_object_set_new(ok, "state", json_string("paused"));
        }
    }
    else if (strcmp(op, "resume") == 0) {
        if (sbx_task_resume(t, &e) == 0) {
            json_object_set_new(ok, "state", json_string("running"));
        }
    }
    else if (strcmp(op, "files_get") == 0) {
        (void)sbx_task_files_get(t, path, SBX_FILES_CP_MAX, out_sink, &fd, &e);
    }
    else if (strcmp(op, "files_put") == 0) {
        const char *dir = json_string_value(json_object_get(req, "dir"));
        char *buf = NULL;
        size_t len = 0;

        if (read_input(fd, &buf, &len, &e) == 0) {
            (void)sbx_task_files_put(t, dir, buf, len, &e);
        }
        free(buf);
    }
    else if (strcmp(op, "files_stat") == 0) {
        int d = sbx_task_files_is_dir(t, path, &e);

        json_object_set_new(ok, "dir", json_boolean(d == 1));
    }
    else if (strcmp(op, "files_list") == 0) {
        json_t *l = sbx_task_files_list(t, path, &e);

        if (l != NULL) {
            json_object_set_new(ok, "listing", l);
        }
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

int sbx_keeper_files_call(const char *state, const char *task, json_t *req, const char *in,
                          size_t len, int (*sink)(void *ud, const char *data, size_t len), void *ud,
                          json_t **result, sbx_error_t **err)
{
    cleanup_free char *sock = NULL;
    char *s;
    int fd;
    int rc = -1;

    if (result != NULL) {
        *result = NULL;
    }
    if (!sbx_id_valid(task, SBX_ID_TASK)) {
        return sbx_error_set(err, SBX_E_USAGE, "'%s' is not a valid task id", task);
    }
    sock = sbx_keeper_socket(state, task);
    if (access(sock, F_OK) < 0) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "no running task '%s' (sbx task list)", task);
    }
    if ((fd = sbx_unix_connect(sock, err)) < 0) {
        return sbx_error_wrap(err, "task '%s': its keeper is not answering", task);
    }
    s = json_dumps(req, JSON_COMPACT);
    if (sbx_frame_write(fd, 'R', s, strlen(s)) < 0) {
        free(s);
        close(fd);
        return sbx_error_set(err, SBX_E_ENGINE, "sending to the keeper: %s", strerror(errno));
    }
    free(s);
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
