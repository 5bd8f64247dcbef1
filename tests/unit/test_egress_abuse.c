/* test_egress_abuse.c - what one sandbox can do to the shared egress proxy (issue 14):
 * descriptors, buffered bytes, CPU, connection counts. The proxy runs in a child
 * process of its own (so a low RLIMIT_NOFILE applies to it alone, and a crash shows as
 * its exit status) with two sandboxes, A (the attacker) and B (the bystander); the
 * destination is a small origin server in another child on 127.0.0.1 whose name the
 * proxy maps through egress.hosts. Clients connect to a sandbox's proxy.sock directly
 * (what `sbx-relay --copy` does). Nothing leaves loopback. */
#include "test_common.h"
#include "test_proc.h"
#include "wait.h"

#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>

#include "config/config.h"
#include "egress/egress.h"
#include "util/rlimit.h"

#define MAX_FDS 1024

static struct {
    char *dir;
    pid_t origin_pid;
    int origin_port;
} g;

/* A running proxy child: commands on cmd, answers on res. */
struct proxy {
    pid_t pid;
    int cmd;
    int res;
    char *log;
    char *dir[2]; /* sandbox A, sandbox B */
};

struct answer {
    struct sbx_egress_summary sum;
    int fd0_open; /* fd 0 of the proxy process is still open (the old bug closed it) */
};

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the origin: "/endless" streams forever, anything else gets "ok" ---- */

static void origin_loop(int lfd)
{
    static char chunk[65536];
    struct pollfd p[MAX_FDS];
    int mode[MAX_FDS]; /* 0 reading the request, 1 streaming */
    nfds_t n = 1;

    memset(chunk, 'x', sizeof(chunk));
    p[0].fd = lfd;
    p[0].events = POLLIN;
    for (;;) {
        if (poll(p, n, -1) < 0) {
            continue;
        }
        if ((p[0].revents & POLLIN) && n < MAX_FDS) {
            int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

            if (fd >= 0) {
                p[n].fd = fd;
                p[n].events = POLLIN;
                p[n].revents = 0;
                mode[n++] = 0;
            }
        }
        for (nfds_t i = 1; i < n; i++) {
            char buf[2048];
            ssize_t r;
            int drop = 0;

            if (p[i].revents == 0) {
                continue;
            }
            if (mode[i] == 0) {
                r = read(p[i].fd, buf, sizeof(buf) - 1);
                if (r <= 0) {
                    drop = 1;
                }
                else {
                    buf[r] = '\0';
                    if (strstr(buf, "/endless") != NULL) {
                        static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: x\r\n\r\n";

                        if (write(p[i].fd, h, sizeof(h) - 1) < 0) {
                            drop = 1;
                        }
                        mode[i] = 1;
                        p[i].events = POLLOUT;
                    }
                    else {
                        static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                                 "Connection: close\r\n\r\nok";

                        if (write(p[i].fd, ok, sizeof(ok) - 1) < 0) {
                            drop = 1;
                        }
                        drop = 1;
                    }
                }
            }
            else {
                while ((r = write(p[i].fd, chunk, sizeof(chunk))) > 0) {
                }
                if (r < 0 && errno != EAGAIN) {
                    drop = 1;
                }
            }
            if (drop) {
                close(p[i].fd);
                p[i] = p[n - 1];
                mode[i] = mode[n - 1];
                n--;
                i--;
            }
        }
    }
}

static int group_setup(void **state)
{
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;

    (void)state;
    signal(SIGPIPE, SIG_IGN);
    g.dir = test_mkdtemp();
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    assert_int_equal(bind(lfd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(lfd, 1024), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&sin, &sl), 0);
    g.origin_port = ntohs(sin.sin_port);
    g.origin_pid = fork();
    assert_true(g.origin_pid >= 0);
    if (g.origin_pid == 0) {
        origin_loop(lfd);
        _exit(0);
    }
    close(lfd);
    return 0;
}

static int group_teardown(void **state)
{
    (void)state;
    kill(g.origin_pid, SIGKILL);
    waitpid(g.origin_pid, NULL, 0);
    test_rm_rf(g.dir);
    free(g.dir);
    return 0;
}

/* ---- the proxy child ---- */

