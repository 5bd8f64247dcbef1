/* sched.c - pools, slots, the FIFO queue rule, wait accounting and alerts.
 * The autoscaler and spend accounting are in autoscale.c, the exports in
 * metrics.c, the snapshot in snapshot.c, names and box measuring in box.c.
 * See sched.h for the model and docs/runner.md for the rules. */
#include "sched/sched_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/admit.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

/* ---- the id table (open hashing, power-of-two buckets) ---- */

static uint64_t hash_id(const char *s)
{
    uint64_t h = 1469598103934665603ULL;

    while (*s) {
        h ^= (unsigned char)*s++;
        h *= 1099511628211ULL;
    }
    return h;
}

static void table_grow(struct sbx_sched *s)
{
    size_t nb = s->n_buckets ? s->n_buckets * 2 : 64;
    struct sched_job **b = xcalloc(nb, sizeof(*b));

    for (size_t i = 0; i < s->n_buckets; i++) {
        struct sched_job *j = s->buckets[i];

        while (j != NULL) {
            struct sched_job *next = j->hnext;
            size_t k = hash_id(j->id) & (nb - 1);

            j->hnext = b[k];
            b[k] = j;
            j = next;
        }
    }
    free(s->buckets);
    s->buckets = b;
    s->n_buckets = nb;
}

struct sched_job *sbx_sched_find(const struct sbx_sched *s, const char *id)
{
    struct sched_job *j;

    if (s->n_buckets == 0) {
        return NULL;
    }
    for (j = s->buckets[hash_id(id) & (s->n_buckets - 1)]; j != NULL; j = j->hnext) {
        if (strcmp(j->id, id) == 0) {
            return j;
        }
    }
    return NULL;
}

static void table_insert(struct sbx_sched *s, struct sched_job *j)
{
    size_t k;

    if (s->n_jobs + 1 > s->n_buckets) {
        table_grow(s);
    }
    k = hash_id(j->id) & (s->n_buckets - 1);
    j->hnext = s->buckets[k];
    s->buckets[k] = j;
    s->n_jobs++;
}

static void table_remove(struct sbx_sched *s, struct sched_job *j)
{
    struct sched_job **pp = &s->buckets[hash_id(j->id) & (s->n_buckets - 1)];

    while (*pp != NULL) {
        if (*pp == j) {
            *pp = j->hnext;
            s->n_jobs--;
            return;
        }
        pp = &(*pp)->hnext;
    }
}

/* ---- FIFO lists ---- */

static void list_push(struct sched_pool *p, struct sched_job *j)
{
    struct sched_list *l = &p->queue[j->cls];

    j->next = NULL;
    j->prev = l->tail;
    if (l->tail != NULL) {
        l->tail->next = j;
    }
    else {
        l->head = j;
    }
    l->tail = j;
    l->n++;
    if (l->alert_next == NULL && !j->alerted) {
        l->alert_next = j;
    }
}

static void list_remove(struct sched_pool *p, struct sched_job *j)
{
    struct sched_list *l = &p->queue[j->cls];

    if (l->alert_next == j) {
        l->alert_next = j->next;
    }
    if (j->prev != NULL) {
        j->prev->next = j->next;
    }
    else {
        l->head = j->next;
    }
    if (j->next != NULL) {
        j->next->prev = j->prev;
    }
    else {
        l->tail = j->prev;
    }
    j->prev = j->next = NULL;
    l->n--;
}

/* ---- capacity split ---- */

static const struct sbx_pool_cfg *pool_cfg(const struct sbx_config *cfg, const char *name)
{
    for (size_t i = 0; i < cfg->n_pools; i++) {
        if (strcmp(cfg->pools[i].name, name) == 0) {
            return &cfg->pools[i];
        }
    }
    return NULL;
}

/* What the config fixes for the served pools, and how many pools share the
 * rest of each resource. */
struct cap_tally {
    int64_t box_mcpu, set_mcpu, set_mem;
    int set_sbx, n_served, n_free_cpu, n_free_mem, n_free_sbx;
};

