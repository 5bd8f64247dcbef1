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

int sbx_upgrade_on(int fd, const char *head, size_t len, const char *where, sbx_error_t **err)
{
    char reply[2048];
    size_t n = 0;

    if (sbx_write_all(fd, head, len) < 0) {
        int e = errno;

        close(fd);
        return sbx_error_set(err, e, "sending to %s: %s", where, strerror(e));
    }
    /* the reply's head, byte by byte: what follows a 101 is the caller's */
    while (n < sizeof(reply) - 1 && (n < 4 || memcmp(reply + n - 4, "\r\n\r\n", 4) != 0)) {
        if (read(fd, reply + n, 1) != 1) {
            break;
        }
        n++;
    }
    reply[n] = '\0';
    if (strncmp(reply, "HTTP/1.1 101", 12) != 0) {
        char body[1024];
        ssize_t k = read(fd, body, sizeof(body) - 1);
        json_t *j = k > 0 ? json_loadb(body, (size_t)k, JSON_DISABLE_EOF_CHECK, NULL) : NULL;
        const char *msg = json_string_value(json_object_get(j, "error"));
        int status = n > 12 ? atoi(reply + 9) : 0;

        sbx_error_set(err,
                      status == 404   ? SBX_E_NOTFOUND
                      : status == 400 ? SBX_E_USAGE
                                      : SBX_E_GENERIC,
                      "%s",
                      msg     ? msg
                      : n > 0 ? strtok(reply, "\r")
                              : "no reply");
        json_decref(j);
        close(fd);
        return -1;
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