static void proxy_child(struct proxy *p, const char *conf, rlim_t nofile, int cmd, int res)
{
    sbx_error_t *err = NULL;
    struct sbx_config *cfg = sbx_config_load_file(conf, &err);
    struct sbx_egress *e;
    char *rule = xasprintf_test("origin.test:%d", g.origin_port);
    const char *rules[] = {rule, NULL};
    char c;

    if (cfg == NULL) {
        fprintf(stderr, "proxy child: %s\n", err->msg);
        _exit(3);
    }
    if (nofile > 0) {
        struct rlimit rl = {nofile, nofile};

        if (setrlimit(RLIMIT_NOFILE, &rl) < 0) {
            _exit(4);
        }
    }
    e = sbx_egress_start(cfg, &err);
    if (e == NULL ||
        sbx_egress_add(e, p->dir[0], "job-a", "task-a", "sandbox-a", rules, &err) < 0 ||
        sbx_egress_add(e, p->dir[1], "job-b", "task-b", "sandbox-b", rules, &err) < 0) {
        fprintf(stderr, "proxy child: %s\n", err ? err->msg : "?");
        _exit(5);
    }
    c = 'R';
    if (write(res, &c, 1) != 1) {
        _exit(6);
    }
    while (read(cmd, &c, 1) == 1 && c != 'Q') {
        struct answer a;

        memset(&a, 0, sizeof(a));
        sbx_egress_summary(e, p->dir[c == 'A' ? 0 : 1], &a.sum);
        a.fd0_open = fcntl(0, F_GETFD) != -1;
        if (write(res, &a, sizeof(a)) != (ssize_t)sizeof(a)) {
            break;
        }
    }
    sbx_egress_stop(e);
    sbx_config_destroy(cfg);
    free(rule);
    /* what this process inherited from the test */
    free(p->log);
    free(p->dir[0]);
    free(p->dir[1]);
    free((char *)conf);
    free(g.dir);
    exit(0); /* exit, not _exit: the sanitizers' leak check runs */
}

/* Starts a proxy child with `budgets` in its egress group and, if nofile > 0, that
 * descriptor limit. */
static void proxy_start(struct proxy *p, const char *name, const char *budgets, rlim_t nofile)
{
    int cmd[2];
    int res[2];
    char *conf;
    char *path;
    char c;

    p->log = xasprintf_test("%s/%s.log", g.dir, name);
    p->dir[0] = xasprintf_test("%s/%s-a", g.dir, name);
    p->dir[1] = xasprintf_test("%s/%s-b", g.dir, name);
    conf = xasprintf_test("egress = {\n  log = \"%s\";\n  system_dns = false;\n"
                          "  hosts = ( { name = \"origin.test\"; address = \"127.0.0.1\"; } );\n"
                          "  %s\n};\n",
                          p->log, budgets);
    path = test_write_file(g.dir, name, conf);
    free(conf);
    assert_int_equal(pipe2(cmd, O_CLOEXEC), 0);
    assert_int_equal(pipe2(res, O_CLOEXEC), 0);
    fflush(NULL);
    p->pid = fork();
    assert_true(p->pid >= 0);
    if (p->pid == 0) {
        close(cmd[1]);
        close(res[0]);
        proxy_child(p, path, nofile, cmd[0], res[1]);
    }
    free(path);
    close(cmd[0]);
    close(res[1]);
    p->cmd = cmd[1];
    p->res = res[0];
    assert_int_equal(read(p->res, &c, 1), 1);
    assert_int_equal(c, 'R');
}

static struct answer proxy_ask(struct proxy *p, char sandbox)
{
    struct answer a;

    assert_int_equal(write(p->cmd, &sandbox, 1), 1);
    assert_int_equal(read(p->res, &a, sizeof(a)), (ssize_t)sizeof(a));
    assert_true(a.fd0_open);
    return a;
}

/* The proxy is still alive (it never crashed); stops it and checks it exited 0 (under
 * the sanitizers: no error and no leak). */
static void proxy_stop(struct proxy *p)
{
    char q = 'Q';
    int st = 0;

    assert_int_equal(waitpid(p->pid, &st, WNOHANG), 0);
    assert_int_equal(write(p->cmd, &q, 1), 1);
    assert_int_equal(waitpid(p->pid, &st, 0), p->pid);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fail_msg("proxy child ended badly: status 0x%x", st);
    }
    close(p->cmd);
    close(p->res);
    free(p->log);
    free(p->dir[0]);
    free(p->dir[1]);
}