/* Gives each served pool what its config sets, and counts what is left. */
static void take_fixed_shares(struct sbx_sched *s, const struct sbx_config *cfg,
                              struct cap_tally *t)
{
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        struct sched_pool *p = &s->pools[i];
        const struct sbx_pool_cfg *pc = pool_cfg(cfg, sbx_pool_name((enum sbx_pool)i));

        if (!p->served) {
            continue;
        }
        t->n_served++;
        if (pc != NULL && pc->cpus > 0) {
            p->mcpu = (int64_t)llround(pc->cpus * 1000.0);
            t->set_mcpu += p->mcpu;
        }
        else {
            t->n_free_cpu++;
        }
        if (pc != NULL && pc->memory > 0) {
            p->memory = pc->memory;
            t->set_mem += p->memory;
        }
        else {
            t->n_free_mem++;
        }
        if (pc != NULL && pc->max_sandboxes > 0) {
            p->max_sandboxes = pc->max_sandboxes;
            t->set_sbx += p->max_sandboxes;
        }
        else {
            t->n_free_sbx++;
        }
    }
}

/* The fixed shares fit the box. */
static int check_fixed_shares(const struct sbx_sched *s, const struct cap_tally *t,
                              sbx_error_t **err)
{
    if (t->n_served == 0) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "scheduler: box.pools is empty: the box "
                             "serves no pool");
    }
    if (t->set_mcpu > t->box_mcpu) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "scheduler: pools ask for %.3g CPUs but the "
                             "box has %.3g",
                             (double)t->set_mcpu / 1000.0, s->box.cpus);
    }
    if (t->set_mem > s->admit_memory) {
        char want[32], admit[32], mem[32], res[32];

        sbx_admit_size(t->set_mem, want, sizeof(want));
        sbx_admit_size(s->admit_memory, admit, sizeof(admit));
        sbx_admit_size(s->box.memory, mem, sizeof(mem));
        sbx_admit_size(s->host_reserve, res, sizeof(res));
        return sbx_error_set(err, SBX_E_CONFIG,
                             "scheduler: pools ask for %s of memory but the box has %s for "
                             "sandboxes (box.memory %s - box.host_reserve %s)",
                             want, admit, mem, res);
    }
    if (t->set_sbx > s->box_max_sandboxes) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "scheduler: pools ask for %d sandboxes but "
                             "box.max_sandboxes is %d",
                             t->set_sbx, s->box_max_sandboxes);
    }
    return 0;
}

/* Shares the rest among the pools the config leaves open; gives out slots. */
static int share_rest(struct sbx_sched *s, const struct sbx_config *cfg, const struct cap_tally *t,
                      sbx_error_t **err)
{
    int64_t rest_mcpu = t->n_free_cpu ? (t->box_mcpu - t->set_mcpu) / t->n_free_cpu : 0;
    int64_t rest_mem = t->n_free_mem ? (s->admit_memory - t->set_mem) / t->n_free_mem : 0;
    int rest_sbx = t->n_free_sbx ? (s->box_max_sandboxes - t->set_sbx) / t->n_free_sbx : 0;
    int extra_sbx = t->n_free_sbx ? (s->box_max_sandboxes - t->set_sbx) % t->n_free_sbx : 0;

    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        struct sched_pool *p = &s->pools[i];
        const struct sbx_pool_cfg *pc = pool_cfg(cfg, sbx_pool_name((enum sbx_pool)i));

        if (!p->served) {
            continue;
        }
        if (pc == NULL || pc->cpus <= 0) {
            p->mcpu = rest_mcpu;
        }
        if (pc == NULL || pc->memory <= 0) {
            p->memory = rest_mem;
        }
        if (pc == NULL || pc->max_sandboxes <= 0) {
            p->max_sandboxes = rest_sbx + (extra_sbx > 0 ? 1 : 0);
            extra_sbx--;
        }
        if (p->mcpu <= 0 || p->memory <= 0 || p->max_sandboxes <= 0) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "scheduler: pool '%s' gets no %s on this "
                                 "box (%.3g CPUs, %.1fG, %d sandboxes)",
                                 sbx_pool_name((enum sbx_pool)i),
                                 p->mcpu <= 0     ? "CPU"
                                 : p->memory <= 0 ? "memory"
                                                  : "sandbox",
                                 (double)p->mcpu / 1000.0, (double)p->memory / (1 << 30),
                                 p->max_sandboxes);
        }
        p->slots = xcalloc((size_t)p->max_sandboxes, sizeof(*p->slots));
        p->boxes = 1;
    }
    return 0;
}

