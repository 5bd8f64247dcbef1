/* keeper_port.c - the keeper's "port" request and its client (docs/tasks.md,
 * "Ports"; the frames of proto.h).
 *
 *   client -> keeper  'R' {"op":"port","port":N,"peer":"127.0.0.1:51234"}
 *   keeper -> client  'X' {"status":0} with the connected socket as SCM_RIGHTS,
 *                     or 'X' {"error":"...","code":125}
 *   client -> keeper  (added) 'R' {"op":"port_end","bytes_in":N,"bytes_out":M} when
 *                     the connection ended (or the client closes without it)
 * The client (sbx port) copies bytes between its accepted connection and that
 * socket; the keeper holds nothing of it but this request's connection, and writes
 * the connection's line to ports.log when it ends (task_port.c). */
#include <errno.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
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

/* (added) A count the client reports: a whole number >= 0, else -1 (unknown). */
static int64_t count_of(json_t *req, const char *key)
{
    json_t *v = json_object_get(req, key);

    return json_is_integer(v) && json_integer_value(v) >= 0 ? (int64_t)json_integer_value(v) : -1;
}

/* (added) Until the client says the connection ended (port_end) or goes away:
 * then the connection's line. The keeper's thread for this request waits here, and
 * gives up when the task ends (the keeper waits for its threads before it ends the
 * task; the connection is reset with the sandbox). */
static void port_wait_end(struct sbx_task *t, int fd, struct sbx_port_conn *conn)
{
    char type = 0;
    char *data = NULL;
    size_t len = 0;
    sbx_error_t *err = NULL;
    json_t *req = NULL;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    int r;

    while ((r = poll(&p, 1, 250)) == 0 || (r < 0 && errno == EINTR)) {
        if (sbx_task_stopped(t, NULL, 0)) {
            sbx_port_conn_end(conn, -1, -1, "the task ended while the connection was open");
            return;
        }
    }
    if (r > 0 && sbx_frame_read(fd, &type, &data, &len, &err) == 0 && type == 'R' && len <= 4096) {
        req = json_loadb(data, len, 0, NULL);
    }
    if (req != NULL &&
        strcmp(json_string_value(json_object_get(req, "op")) ?: "", "port_end") == 0) {
        sbx_port_conn_end(conn, count_of(req, "bytes_in"), count_of(req, "bytes_out"), NULL);
    }
    else {
        sbx_port_conn_end(conn, -1, -1, "sbx port went away without counting the bytes");
    }
    json_decref(req);
    free(data);
    sbx_error_free(&err);
}

void sbx_keeper_port(struct sbx_task *t, int fd, json_t *req)
{
    json_t *jp = json_object_get(req, "port");
    const char *peer = json_string_value(json_object_get(req, "peer"));
    char peer_ok[PEER_MAX];
    sbx_error_t *err = NULL;
    struct sbx_port_conn *conn = NULL;
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
                                   &conn, &err) == 0) {
        if (send_frame_fd(fd, "{\"status\":0}", sock) < 0) {
            /* the client went away: the connection goes with our copy */
            close(sock);
            sbx_port_conn_end(conn, 0, 0, "sbx port went away before it got the connection");
            return;
        }
        close(sock);
        port_wait_end(t, fd, conn);
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

void sbx_keeper_port_done(int ctl, int64_t bytes_in, int64_t bytes_out)
{
    char msg[128];

    if (ctl < 0) {
        return;
    }
    snprintf(msg, sizeof(msg), "{\"op\":\"port_end\",\"bytes_in\":%lld,\"bytes_out\":%lld}",
             (long long)bytes_in, (long long)bytes_out);
    (void)sbx_frame_write(ctl, 'R', msg, strlen(msg)); /* a keeper gone: no line */
    close(ctl);
}

int sbx_keeper_port_open(const char *state, const char *task, int port, const char *peer, int *out,
                         int *keeper, sbx_error_t **err)
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
    *keeper = -1;
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
    body[len] = '\0';
    j = json_loads(body, 0, NULL);
    if (passed >= 0 && json_is_integer(json_object_get(j, "status"))) {
        json_decref(j);
        *out = passed;
        *keeper = fd; /* (added) kept for sbx_keeper_port_done */
        return 0;
    }
    close(fd);
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