/* Waits (up to 20 s) until sandbox's open connections are `open`. */
static void wait_open(struct proxy *p, char sandbox, uint64_t open)
{
    double end = now_s() + 20;

    while (proxy_ask(p, sandbox).sum.open != open) {
        if (now_s() > end) {
            fail_msg("sandbox %c: %llu connections open, expected %llu", sandbox,
                     (unsigned long long)proxy_ask(p, sandbox).sum.open, (unsigned long long)open);
        }
        usleep(20 * 1000);
    }
}

/* Log lines of sandbox ("sandbox-a") with `"reason":"REASON"`. */
static int log_count(const struct proxy *p, const char *sandbox, const char *reason)
{
    FILE *f = fopen(p->log, "r");
    char line[4096];
    char *want_sb = xasprintf_test("\"sandbox\":\"%s\"", sandbox);
    char *want_r = xasprintf_test("\"reason\":\"%s\"", reason);
    int n = 0;

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (strstr(line, want_sb) != NULL && strstr(line, want_r) != NULL) {
            n++;
        }
    }
    fclose(f);
    free(want_sb);
    free(want_r);
    return n;
}

/* Waits (up to 20 s) for exactly n such lines: a refusal's line is written once its
 * answer has been sent, so the client may see the answer first. */
static void wait_log(const struct proxy *p, const char *sandbox, const char *reason, int n)
{
    double end = now_s() + 20;
    int got;

    while ((got = log_count(p, sandbox, reason)) < n && now_s() < end) {
        usleep(20 * 1000);
    }
    if (got != n) {
        fail_msg("%s: %d lines with reason %s, expected %d", sandbox, got, reason, n);
    }
}

/* ---- clients ---- */

static int ux_connect(const struct proxy *p, int sandbox)
{
    struct sockaddr_un sun;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);

    assert_true(fd >= 0);
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/proxy.sock", p->dir[sandbox]);
    assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    return fd;
}

/* Sends a request; 0, or -1 when the proxy has closed the connection already (a
 * connection over budget is closed as soon as it is accepted). */
static int send_get(int fd, const char *path)
{
    char *req = xasprintf_test("GET http://origin.test:%d/%s HTTP/1.1\r\n"
                               "Host: origin.test:%d\r\n\r\n",
                               g.origin_port, path, g.origin_port);
    ssize_t n = send(fd, req, strlen(req), MSG_NOSIGNAL);

    if (n < 0) {
        assert_true(errno == EPIPE || errno == ECONNRESET);
    }
    else {
        assert_int_equal(n, (ssize_t)strlen(req));
    }
    free(req);
    return n < 0 ? -1 : 0;
}

/* The first bytes of a reply within ms: n > 0 bytes, 0 at EOF, -1 on timeout. */
static ssize_t read_some(int fd, char *buf, size_t cap, int ms)
{
    struct pollfd pfd = {fd, POLLIN, 0};
    ssize_t n;

    if (poll(&pfd, 1, ms) <= 0) {
        return -1;
    }
    n = recv(fd, buf, cap - 1, 0);
    if (n < 0) {
        n = 0; /* reset: the proxy closed it */
    }
    buf[n] = '\0';
    return n;
}

/* Opens a tunnel of `sandbox` to /endless and reads its first bytes: 1 when it
 * streams (fd kept in *out), 0 when the proxy refused it (closed or 503). */
static int open_endless(const struct proxy *p, int sandbox, int *out)
{
    char buf[256];
    int fd = ux_connect(p, sandbox);
    ssize_t n;

    if (send_get(fd, "endless") < 0) {
        close(fd);
        return 0;
    }
    n = read_some(fd, buf, sizeof(buf), 15000);
    assert_true(n >= 0); /* an answer either way, never a hang */
    if (n > 0 && strncmp(buf, "HTTP/1.1 200", 12) == 0) {
        *out = fd;
        return 1;
    }
    close(fd);
    return 0;
}

/* One request of `sandbox` answered "ok"; returns the seconds it took (connect, request
 * and reply), or -1 if it was not answered. */
static double request_ok(const struct proxy *p, int sandbox)
{
    double t0 = now_s();
    int fd = ux_connect(p, sandbox);
    struct timeval tv = {15, 0};
    char *reply;
    double dt;

    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    if (send_get(fd, "hello") < 0) {
        close(fd);
        return -1;
    }
    reply = test_read_all(fd);
    dt = now_s() - t0;
    close(fd);
    if (strstr(reply, "\r\n\r\nok") == NULL) {
        free(reply);
        return -1;
    }
    free(reply);
    return dt;
}

