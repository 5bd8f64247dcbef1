/* egress_bench.c - throughput and added connect latency of the egress path (sbx-relay
 * on a loopback port hands each connection to the proxy through its unix socket; the
 * proxy connects to the destination) against a direct loopback connection, measured in
 * the same run: a download (the origin sends) and an upload (the client sends).
 *
 *   egress_bench [MIB] [CONNECTS] [ROUNDS] [copy | sandboxes=N | fair=N]
 *   (defaults: 1024 MiB, 200 connections, 3 rounds; "copy" runs the relay with --copy;
 *   "sandboxes=N": N sandboxes at once, one shared proxy against one proxy each;
 *   "fair=N": a quiet sandbox's connect latency alone and next to N flooding ones,
 *   egress_fair.c)
 *
 * The destination is a thread of this program on 127.0.0.1; the proxy runs in this
 * process through its API; the relay is ../libexec/sbx-relay next to this binary (or
 * $SBX_BUILD_DIR/libexec/sbx-relay). Prints numbers and the ratios. SBX_BENCH_ONLY=direct
 * or =proxied measures one path only (for a profiler). */
#include <arpa/inet.h>
#include <errno.h>
#include <stdatomic.h>
#include <limits.h>
#include <stdint.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "egress/egress.h"
#include "util/xalloc.h"

#include "egress_bench.h"

int origin_fd;
atomic_int origin_active;
static pid_t relay_pid;
char bench_dir[] = "/tmp/sbx-egress-bench-XXXXXX";

/* On any exit: stop the relay and remove the scratch directory. */
static void cleanup(void)
{
    char cmd[64];

    if (relay_pid > 0) {
        kill(relay_pid, SIGTERM);
        waitpid(relay_pid, NULL, 0);
        relay_pid = 0;
    }
    if (strchr(bench_dir, 'X') == NULL) {
        snprintf(cmd, sizeof(cmd), "rm -rf '%s'", bench_dir);
        if (system(cmd) != 0) {
            fprintf(stderr, "egress_bench: could not remove %s\n", bench_dir);
        }
    }
}
int origin_port;
int64_t bulk_bytes;
int flood_nice; /* SBX_BENCH_FLOOD_NICE: the floods' client and origin threads */

double now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

void die(const char *what)
{
    fprintf(stderr, "egress_bench: %s: %s\n", what, strerror(errno));
    exit(1);
}

/* The destination: per connection, one command byte: 'B' sends bulk_bytes, 'U' reads
 * until EOF and then answers one byte, 'L' answers one byte. */
static void *origin_conn(void *arg)
{
    int c = (int)(intptr_t)arg;
    char *buf = xcalloc(1, CHUNK);
    char cmd;

    memset(buf, 'b', CHUNK);
    {
        if (read(c, &cmd, 1) == 1) {
            if (cmd == 'B') {
                int64_t left = bulk_bytes;

                if (flood_nice > 0) {
                    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), flood_nice);
                }
                while (left > 0) {
                    ssize_t n = write(c, buf, left < CHUNK ? (size_t)left : CHUNK);

                    if (n <= 0) {
                        break;
                    }
                    left -= n;
                }
            }
            else if (cmd == 'U') {
                while (read(c, buf, CHUNK) > 0) {
                }
                if (write(c, "x", 1) != 1) {
                    /* the client went away */
                }
            }
            else if (write(c, "x", 1) != 1) {
                /* the client went away */
            }
        }
        close(c);
    }
    free(buf);
    atomic_fetch_sub(&origin_active, 1);
    return NULL;
}

/* The destination: a thread per connection (several sandboxes transfer at once). */
void *origin_main(void *arg)
{
    (void)arg;
    for (;;) {
        int c = accept(origin_fd, NULL, NULL);
        pthread_t th;

        if (c < 0) {
            continue;
        }
        atomic_fetch_add(&origin_active, 1); /* until origin_conn is done with it */
        if (pthread_create(&th, NULL, origin_conn, (void *)(intptr_t)c) != 0) {
            atomic_fetch_sub(&origin_active, 1);
            close(c);
            continue;
        }
        pthread_detach(th);
    }
    return NULL;
}

