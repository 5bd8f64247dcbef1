/* test_egress_fair.c - fair shares in the real proxy (issue 25; docs/egress.md, "Fair
 * shares"): two sandboxes streaming at once share egress.bandwidth, and a sandbox's
 * listener that takes its connections in turns of four still takes them all. The
 * proxy runs in this process (its own thread), the origin is a thread on 127.0.0.1
 * that the proxy reaches through egress.hosts; clients speak to a sandbox's
 * proxy.sock directly. Nothing leaves loopback. The share logic itself, on a fake
 * clock, is test_egress_share.c; here only bounds that a slow machine cannot break
 * (fewer bytes, never more). */
#include "test_common.h"
#include "test_proc.h"

#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>

#include "config/config.h"
#include "egress/egress.h"

#define MIB (1024.0 * 1024.0)

static int origin_port;

/* One origin connection: "/endless" streams until the client goes, anything else is
 * answered "ok". */
static void *origin_conn(void *arg)
{
    int fd = (int)(intptr_t)arg;
    static const char chunk[65536];
    char buf[2048];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);

    if (n > 0) {
        buf[n] = '\0';
        if (strstr(buf, "/endless") != NULL) {
            static const char h[] = "HTTP/1.1 200 OK\r\nContent-Type: x\r\n\r\n";

            if (write(fd, h, sizeof(h) - 1) == (ssize_t)sizeof(h) - 1) {
                while (write(fd, chunk, sizeof(chunk)) > 0) {
                }
            }
        }
        else {
            static const char ok[] = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n"
                                     "Connection: close\r\n\r\nok";

            if (write(fd, ok, sizeof(ok) - 1) < 0) {
                /* the client went */
            }
        }
    }
    close(fd);
    return NULL;
}

