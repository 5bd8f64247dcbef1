/* rmetrics.c - the runner's own metrics (rmetrics.h) as Prometheus text. */
#include "runner/rmetrics.h"

#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/time.h>
#include <unistd.h>

#include "sbx_build.h"
#include "util/xalloc.h"

#define RM_RUN_BUCKETS 12
#define RM_START_BUCKETS 11

struct rm_hist {
    uint64_t bucket[RM_RUN_BUCKETS];
    uint64_t count;
    uint64_t sum_ms; /* whole milliseconds: the sum prints without binary noise */
};

struct runner_metrics {
    pthread_mutex_t mu;
    struct rm_hist run[SBX_POOL_COUNT];
    struct rm_hist start[SBX_POOL_COUNT];
    uint64_t egress_allowed[SBX_POOL_COUNT];
    uint64_t egress_denied[SBX_POOL_COUNT];
    uint64_t refused[RM_REFUSED_COUNT];
    int64_t started_at_ms; /* Unix time */
};

static const double run_bounds[RM_RUN_BUCKETS] = {0.1, 0.5, 1,   5,    10,   30,
                                                  60,  300, 600, 1800, 3600, 7200};
static const double start_bounds[RM_START_BUCKETS] = {0.05, 0.1, 0.25, 0.5, 1,  2.5,
                                                      5,    10,  30,   60,  120};
static const char *const refusal_names[RM_REFUSED_COUNT] = {
    "invalid", "unauthorized", "forbidden", "conflict", "too_large", "policy", "error"};

const char *rm_fmt(char *buf, size_t len, double v)
{
    if (v == floor(v) && fabs(v) < 1e15) {
        snprintf(buf, len, "%.0f", v); /* whole numbers in full, not 7.2e+03 */
        return buf;
    }
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(buf, len, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) {
            break;
        }
    }
    return buf;
}

struct runner_metrics *rm_new(void)
{
    struct runner_metrics *m = xcalloc(1, sizeof(*m));
    struct timeval tv;

    pthread_mutex_init(&m->mu, NULL);
    gettimeofday(&tv, NULL);
    m->started_at_ms = (int64_t)tv.tv_sec * 1000 + tv.tv_usec / 1000;
    return m;
}

void rm_free(struct runner_metrics *m)
{
    if (m == NULL) {
        return;
    }
    pthread_mutex_destroy(&m->mu);
    free(m);
}

static void observe(struct runner_metrics *m, struct rm_hist *h, const double *bounds, int n,
                    int64_t ms)
{
    if (ms < 0) {
        ms = 0;
    }
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < n; i++) {
        if ((double)ms <= bounds[i] * 1000.0) {
            h->bucket[i]++;
        }
    }
    h->count++;
    h->sum_ms += (uint64_t)ms;
    pthread_mutex_unlock(&m->mu);
}

void rm_job_run(struct runner_metrics *m, enum sbx_pool pool, int64_t ms)
{
    if ((unsigned)pool < SBX_POOL_COUNT) {
        observe(m, &m->run[pool], run_bounds, RM_RUN_BUCKETS, ms);
    }
}

void rm_sandbox_start(struct runner_metrics *m, enum sbx_pool pool, int64_t ms)
{
    if ((unsigned)pool < SBX_POOL_COUNT) {
        observe(m, &m->start[pool], start_bounds, RM_START_BUCKETS, ms);
    }
}

void rm_egress(struct runner_metrics *m, enum sbx_pool pool, int64_t allowed, int64_t denied)
{
    if ((unsigned)pool >= SBX_POOL_COUNT) {
        return;
    }
    pthread_mutex_lock(&m->mu);
    m->egress_allowed[pool] += allowed > 0 ? (uint64_t)allowed : 0;
    m->egress_denied[pool] += denied > 0 ? (uint64_t)denied : 0;
    pthread_mutex_unlock(&m->mu);
}

void rm_refused(struct runner_metrics *m, enum rm_refusal why)
{
    pthread_mutex_lock(&m->mu);
    m->refused[why]++;
    pthread_mutex_unlock(&m->mu);
}

enum rm_refusal rm_refusal_of(int code)
{
    switch (code) {
    case 400:
        return RM_REFUSED_INVALID;
    case 401:
        return RM_REFUSED_UNAUTHORIZED;
    case 403:
        return RM_REFUSED_FORBIDDEN;
    case 404:
    case 409:
        return RM_REFUSED_CONFLICT;
    case 413:
        return RM_REFUSED_TOO_LARGE;
    case 422:
        return RM_REFUSED_POLICY;
    default:
        return RM_REFUSED_ERROR;
    }
}

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void hist(FILE *f, const char *name, const char *pool, const struct rm_hist *h,
                 const double *bounds, int n)
{
    char b[32];

    for (int i = 0; i < n; i++) {
        fprintf(f, "%s_bucket{pool=\"%s\",le=\"%s\"} %llu\n", name, pool,
                rm_fmt(b, sizeof(b), bounds[i]), (unsigned long long)h->bucket[i]);
    }
    fprintf(f, "%s_bucket{pool=\"%s\",le=\"+Inf\"} %llu\n", name, pool,
            (unsigned long long)h->count);
    fprintf(f, "%s_sum{pool=\"%s\"} %llu.%03llu\n", name, pool,
            (unsigned long long)(h->sum_ms / 1000), (unsigned long long)(h->sum_ms % 1000));
    fprintf(f, "%s_count{pool=\"%s\"} %llu\n", name, pool, (unsigned long long)h->count);
}

