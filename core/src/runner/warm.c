/* warm.c - the runner's warm pool (docs/runner.md, "Warm pool"): per pool,
 * pools.NAME.warm sandboxes created and started with no task, each claimed
 * once by a job's task (sbx_task_claim) and destroyed when that task ends,
 * never returned. Replaced after pools.NAME.warm_max_age.
 *
 * Capacity: a warm sandbox counts as one of the pool's sandboxes and its
 * default memory against the pool's memory, beside the scheduler's running
 * jobs. A waiting job always wins: the pool is refilled only while no job of
 * it is queued and a slot and the memory are free, and a job granted with no
 * warm sandbox to claim first evicts warm sandboxes until the pool fits again.
 *
 * Threads: the loop decides (tick, grants); a filler thread per start and an
 * ender thread per removal do the slow work and count in r->workers. Every
 * field of struct runner_warm is under r->mu. */
#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin/instance.h"
#include "runner/state.h"
#include "runner/health.h"
#include "runner/recover.h"
#include "runner/rmetrics.h"
#include "sandbox/backlog.h"
#include "runner/warm.h"
#include "sandbox/owner.h"
#include "sandbox/statedir.h"
#include "util/log.h"
#include "util/xalloc.h"

#define WARM_DEFAULT_MAX_AGE 600 /* s */
#define WARM_RETRY_MS 5000       /* after a failed start */
#define WARM_HOLD_MS 1000        /* the longest a claim holds back a refill (warm.h) */

struct warm_box {
    struct sbx_task *t;
    int64_t ready_ms;
    struct warm_box *next;
};

struct warm_pool {
    int want;
    int64_t max_age_ms;
    struct warm_box *ready; /* oldest first */
    int n_ready;
    int n_filling;
    int64_t retry_at;   /* ms */
    int claiming;       /* taken, before their first output (runner_warm_claim_done) */
    int64_t hold_until; /* ms: no refill before, while claiming */
    uint64_t claims, misses, refills, expired, evicted, failed;
    int64_t refill_last_ms;
    double refill_sum_s;
};

struct runner_warm {
    struct warm_pool p[SBX_POOL_COUNT];
    int64_t sweep_at; /* ms: the next orphan sweep */
    int sweeping;
    uint64_t sweeps; /* orphan sweeps done since start (queue_json: orphan_sweeps) */
    struct sbx_open_instance *sweep_pi; /* the sweeper's provider, kept (sweeper_main) */
};

/* A sandbox whose create was in flight when a runner was killed can appear
 * after the next runner's recovery listed the engine; with a warm pool a
 * create is often in flight (and the next runner may have no warm pool). So
 * the orphan rule (docs/architecture.md, Labels) is applied again every
 * runner.orphan_sweep (default 20 s; WARM_SWEEP_MS without a configuration). */
#define WARM_SWEEP_MS 20000

struct warm_job {
    struct sbx_runner *r;
    enum sbx_pool pool;
    struct sbx_task *t; /* ender: the task to end */
};

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int spawn(struct sbx_runner *r, void *(*fn)(void *), struct warm_job *w)
{
    pthread_t th;
    pthread_attr_t a;
    int rc;

    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    r->workers++; /* under r->mu: the runner stops only when they are done */
    rc = pthread_create(&th, &a, fn, w);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        r->workers--;
        sbx_error_log("runner: warm pool: pthread_create: %s", strerror(rc));
        free(w);
        return -1;
    }
    return 0;
}

static void *ender_main(void *arg)
{
    struct warm_job *w = arg;
    struct sbx_runner *r = w->r;

    sbx_task_end(w->t, "warm sandbox removed", NULL, NULL);
    pthread_mutex_lock(&r->mu);
    r->workers--;
    pthread_mutex_unlock(&r->mu);
    free(w);
    return NULL;
}

/* Ends t in the background (under r->mu); inline when no thread can start. */
static void end_async(struct sbx_runner *r, struct sbx_task *t)
{
    struct warm_job *w = xcalloc(1, sizeof(*w));

    w->r = r;
    w->t = t;
    if (spawn(r, ender_main, w) < 0) {
        pthread_mutex_unlock(&r->mu);
        sbx_task_end(t, "warm sandbox removed", NULL, NULL);
        pthread_mutex_lock(&r->mu);
    }
}