static void *origin_main(void *arg)
{
    int lfd = (int)(intptr_t)arg;

    for (;;) {
        int fd = accept(lfd, NULL, NULL);
        pthread_t th;

        if (fd < 0) {
            continue;
        }
        if (pthread_create(&th, NULL, origin_conn, (void *)(intptr_t)fd) != 0) {
            close(fd);
            continue;
        }
        pthread_detach(th);
    }
    return NULL;
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

struct proxy {
    char *dir;
    char *sb[2];
    struct sbx_egress *e;
    struct sbx_config *cfg;
};

/* A proxy with two sandboxes, egress.bandwidth = bandwidth. */
static void proxy_start(struct proxy *p, int64_t bandwidth)
{
    char *rule = xasprintf_test("origin.test:%d", origin_port);
    const char *rules[] = {rule, NULL};
    sbx_error_t *err = NULL;

    p->dir = test_mkdtemp();
    p->cfg = sbx_config_defaults();
    p->cfg->egress.log = xasprintf_test("%s/egress.log", p->dir);
    p->cfg->egress.system_dns = 0;
    p->cfg->egress.hosts = calloc(1, sizeof(*p->cfg->egress.hosts));
    assert_non_null(p->cfg->egress.hosts);
    p->cfg->egress.hosts[0].name = strdup("origin.test");
    p->cfg->egress.hosts[0].address = strdup("127.0.0.1");
    p->cfg->egress.n_hosts = 1;
    p->cfg->egress.bandwidth = bandwidth;
    p->e = sbx_egress_start(p->cfg, &err);
    assert_non_null(p->e);
    for (int i = 0; i < 2; i++) {
        p->sb[i] = xasprintf_test("%s/sb%d", p->dir, i);
        assert_int_equal(sbx_egress_add(p->e, p->sb[i], "job", "task", i ? "b" : "a", rules, &err),
                         0);
    }
    free(rule);
}

static void proxy_stop(struct proxy *p)
{
    sbx_egress_stop(p->e);
    sbx_config_destroy(p->cfg);
    for (int i = 0; i < 2; i++) {
        free(p->sb[i]);
    }
    test_rm_rf(p->dir);
    free(p->dir);
}

/* A connection to sandbox i's proxy socket with `path` requested. */
static int request(const struct proxy *p, int i, const char *path)
{
    struct sockaddr_un sun;
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    char *req =
        xasprintf_test("GET http://origin.test:%d/%s HTTP/1.1\r\nHost: origin.test:%d\r\n\r\n",
                       origin_port, path, origin_port);

    assert_true(fd >= 0);
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s/proxy.sock", p->sb[i]);
    assert_int_equal(connect(fd, (struct sockaddr *)&sun, sizeof(sun)), 0);
    assert_int_equal(write(fd, req, strlen(req)), (ssize_t)strlen(req));
    free(req);
    return fd;
}

/* Two sandboxes stream at once through a proxy sharing 4 MiB/s: over two seconds each
 * moves about 2 MiB/s, together never more than the share plus what the path holds
 * (unlimited, loopback moves hundreds of MiB/s), and neither is starved. */
static void test_two_sandboxes_share(void **state)
{
    struct proxy p;
    int fd[2];
    double got[2] = {0, 0};
    double t0;
    double dt;
    static char buf[1 << 16];

    (void)state;
    proxy_start(&p, 4 << 20);
    fd[0] = request(&p, 0, "endless");
    fd[1] = request(&p, 1, "endless");
    t0 = now_s();
    while (now_s() - t0 < 2.0) {
        struct pollfd pf[2] = {{fd[0], POLLIN, 0}, {fd[1], POLLIN, 0}};

        if (poll(pf, 2, 100) < 0) {
            continue;
        }
        for (int i = 0; i < 2; i++) {
            ssize_t n = pf[i].revents ? recv(fd[i], buf, sizeof(buf), MSG_DONTWAIT) : 0;

            if (n > 0) {
                got[i] += (double)n;
            }
        }
    }
    dt = now_s() - t0;
    printf("# %.2f s: sandbox a %.2f MiB, b %.2f MiB (share 4 MiB/s)\n", dt, got[0] / MIB,
           got[1] / MIB);
    /* Past the buckets: what the path holds (the client sockets' buffers, 256 KiB
     * doubled, a pipe of 256 KiB), and after each pause of this thread longer than the
     * count's window both sandboxes drop out of it and the first to read again fills
     * its path unlimited. 24 MiB covers many such pauses on a loaded machine; without
     * the shares the two move hundreds of MiB here. */
    assert_true(got[0] + got[1] <= 4 * MIB * dt + 24 * MIB);
    assert_true(got[0] >= 256 * 1024);
    assert_true(got[1] >= 256 * 1024);
    close(fd[0]);
    close(fd[1]);
    proxy_stop(&p);
}

/* A listener takes four connections per turn, then yields (accept.c): forty waiting
 * at once are all taken and answered, whatever the turns. */
static void test_accept_turns_take_everything(void **state)
{
    enum { N = 40 };
    struct proxy p;
    int fd[N];

    (void)state;
    proxy_start(&p, 0);
    for (int i = 0; i < N; i++) {
        fd[i] = request(&p, i % 2, "ok");
    }
    for (int i = 0; i < N; i++) {
        struct timeval tv = {20, 0};
        char *reply;

        setsockopt(fd[i], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        reply = test_read_all(fd[i]);
        if (strstr(reply, "\r\n\r\nok") == NULL) {
            fail_msg("connection %d: '%s'", i, reply);
        }
        free(reply);
        close(fd[i]);
    }
    proxy_stop(&p);
}

static int group_setup(void **state)
{
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    int lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    pthread_t th;

    (void)state;
    signal(SIGPIPE, SIG_IGN);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(lfd, 128) < 0 ||
        getsockname(lfd, (struct sockaddr *)&sin, &sl) < 0) {
        return -1;
    }
    origin_port = ntohs(sin.sin_port);
    if (pthread_create(&th, NULL, origin_main, (void *)(intptr_t)lfd) != 0) {
        return -1;
    }
    pthread_detach(th);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_sandboxes_share),
        cmocka_unit_test(test_accept_turns_take_everything),
    };

    return cmocka_run_group_tests(tests, group_setup, NULL);
}
