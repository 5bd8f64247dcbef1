/* egress_hold_bench.c - what one sandbox's unread endless downloads make the host hold
 * (issue 14): N connections of one sandbox ask the proxy for an endless download from a
 * local origin and never read it. Prints how many tunnels the proxy built, how many it
 * refused, the growth of the host's TCP memory (/proc/net/sockstat, both ends of
 * loopback) and of MemAvailable, and the proxy's own count of what it holds for the
 * sandbox.
 *
 *   egress_hold_bench [N] [ORIGIN_SNDBUF_KIB]
 *   (defaults: 512 connections; the origin's send buffer autotuned, or fixed to this
 *   many KiB so that the growth is mostly the proxy's side)
 *
 * The proxy runs in this process with the default budgets; clients connect to the
 * sandbox's proxy.sock directly. Nothing leaves loopback. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "config/config.h"
#include "egress/egress.h"
#include "util/xalloc.h"

#define MAX_CONNS 4096

static int origin_sndbuf;

/* Streams to every connection that sent a request, forever. */
static void origin(int lfd)
{
    static char chunk[65536];
    static struct pollfd p[MAX_CONNS + 1];
    nfds_t n = 1;

    memset(chunk, 'x', sizeof(chunk));
    p[0].fd = lfd;
    p[0].events = POLLIN;
    for (;;) {
        if (poll(p, n, -1) < 0) {
            continue;
        }
        if ((p[0].revents & POLLIN) && n <= MAX_CONNS) {
            int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK);

            if (fd >= 0) {
                if (origin_sndbuf > 0) {
                    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &origin_sndbuf, sizeof(origin_sndbuf));
                }
                p[n].fd = fd;
                p[n].events = POLLIN;
                p[n++].revents = 0;
            }
        }
        for (nfds_t i = 1; i < n; i++) {
            char b[2048];
            ssize_t r = 0;

            if (p[i].revents == 0) {
                continue;
            }
            if (p[i].events == POLLIN) {
                r = read(p[i].fd, b, sizeof(b));
                if (r > 0) {
                    r = write(p[i].fd, "HTTP/1.1 200 OK\r\n\r\n", 19);
                    p[i].events = POLLOUT;
                }
            }
            else {
                while ((r = write(p[i].fd, chunk, sizeof(chunk))) > 0) {
                }
                if (r < 0 && errno == EAGAIN) {
                    r = 1;
                }
            }
            if (r <= 0) {
                close(p[i].fd);
                p[i--] = p[--n];
            }
        }
    }
}

