/* proto.c - unix socket helpers (frames: util/frame.c). */
#include "sandbox/proto.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "http/h1_reply.h"
#include "util/fileio.h"

static int fill_addr(struct sockaddr_un *a, const char *path, sbx_error_t **err)
{
    memset(a, 0, sizeof(*a));
    a->sun_family = AF_UNIX;
    if (strlen(path) >= sizeof(a->sun_path)) {
        return sbx_error_set(err, ENAMETOOLONG, "socket path %s is too long (max %zu)", path,
                             sizeof(a->sun_path) - 1);
    }
    memcpy(a->sun_path, path, strlen(path) + 1);
    return 0;
}

int sbx_unix_connect(const char *path, sbx_error_t **err)
{
    struct sockaddr_un a;
    int fd;

    if (fill_addr(&a, path, err) < 0) {
        return -1;
    }
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return sbx_error_set(err, errno, "socket: %s", strerror(errno));
    }
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) < 0) {
        int e = errno;

        close(fd);
        return sbx_error_set(err, e, "connect %s: %s", path, strerror(e));
    }
    return fd;
}

int sbx_unix_listen(const char *path, unsigned mode, sbx_error_t **err)
{
    struct sockaddr_un a;
    int fd;

    if (fill_addr(&a, path, err) < 0) {
        return -1;
    }
    unlink(path);
    fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return sbx_error_set(err, errno, "socket: %s", strerror(errno));
    }
    if (bind(fd, (struct sockaddr *)&a, sizeof(a)) < 0 || chmod(path, mode) < 0 ||
        listen(fd, 64) < 0) {
        int e = errno;

        close(fd);
        return sbx_error_set(err, e, "listen on %s: %s", path, strerror(e));
    }
    return fd;
}

/* A reply other than a 101 (h parsed its head): its JSON "error" (the first
 * bytes of its body), else its status line, in err; fd closed. (changed, issue
 * 31) A reply with no body (a 1xx, an HTTP/1.0 101, a 204 or 304) is not read
 * further: nothing more may come before the peer closes. */
static int upgrade_refused(int fd, const struct sbx_h1_head *h, const char *reply,
                           sbx_error_t **err)
{
    char body[1024];
    char line[128];
    size_t want = sizeof(body) - 1;
    ssize_t k;
    json_t *j;
    const char *msg;

    if (h->framing == SBX_H1_LENGTH && h->content_length < want) {
        want = (size_t)h->content_length;
    }
    k = h->framing == SBX_H1_NO_BODY || want == 0 ? 0 : read(fd, body, want);
    j = k > 0 ? json_loadb(body, (size_t)k, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
    msg = json_string_value(json_object_get(j, "error"));
    sbx_h1_reply_status_line(h, reply, line, sizeof(line));
    sbx_error_set(err,
                  h->status == 404   ? SBX_E_NOTFOUND
                  : h->status == 400 ? SBX_E_USAGE
                                     : SBX_E_GENERIC,
                  "%s", msg ? msg : line);
    json_decref(j);
    close(fd);
    return -1;
}

int sbx_upgrade_on(int fd, const char *head, size_t len, const char *where, sbx_error_t **err)
{
    char reply[SBX_H1_UPGRADE_HEAD_MAX + 1];
    char why[256];
    struct sbx_h1_head h;
    size_t n = 0;
    long end = 0;

    if (sbx_write_all(fd, head, len) < 0) {
        int e = errno;

        close(fd);
        return sbx_error_set(err, e, "sending to %s: %s", where, strerror(e));
    }
    /* (changed, issue 31) the reply's head, byte by byte (what follows a 101 is the
     * caller's), parsed by the one HTTP/1 parser under its cap (http/h1_reply.h) */
    sbx_h1_reply_init(&h, SBX_H1_REPLY_UPGRADE);
    while (end == 0 && n < sizeof(reply) && read(fd, reply + n, 1) == 1) {
        n++;
        end = sbx_h1_reply_feed(&h, reply, n, where, why, sizeof(why));
    }
    if (end == 0) {
        sbx_h1_reply_cut(n, where, why, sizeof(why));
    }
    if (end <= 0) {
        close(fd);
        return sbx_error_set(err, SBX_E_GENERIC, "%s", why);
    }
    if (h.status != 101 || h.minor != 1) {
        return upgrade_refused(fd, &h, reply, err);
    }
    return fd;
}

int sbx_unix_upgrade(const char *path, const char *target, const char *proto, const char *headers,
                     sbx_error_t **err)
{
    char head[2048];
    int fd = sbx_unix_connect(path, err);
    int len;

    if (fd < 0) {
        return -1;
    }
    len = snprintf(head, sizeof(head),
                   "GET %s HTTP/1.1\r\nHost: sbx\r\nConnection: Upgrade\r\nUpgrade: %s\r\n%s\r\n",
                   target, proto, headers ? headers : "");
    if (len < 0 || (size_t)len >= sizeof(head)) {
        close(fd);
        return sbx_error_set(err, SBX_E_USAGE, "request to %s: too long", path);
    }
    fd = sbx_upgrade_on(fd, head, (size_t)len, path, err);
    explicit_bzero(head, sizeof(head)); /* the headers may carry a token */
    return fd;
}