int tcp_listen(int *port)
{
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || bind(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0 || listen(fd, 512) < 0 ||
        getsockname(fd, (struct sockaddr *)&sin, &sl) < 0) {
        die("listen");
    }
    *port = ntohs(sin.sin_port);
    return fd;
}

static int tcp_connect(int port)
{
    struct sockaddr_in sin;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_port = htons((unsigned short)port);
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd < 0 || connect(fd, (struct sockaddr *)&sin, sizeof(sin)) < 0) {
        die("connect");
    }
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    return fd;
}

/* Opens a stream to the origin, directly (relay_port 0) or through the relay with
 * CONNECT, and sends the command byte. */
int open_stream(int relay_port, char cmd)
{
    int fd;

    if (relay_port == 0) {
        fd = tcp_connect(origin_port);
    }
    else {
        char req[128];
        char resp[256];
        size_t got = 0;
        int n = snprintf(req, sizeof(req),
                         "CONNECT bench.test:%d HTTP/1.1\r\n"
                         "Host: bench.test:%d\r\n\r\n",
                         origin_port, origin_port);

        fd = tcp_connect(relay_port);
        if (write(fd, req, (size_t)n) != n) {
            die("write CONNECT");
        }
        /* Read the reply head byte by byte so no tunnel byte is eaten. */
        while (got < sizeof(resp) - 1) {
            if (read(fd, resp + got, 1) != 1) {
                die("read CONNECT reply");
            }
            got++;
            if (got >= 4 && memcmp(resp + got - 4, "\r\n\r\n", 4) == 0) {
                break;
            }
        }
        resp[got] = '\0';
        if (strncmp(resp, "HTTP/1.1 200", 12) != 0) {
            fprintf(stderr, "egress_bench: proxy said: %s\n", resp);
            exit(1);
        }
    }
    if (write(fd, &cmd, 1) != 1) {
        die("write command");
    }
    return fd;
}

double bulk(int relay_port)
{
    char *buf = xcalloc(1, CHUNK);
    int fd = open_stream(relay_port, 'B');
    int64_t total = 0;
    double t0 = now();
    ssize_t n;

    while ((n = read(fd, buf, CHUNK)) > 0) {
        total += n;
    }
    close(fd);
    free(buf);
    if (total != bulk_bytes) {
        fprintf(stderr, "egress_bench: got %lld of %lld bytes\n", (long long)total,
                (long long)bulk_bytes);
        exit(1);
    }
    return (double)total / (1024.0 * 1024.0) / (now() - t0);
}

/* Sends bulk_bytes to the origin, half-closes, and waits for its answer (so every byte
 * has been read at the far end). */
static double upload(int relay_port)
{
    char *buf = xcalloc(1, CHUNK);
    int fd = open_stream(relay_port, 'U');
    int64_t left = bulk_bytes;
    double t0 = now();
    char x;

    memset(buf, 'u', CHUNK);
    while (left > 0) {
        ssize_t n = write(fd, buf, left < CHUNK ? (size_t)left : CHUNK);

        if (n <= 0) {
            die("upload write");
        }
        left -= n;
    }
    shutdown(fd, SHUT_WR);
    if (read(fd, &x, 1) != 1) {
        die("upload answer");
    }
    close(fd);
    free(buf);
    return (double)bulk_bytes / (1024.0 * 1024.0) / (now() - t0);
}

int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return x < y ? -1 : x > y;
}