void runner_warm_end(struct sbx_runner *r, struct sbx_task *t)
{
    pthread_mutex_lock(&r->mu);
    end_async(r, t);
    pthread_mutex_unlock(&r->mu);
}

/* (added) One command in a new warm sandbox before it counts as ready: the
 * exec agent's control connection (waited for at a sandbox's first exec) is
 * made now, not at the claim, and the shell and C library of the sandbox's
 * own filesystem (a copy-on-write snapshot per sandbox with btrfs) are read
 * once before a claimed command needs them. A failure only means a slower
 * first command. */
static void prime(struct sbx_task *t)
{
    static const char *const argv[] = {"/bin/sh", "-c", ":", NULL};
    sbx_error_t *err = NULL;
    int status = 0;

    if (sbx_task_exec(t, argv, NULL, 0, NULL, NULL, NULL, &status, &err) < 0) {
        sbx_debug("runner: warm sandbox %s: priming: %s", sbx_task_id(t), sbx_error_msg(err));
        sbx_error_free(&err);
    }
}

static void *filler_main(void *arg)
{
    struct warm_job *w = arg;
    struct sbx_runner *r = w->r;
    struct warm_pool *p = &r->warm->p[w->pool];
    char id[SBX_SCHED_ID_MAX];
    char hex[16];
    struct sbx_task *t = NULL;
    sbx_error_t *err = NULL;
    int64_t t0 = mono_ms();
    int rc;

    sbx_task_id_new(hex, sizeof(hex)); /* t-<12 hex> */
    snprintf(id, sizeof(id), "w-%s", hex + 2);
    {
        struct sbx_task_opts o = {
            .task_id = id,
            .pool = sbx_pool_name(w->pool),
            .ephemeral = 1,
            .slot_class = "light",
            .no_reap = 1,
            .egress = r->egress,
            .warm = 1,
        };

        rc = sbx_task_start(r->cfg, r->plugin_dir, &o, &t, &err);
    }
    if (rc == 0) {
        prime(t);
    }
    pthread_mutex_lock(&r->mu);
    p->n_filling--;
    if (rc < 0) {
        p->failed++;
        p->retry_at = mono_ms() + WARM_RETRY_MS;
        sbx_warn("runner: warm pool %s: %s (retried in %d s)", sbx_pool_name(w->pool),
                 sbx_error_msg(err), WARM_RETRY_MS / 1000);
        sbx_error_free(&err);
    }
    else if (r->stopping || p->n_ready >= p->want) {
        end_async(r, t);
    }
    else {
        struct warm_box *b = xcalloc(1, sizeof(*b));
        struct warm_box **pp = &p->ready;

        b->t = t;
        b->ready_ms = mono_ms();
        while (*pp != NULL) {
            pp = &(*pp)->next;
        }
        *pp = b;
        p->n_ready++;
        p->refills++;
        p->refill_last_ms = b->ready_ms - t0;
        p->refill_sum_s += (double)(b->ready_ms - t0) / 1000.0;
        sbx_info("runner: warm pool %s: sandbox %s ready in %" PRId64 " ms (%d warm)",
                 sbx_pool_name(w->pool), id, p->refill_last_ms, p->n_ready);
    }
    r->workers--;
    pthread_mutex_unlock(&r->mu);
    free(w);
    return NULL;
}