static void close_all(int *fds, int n)
{
    for (int i = 0; i < n; i++) {
        close(fds[i]);
    }
}

/* (a) The process runs out of descriptors. With a low RLIMIT_NOFILE and no connection
 * budget to stop it, sandbox A opens unread endless tunnels until they fail; then, one
 * idle connection at a time, it walks the proxy's free descriptors down to none,
 * trying a tunnel at each step, so every point where building a tunnel can fail is hit
 * (accept, the destination socket, the first pipe, the second pipe: the old crash).
 * Twice, the second time from six free descriptors. Each failure is one connection
 * with a logged reason; the proxy survives, fd 0 stays open, and once A lets go,
 * sandbox B is served. */
static void test_descriptor_exhaustion(void **state)
{
    struct proxy p;
    static int tun[MAX_FDS];
    static int other[MAX_FDS];
    int n_tun = 0;
    int n_other = 0;
    int fails = 0;

    (void)state;
    proxy_start(&p, "nofile", "header_timeout = \"60s\"; max_connections = 4096;", 64);
    while (n_tun < 200 && open_endless(&p, 0, &tun[n_tun])) {
        n_tun++;
    }
    assert_true(n_tun >= 2 && n_tun < 200);
    fails++;
    for (int round = 0; round < 2; round++) {
        int idle = 0;

        if (round == 1) {
            /* six free descriptors again (one tunnel's worth), then one fewer; first
             * let the proxy refuse what still waits in the backlog */
            double end = now_s() + 20;

            usleep(500 * 1000);
            close(tun[--n_tun]);
            while (log_count(&p, "sandbox-a", "client-error") < 1) {
                assert_true(now_s() < end);
                usleep(20 * 1000);
            }
            other[n_other++] = ux_connect(&p, 0);
            usleep(100 * 1000);
        }
        while (idle < 7) {
            int fd;

            if (open_endless(&p, 0, &fd)) {
                tun[n_tun++] = fd;
                continue;
            }
            fails++;
            other[n_other++] = ux_connect(&p, 0); /* one more idle connection: one fd less */
            usleep(100 * 1000);                   /* (accepted, or refused) */
            idle++;
        }
    }
    print_message("%d tunnels held, %d tunnels refused under RLIMIT_NOFILE 64\n", n_tun, fails);
    assert_true(fails >= 10);
    assert_true(log_count(&p, "sandbox-a", "out-of-descriptors") >= 6);
    assert_true(proxy_ask(&p, 'A').sum.refused >= 6);
    /* A lets go; B is served by the same process. */
    close_all(tun, n_tun);
    close_all(other, n_other);
    wait_open(&p, 'A', 0);
    assert_true(request_ok(&p, 1) >= 0);
    assert_true(request_ok(&p, 0) >= 0);
    proxy_stop(&p);
}

/* (a, d) With its connection budget, sandbox A cannot exhaust the proxy's descriptors
 * at all: under the same low RLIMIT_NOFILE, A's tunnels past max_connections are
 * refused (logged budget-connections) and B is served while A holds them all. */
static void test_connection_budget(void **state)
{
    struct proxy p;
    int fds[16];
    int n = 0;
    int refused = 0;

    (void)state;
    proxy_start(&p, "conns", "max_connections = 6;", 64);
    for (int i = 0; i < 10; i++) {
        if (open_endless(&p, 0, &fds[n])) {
            n++;
        }
        else {
            refused++;
        }
    }
    assert_int_equal(n, 6);
    assert_int_equal(refused, 4);
    wait_log(&p, "sandbox-a", "budget-connections", 4);
    assert_int_equal(proxy_ask(&p, 'A').sum.refused, 4);
    assert_int_equal(proxy_ask(&p, 'A').sum.open, 6);
    for (int i = 0; i < 3; i++) {
        assert_true(request_ok(&p, 1) >= 0);
    }
    assert_int_equal(log_count(&p, "sandbox-b", "budget-connections"), 0);
    close_all(fds, n);
    wait_open(&p, 'A', 0);
    proxy_stop(&p);
}

/* (b) Endless downloads the sandbox never reads: the proxy stops reading each
 * destination when its pipe is full, each tunnel's buffers are fixed and reserved
 * against max_buffer, and tunnels past the budget are refused (503 budget-buffer).
 * What the proxy holds for A (pipes, socket queues) stays under max_buffer, and B
 * still gets its tunnels. */