static int split_capacity(struct sbx_sched *s, const struct sbx_config *cfg, sbx_error_t **err)
{
    struct cap_tally t = {.box_mcpu = (int64_t)llround(s->box.cpus * 1000.0)};

    for (char **pp = cfg->box.pools; pp != NULL && *pp != NULL; pp++) {
        int id = sbx_pool_parse(*pp);

        if (id < 0) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "scheduler: box.pools names unknown pool "
                                 "'%s' (pools are 'ci' and 'agent')",
                                 *pp);
        }
        s->pools[id].served = 1;
    }
    take_fixed_shares(s, cfg, &t);
    if (check_fixed_shares(s, &t, err) < 0) {
        return -1;
    }
    return share_rest(s, cfg, &t, err);
}

struct sbx_sched *sbx_sched_create(const struct sbx_sched_opts *opts, sbx_error_t **err)
{
    struct sbx_sched *s;
    const struct sbx_config *cfg;

    if (opts == NULL || opts->cfg == NULL) {
        sbx_error_set(err, EINVAL, "scheduler: no configuration given");
        return NULL;
    }
    cfg = opts->cfg;
    if (cfg->box.max_sandboxes < 1) {
        sbx_error_set(err, SBX_E_CONFIG, "scheduler: box.max_sandboxes must be >= 1, not %d",
                      cfg->box.max_sandboxes);
        return NULL;
    }
    s = xcalloc(1, sizeof(*s));
    s->clock = opts->clock ? opts->clock : sbx_clock_real;
    s->clock_ctx = opts->clock_ctx;
    if (opts->capacity != NULL) {
        s->box = *opts->capacity;
    }
    else if (sbx_box_measure(NULL, &s->box, err) < 0) {
        free(s);
        return NULL;
    }
    if (cfg->box.memory > 0) {
        s->box.memory = cfg->box.memory;
    }
    if (s->box.cpus <= 0 || s->box.memory <= 0) {
        sbx_error_set(err, EINVAL,
                      "scheduler: box capacity must be positive (%.3g CPUs, %lld "
                      "bytes)",
                      s->box.cpus, (long long)s->box.memory);
        free(s);
        return NULL;
    }
    s->host_reserve = cfg->box.host_reserve >= 0 ? cfg->box.host_reserve
                                                 : sbx_admit_default_reserve(s->box.memory);
    s->admit_memory = s->box.memory - s->host_reserve;
    if (s->admit_memory <= 0) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "scheduler: box.host_reserve (%.1fG) leaves nothing of the box's "
                      "%.1fG of memory for sandboxes",
                      (double)s->host_reserve / (1 << 30), (double)s->box.memory / (1 << 30));
        free(s);
        return NULL;
    }
    s->box_max_sandboxes = cfg->box.max_sandboxes;
    s->heavy_min_memory = cfg->box.heavy_min_memory;
    s->alert_after_ms = cfg->runner.alert_after * 1000;
    s->cooldown_ms = cfg->runner.cooldown * 1000;
    s->max_boxes = cfg->runner.max_boxes;
    s->box_hour_price = cfg->runner.box_hour_price;
    s->spend_day_cap = cfg->runner.spend_day_cap;
    s->spend_month_cap = cfg->runner.spend_month_cap;
    if (split_capacity(s, cfg, err) < 0) {
        sbx_sched_destroy(s);
        return NULL;
    }
    if (s->box.memory < s->heavy_min_memory) {
        snprintf(s->heavy_refusal, sizeof(s->heavy_refusal),
                 "this box has %.1fG of memory, less than box.heavy_min_memory (%.1fG): it "
                 "takes no heavy jobs",
                 (double)s->box.memory / (1 << 30), (double)s->heavy_min_memory / (1 << 30));
    }
    sbx_sched_spend_init(s, s->clock(s->clock_ctx));
    return s;
}

