/* keeper_port.c - the keeper's "port" request and its client (docs/tasks.md,
 * "Ports"; the frames of proto.h).
 *
 *   client -> keeper  'R' {"op":"port","port":N,"peer":"127.0.0.1:51234"}
 *   keeper -> client  'X' {"status":0} with the connected socket as SCM_RIGHTS,
 *                     or 'X' {"error":"...","code":125}
 * The client (sbx port) then copies bytes between its accepted connection and
 * that socket; the keeper has logged the connection and holds nothing of it. */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sandbox/keeper.h"
#include "sandbox/proto.h"
#include "sandbox/statedir.h"
#include "sandbox/task_port.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

#define PEER_MAX 128

static int send_frame_fd(int fd, const char *json, int pass)
{
    size_t len = strlen(json);
    cleanup_free unsigned char *buf = xmalloc(SBX_FRAME_HDR + len);
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {buf, SBX_FRAME_HDR + len};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;

    sbx_frame_encode(buf, 'X', (uint32_t)len);
    memcpy(buf + SBX_FRAME_HDR, json, len);
    memset(&ctl, 0, sizeof(ctl));
    msg.msg_control = ctl.b;
    msg.msg_controllen = sizeof(ctl.b);
    cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &pass, sizeof(int));
    return sendmsg(fd, &msg, MSG_NOSIGNAL) == (ssize_t)(SBX_FRAME_HDR + len) ? 0 : -1;
}

void sbx_keeper_port(struct sbx_task *t, int fd, json_t *req)
{
    json_t *jp = json_object_get(req, "port");
    const char *peer = json_string_value(json_object_get(req, "peer"));
    char peer_ok[PEER_MAX];
    sbx_error_t *err = NULL;
    int sock = -1;
    char *reply;

    /* the peer is only logged: printable, bounded */
    snprintf(peer_ok, sizeof(peer_ok), "%s", peer ? peer : "?");
    for (char *p = peer_ok; *p; p++) {
        if (*p < 0x20 || *p > 0x7e) {
            *p = '?';
        }
    }
    if (!json_is_integer(jp)) {
        sbx_error_set(&err, SBX_E_USAGE, "request field 'port': use an integer 1-65535");
    }
    else if (sbx_task_port_connect(t, (int)json_integer_value(jp), peer_ok, "sbx port", &sock,
                                   &err) == 0) {
        if (send_frame_fd(fd, "{\"status\":0}", sock) < 0) {
            /* the client went away: the connection goes with our copy */
        }
        close(sock);
        return;
    }
    reply =
        json_dumps(json_pack("{s:s, s:i}", "error", sbx_error_msg(err), "code", 125), JSON_COMPACT);
    sbx_frame_write(fd, 'X', reply, strlen(reply));
    free(reply);
    sbx_error_free(&err);
}

static int read_full(int fd, char *p, size_t n)
{
    while (n > 0) {
        ssize_t r = read(fd, p, n);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            return -1;
        }
        p += r;
        n -= (size_t)r;
    }
    return 0;
}

int sbx_keeper_port_open(const char *state, const char *task, int port, const char *peer, int *out,
                         sbx_error_t **err)
{
    cleanup_free char *sock = sbx_keeper_socket(state, task);
    json_t *req = json_pack("{s:s, s:i, s:s}", "op", "port", "port", port, "peer", peer);
    char *s = json_dumps(req, JSON_COMPACT);
    unsigned char hdr[SBX_FRAME_HDR];
    unsigned char type = 0;
    union {
        char b[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct iovec iov = {hdr, sizeof(hdr)};
    struct msghdr msg = {.msg_iov = &iov, .msg_iovlen = 1};
    struct cmsghdr *cm;
    cleanup_free char *body = NULL;
    uint32_t len;
    json_t *j;
    int passed = -1;
    int fd;
    ssize_t n;

    *out = -1;
    json_decref(req);
    fd = sbx_unix_connect(sock, err);
    if (fd < 0) {
        free(s);
        return sbx_error_wrap(err, "task '%s': its keeper is not answering", task);
    }
    if (sbx_frame_write(fd, 'R', s, strlen(s)) < 0) {
        free(s);
        close(fd);
        return sbx_error_set(err, errno, "sending to the keeper: %s", strerror(errno));
    }
    free(s);
    msg.msg_control = ctl.b;
    msg.msg_controllen = sizeof(ctl.b);
    do {
        n = recvmsg(fd, &msg, MSG_WAITALL | MSG_CMSG_CLOEXEC);
    } while (n < 0 && errno == EINTR);
    cm = n > 0 ? CMSG_FIRSTHDR(&msg) : NULL;
    if (cm != NULL && cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS &&
        cm->cmsg_len == CMSG_LEN(sizeof(int))) {
        memcpy(&passed, CMSG_DATA(cm), sizeof(int));
    }
    if (n != (ssize_t)sizeof(hdr) || sbx_frame_decode(hdr, 65536, &type, &len) != SBX_FRAME_OK ||
        type != 'X' || read_full(fd, body = xmalloc(len + 1), len) < 0) {
        close(fd);
        if (passed >= 0) {
            close(passed);
        }
        return sbx_error_set(err, SBX_E_PROTOCOL, "task '%s': malformed reply from its keeper",
                             task);
    }
    close(fd);
    body[len] = '\0';
    j = json_loads(body, 0, NULL);
    if (passed >= 0 && json_is_integer(json_object_get(j, "status"))) {
        json_decref(j);
        *out = passed;
        return 0;
    }
    if (passed >= 0) {
        close(passed);
    }
    sbx_error_set(err, SBX_E_ENGINE, "task '%s': %s", task,
                  json_string_value(json_object_get(j, "error"))
                      ? json_string_value(json_object_get(j, "error"))
                      : "the keeper gave no connection");
    json_decref(j);
    return -1;
}