static void test_buffer_budget(void **state)
{
    struct proxy p;
    int fds[32];
    int n = 0;
    int refused = 0;
    uint64_t max_buffer = 8 << 20;
    uint64_t per = SBX_EGRESS_TUNNEL_RESERVE(256 * 1024);
    struct answer a;
    int b_fd;

    (void)state;
    proxy_start(&p, "buffer", "max_buffer = \"8M\"; socket_buffer = \"256K\";", 0);
    for (int i = 0; i < 12; i++) {
        if (open_endless(&p, 0, &fds[n])) {
            n++;
        }
        else {
            refused++;
        }
    }
    assert_int_equal(n, (int)(max_buffer / per));
    assert_int_equal(refused, 12 - n);
    wait_log(&p, "sandbox-a", "budget-buffer", refused);
    /* the destinations keep sending until the pipes are full: the proxy holds
     * something for every tunnel (before: a fixed 2 s) */
    wait_until(proxy_ask(&p, 'A').sum.held >= (uint64_t)n * 64 * 1024, 30, NULL,
               "the proxy to hold %d x 64 KiB for sandbox A's unread tunnels", n);
    a = proxy_ask(&p, 'A');
    print_message("sandbox A: %d unread endless tunnels hold %llu bytes in the proxy "
                  "(reserved %llu, max_buffer %llu)\n",
                  n, (unsigned long long)a.sum.held, (unsigned long long)a.sum.reserved,
                  (unsigned long long)max_buffer);
    assert_true(a.sum.reserved <= max_buffer);
    assert_true(a.sum.held <= a.sum.reserved);
    /* the pipes are full: the proxy holds something, and it stopped reading */
    assert_true(a.sum.held >= (uint64_t)n * 64 * 1024);
    /* it stopped reading: what it holds stops growing (two asks 200 ms apart
     * agree), under the reserve all along (before: one look after a fixed 1 s) */
    {
        uint64_t last = a.sum.held;
        uint64_t held;
        double end = test_now() + 30;

        for (;;) {
            usleep(200 * 1000);
            held = proxy_ask(&p, 'A').sum.held;
            assert_true(held <= a.sum.reserved);
            if (held == last) {
                break;
            }
            if (test_now() > end) {
                fail_msg("waited 30 s for what the proxy holds for A to stop growing (%llu)",
                         (unsigned long long)held);
            }
            last = held;
        }
    }
    /* B has its own budget */
    assert_int_equal(open_endless(&p, 1, &b_fd), 1);
    close(b_fd);
    close_all(fds, n);
    wait_open(&p, 'A', 0);
    assert_int_equal(proxy_ask(&p, 'A').sum.reserved, 0);
    proxy_stop(&p);
}

