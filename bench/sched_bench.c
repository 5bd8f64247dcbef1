/* sched_bench.c - one scheduling decision with 10,000 jobs queued, and store
 * insert throughput. Prints medians and ratios: against the 100 us target and
 * against a peer measured in the same run (a naive scan of every queued job
 * for the decision; relaxed fsync and one big transaction for the store).
 *
 *   build/bench/sched_bench [queued=10000] [samples=20000] [store_jobs=300]
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "config/config.h"
#include "sched/sched.h"
#include "store/store_internal.h"
#include "util/xalloc.h"

#define G (1LL << 30)
#define TARGET_US 100.0

static int64_t fake_now = 1793491200000LL;

static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static double now_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e9 + (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;

    return x < y ? -1 : x > y;
}

static double median(double *v, size_t n)
{
    qsort(v, n, sizeof(*v), cmp_double);
    return v[n / 2];
}

static double percentile(double *v, size_t n, double p)
{
    /* v is sorted by median() */
    return v[(size_t)((double)(n - 1) * p)];
}

static void submit(struct sbx_sched *s, int i)
{
    char id[32];
    struct sbx_sched_job j = {id,
                              NULL,
                              i % 2 ? SBX_POOL_CI : SBX_POOL_AGENT,
                              i % 10 == 0 ? SBX_CLASS_HEAVY : SBX_CLASS_LIGHT,
                              1.0,
                              2 * G,
                              0};
    sbx_error_t *err = NULL;

    snprintf(id, sizeof(id), "job-%d", i);
    if (sbx_sched_submit(s, &j, &err) < 0) {
        fprintf(stderr, "submit: %s\n", err->msg);
        exit(1);
    }
}

/* ---- the peer: every queued job in one array, scanned for each decision ---- */

struct naive_job {
    int pool, heavy, live;
    double cpus;
    int64_t mem, seq;
};

struct naive {
    struct naive_job *jobs;
    size_t n;
    double cpus_used[2], cpus[2];
    int64_t mem_used[2], mem[2];
    int running[2], max[2], heavy[2];
};

static struct naive_job *naive_pick(struct naive *nv)
{
    struct naive_job *best = NULL;

    for (size_t i = 0; i < nv->n; i++) {
        struct naive_job *j = &nv->jobs[i];
        int p = j->pool;

        if (!j->live || nv->running[p] >= nv->max[p] || nv->cpus_used[p] + j->cpus > nv->cpus[p] ||
            nv->mem_used[p] + j->mem > nv->mem[p] || (j->heavy && nv->heavy[p])) {
            continue;
        }
        if (best == NULL || j->seq < best->seq) {
            best = j;
        }
    }
    return best;
}

static void bench_sched(int queued, int samples)
{
    struct sbx_config *cfg = sbx_config_defaults();
    struct sbx_box_capacity cap = {16, 64 * G};
    struct sbx_sched_opts o = {cfg, &cap, fake_clock, NULL};
    struct sbx_sched_grant g;
    sbx_error_t *err = NULL;
    struct sbx_sched *s = sbx_sched_create(&o, &err);
    double *t = xcalloc((size_t)samples, sizeof(double));
    double *tb = xcalloc((size_t)samples, sizeof(double));
    double *tp = xcalloc((size_t)samples, sizeof(double));
    char(*running)[SBX_SCHED_ID_MAX] = xcalloc(6, SBX_SCHED_ID_MAX);
    int next = 0, n_running = 0, peer_samples = samples < 2000 ? samples : 2000;
    struct naive nv;
    double med, medb, medp, t0;
    int r;

    if (s == NULL) {
        fprintf(stderr, "sched: %s\n", err->msg);
        exit(1);
    }
    /* fill the slots, then queue `queued` more */
    for (; next < 6; next++) {
        submit(s, next);
    }
    while (sbx_sched_next_grant(s, &g)) {
        memcpy(running[n_running++], g.id, SBX_SCHED_ID_MAX);
    }
    for (int i = 0; i < queued; i++) {
        submit(s, next++);
    }
    /* a decision that grants: free one slot, then time next_grant */
    for (int i = 0; i < samples; i++) {
        int k = i % n_running;

        if (sbx_sched_release(s, running[k], SBX_RESULT_OK, &err) < 0) {
            fprintf(stderr, "release: %s\n", err->msg);
            exit(1);
        }
        t0 = now_ns();
        r = sbx_sched_next_grant(s, &g);
        t[i] = now_ns() - t0;
        if (r != 1) {
            fprintf(stderr, "no grant with a free slot\n");
            exit(1);
        }
        memcpy(running[k], g.id, SBX_SCHED_ID_MAX);
        submit(s, next++); /* keep `queued` jobs waiting */
    }
    /* a decision that finds nothing to start (every slot busy) */
    for (int i = 0; i < samples; i++) {
        t0 = now_ns();
        r = sbx_sched_next_grant(s, &g);
        tb[i] = now_ns() - t0;
        if (r != 0) {
            fprintf(stderr, "unexpected grant\n");
            exit(1);
        }
    }
    /* the peer: the same decision by scanning all queued jobs */
    memset(&nv, 0, sizeof(nv));
    nv.n = (size_t)queued;
    nv.jobs = xcalloc(nv.n, sizeof(*nv.jobs));
    for (int p = 0; p < 2; p++) {
        nv.cpus[p] = 8;
        nv.mem[p] = 32 * G;
        nv.max[p] = 3;
        nv.running[p] = 2;
        nv.cpus_used[p] = 2;
        nv.mem_used[p] = 4 * G;
    }
    for (size_t i = 0; i < nv.n; i++) {
        nv.jobs[i] = (struct naive_job){(int)(i % 2), i % 10 == 0, 1, 1.0, 2 * G, (int64_t)i};
    }
    for (int i = 0; i < peer_samples; i++) {
        struct naive_job *j;

        t0 = now_ns();
        j = naive_pick(&nv);
        tp[i] = now_ns() - t0;
        j->live = 0; /* granted and at once released, keeping the slots as they were */
        nv.jobs[i % nv.n].live = 1;
    }
    med = median(t, (size_t)samples) / 1000.0;
    medb = median(tb, (size_t)samples) / 1000.0;
    medp = median(tp, (size_t)peer_samples) / 1000.0;
    printf("sched: one decision with %d jobs queued (both pools, 6 slots busy), %d samples\n",
           queued, samples);
    printf("  grant:       median %.3f us  p99 %.3f us  -> %.5f of the %.0f us target "
           "(%.0fx under)\n",
           med, percentile(t, (size_t)samples, 0.99) / 1000.0, med / TARGET_US, TARGET_US,
           TARGET_US / med);
    printf("  no grant:    median %.3f us  p99 %.3f us  -> %.5f of the target\n", medb,
           percentile(tb, (size_t)samples, 0.99) / 1000.0, medb / TARGET_US);
    printf("  peer (scan of every queued job, %d samples): median %.3f us -> the scheduler is "
           "%.0fx faster\n",
           peer_samples, medp, medp / med);
    free(t);
    free(tb);
    free(tp);
    free(running);
    free(nv.jobs);
    sbx_sched_destroy(s);
    sbx_config_destroy(cfg);
}

