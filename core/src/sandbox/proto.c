/* proto.c - the keeper's unix socket helpers (frames: util/frame.c). */
#include "sandbox/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

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
