/* keeper_ops.c - (added) the keeper's "snapshot" and "egress" requests and the client's
 * call (keeper_ops.h). The keeper holds the task's lease, its proxy socket and its
 * provider: a snapshot is scanned for the lease's values there, and an egress change
 * reaches the proxy there. The keeper's socket is mode 0600: who asks is its user,
 * "local". */
#include "sandbox/keeper_ops.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sandbox/egress_change.h"
#include "sandbox/keeper.h"
#include "sandbox/proto.h"
#include "sandbox/snapshot.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

static void reply(int fd, json_t *result, const sbx_error_t *e)
{
    json_t *j =
        e != NULL ? json_pack("{s:s, s:i, s:i}", "error", e->msg, "code", 125, "sbx_code", e->code)
                  : json_pack("{s:i, s:o}", "status", 0, "result", result);
    char *s = json_dumps(j, JSON_COMPACT);

    if (sbx_frame_write(fd, 'X', s, strlen(s)) < 0) {
        /* the client went away: nothing to tell */
    }
    free(s);
    json_decref(j);
}

int sbx_keeper_extra_op(struct sbx_task *t, const char *op, json_t *req, int fd)
{
    sbx_error_t *err = NULL;
    json_t *result = NULL;

    if (strcmp(op, "snapshot") == 0) {
        int for_fork = json_is_true(json_object_get(req, "fork"));

        sbx_task_snapshot(t, "local", for_fork, &result, &err);
    }
    else if (strcmp(op, "egress") == 0) {
        sbx_task_egress_change(t, json_string_value(json_object_get(req, "change")),
                               json_string_value(json_object_get(req, "rule")), "local", "cli",
                               &result, &err);
    }
    else {
        return 0;
    }
    reply(fd, result, err);
    sbx_error_free(&err);
    return 1;
}

json_t *sbx_keeper_call(const char *state, const char *task, json_t *req, sbx_error_t **err)
{
    cleanup_free char *sock = NULL;
    char *s;
    char type = 0;
    char *data = NULL;
    size_t len = 0;
    json_t *j = NULL;
    json_t *result = NULL;
    int fd;
    int r;

    if (!sbx_id_valid(task, SBX_ID_TASK)) {
        sbx_error_set(err, SBX_E_USAGE, "'%.80s' is not a valid task id", task);
        return NULL;
    }
    sock = sbx_keeper_socket(state, task);
    if (access(sock, F_OK) < 0) {
        sbx_error_set(err, SBX_E_NOTFOUND, "no running task '%s' (sbx task list)", task);
        return NULL;
    }
    fd = sbx_unix_connect(sock, err);
    if (fd < 0) {
        sbx_error_wrap(err, "task '%s': its keeper is not answering", task);
        return NULL;
    }
    s = json_dumps(req, JSON_COMPACT);
    r = sbx_frame_write(fd, 'R', s, strlen(s));
    free(s);
    if (r < 0) {
        sbx_error_set(err, SBX_E_GENERIC, "task '%s': sending to its keeper: %s", task,
                      strerror(errno));
        close(fd);
        return NULL;
    }
    /* the keeper answers with one 'X' frame (output frames are for execs only) */
    do {
        free(data);
        data = NULL;
        r = sbx_frame_read(fd, &type, &data, &len, err);
    } while (r == 0 && type != 'X');
    close(fd);
    if (r != 0) {
        if (r == 1) {
            sbx_error_set(err, SBX_E_GENERIC, "task '%s': its keeper closed the connection", task);
        }
        free(data);
        return NULL;
    }
    j = json_loads(data, 0, NULL);
    free(data);
    if (j != NULL && json_string_value(json_object_get(j, "error")) != NULL) {
        json_int_t code = json_integer_value(json_object_get(j, "sbx_code"));

        sbx_error_set(
            err, code >= SBX_E_GENERIC && code < SBX_E_GENERIC + 100 ? (int)code : SBX_E_GENERIC,
            "%s", json_string_value(json_object_get(j, "error")));
    }
    else if (j != NULL && json_is_object(json_object_get(j, "result"))) {
        result = json_incref(json_object_get(j, "result"));
    }
    else {
        sbx_error_set(err, SBX_E_PROTOCOL, "task '%s': malformed reply from its keeper", task);
    }
    json_decref(j);
    return result;
}