void sbx_sched_destroy(struct sbx_sched *s)
{
    if (s == NULL) {
        return;
    }
    for (size_t i = 0; i < s->n_buckets; i++) {
        struct sched_job *j = s->buckets[i];

        while (j != NULL) {
            struct sched_job *next = j->hnext;

            free(j);
            j = next;
        }
    }
    free(s->buckets);
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        free(s->pools[i].slots);
    }
    free(s);
}

/* ---- submit ---- */

static int check_job(struct sbx_sched *s, const struct sbx_sched_job *job, sbx_error_t **err)
{
    const struct sched_pool *p;
    int64_t mcpu;

    if (job == NULL) {
        return sbx_error_set(err, EINVAL, "scheduler: no job given");
    }
    if (!sbx_id_valid(job->id, SBX_ID_NAME)) {
        return sbx_error_set(err, EINVAL,
                             "scheduler: job id must be 1-%d characters of "
                             "[A-Za-z0-9._:-]",
                             SBX_SCHED_ID_MAX - 1);
    }
    if (job->task != NULL && !sbx_id_valid(job->task, SBX_ID_NAME)) {
        return sbx_error_set(err, EINVAL,
                             "scheduler: job %s: task id must be 1-%d characters "
                             "of [A-Za-z0-9._:-]",
                             job->id, SBX_SCHED_ID_MAX - 1);
    }
    if ((unsigned)job->pool >= SBX_POOL_COUNT) {
        return sbx_error_set(err, EINVAL, "scheduler: job %s: unknown pool %d", job->id,
                             (int)job->pool);
    }
    if (job->cls != SBX_CLASS_LIGHT && job->cls != SBX_CLASS_HEAVY) {
        return sbx_error_set(err, EINVAL, "scheduler: job %s: unknown class %d", job->id,
                             (int)job->cls);
    }
    if (!(job->cpus > 0) || !isfinite(job->cpus) || job->memory <= 0) {
        return sbx_error_set(err, EINVAL,
                             "scheduler: job %s: cpus and memory must be "
                             "positive (got %g CPUs, %lld bytes)",
                             job->id, job->cpus, (long long)job->memory);
    }
    if (sbx_sched_find(s, job->id) != NULL) {
        return sbx_error_set(err, EEXIST, "scheduler: job %s already exists", job->id);
    }
    p = &s->pools[job->pool];
    if (!p->served) {
        return sbx_error_set(err, SBX_E_POLICY,
                             "refused: job %s: this box does not serve "
                             "pool '%s' (box.pools)",
                             job->id, sbx_pool_name(job->pool));
    }
    if (job->cls == SBX_CLASS_HEAVY && s->heavy_refusal[0] != '\0') {
        return sbx_error_set(err, SBX_E_POLICY, "refused: job %s is heavy but %s", job->id,
                             s->heavy_refusal);
    }
    mcpu = (int64_t)llround(job->cpus * 1000.0);
    if (mcpu > p->mcpu) {
        return sbx_error_set(err, SBX_E_POLICY,
                             "refused: job %s asks for %.3g CPUs but pool "
                             "'%s' has %.3g on this box",
                             job->id, job->cpus, sbx_pool_name(job->pool),
                             (double)p->mcpu / 1000.0);
    }
    if (job->memory > p->memory) {
        char want[32], has[32], mem[32], res[32];

        sbx_admit_size(job->memory, want, sizeof(want));
        sbx_admit_size(p->memory, has, sizeof(has));
        sbx_admit_size(s->box.memory, mem, sizeof(mem));
        sbx_admit_size(s->host_reserve, res, sizeof(res));
        return sbx_error_set(err, SBX_E_POLICY,
                             "refused: job %s asks for %s of memory but pool '%s' has %s on "
                             "this box (box.memory %s - box.host_reserve %s, split between the "
                             "pools)",
                             job->id, want, sbx_pool_name(job->pool), has, mem, res);
    }
    return 0;
}