/* Median microseconds from connect() to the origin's first byte. */
double latency(int relay_port, int count)
{
    double *v = xcalloc((size_t)count, sizeof(double));
    double m;

    for (int i = 0; i < count; i++) {
        double t0 = now();
        int fd = open_stream(relay_port, 'L');
        char x;

        if (read(fd, &x, 1) != 1) {
            die("read first byte");
        }
        v[i] = (now() - t0) * 1e6;
        close(fd);
    }
    qsort(v, (size_t)count, sizeof(double), cmp_double);
    m = v[count / 2];
    free(v);
    return m;
}

static char *relay_path(void)
{
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    const char *build = getenv("SBX_BUILD_DIR");
    char *slash;

    if (build != NULL) {
        return xasprintf("%s/libexec/sbx-relay", build);
    }
    if (n <= 0) {
        die("readlink /proc/self/exe");
    }
    exe[n] = '\0';
    slash = strrchr(exe, '/');
    *slash = '\0';
    return xasprintf("%s/../libexec/sbx-relay", exe);
}

static int relay_copy; /* argv[4] == "copy": the relay copies bytes (--copy) */

pid_t start_relay(const char *sock, int *port)
{
    int fds[2];
    char line[32];
    pid_t pid;
    FILE *f;
    char *relay = relay_path();

    if (pipe(fds) < 0) {
        die("pipe");
    }
    pid = fork();
    if (pid == 0) {
        dup2(fds[1], 1);
        close(fds[0]);
        execl(relay, relay, "--listen", "127.0.0.1:0", "--socket", sock, "--print-port",
              relay_copy ? "--copy" : (char *)NULL, (char *)NULL);
        _exit(127);
    }
    close(fds[1]);
    f = fdopen(fds[0], "r");
    if (f == NULL || fgets(line, sizeof(line), f) == NULL) {
        fprintf(stderr, "egress_bench: %s did not start\n", relay);
        exit(1);
    }
    fclose(f);
    free(relay);
    *port = atoi(line);
    return pid;
}

/* ---- several sandboxes at once: one shared proxy with budgets, or one proxy each ---- */

struct lane {
    int port; /* the sandbox's relay */
    char cmd; /* 'B' download, 'U' upload */
    double mibs;
    pthread_t th;
};

static void *lane_main(void *arg)
{
    struct lane *l = arg;

    l->mibs = l->cmd == 'B' ? bulk(l->port) : upload(l->port);
    return NULL;
}

/* All n sandboxes transfer bulk_bytes at once (cmd 'B' or 'U'); returns the aggregate
 * MiB/s and fills the slowest sandbox's share. */
static double concurrent(const int *ports, int n, char cmd, double *slowest)
{
    struct lane *l = xcalloc((size_t)n, sizeof(*l));
    double t0 = now();
    double agg;

    for (int i = 0; i < n; i++) {
        l[i].port = ports[i];
        l[i].cmd = cmd;
        pthread_create(&l[i].th, NULL, lane_main, &l[i]);
    }
    *slowest = 0.0;
    for (int i = 0; i < n; i++) {
        pthread_join(l[i].th, NULL);
        if (*slowest == 0.0 || l[i].mibs < *slowest) {
            *slowest = l[i].mibs;
        }
    }
    agg = (double)n * (double)bulk_bytes / (1024.0 * 1024.0) / (now() - t0);
    free(l);
    return agg;
}

/* Sandbox 0's median connect-to-first-byte while sandboxes 1..n-1 download. */
static double latency_under_load(const int *ports, int n, int connects)
{
    struct lane *l = xcalloc((size_t)n, sizeof(*l));
    double m;

    for (int i = 1; i < n; i++) {
        l[i].port = ports[i];
        l[i].cmd = 'B';
        pthread_create(&l[i].th, NULL, lane_main, &l[i]);
    }
    usleep(50 * 1000);
    m = latency(ports[0], connects);
    for (int i = 1; i < n; i++) {
        pthread_join(l[i].th, NULL);
    }
    free(l);
    return m;
}

