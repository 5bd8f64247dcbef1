/* egress_fair.c - `egress_bench MIB CONNECTS ROUNDS fair=N` (bench/egress_fair.sh):
 * one quiet sandbox's connect-to-first-byte alone and while N other sandboxes of the
 * same shared proxy download without pause (issue 25: p50 at most 1.5x quiet).
 *
 * Each round, on one proxy with N + 1 sandboxes behind a relay each:
 *   1. wait until the proxy is idle: no connection open in any sandbox (its summary)
 *      and no origin connection open (the previous round's floods have ended);
 *   2. "lone": one download of MIB MiB by the quiet sandbox, alone (a lone sandbox's
 *      throughput: the fair shares must not slow it); idle again;
 *   3. "quiet": CONNECTS connects of the quiet sandbox, p50 and p95;
 *   4. the N floods start (each downloads MIB-sized streams back to back), and the
 *      quiet sandbox waits until every flood has received 4 MiB (streaming);
 *   5. "loaded": the same CONNECTS connects, same relay, same proxy, same origin;
 *      every flood's bytes are counted over exactly that window, and a flood that
 *      moved nothing in it is reported (the measurement is then not under load);
 *   6. the floods stop (they close their streams; their process answers once their
 *      origin's connections have ended too).
 * Waits are for a condition with a deadline, never a fixed sleep.
 *
 * Where things run: the proxy, the quiet sandbox's client and its origin run in this
 * process; the floods' clients and their origin run in a child process of their own
 * session (setsid: a scheduler group of its own), as sandboxes run in cgroups of their
 * own and destinations on other hosts. SBX_BENCH_FLOODS_IN_PROCESS=1 keeps the floods
 * in this process (the layout before, for comparison).
 *
 * egress.connection_rate is off here (0): its default (200 new connections per second
 * per sandbox, a burst of 200) is what the quiet sandbox's back-to-back connects would
 * measure after their first 200, about 5 ms each. That is why the baseline jumped from
 * 358 us in the first round to about 5 ms in the later ones before (the limiter's
 * bucket was empty), not the floods. */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include "egress/egress.h"
#include "util/xalloc.h"

#include "egress_bench.h"

#define STREAMING_BYTES (4 << 20) /* a flood is streaming once it has this much */
#define WAIT_DEADLINE 60.0        /* seconds for any condition */

struct flood {
    int port;
    _Atomic uint64_t bytes; /* received so far, all its streams */
    pthread_t th;
};

/* Shared with the flood process (MAP_SHARED). */
struct floods {
    atomic_int stop;
    int n;
    struct flood f[64];
};

static atomic_int flood_stop_local;
static atomic_int *flood_stop = &flood_stop_local;

/* Downloads MIB-sized streams back to back until flood_stop, then closes its stream
 * at once (the proxy and the origin see it end). */
static void *flood_main(void *arg)
{
    struct flood *f = arg;
    char *buf = xcalloc(1, CHUNK);

    if (flood_nice > 0) {
        setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), flood_nice);
    }
    while (!atomic_load(flood_stop)) {
        int fd = open_stream(f->port, 'B');
        ssize_t n;

        while (!atomic_load(flood_stop) && (n = read(fd, buf, CHUNK)) > 0) {
            atomic_fetch_add(&f->bytes, (uint64_t)n);
        }
        close(fd);
    }
    free(buf);
    return NULL;
}

/* The load averages (/proc/loadavg): 1, 5 and 15 minutes; -1 when unreadable. */
static void loadavg(double v[3])
{
    FILE *f = fopen("/proc/loadavg", "r");

    v[0] = v[1] = v[2] = -1.0;
    if (f != NULL) {
        if (fscanf(f, "%lf %lf %lf", &v[0], &v[1], &v[2]) != 3) {
            v[0] = v[1] = v[2] = -1.0;
        }
        fclose(f);
    }
}