static double store_run(const char *path, int n, int mode)
{
    sbx_error_t *err = NULL;
    struct sbx_store *st = sbx_store_open(path, &err);
    struct sbx_job_rec j;
    double t0, dt;

    if (st == NULL) {
        fprintf(stderr, "store: %s\n", err->msg);
        exit(1);
    }
    if (mode == 1) {
        sbx_store_exec(st, "PRAGMA synchronous = NORMAL", NULL);
    }
    memset(&j, 0, sizeof(j));
    j.pool = "ci";
    j.cls = "light";
    j.argv = json_pack("[s, s, s]", "pnpm", "run", "lint");
    j.limits = (struct sbx_limits){2.0, 8 * G, 40 * G, 4096, 3600, 28800};
    t0 = now_ns();
    if (mode == 2) {
        sbx_store_exec(st, "BEGIN", NULL);
    }
    for (int i = 0; i < n; i++) {
        char id[32];

        snprintf(id, sizeof(id), "m%d-%d", mode, i);
        j.id = id;
        if (sbx_store_job_insert(st, &j, &err) < 0) {
            fprintf(stderr, "insert: %s\n", err->msg);
            exit(1);
        }
    }
    if (mode == 2) {
        sbx_store_exec(st, "COMMIT", NULL);
    }
    dt = (now_ns() - t0) / 1e9;
    json_decref(j.argv);
    sbx_store_close(st);
    return (double)n / dt;
}

static void bench_store(int n)
{
    char dir[] = "/tmp/sbx-bench-XXXXXX";
    char path[64];
    double full, normal, batch;

    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        exit(1);
    }
    snprintf(path, sizeof(path), "%s/state.db", dir);
    full = store_run(path, n, 0);
    normal = store_run(path, n, 1);
    batch = store_run(path, n * 10, 2);
    printf("store: job insert throughput in %s (WAL)\n", dir);
    printf("  one commit per job, synchronous=FULL (what sbx does): %.0f jobs/s\n", full);
    printf("  peer: one commit per job, synchronous=NORMAL:         %.0f jobs/s (FULL is %.2fx)\n",
           normal, full / normal);
    printf("  peer: %d jobs in one transaction:                    %.0f jobs/s (FULL is %.3fx)\n",
           n * 10, batch, full / batch);
    unlink(path);
    snprintf(path, sizeof(path), "%s/state.db-wal", dir);
    unlink(path);
    snprintf(path, sizeof(path), "%s/state.db-shm", dir);
    unlink(path);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    int queued = argc > 1 ? atoi(argv[1]) : 10000;
    int samples = argc > 2 ? atoi(argv[2]) : 20000;
    int store_jobs = argc > 3 ? atoi(argv[3]) : 300;

    if (queued < 1 || samples < 1 || store_jobs < 1) {
        fprintf(stderr, "usage: sched_bench [queued] [samples] [store_jobs]\n");
        return 2;
    }
    bench_sched(queued, samples);
    bench_store(store_jobs);
    return 0;
}