static struct sched_job *job_new(struct sbx_sched *s, const struct sbx_sched_job *job)
{
    struct sched_job *j = xcalloc(1, sizeof(*j));

    snprintf(j->id, sizeof(j->id), "%s", job->id);
    snprintf(j->task, sizeof(j->task), "%s", job->task ? job->task : job->id);
    j->pool = job->pool;
    j->cls = job->cls;
    j->mcpu = (int64_t)llround(job->cpus * 1000.0);
    j->memory = job->memory;
    j->enqueued_at = job->enqueued_at ? job->enqueued_at : s->clock(s->clock_ctx);
    j->seq = ++s->seq;
    j->slot = -1;
    table_insert(s, j);
    return j;
}

int sbx_sched_submit(struct sbx_sched *s, const struct sbx_sched_job *job, sbx_error_t **err)
{
    struct sched_job *j;

    if (check_job(s, job, err) < 0) {
        return -1;
    }
    j = job_new(s, job);
    j->state = SCHED_QUEUED;
    list_push(&s->pools[j->pool], j);
    return 0;
}

/* A fleet box checks a job against its pools' shapes at submit without
 * queueing it here: the shared queue holds it (runner/fleet.c). */
int sbx_sched_check(struct sbx_sched *s, const struct sbx_sched_job *job, sbx_error_t **err)
{
    return check_job(s, job, err);
}

/* ---- the decision ---- */

static int fits(const struct sched_pool *p, const struct sched_job *j)
{
    if (p->running >= p->max_sandboxes) {
        return 0;
    }
    if (p->mcpu_used + j->mcpu > p->mcpu || p->memory_used + j->memory > p->memory) {
        return 0;
    }
    return j->cls == SBX_CLASS_LIGHT || p->heavy == NULL;
}

/* The job that may start next in a pool, or NULL. A heavy head parked behind
 * the busy heavy slot lets light jobs pass; any other head that does not fit
 * holds the pool (FIFO, no starvation). */
static struct sched_job *pool_pick(const struct sched_pool *p)
{
    struct sched_job *h = p->queue[SBX_CLASS_HEAVY].head;
    struct sched_job *l = p->queue[SBX_CLASS_LIGHT].head;
    struct sched_job *head;

    if (h != NULL && p->heavy != NULL) {
        h = NULL;
    }
    if (h == NULL) {
        head = l;
    }
    else if (l == NULL) {
        head = h;
    }
    else {
        head = h->seq < l->seq ? h : l;
    }
    if (head == NULL || !fits(p, head)) {
        return NULL;
    }
    return head;
}

int sbx_sched_claim_fit(const struct sbx_sched *s, enum sbx_pool pool, enum sbx_job_class cls,
                        double cpus, int64_t memory)
{
    const struct sched_pool *p;
    struct sched_job j = {.pool = pool, .cls = cls, .memory = memory};

    if ((unsigned)pool >= SBX_POOL_COUNT || s->draining || !(cpus > 0) || !isfinite(cpus)) {
        return -1;
    }
    p = &s->pools[pool];
    j.mcpu = (int64_t)llround(cpus * 1000.0);
    if (!p->served) {
        return -1;
    }
    if (j.mcpu > p->mcpu || memory > p->memory ||
        (cls == SBX_CLASS_HEAVY && s->heavy_refusal[0] != '\0')) {
        return 0; /* never on this box: another box of the pool may take it */
    }
    if (p->queue[SBX_CLASS_LIGHT].n + p->queue[SBX_CLASS_HEAVY].n > 0) {
        return -1; /* what this box holds starts first */
    }
    if (fits(p, &j)) {
        return 1;
    }
    return cls == SBX_CLASS_HEAVY && p->heavy != NULL && p->running < p->max_sandboxes ? 0 : -1;
}

