/* fileio.c - small file helpers (fileio.h). */
#include "util/fileio.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

long long sbx_fd_copy(int in, int out, long long max)
{
    char buf[65536];
    long long total = 0;

    for (;;) {
        ssize_t r = read(in, buf, sizeof(buf));

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return -1;
        }
        if (r == 0) {
            return total;
        }
        if (total + r > max) {
            errno = EFBIG;
            return -1;
        }
        for (ssize_t off = 0; off < r;) {
            ssize_t w = write(out, buf + off, (size_t)(r - off));

            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w <= 0) {
                if (w == 0) {
                    errno = EIO;
                }
                return -1;
            }
            off += w;
        }
        total += r;
    }
}

int sbx_file_write_text(const char *path, const char *text, unsigned mode, uid_t uid, gid_t gid)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, mode);
    size_t len = strlen(text);
    int ok;
    int saved;

    if (fd < 0) {
        return -1;
    }
    ok = write(fd, text, len) == (ssize_t)len && fchown(fd, uid, gid) == 0;
    saved = errno;
    ok = close(fd) == 0 && ok;
    if (!ok) {
        errno = saved != 0 ? saved : EIO;
    }
    return ok ? 0 : -1;
}

static int out_all(int fd, const void *buf, size_t len, int sock)
{
    const char *p = buf;

    while (len > 0) {
        ssize_t n = sock ? send(fd, p, len, MSG_NOSIGNAL) : write(fd, p, len);

        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return -1;
        }
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

int sbx_write_all(int fd, const void *buf, size_t len)
{
    return out_all(fd, buf, len, 0);
}

int sbx_send_all(int fd, const void *buf, size_t len)
{
    return out_all(fd, buf, len, 1);
}
