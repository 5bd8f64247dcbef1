/* proto.c - keeper frames and unix socket helpers. */
#include "sandbox/proto.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "util/fileio.h"
#include "util/xalloc.h"

static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t got = 0;

    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        if (n == 0) {
            return got == 0 ? 1 : -1;
        }
        got += (size_t)n;
    }
    return 0;
}

int sbx_frame_write(int fd, char type, const void *data, size_t len)
{
    unsigned char hdr[5];

    hdr[0] = (unsigned char)type;
    hdr[1] = (unsigned char)(len >> 24);
    hdr[2] = (unsigned char)(len >> 16);
    hdr[3] = (unsigned char)(len >> 8);
    hdr[4] = (unsigned char)len;
    if (sbx_send_all(fd, hdr, sizeof(hdr)) < 0) {
        return -1;
    }
    return len > 0 ? sbx_send_all(fd, data, len) : 0;
}

int sbx_frame_read(int fd, char *type, char **data, size_t *len, sbx_error_t **err)
{
    unsigned char hdr[5];
    uint32_t n;
    int r = read_all(fd, hdr, sizeof(hdr));

    if (r != 0) {
        if (r < 0) {
            return sbx_error_set(err, errno ? errno : EPROTO, "keeper connection: %s",
                                 errno ? strerror(errno) : "truncated frame");
        }
        return 1;
    }
    n = ((uint32_t)hdr[1] << 24) | ((uint32_t)hdr[2] << 16) | ((uint32_t)hdr[3] << 8) | hdr[4];
    if (n > SBX_FRAME_MAX) {
        return sbx_error_set(err, SBX_E_PROTOCOL, "keeper connection: frame of %u bytes", n);
    }
    *type = (char)hdr[0];
    *data = xmalloc(n + 1);
    if (n > 0 && read_all(fd, *data, n) != 0) {
        free(*data);
        *data = NULL;
        return sbx_error_set(err, SBX_E_PROTOCOL, "keeper connection: truncated frame");
    }
    (*data)[n] = '\0';
    *len = n;
    return 0;
}

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