/* connect-to-first-byte of count connects through relay port: p50 and p95, us */
static void latency_pct(int port, int count, double *p50, double *p95)
{
    double *v = xcalloc((size_t)count, sizeof(double));

    for (int i = 0; i < count; i++) {
        double t0 = now();
        int fd = open_stream(port, 'L');
        char x;

        if (read(fd, &x, 1) != 1) {
            die("read first byte");
        }
        v[i] = (now() - t0) * 1e6;
        close(fd);
    }
    qsort(v, (size_t)count, sizeof(double), cmp_double);
    *p50 = v[count / 2];
    *p95 = v[count * 95 / 100];
    free(v);
}

/* Open connections of all sandboxes of e (dirs[0..n)), or -1. */
static long proxy_open(struct sbx_egress *e, char **dirs, int n)
{
    long open = 0;

    for (int i = 0; i < n; i++) {
        struct sbx_egress_summary s;

        if (sbx_egress_summary(e, dirs[i], &s) < 0) {
            return -1;
        }
        open += (long)s.open;
    }
    return open;
}

/* Waits (polling every 2 ms, at most WAIT_DEADLINE) until the proxy has no connection
 * open and the origin none either. Returns the seconds it took; exits on the deadline. */
static double wait_idle(struct sbx_egress *e, char **dirs, int n)
{
    double t0 = now();
    struct timespec step = {0, 2 * 1000 * 1000};

    for (;;) {
        long open = proxy_open(e, dirs, n);
        int origin = atomic_load(&origin_active);

        if (open == 0 && origin == 0) {
            return now() - t0;
        }
        if (now() - t0 > WAIT_DEADLINE) {
            fprintf(stderr,
                    "egress_bench: the proxy is not idle after %.0f s (%ld connections "
                    "open, %d at the origin)\n",
                    WAIT_DEADLINE, open, origin);
            exit(1);
        }
        nanosleep(&step, NULL);
    }
}

/* Waits until every flood has received STREAMING_BYTES more than at *from. */
static void wait_streaming(struct flood *fl, int n, const uint64_t *from)
{
    double t0 = now();
    struct timespec step = {0, 1000 * 1000};

    for (int i = 0; i < n; i++) {
        while (atomic_load(&fl[i].bytes) < from[i] + STREAMING_BYTES) {
            if (now() - t0 > WAIT_DEADLINE) {
                fprintf(stderr, "egress_bench: flood %d not streaming after %.0f s\n", i,
                        WAIT_DEADLINE);
                exit(1);
            }
            nanosleep(&step, NULL);
        }
    }
}

/* The floods: started with 'S' on ctl, stopped with 'T'; each stop is answered 'd' once
 * their streams and their origin's connections have all ended. */
static void floods_start(struct floods *fs)
{
    atomic_store(flood_stop, 0);
    for (int i = 0; i < fs->n; i++) {
        pthread_create(&fs->f[i].th, NULL, flood_main, &fs->f[i]);
    }
}

static void floods_stop(struct floods *fs)
{
    double t0 = now();
    struct timespec step = {0, 1000 * 1000};

    atomic_store(flood_stop, 1);
    for (int i = 0; i < fs->n; i++) {
        pthread_join(fs->f[i].th, NULL);
    }
    while (atomic_load(&origin_active) > 0 && now() - t0 < WAIT_DEADLINE) {
        nanosleep(&step, NULL);
    }
}