/* `egress_bench MIB CONNECTS ROUNDS sandboxes=N`: N sandboxes, each behind its own
 * relay, transfer at once, in two layouts measured alternately in one run: "shared"
 * (one proxy, one loop thread, N sandboxes: what `sbx serve` runs, with its per-sandbox
 * budgets) and "per-sandbox" (N proxies with a loop thread each: what embedded tasks
 * run, one per task). Prints aggregate and slowest-sandbox throughput each way and
 * sandbox 0's connect latency while the others download. */
static int multi(struct sbx_config *cfg, int n, int connects, int rounds)
{
    struct sbx_egress *shared;
    struct sbx_egress **own = xcalloc((size_t)n, sizeof(*own));
    int *ports[2];
    pid_t *relays = xcalloc(2 * (size_t)n, sizeof(*relays));
    char *rule = xasprintf("bench.test:%d", origin_port);
    const char *rules[] = {rule, NULL};
    sbx_error_t *err = NULL;
    double best[2][3][2]; /* [shared, per-sandbox][down, up, latency][aggregate, slowest] */
    static const char *const name[] = {"shared", "per-sandbox"};

    ports[0] = xcalloc((size_t)n, sizeof(int));
    ports[1] = xcalloc((size_t)n, sizeof(int));
    shared = sbx_egress_start(cfg, &err);
    if (shared == NULL) {
        fprintf(stderr, "egress_bench: %s\n", err->msg);
        return 1;
    }
    for (int i = 0; i < n; i++) {
        char *d0 = xasprintf("%s/shared-%d", bench_dir, i);
        char *d1 = xasprintf("%s/own-%d", bench_dir, i);
        char *s0 = xasprintf("%s/%s", d0, SBX_EGRESS_SOCKET);
        char *s1 = xasprintf("%s/%s", d1, SBX_EGRESS_SOCKET);

        own[i] = sbx_egress_start(cfg, &err);
        if (own[i] == NULL || sbx_egress_add(shared, d0, "b", "b", "b", rules, &err) < 0 ||
            sbx_egress_add(own[i], d1, "b", "b", "b", rules, &err) < 0) {
            fprintf(stderr, "egress_bench: %s\n", err->msg);
            return 1;
        }
        relays[2 * i] = start_relay(s0, &ports[0][i]);
        relays[2 * i + 1] = start_relay(s1, &ports[1][i]);
        free(d0);
        free(d1);
        free(s0);
        free(s1);
    }
    for (int k = 0; k < 2; k++) {
        latency(ports[k][0], 10);
    }
    memset(best, 0, sizeof(best));
    for (int r = 0; r < rounds; r++) {
        for (int k = 0; k < 2; k++) {
            double v[3][2];

            v[0][0] = concurrent(ports[k], n, 'B', &v[0][1]);
            v[1][0] = concurrent(ports[k], n, 'U', &v[1][1]);
            v[2][0] = latency_under_load(ports[k], n, connects);
            v[2][1] = 0.0;
            printf("  round %d %-11s: down %.1f MiB/s (slowest sandbox %.1f), up %.1f "
                   "(slowest %.1f), connect under load %.0f us\n",
                   r + 1, name[k], v[0][0], v[0][1], v[1][0], v[1][1], v[2][0]);
            for (int w = 0; w < 2; w++) {
                for (int j = 0; j < 2; j++) {
                    best[k][w][j] = v[w][j] > best[k][w][j] ? v[w][j] : best[k][w][j];
                }
            }
            if (best[k][2][0] == 0.0 || v[2][0] < best[k][2][0]) {
                best[k][2][0] = v[2][0];
            }
        }
    }
    printf("egress bench: %d sandboxes at once, %lld MiB each, best of %d rounds\n", n,
           (long long)(bulk_bytes >> 20), rounds);
    for (int k = 0; k < 2; k++) {
        printf("  %-11s down %8.1f MiB/s (slowest sandbox %7.1f)  up %8.1f MiB/s (slowest "
               "%7.1f)  connect under load %6.0f us\n",
               name[k], best[k][0][0], best[k][0][1], best[k][1][0], best[k][1][1], best[k][2][0]);
    }
    printf("  shared / per-sandbox: down %.2f, up %.2f\n", best[0][0][0] / best[1][0][0],
           best[0][1][0] / best[1][1][0]);
    for (int i = 0; i < 2 * n; i++) {
        kill(relays[i], SIGTERM);
        waitpid(relays[i], NULL, 0);
    }
    sbx_egress_stop(shared);
    for (int i = 0; i < n; i++) {
        sbx_egress_stop(own[i]);
    }
    free(own);
    free(relays);
    free(ports[0]);
    free(ports[1]);
    free(rule);
    sbx_config_destroy(cfg);
    return 0;
}