static long open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *e;
    long n = 0;

    if (d == NULL) {
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        n += e->d_name[0] != '.';
    }
    closedir(d);
    return n - 1; /* the directory's own fd */
}

static long long resident_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "re");
    long long size = 0, rss = -1;

    if (f == NULL) {
        return -1;
    }
    if (fscanf(f, "%lld %lld", &size, &rss) != 2) {
        rss = -1;
    }
    fclose(f);
    return rss < 0 ? -1 : rss * sysconf(_SC_PAGESIZE);
}

/* ms as "S.mmm": exact, without binary noise */
static void put_ms(FILE *f, int64_t ms)
{
    fprintf(f, "%lld.%03lld\n", (long long)(ms / 1000), (long long)(ms % 1000));
}

static void process_metrics(FILE *f, int64_t started_at_ms)
{
    struct rusage ru;
    struct rlimit rl;
    long fds = open_fds();
    long long rss = resident_bytes();

    if (getrusage(RUSAGE_SELF, &ru) == 0) {
        int64_t cpu_ms = ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000 +
                         (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1000;

        family(f, "process_cpu_seconds_total", "counter", "User and system CPU time spent.");
        fprintf(f, "process_cpu_seconds_total ");
        put_ms(f, cpu_ms);
    }
    if (rss >= 0) {
        family(f, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.");
        fprintf(f, "process_resident_memory_bytes %lld\n", rss);
    }
    if (fds >= 0) {
        family(f, "process_open_fds", "gauge", "Number of open file descriptors.");
        fprintf(f, "process_open_fds %ld\n", fds);
    }
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY) {
        family(f, "process_max_fds", "gauge", "Maximum number of open file descriptors.");
        fprintf(f, "process_max_fds %llu\n", (unsigned long long)rl.rlim_cur);
    }
    family(f, "process_start_time_seconds", "gauge", "Start time of the process (Unix seconds).");
    fprintf(f, "process_start_time_seconds ");
    put_ms(f, started_at_ms);
}

void rm_write(struct runner_metrics *m, FILE *f, const int served[SBX_POOL_COUNT])
{
    struct runner_metrics c;

    pthread_mutex_lock(&m->mu);
    memcpy(&c, m, sizeof(c));
    pthread_mutex_unlock(&m->mu);
    family(f, "sbx_job_run_seconds", "histogram",
           "Time a job's command ran in its sandbox (ready to end), by pool.");
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        if (served[p]) {
            hist(f, "sbx_job_run_seconds", sbx_pool_name((enum sbx_pool)p), &c.run[p], run_bounds,
                 RM_RUN_BUCKETS);
        }
    }
    family(f, "sbx_sandbox_start_seconds", "histogram",
           "Time from slot grant to a ready sandbox, for jobs that started one, by pool.");
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        if (served[p]) {
            hist(f, "sbx_sandbox_start_seconds", sbx_pool_name((enum sbx_pool)p), &c.start[p],
                 start_bounds, RM_START_BUCKETS);
        }
    }
    family(f, "sbx_egress_connections_total", "counter",
           "Egress connections of ended jobs decided by the proxy, by pool and decision.");
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        if (served[p]) {
            fprintf(f, "sbx_egress_connections_total{pool=\"%s\",decision=\"allowed\"} %llu\n",
                    sbx_pool_name((enum sbx_pool)p), (unsigned long long)c.egress_allowed[p]);
            fprintf(f, "sbx_egress_connections_total{pool=\"%s\",decision=\"denied\"} %llu\n",
                    sbx_pool_name((enum sbx_pool)p), (unsigned long long)c.egress_denied[p]);
        }
    }
    family(f, "sbx_jobs_refused_total", "counter",
           "Job submissions refused, by reason (401 counts every unauthenticated request).");
    for (int i = 0; i < RM_REFUSED_COUNT; i++) {
        fprintf(f, "sbx_jobs_refused_total{reason=\"%s\"} %llu\n", refusal_names[i],
                (unsigned long long)c.refused[i]);
    }
    family(f, "sbx_build_info", "gauge", "Always 1; the labels name the build.");
    fprintf(f, "sbx_build_info{version=\"%s\"} 1\n", SBX_VERSION);
    process_metrics(f, c.started_at_ms);
}