static void *sweeper_main(void *arg)
{
    struct warm_job *w = arg;
    struct sbx_runner *r = w->r;
    sbx_error_t *err = NULL;

    /* one provider instance for every sweep (r->warm->sweep_pi: only this
     * thread uses it, one sweep at a time) */
    if (r->warm->sweep_pi == NULL) {
        r->warm->sweep_pi =
            sbx_instance_open(r->cfg, r->plugin_dir, r->cfg->provider, SBX_PLUGIN_PROVIDER, &err);
    }
    if (r->warm->sweep_pi != NULL) {
        runner_destroy_orphans(r, r->warm->sweep_pi, "sbx.owner", NULL, &err);
    }
    if (err != NULL) {
        sbx_debug("runner: orphan sweep: %s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    pthread_mutex_lock(&r->mu);
    r->warm->sweeping = 0;
    r->warm->sweeps++;
    r->workers--;
    pthread_mutex_unlock(&r->mu);
    free(w);
    return NULL;
}

int runner_warm_init(struct sbx_runner *r, sbx_error_t **err)
{
    struct sbx_sched_snapshot *snap = sbx_sched_snapshot(r->sched);
    int rc = 0;

    r->warm = xcalloc(1, sizeof(*r->warm));
    if (r->one_shot) { /* (added, issue 31) its task's start has just reaped */
        r->warm->sweep_at =
            mono_ms() +
            (r->cfg->runner.orphan_sweep > 0 ? r->cfg->runner.orphan_sweep * 1000 : WARM_SWEEP_MS);
    }
    for (size_t i = 0; i < r->cfg->n_pools && rc == 0; i++) {
        const struct sbx_pool_cfg *pc = &r->cfg->pools[i];
        int pool = sbx_pool_parse(pc->name);
        struct warm_pool *p;

        if (pool < 0 || pc->warm == 0) {
            continue;
        }
        p = &r->warm->p[pool];
        if (!snap->pools[pool].served) {
            sbx_warn("%s:%d: 'pools.%s.warm': this box does not serve pool %s (box.pools); no "
                     "warm sandboxes",
                     r->cfg->path ? r->cfg->path : "config", pc->warm_line, pc->name, pc->name);
            continue;
        }
        if (pc->warm > snap->pools[pool].max_sandboxes) {
            rc = sbx_error_set(err, SBX_E_CONFIG,
                               "%s:%d: 'pools.%s.warm' = %d is more than the pool's %d "
                               "sandboxes",
                               r->cfg->path ? r->cfg->path : "config", pc->warm_line, pc->name,
                               pc->warm, snap->pools[pool].max_sandboxes);
            break;
        }
        if (r->pools.memory[pool] > 0 &&
            (int64_t)pc->warm * r->pools.memory[pool] > snap->pools[pool].memory) {
            rc = sbx_error_set(err, SBX_E_CONFIG,
                               "%s:%d: 'pools.%s.warm' = %d sandboxes of %" PRId64
                               " bytes do not fit the pool's memory (%" PRId64 " bytes)",
                               r->cfg->path ? r->cfg->path : "config", pc->warm_line, pc->name,
                               pc->warm, r->pools.memory[pool], snap->pools[pool].memory);
            break;
        }
        if (pc->warm * r->pools.cpus[pool] > snap->pools[pool].cpus + 1e-9) {
            rc = sbx_error_set(err, SBX_E_CONFIG,
                               "%s:%d: 'pools.%s.warm' = %d sandboxes of %.3g CPUs do not fit "
                               "the pool's %.3g CPUs (lower limits.cpus or the warm count)",
                               r->cfg->path ? r->cfg->path : "config", pc->warm_line, pc->name,
                               pc->warm, r->pools.cpus[pool], snap->pools[pool].cpus);
            break;
        }
        p->want = pc->warm;
        p->max_age_ms = (pc->warm_max_age > 0 ? pc->warm_max_age : WARM_DEFAULT_MAX_AGE) * 1000;
    }
    sbx_sched_snapshot_free(snap);
    return rc;
}

void runner_warm_free(struct sbx_runner *r)
{
    if (r->warm == NULL) {
        return;
    }
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        while (r->warm->p[i].ready != NULL) { /* only when the loop never ran */
            struct warm_box *b = r->warm->p[i].ready;

            r->warm->p[i].ready = b->next;
            sbx_task_end(b->t, "runner stopped", NULL, NULL);
            free(b);
        }
    }
    sbx_instance_close(r->warm->sweep_pi);
    free(r->warm);
    r->warm = NULL;
}

/* Removes the oldest ready box of p (under r->mu) in the background. */
static void drop_oldest(struct sbx_runner *r, struct warm_pool *p)
{
    struct warm_box *b = p->ready;

    p->ready = b->next;
    p->n_ready--;
    end_async(r, b->t);
    free(b);
}

/* n warm sandboxes of mem bytes and cpus CPUs fit beside the pool's running
 * jobs: a slot, the memory and the CPUs each, as the scheduler counts them */
static int fits(const struct sbx_sched_pool_snap *s, int n, int64_t mem, double cpus)
{
    return s->running + n <= s->max_sandboxes && s->memory_used + (int64_t)n * mem <= s->memory &&
           s->cpus_used + n * cpus <= s->cpus + 1e-9;
}

void runner_warm_tick(struct sbx_runner *r)
{
    struct sbx_sched_snapshot *snap;
    int64_t now = mono_ms();

    if (r->warm == NULL) {
        return;
    }
    snap = sbx_sched_snapshot(r->sched);
    pthread_mutex_lock(&r->mu);
    if (!r->stopping && !r->warm->sweeping && now >= r->warm->sweep_at) {
        struct warm_job *w = xcalloc(1, sizeof(*w));

        w->r = r;
        r->warm->sweep_at =
            now +
            (r->cfg->runner.orphan_sweep > 0 ? r->cfg->runner.orphan_sweep * 1000 : WARM_SWEEP_MS);
        r->warm->sweeping = 1;
        if (spawn(r, sweeper_main, w) < 0) {
            r->warm->sweeping = 0;
        }
    }
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        struct warm_pool *p = &r->warm->p[i];
        const struct sbx_sched_pool_snap *s = &snap->pools[i];
        int64_t mem = r->pools.memory[i];
        double cpus = r->pools.cpus[i];

        while (p->ready != NULL && (r->stopping || now - p->ready->ready_ms >= p->max_age_ms)) {
            if (!r->stopping) {
                p->expired++;
            }
            drop_oldest(r, p);
        }
        /* a waiting job always wins: no refill while one waits, and warm
         * sandboxes beyond what the pool holds beside its running jobs go */
        while (p->ready != NULL && !fits(s, p->n_ready + p->n_filling, mem, cpus)) {
            p->evicted++;
            drop_oldest(r, p);
        }
        /* nor while the engine has more than SBX_REMOVAL_BACKLOG_MAX
         * sandboxes to remove (a new one would wait behind them) */
        if (r->stopping || p->want == 0 || s->n_queued > 0 || snap->draining ||
            runner_health_backlog(r->health) > SBX_REMOVAL_BACKLOG_MAX ||
            p->n_ready + p->n_filling >= p->want || p->n_filling > 0 || now < p->retry_at ||
            (p->claiming > 0 && now < p->hold_until) ||
            !fits(s, p->n_ready + p->n_filling + 1, mem, cpus)) {
            continue;
        }
        {
            struct warm_job *w = xcalloc(1, sizeof(*w));

            w->r = r;
            w->pool = (enum sbx_pool)i;
            p->n_filling++;
            if (spawn(r, filler_main, w) < 0) {
                p->n_filling--;
            }
        }
    }
    pthread_mutex_unlock(&r->mu);
    sbx_sched_snapshot_free(snap);
}