static void flood_process(struct floods *fs, int ctl)
{
    pthread_t th;
    char cmd;

    setsid(); /* a scheduler group of its own (autogroup), as a sandbox has a cgroup */
    pthread_create(&th, NULL, origin_main, NULL);
    while (read(ctl, &cmd, 1) == 1) {
        if (cmd == 'S') {
            floods_start(fs);
        }
        else if (cmd == 'T') {
            floods_stop(fs);
            if (write(ctl, "d", 1) != 1) {
                break;
            }
        }
    }
    _exit(0);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int egress_fair(struct sbx_config *cfg, int n, int connects, int rounds)
{
    struct sbx_egress *e;
    int *ports = xcalloc((size_t)n + 1, sizeof(int));
    pid_t *relays = xcalloc((size_t)n + 1, sizeof(*relays));
    char **dirs = xcalloc((size_t)n + 1, sizeof(*dirs));
    uint64_t *from = xcalloc((size_t)n, sizeof(*from));
    char *rule = xasprintf("bench.test:%d opaque", origin_port);
    const char *rules[] = {rule, NULL};
    char *flood_rule;
    const char *flood_rules[] = {NULL, NULL};
    int in_process = getenv("SBX_BENCH_FLOODS_IN_PROCESS") != NULL &&
                     strcmp(getenv("SBX_BENCH_FLOODS_IN_PROCESS"), "1") == 0;
    struct floods *fs = mmap(NULL, sizeof(struct floods), PROT_READ | PROT_WRITE,
                             MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    struct flood *fl;
    int flood_port = origin_port;
    int ctl[2] = {-1, -1};
    pid_t child = -1;

    sbx_error_t *err = NULL;
    /* per round: lone MiB/s, quiet p50 p95, loaded p50 p95, ratios p50 p95, flood MiB/s */
    double *v[8];
    double la[3];
    double la_max = 0.0;
    int allowed;
    int stalled_rounds = 0;
    cpu_set_t set;

    if (fs == MAP_FAILED || n > 64) {
        die("mmap");
    }
    memset(fs, 0, sizeof(*fs));
    fs->n = n;
    fl = fs->f;
    if (!in_process) {
        /* the floods' own origin, accepted on in their process */
        int fd = tcp_listen(&flood_port);

        flood_stop = &fs->stop;
        if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, ctl) < 0) {
            die("socketpair");
        }
        child = fork();
        if (child < 0) {
            die("fork");
        }
        if (child == 0) {
            close(ctl[0]);
            close(origin_fd);
            origin_fd = fd;
            origin_port = flood_port;
            atomic_store(&origin_active, 0);
            flood_process(fs, ctl[1]);
        }
        close(ctl[1]);
        close(fd);
    }
    flood_rule = xasprintf("bench.test:%d opaque", flood_port);
    flood_rules[0] = flood_rule;
    for (int k = 0; k < 8; k++) {
        v[k] = xcalloc((size_t)rounds, sizeof(double));
    }
    CPU_ZERO(&set);
    allowed = sched_getaffinity(0, sizeof(set), &set) == 0 ? CPU_COUNT(&set) : -1;
    cfg->egress.connection_rate = 0; /* see above */
    e = sbx_egress_start(cfg, &err);
    if (e == NULL) {
        fprintf(stderr, "egress_bench: %s\n", err->msg);
        return 1;
    }
    for (int i = 0; i <= n; i++) {
        char *sock;
        char *name = xasprintf("sb%d", i);

        dirs[i] = xasprintf("%s/fair-%d", bench_dir, i);
        sock = xasprintf("%s/%s", dirs[i], SBX_EGRESS_SOCKET);
        if (sbx_egress_add(e, dirs[i], name, name, name, i == n ? rules : flood_rules, &err) < 0) {
            fprintf(stderr, "egress_bench: %s\n", err->msg);
            return 1;
        }
        relays[i] = start_relay(sock, &ports[i]);
        free(sock);
        free(name);
    }
    loadavg(la);
    printf("egress fairness: 1 quiet sandbox and %d flooding (%lld MiB streams, their threads "
           "at nice %d, %s) on one proxy, %d connects per phase, %d rounds; egress.bandwidth %lld "
           "B/s; load average %.2f %.2f %.2f at the start; %d of %ld "
           "CPUs\n",
           n, (long long)(bulk_bytes >> 20), flood_nice,
           in_process ? "in this process" : "in a process of their own", connects, rounds,
           (long long)cfg->egress.bandwidth, la[0], la[1], la[2], allowed,
           sysconf(_SC_NPROCESSORS_ONLN));
    latency(ports[n], 20); /* warm up */
    for (int r = 0; r < rounds; r++) {
        double idle;
        double t0;
        double t1;
        double slowest = -1.0;
        uint64_t moved = 0;
        int stalled = 0;

        idle = wait_idle(e, dirs, n + 1);
        v[0][r] = bulk(ports[n]); /* a lone download: the shares must not slow it */
        idle += wait_idle(e, dirs, n + 1);
        latency_pct(ports[n], connects, &v[1][r], &v[2][r]);

        for (int i = 0; i < n; i++) {
            fl[i].port = ports[i];
            from[i] = atomic_load(&fl[i].bytes);
        }
        if (in_process) {
            floods_start(fs);
        }
        else if (write(ctl[0], "S", 1) != 1) {
            die("start the floods");
        }
        wait_streaming(fl, n, from);
        for (int i = 0; i < n; i++) {
            from[i] = atomic_load(&fl[i].bytes);
        }
        t0 = now();
        latency_pct(ports[n], connects, &v[3][r], &v[4][r]);
        t1 = now();
        for (int i = 0; i < n; i++) {
            uint64_t b = atomic_load(&fl[i].bytes) - from[i];
            double mibs = (double)b / (1024.0 * 1024.0) / (t1 - t0);

            moved += b;
            stalled += b == 0;
            slowest = slowest < 0 || mibs < slowest ? mibs : slowest;
        }
        if (in_process) {
            floods_stop(fs);
        }
        else {
            char x;

            atomic_store(flood_stop, 1); /* they stop reading at once */
            if (write(ctl[0], "T", 1) != 1 || read(ctl[0], &x, 1) != 1) {
                die("stop the floods");
            }
        }
        stalled_rounds += stalled > 0;

        v[5][r] = v[3][r] / v[1][r];
        v[6][r] = v[4][r] / v[2][r];
        v[7][r] = (double)moved / (1024.0 * 1024.0) / (t1 - t0);
        loadavg(la);
        la_max = la[0] > la_max ? la[0] : la_max;
        printf("  round %d: lone download %.0f MiB/s; quiet p50 %.0f p95 %.0f us; loaded p50 "
               "%.0f p95 %.0f us (ratio %.2f, %.2f); floods %.0f MiB/s together over the "
               "%.2f s loaded phase (slowest %.0f%s); idle waits %.3f s; load "
               "%.2f %.2f %.2f\n",
               r + 1, v[0][r], v[1][r], v[2][r], v[3][r], v[4][r], v[5][r], v[6][r], v[7][r],
               t1 - t0, slowest, stalled ? ", SOME FLOOD STALLED" : "", idle, la[0], la[1], la[2]);
    }
    {
        double lone = median(v[0], rounds);
        double q50 = median(v[1], rounds);
        double q95 = median(v[2], rounds);
        double l50 = median(v[3], rounds);
        double l95 = median(v[4], rounds);
        double r50 = median(v[5], rounds);
        double r95 = median(v[6], rounds);
        double fmibs = median(v[7], rounds);

        printf("  median of %d rounds: lone download %.0f MiB/s; quiet p50 %.0f p95 %.0f us; "
               "loaded p50 %.0f p95 %.0f us; floods %.0f MiB/s\n",
               rounds, lone, q50, q95, l50, l95, fmibs);
        printf("  ratio p50 %.2f (median of the rounds' ratios; target <= 1.50: %s), p95 %.2f; "
               "load average (1 min) at most %.2f after a round%s\n",
               r50, r50 <= 1.5 ? "met" : "MISSED", r95, la_max,
               stalled_rounds ? "; SOME ROUNDS HAD A STALLED FLOOD" : "");
    }
    for (int i = 0; i <= n; i++) {
        kill(relays[i], SIGTERM);
        waitpid(relays[i], NULL, 0);
        free(dirs[i]);
    }
    if (child > 0) {
        close(ctl[0]);
        waitpid(child, NULL, 0);
    }
    sbx_egress_stop(e);
    for (int k = 0; k < 8; k++) {
        free(v[k]);
    }
    free(dirs);
    free(ports);
    free(relays);
    munmap(fs, sizeof(*fs));
    free(from);
    free(rule);
    free(flood_rule);
    sbx_config_destroy(cfg);
    return 0;
}
