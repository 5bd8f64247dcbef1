/* docker_port.c - a connection to a port inside a sandbox (the port_connect op;
 * docs/tasks.md, "Ports").
 *
 * The sandbox has no network (NetworkMode none: only lo). The host connects to
 * 127.0.0.1:PORT from inside the sandbox's network namespace instead: a thread of
 * ours enters that namespace (dk_open_ns: the init's netns, pinned and checked),
 * makes the socket there and connects; a socket stays in the namespace it was
 * made in, so the thread hands it back and ends. The sandbox gains no interface,
 * route or address, and cannot reach out through the connection: it only
 * answers on it. */
#include "docker.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#define CONNECT_MS 5000

struct port_call {
    int nsfd;
    int port;
    int fd;  /* out */
    int err; /* out: errno of the failed step */
    const char *step;
};

static void *port_thread(void *arg)
{
    struct port_call *p = arg;
    struct sockaddr_in sa = {.sin_family = AF_INET};
    struct pollfd pf;
    int fd;
    int e = 0;
    socklen_t el = sizeof(e);

    p->fd = -1;
    if (setns(p->nsfd, CLONE_NEWNET) < 0) {
        p->err = errno;
        p->step = "entering the sandbox's network namespace";
        return NULL;
    }
    fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        p->err = errno;
        p->step = "socket";
        return NULL;
    }
    sa.sin_port = htons((uint16_t)p->port);
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
        p->err = errno;
        p->step = "connect";
        close(fd);
        return NULL;
    }
    pf.fd = fd;
    pf.events = POLLOUT;
    if (poll(&pf, 1, CONNECT_MS) <= 0 || getsockopt(fd, SOL_SOCKET, SO_ERROR, &e, &el) < 0 ||
        e != 0) {
        p->err = e != 0 ? e : ETIMEDOUT;
        p->step = "connect";
        close(fd);
        return NULL;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    p->fd = fd;
    return NULL;
}

int dk_port_connect(void *ctx, const char *id, int port, int *fd_out, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    struct port_call p = {.port = port, .fd = -1};
    pthread_t th;

    if (port < 1 || port > 65535) {
        return c->host->error_set(err, SBX_E_USAGE, "port %d: use 1-65535", port);
    }
    p.nsfd = dk_open_ns(c, id, "net", err);
    if (p.nsfd < 0) {
        return -1;
    }
    /* a thread of its own: setns changes the calling thread's namespace only */
    if (pthread_create(&th, NULL, port_thread, &p) != 0) {
        close(p.nsfd);
        return c->host->error_set(err, SBX_E_GENERIC, "starting a thread for port %d", port);
    }
    pthread_join(th, NULL);
    close(p.nsfd);
    if (p.fd < 0) {
        if (p.err == ECONNREFUSED) {
            return c->host->error_set(err, ECONNREFUSED,
                                      "nothing listens on 127.0.0.1:%d in sandbox %.12s", port, id);
        }
        return c->host->error_set(err, p.err, "port %d of sandbox %.12s: %s: %s", port, id, p.step,
                                  strerror(p.err));
    }
    *fd_out = p.fd;
    return 0;
}
