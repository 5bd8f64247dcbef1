/* relay.c - bytes copied both ways between two sockets (relay.h). */
#include "util/relay.h"

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/xalloc.h"

#define COPY_CHUNK 65536

void sbx_relay_both(int a, int b, int64_t *ab, int64_t *ba)
{
    int open_ab = 1, open_ba = 1;
    char *buf = xmalloc(COPY_CHUNK);

    while (open_ab || open_ba) {
        struct pollfd p[2] = {{.fd = open_ab ? a : -1, .events = POLLIN},
                              {.fd = open_ba ? b : -1, .events = POLLIN}};

        if (poll(p, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        for (int i = 0; i < 2; i++) {
            int from = i == 0 ? a : b;
            int to = i == 0 ? b : a;
            int *open = i == 0 ? &open_ab : &open_ba;
            ssize_t n;

            if (p[i].revents == 0) {
                continue;
            }
            n = read(from, buf, COPY_CHUNK);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                *open = 0;
                shutdown(to, SHUT_WR);
                if (n < 0) { /* a reset: both ways end */
                    open_ab = open_ba = 0;
                }
                continue;
            }
            *(i == 0 ? ab : ba) += n;
            for (ssize_t off = 0; off < n;) {
                ssize_t w = send(to, buf + off, (size_t)(n - off), MSG_NOSIGNAL);

                if (w < 0 && errno == EINTR) {
                    continue;
                }
                if (w <= 0) {
                    open_ab = open_ba = 0;
                    break;
                }
                off += w;
            }
        }
    }
    free(buf);
}