int main(int argc, char **argv)
{
    long mib = argc > 1 ? atol(argv[1]) : 1024;
    int connects = argc > 2 ? atoi(argv[2]) : 200;
    int rounds = argc > 3 ? atoi(argv[3]) : 3;

    relay_copy = argc > 4 && strcmp(argv[4], "copy") == 0;
    int sandboxes = argc > 4 && strncmp(argv[4], "sandboxes=", 10) == 0 ? atoi(argv[4] + 10) : 0;
    int flooders = argc > 4 && strncmp(argv[4], "fair=", 5) == 0 ? atoi(argv[4] + 5) : 0;
    char *dir = bench_dir;
    struct sbx_config *cfg = sbx_config_defaults();
    struct sbx_egress *e;
    struct sbx_egress_summary sum;
    sbx_error_t *err = NULL;
    pthread_t th;
    char *sockdir;
    char *sock;
    char *rule;
    const char *rules[2];
    pid_t relay;
    int relay_port;
    double best[2][2]; /* [down, up][direct, proxied] MiB/s */
    double d_lat;
    double p_lat;

    if (mib <= 0 || connects <= 0 || rounds <= 0 ||
        (argc > 4 && !relay_copy && (sandboxes < 1 || sandboxes > 64) &&
         (flooders < 1 || flooders > 64))) {
        fprintf(stderr,
                "usage: egress_bench [MIB] [CONNECTS] [ROUNDS] [copy | sandboxes=N | fair=N]\n");
        return 2;
    }
    signal(SIGPIPE, SIG_IGN);
    bulk_bytes = (int64_t)mib << 20;
    if (mkdtemp(dir) == NULL) {
        die("mkdtemp");
    }
    atexit(cleanup);
    origin_fd = tcp_listen(&origin_port);
    pthread_create(&th, NULL, origin_main, NULL);

    cfg->egress.log = xasprintf("%s/egress.log", dir);
    cfg->egress.hosts = xcalloc(1, sizeof(*cfg->egress.hosts));
    cfg->egress.hosts[0].name = xstrdup("bench.test");
    cfg->egress.hosts[0].address = xstrdup("127.0.0.1");
    cfg->egress.n_hosts = 1;
    if (getenv("SBX_BENCH_BANDWIDTH") != NULL && *getenv("SBX_BENCH_BANDWIDTH") != '\0') {
        /* egress.bandwidth, bytes/s; 0: off */
        cfg->egress.bandwidth = atoll(getenv("SBX_BENCH_BANDWIDTH"));
    }
    if (sandboxes > 0) {
        return multi(cfg, sandboxes, connects, rounds);
    }
    if (flooders > 0) {
        flood_nice = getenv("SBX_BENCH_FLOOD_NICE") ? atoi(getenv("SBX_BENCH_FLOOD_NICE")) : 0;
        return egress_fair(cfg, flooders, connects, rounds);
    }
    e = sbx_egress_start(cfg, &err);
    if (e == NULL) {
        fprintf(stderr, "egress_bench: %s\n", err->msg);
        return 1;
    }
    sockdir = xasprintf("%s/sb", dir);
    sock = xasprintf("%s/%s", sockdir, SBX_EGRESS_SOCKET);
    /* the streams carry a command byte, then raw bytes: neither TLS nor HTTP, so the
     * rule says the protocol is opaque (docs/egress.md) */
    rule = xasprintf("bench.test:%d opaque", origin_port);
    rules[0] = rule;
    rules[1] = NULL;
    if (sbx_egress_add(e, sockdir, "bench", "bench", "bench", rules, &err) < 0) {
        fprintf(stderr, "egress_bench: %s\n", err->msg);
        return 1;
    }
    relay = start_relay(sock, &relay_port);
    relay_pid = relay;

    /* Warm up both paths, then alternate so both see the same machine load. */
    latency(0, 10);
    latency(relay_port, 10);
    d_lat = latency(0, connects);
    p_lat = latency(relay_port, connects);
    /* Rounds of one direct and one proxied transfer each way; the best of each (the
     * machine is shared, the best is the least disturbed). SBX_BENCH_ONLY=direct or
     * proxied runs one path only, for a profiler. */
    memset(best, 0, sizeof(best));
    for (int r = 0; r < rounds; r++) {
        const char *only = getenv("SBX_BENCH_ONLY");
        int skip_direct = only != NULL && strcmp(only, "proxied") == 0;
        int skip_proxied = only != NULL && strcmp(only, "direct") == 0;
        double v[2][2];

        v[0][0] = skip_direct ? 0.0 : bulk(0);
        v[0][1] = skip_proxied ? 0.0 : bulk(relay_port);
        v[1][0] = skip_direct ? 0.0 : upload(0);
        v[1][1] = skip_proxied ? 0.0 : upload(relay_port);
        printf("  round %d: down direct %.1f proxied %.1f MiB/s; up direct %.1f proxied "
               "%.1f MiB/s\n",
               r + 1, v[0][0], v[0][1], v[1][0], v[1][1]);
        for (int w = 0; w < 2; w++) {
            for (int k = 0; k < 2; k++) {
                best[w][k] = v[w][k] > best[w][k] ? v[w][k] : best[w][k];
            }
        }
    }

    printf("egress bench: %ld MiB transfer, %d connects (sbx-relay%s -> proxy -> "
           "127.0.0.1)\n",
           mib, connects,
           relay_copy ? " --copy via its unix socket" : " hands each socket to the proxy");
    printf("  best of %d rounds\n", rounds);
    for (int w = 0; w < 2; w++) {
        double ratio = best[w][0] > 0.0 ? best[w][1] / best[w][0] : 0.0;

        printf("  throughput %s  direct %9.1f MiB/s   proxied %9.1f MiB/s   ratio %.2f  "
               "(target >= 0.50: %s)\n",
               w == 0 ? "down" : "up  ", best[w][0], best[w][1], ratio,
               ratio >= 0.5 ? "met" : "MISSED");
    }
    printf("  connect          direct %9.1f us      proxied %9.1f us      ratio %.2f  added %.1f "
           "us (target < 1000 us: %s)\n",
           d_lat, p_lat, p_lat / d_lat, p_lat - d_lat, p_lat - d_lat < 1000.0 ? "met" : "MISSED");

    kill(relay, SIGTERM);
    waitpid(relay, NULL, 0);
    relay_pid = 0;
    sbx_egress_remove(e, sockdir, &sum);
    printf("  proxy log: %llu allowed, %llu denied, %llu log errors\n",
           (unsigned long long)sum.allowed, (unsigned long long)sum.denied,
           (unsigned long long)sum.log_errors);
    sbx_egress_stop(e);
    {
        FILE *f = fopen(cfg->egress.log, "r");
        char line[1024];

        if (f != NULL && fgets(line, sizeof(line), f) != NULL) {
            printf("  first log line: %s", line);
        }
        if (f != NULL) {
            fclose(f);
        }
    }
    sbx_config_destroy(cfg);
    free(sockdir);
    free(sock);
    free(rule);
    return 0;
}