struct sbx_task *runner_warm_take(struct sbx_runner *r, enum sbx_pool pool)
{
    struct warm_pool *p;
    struct warm_box *b;
    struct sbx_task *t = NULL;
    int64_t now = mono_ms();

    if (r->warm == NULL) {
        return NULL;
    }
    p = &r->warm->p[pool];
    pthread_mutex_lock(&r->mu);
    while ((b = p->ready) != NULL) {
        p->ready = b->next;
        p->n_ready--;
        if (now - b->ready_ms < p->max_age_ms) {
            t = b->t;
            free(b);
            p->claiming++;
            p->hold_until = now + WARM_HOLD_MS;
            break;
        }
        p->expired++;
        end_async(r, b->t);
        free(b);
    }
    pthread_mutex_unlock(&r->mu);
    return t;
}

void runner_warm_claim_done(struct sbx_runner *r, enum sbx_pool pool)
{
    if (r->warm == NULL) {
        return;
    }
    pthread_mutex_lock(&r->mu);
    if (r->warm->p[pool].claiming > 0) {
        r->warm->p[pool].claiming--;
    }
    pthread_mutex_unlock(&r->mu);
}

void runner_warm_count(struct sbx_runner *r, enum sbx_pool pool, int claimed)
{
    if (r->warm == NULL || r->warm->p[pool].want == 0) {
        return;
    }
    pthread_mutex_lock(&r->mu);
    if (claimed) {
        r->warm->p[pool].claims++;
    }
    else {
        r->warm->p[pool].misses++;
    }
    pthread_mutex_unlock(&r->mu);
}