/* A held heavy slot in a copy: claim_fit only asks whether there is one. */
static struct sched_job fit_heavy_marker;

struct sbx_sched *sbx_sched_fit_copy(const struct sbx_sched *s)
{
    struct sbx_sched *c = xmalloc(sizeof(*c));

    memcpy(c, s, sizeof(*c));
    c->clock_ctx = NULL;
    c->buckets = NULL; /* nothing of s is reachable from the copy */
    c->n_buckets = 0;
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        struct sched_pool *cp = &c->pools[p];

        cp->heavy = cp->heavy != NULL ? &fit_heavy_marker : NULL;
        cp->slots = NULL;
        for (int k = 0; k < 2; k++) { /* the counts stay */
            cp->queue[k].head = cp->queue[k].tail = cp->queue[k].alert_next = NULL;
        }
    }
    return c;
}

void sbx_sched_fit_free(struct sbx_sched *copy)
{
    free(copy);
}

static void take_slot(struct sbx_sched *s, struct sched_job *j, int64_t now)
{
    struct sched_pool *p = &s->pools[j->pool];

    for (int i = 0; i < p->max_sandboxes; i++) {
        if (p->slots[i] == NULL) {
            p->slots[i] = j;
            j->slot = i;
            break;
        }
    }
    j->state = SCHED_RUNNING;
    j->granted_at = now;
    p->running++;
    p->mcpu_used += j->mcpu;
    p->memory_used += j->memory;
    if (j->cls == SBX_CLASS_HEAVY) {
        p->heavy = j;
    }
}

static void fill_grant(const struct sched_job *j, struct sbx_sched_grant *out)
{
    memset(out, 0, sizeof(*out));
    memcpy(out->id, j->id, sizeof(out->id));
    memcpy(out->task, j->task, sizeof(out->task));
    out->pool = j->pool;
    out->cls = j->cls;
    out->slot = j->slot;
    out->enqueued_at = j->enqueued_at;
    out->granted_at = j->granted_at;
    out->wait_ms = j->granted_at - j->enqueued_at;
}

static void count_wait(struct sched_pool *p, int64_t wait_ms)
{
    double secs = wait_ms > 0 ? (double)wait_ms / 1000.0 : 0.0;

    for (int b = 0; b < SBX_SCHED_WAIT_BUCKETS; b++) {
        if (secs <= sbx_sched_wait_bounds[b]) {
            p->wait_buckets[b]++;
        }
    }
    p->wait_count++;
    p->wait_sum += secs;
}

int sbx_sched_next_grant(struct sbx_sched *s, struct sbx_sched_grant *out)
{
    struct sched_job *best = NULL;
    int64_t now;

    if (s->draining) {
        return 0;
    }
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        struct sched_job *j;

        if (!s->pools[i].served) {
            continue;
        }
        j = pool_pick(&s->pools[i]);
        if (j != NULL && (best == NULL || j->seq < best->seq)) {
            best = j;
        }
    }
    if (best == NULL) {
        return 0;
    }
    now = s->clock(s->clock_ctx);
    list_remove(&s->pools[best->pool], best);
    take_slot(s, best, now);
    s->pools[best->pool].started++;
    count_wait(&s->pools[best->pool], now - best->enqueued_at);
    fill_grant(best, out);
    return 1;
}

static void drop_job(struct sbx_sched *s, struct sched_job *j)
{
    table_remove(s, j);
    free(j);
}