/* Seconds of CPU (user + system) process pid has used. */
static double cpu_seconds(pid_t pid)
{
    char *path = xasprintf_test("/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    char buf[1024];
    unsigned long ut = 0;
    unsigned long st = 0;
    char *p;

    free(path);
    assert_non_null(f);
    assert_non_null(fgets(buf, sizeof(buf), f));
    fclose(f);
    p = strrchr(buf, ')');
    assert_non_null(p);
    /* after ") ": state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime stime */
    assert_int_equal(sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %lu %lu", &ut, &st),
                     2);
    return (double)(ut + st) / (double)sysconf(_SC_CLK_TCK);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return (x > y) - (x < y);
}

/* (c) Slow clients in sandbox A: 150 dribble a request head a byte at a time, 60 read
 * endless downloads 4 KiB at a time, while sandbox B makes requests: B's
 * connect-to-reply latency stays within a generous bound, and the proxy's CPU for all
 * of A's clients stays small. */
static void test_slow_clients(void **state)
{
    enum { SLOW = 150, READERS = 60, ROUNDS = 40 };
    struct proxy p;
    int fds[SLOW];
    int readers[READERS];
    double lat[ROUNDS / 4];
    int n_lat = 0;
    double cpu0;
    double cpu;
    double t0;
    double wall;

    (void)state;
    proxy_start(&p, "slow", "header_timeout = \"60s\";", 0);
    for (int i = 0; i < SLOW; i++) {
        fds[i] = ux_connect(&p, 0);
        assert_int_equal(send(fds[i], "GET http://origin.test/", 23, MSG_NOSIGNAL), 23);
    }
    cpu0 = cpu_seconds(p.pid);
    t0 = now_s();
    for (int i = 0; i < READERS; i++) {
        assert_int_equal(open_endless(&p, 0, &readers[i]), 1);
    }
    for (int r = 0; r < ROUNDS; r++) {
        for (int i = 0; i < SLOW; i++) {
            assert_int_equal(send(fds[i], "a", 1, MSG_NOSIGNAL), 1);
        }
        for (int i = 0; i < READERS; i++) {
            char buf[4096];

            assert_true(recv(readers[i], buf, sizeof(buf), 0) > 0);
        }
        if (r % 4 == 0) {
            lat[n_lat] = request_ok(&p, 1);
            assert_true(lat[n_lat] >= 0);
            n_lat++;
        }
        usleep(25 * 1000);
    }
    wall = now_s() - t0;
    cpu = cpu_seconds(p.pid) - cpu0;
    qsort(lat, (size_t)n_lat, sizeof(lat[0]), cmp_double);
    print_message("B's latency with %d slow writers and %d slow readers in A: median %.1f ms, "
                  "max %.1f ms; proxy CPU %.2f s in %.2f s (%.0f%%)\n",
                  SLOW, READERS, lat[n_lat / 2] * 1e3, lat[n_lat - 1] * 1e3, cpu, wall,
                  100 * cpu / wall);
    assert_true(lat[n_lat / 2] < 0.5); /* generous: tens of milliseconds at worst here */
    assert_true(lat[n_lat - 1] < 5.0);
    assert_true(cpu < 0.5 * wall);
    /* all of A's slow clients are still waiting, none answered */
    assert_int_equal(proxy_ask(&p, 'A').sum.open, SLOW + READERS);
    close_all(fds, SLOW);
    close_all(readers, READERS);
    wait_open(&p, 'A', 0);
    proxy_stop(&p);
}

/* Budgets in the configuration: bad values are one-line errors with FILE:LINE. */
static void test_budget_config(void **state)
{
    static const struct {
        const char *text;
        const char *want;
    } bad[] = {
        {"max_connections = 0;", "'egress.max_connections' must be 1 to 65536"},
        {"socket_buffer = \"1K\";", "'egress.socket_buffer' must be 4K to 64M"},
        {"max_buffer = \"1M\";", "'egress.max_buffer' must hold one tunnel"},
        {"connection_rate = -1;", "'egress.connection_rate' must be 0 to 1000000"},
        {"max_buffer = \"lots\";", "max_buffer"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char *conf = xasprintf_test("egress = {\n  log = \"/tmp/x\";\n  %s\n};\n", bad[i].text);
        char *path = test_write_file(g.dir, "bad.conf", conf);
        sbx_error_t *err = NULL;
        struct sbx_config *cfg = sbx_config_load_file(path, &err);

        assert_null(cfg);
        assert_non_null(err);
        if (strstr(err->msg, bad[i].want) == NULL || strstr(err->msg, "bad.conf:3") == NULL) {
            fail_msg("'%s': got '%s'", bad[i].text, err->msg);
        }
        sbx_error_free(&err);
        free(conf);
        free(path);
    }
    {
        struct sbx_config *d = sbx_config_defaults();

        assert_int_equal(d->egress.max_connections, SBX_DEFAULT_EGRESS_MAX_CONNECTIONS);
        assert_int_equal(d->egress.max_buffer, SBX_DEFAULT_EGRESS_MAX_BUFFER);
        assert_int_equal(d->egress.socket_buffer, SBX_DEFAULT_EGRESS_SOCKET_BUFFER);
        assert_int_equal(d->egress.connection_rate, SBX_DEFAULT_EGRESS_CONNECTION_RATE);
        sbx_config_destroy(d);
    }
}

/* The runner and the keeper raise their soft descriptor limit to the hard one. */
static void test_raise_nofile(void **state)
{
    pid_t pid;
    int st = 0;

    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct rlimit rl;

        getrlimit(RLIMIT_NOFILE, &rl);
        rl.rlim_cur = 64;
        if (setrlimit(RLIMIT_NOFILE, &rl) < 0 || sbx_raise_nofile("test") != (long)rl.rlim_max) {
            _exit(1);
        }
        getrlimit(RLIMIT_NOFILE, &rl);
        _exit(rl.rlim_cur == rl.rlim_max ? 0 : 2);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_budget_config),         cmocka_unit_test(test_connection_budget),
        cmocka_unit_test(test_descriptor_exhaustion), cmocka_unit_test(test_buffer_budget),
        cmocka_unit_test(test_slow_clients),          cmocka_unit_test(test_raise_nofile),
    };

    return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