int runner_warm_idle(struct sbx_runner *r)
{
    if (r->warm == NULL) {
        return 1;
    }
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        if (r->warm->p[i].n_ready > 0 || r->warm->p[i].n_filling > 0) {
            return 0;
        }
    }
    return 1;
}

json_t *runner_warm_json(struct sbx_runner *r)
{
    json_t *o = json_object();

    if (r->warm == NULL) {
        return o;
    }
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        const struct warm_pool *p = &r->warm->p[i];

        json_object_set_new(
            o, sbx_pool_name((enum sbx_pool)i),
            json_pack("{s:i, s:i, s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:f}", "wanted", p->want,
                      "ready", p->n_ready, "starting", p->n_filling, "max_age",
                      (json_int_t)(p->max_age_ms / 1000), "claims", (json_int_t)p->claims, "misses",
                      (json_int_t)p->misses, "refills", (json_int_t)p->refills, "expired",
                      (json_int_t)p->expired, "evicted", (json_int_t)p->evicted, "refill_last_ms",
                      (json_int_t)p->refill_last_ms, "refill_seconds_sum", p->refill_sum_s));
    }
    pthread_mutex_unlock(&r->mu);
    return o;
}

uint64_t runner_warm_sweeps(struct sbx_runner *r)
{
    uint64_t n = 0;

    if (r->warm != NULL) {
        pthread_mutex_lock(&r->mu);
        n = r->warm->sweeps;
        pthread_mutex_unlock(&r->mu);
    }
    return n;
}

void runner_warm_metrics(struct sbx_runner *r, FILE *f)
{
    static const struct {
        const char *name, *type, *help;
    } m[] = {
        {"sbx_warm_sandboxes", "gauge", "Warm sandboxes ready to be claimed."},
        {"sbx_warm_wanted", "gauge", "Warm sandboxes configured (pools.NAME.warm)."},
        {"sbx_warm_claims_total", "counter", "Jobs that claimed a warm sandbox."},
        {"sbx_warm_misses_total", "counter",
         "Jobs of a pool with a warm pool that started cold (empty pool or another shape)."},
        {"sbx_warm_refills_total", "counter", "Warm sandboxes started."},
        {"sbx_warm_expired_total", "counter", "Warm sandboxes replaced after warm_max_age."},
        {"sbx_warm_evicted_total", "counter", "Warm sandboxes removed for a waiting job."},
        {"sbx_warm_refill_seconds_total", "counter", "Time spent starting warm sandboxes."},
    };

    if (r->warm == NULL) {
        return;
    }
    pthread_mutex_lock(&r->mu);
    for (size_t k = 0; k < sizeof(m) / sizeof(m[0]); k++) {
        fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", m[k].name, m[k].help, m[k].name, m[k].type);
        for (int i = 0; i < SBX_POOL_COUNT; i++) {
            const struct warm_pool *p = &r->warm->p[i];
            double v[] = {p->n_ready,         p->want,
                          (double)p->claims,  (double)p->misses,
                          (double)p->refills, (double)p->expired,
                          (double)p->evicted, p->refill_sum_s};
            char buf[64];

            fprintf(f, "%s{pool=\"%s\"} %s\n", m[k].name, sbx_pool_name((enum sbx_pool)i),
                    rm_fmt(buf, sizeof(buf), v[k]));
        }
    }
    pthread_mutex_unlock(&r->mu);
}

void runner_warm_sweep(const char *state)
{
    char *tasks = xasprintf("%s/tasks", state);
    DIR *d = opendir(tasks);
    struct dirent *e;

    while (d != NULL && (e = readdir(d)) != NULL) {
        char *rec;
        json_t *o;
        const char *owner;

        if (strncmp(e->d_name, "w-", 2) != 0 || !sbx_id_valid(e->d_name, SBX_ID_TASK)) {
            continue;
        }
        rec = xasprintf("%s/%s/task.json", tasks, e->d_name);
        o = json_load_file(rec, 0, NULL);
        owner = json_string_value(json_object_get(o, "owner"));
        /* a record that does not parse is an unfinished start of a gone runner
         * too; one whose owner lives is left alone */
        if (owner == NULL || !sbx_owner_alive(owner)) {
            sbx_task_dir_remove(state, e->d_name);
        }
        json_decref(o);
        free(rec);
    }
    if (d != NULL) {
        closedir(d);
    }
    free(tasks);
}