static long proc_value(const char *path, const char *line_start, const char *key)
{
    FILE *f = fopen(path, "r");
    char l[512];
    long v = -1;

    while (f != NULL && fgets(l, sizeof(l), f) != NULL) {
        if (strncmp(l, line_start, strlen(line_start)) == 0) {
            char *k = strstr(l, key);

            v = k != NULL ? atol(k + strlen(key)) : -1;
        }
    }
    if (f != NULL) {
        fclose(f);
    }
    return v;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 512;
    char dir[] = "/tmp/sbx-egress-hold-XXXXXX";
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    struct sbx_config *cfg = sbx_config_defaults();
    struct sbx_egress_summary sum;
    sbx_error_t *err = NULL;
    struct sbx_egress *e;
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int *fds;
    int ok = 0;
    int refused = 0;
    long mem0, tcp0, mem1, tcp1;
    char *rule;
    char *sbdir;
    const char *rules[2];
    pid_t op;

    origin_sndbuf = argc > 2 ? atoi(argv[2]) * 1024 : 0;
    if (n <= 0 || n > MAX_CONNS || mkdtemp(dir) == NULL) {
        fprintf(stderr, "usage: egress_hold_bench [N (1-%d)] [ORIGIN_SNDBUF_KIB]\n", MAX_CONNS);
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 1024) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &sl) < 0) {
        perror("egress_hold_bench: origin");
        return 1;
    }
    op = fork();
    if (op == 0) {
        origin(lfd);
        _exit(0);
    }
    close(lfd);
    cfg->egress.log = xasprintf("%s/egress.log", dir);
    cfg->egress.system_dns = 0;
    cfg->egress.hosts = xcalloc(1, sizeof(*cfg->egress.hosts));
    cfg->egress.hosts[0].name = xstrdup("origin.test");
    cfg->egress.hosts[0].address = xstrdup("127.0.0.1");
    cfg->egress.n_hosts = 1;
    rule = xasprintf("origin.test:%d", ntohs(sin.sin_port));
    rules[0] = rule;
    rules[1] = NULL;
    sbdir = xasprintf("%s/sb", dir);
    e = sbx_egress_start(cfg, &err);
    if (e == NULL || sbx_egress_add(e, sbdir, "hold", "hold", "hold", rules, &err) < 0) {
        fprintf(stderr, "egress_hold_bench: %s\n", err->msg);
        kill(op, SIGKILL);
        return 1;
    }
    mem0 = proc_value("/proc/meminfo", "MemAvailable:", ":");
    tcp0 = proc_value("/proc/net/sockstat", "TCP:", "mem ");
    fds = xcalloc((size_t)n, sizeof(int));
    for (int i = 0; i < n; i++) {
        struct sockaddr_un sun;
        struct pollfd pfd;
        char req[256];
        char b[16];
        int l =
            snprintf(req, sizeof(req),
                     "GET http://origin.test:%d/endless HTTP/1.1\r\nHost: origin.test:%d\r\n\r\n",
                     ntohs(sin.sin_port), ntohs(sin.sin_port));

        memset(&sun, 0, sizeof(sun));
        sun.sun_family = AF_UNIX;
        snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/%s", sbdir, SBX_EGRESS_SOCKET);
        fds[i] = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fds[i] < 0 || connect(fds[i], (struct sockaddr *)&sun, sizeof(sun)) < 0 ||
            send(fds[i], req, (size_t)l, MSG_NOSIGNAL) != l) {
            refused++;
            continue;
        }
        pfd.fd = fds[i];
        pfd.events = POLLIN;
        if (poll(&pfd, 1, 5000) > 0 && recv(fds[i], b, 12, 0) == 12 &&
            memcmp(b, "HTTP/1.1 200", 12) == 0) {
            ok++;
        }
        else {
            refused++;
        }
    }
    sleep(8); /* the origin keeps sending until every queue on the way is full */
    mem1 = proc_value("/proc/meminfo", "MemAvailable:", ":");
    tcp1 = proc_value("/proc/net/sockstat", "TCP:", "mem ");
    sbx_egress_summary(e, sbdir, &sum);
    printf("egress hold bench: %d unread endless downloads of one sandbox (origin send buffer "
           "%s)\n",
           n, origin_sndbuf > 0 ? argv[2] : "autotuned");
    printf("  tunnels %d, refused %d\n", ok, refused);
    printf("  host TCP memory +%ld MiB (/proc/net/sockstat, both ends of loopback), "
           "MemAvailable -%ld MiB\n",
           (tcp1 - tcp0) * 4 / 1024, (mem0 - mem1) / 1024);
    printf("  the proxy holds %.1f MiB for the sandbox; its tunnels reserve %.1f MiB\n",
           (double)sum.held / 1048576.0, (double)sum.reserved / 1048576.0);
    for (int i = 0; i < n; i++) {
        if (fds[i] >= 0) {
            close(fds[i]);
        }
    }
    sbx_egress_stop(e);
    kill(op, SIGKILL);
    waitpid(op, NULL, 0);
    {
        char *cmd = xasprintf("rm -rf '%s'", dir);

        if (system(cmd) != 0) {
            fprintf(stderr, "egress_hold_bench: could not remove %s\n", dir);
        }
        free(cmd);
    }
    free(fds);
    free(rule);
    free(sbdir);
    sbx_config_destroy(cfg);
    return 0;
}