int sbx_sched_release(struct sbx_sched *s, const char *id, enum sbx_job_result result,
                      sbx_error_t **err)
{
    struct sched_job *j = id ? sbx_sched_find(s, id) : NULL;
    struct sched_pool *p;

    if (j == NULL) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "scheduler: no job '%s'", id ? id : "(null)");
    }
    if (j->state != SCHED_RUNNING) {
        return sbx_error_set(err, EINVAL,
                             "scheduler: job %s is queued, not running (cancel "
                             "it instead)",
                             id);
    }
    if ((unsigned)result >= SBX_RESULT_COUNT) {
        return sbx_error_set(err, EINVAL, "scheduler: job %s: unknown result %d", id, (int)result);
    }
    p = &s->pools[j->pool];
    if (j->slot >= 0) {
        p->slots[j->slot] = NULL;
    }
    p->running--;
    p->mcpu_used -= j->mcpu;
    p->memory_used -= j->memory;
    if (p->heavy == j) {
        p->heavy = NULL;
    }
    p->finished[result]++;
    drop_job(s, j);
    return 0;
}

int sbx_sched_cancel(struct sbx_sched *s, const char *id, sbx_error_t **err)
{
    struct sched_job *j = id ? sbx_sched_find(s, id) : NULL;

    if (j == NULL) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "scheduler: no job '%s'", id ? id : "(null)");
    }
    if (j->state == SCHED_RUNNING) {
        return sbx_error_set(err, EBUSY,
                             "scheduler: job %s is running: stop its sandbox, "
                             "then release it as cancelled",
                             id);
    }
    list_remove(&s->pools[j->pool], j);
    drop_job(s, j);
    return 0;
}

int sbx_sched_adopt(struct sbx_sched *s, const struct sbx_sched_job *job, int64_t granted_at,
                    sbx_error_t **err)
{
    struct sched_pool *p;
    struct sched_job *j;

    if (check_job(s, job, err) < 0) {
        return -1;
    }
    p = &s->pools[job->pool];
    if (p->running >= p->max_sandboxes) {
        return sbx_error_set(err, EBUSY,
                             "scheduler: cannot re-adopt job %s: pool '%s' has no "
                             "free slot",
                             job->id, sbx_pool_name(job->pool));
    }
    if (job->cls == SBX_CLASS_HEAVY && p->heavy != NULL) {
        return sbx_error_set(err, EBUSY,
                             "scheduler: cannot re-adopt job %s: the heavy slot of "
                             "pool '%s' is held by %s",
                             job->id, sbx_pool_name(job->pool), p->heavy->id);
    }
    j = job_new(s, job);
    take_slot(s, j, granted_at ? granted_at : s->clock(s->clock_ctx));
    return 0;
}

/* ---- alerts ---- */

size_t sbx_sched_due_alerts(struct sbx_sched *s, struct sbx_sched_alert *out, size_t max)
{
    int64_t now = s->clock(s->clock_ctx);
    size_t n = 0;

    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        for (int c = 0; c < 2; c++) {
            struct sched_list *l = &s->pools[i].queue[c];

            while (n < max && l->alert_next != NULL &&
                   now - l->alert_next->enqueued_at >= s->alert_after_ms) {
                struct sched_job *j = l->alert_next;

                j->alerted = 1;
                l->alert_next = j->next;
                s->pools[i].alerts++;
                memset(&out[n], 0, sizeof(out[n]));
                memcpy(out[n].id, j->id, sizeof(out[n].id));
                out[n].pool = j->pool;
                out[n].cls = j->cls;
                out[n].enqueued_at = j->enqueued_at;
                out[n].wait_ms = now - j->enqueued_at;
                n++;
            }
        }
    }
    return n;
}

void sbx_sched_drain(struct sbx_sched *s, int on)
{
    s->draining = on ? 1 : 0;
}

int sbx_sched_can_stop(const struct sbx_sched *s)
{
    if (!s->draining) {
        return 0;
    }
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        if (s->pools[i].running > 0) {
            return 0;
        }
    }
    return 1;
}
