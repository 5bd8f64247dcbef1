/* sched.h - the runner's scheduler: pure logic with an injected clock.
 *
 * No threads, no I/O, no locks: the caller (the daemon's event loop) owns the
 * object and calls it from one thread. Durable state lives in store/; after a
 * restart the caller re-submits the queued jobs (with their original enqueue
 * time) and re-adopts the running ones with sbx_sched_adopt().
 *
 * Model (docs/runner.md):
 *   - two pools, ci and agent, each with its own CPU, memory and sandbox
 *     capacity and its own exclusive heavy slot; nothing is shared between
 *     pools, so a CI job never waits behind an agent task and the reverse;
 *   - a box serves the pools in box.pools; its measured capacity is split
 *     between them (config pools { ci = {...}; agent = {...} } or evenly);
 *   - light jobs share the pool's parallel slots, sized by each job's limits;
 *     a heavy job also takes the pool's one heavy slot;
 *   - queue rule: FIFO within a pool, except that a heavy job waiting only for
 *     the heavy slot (another heavy job holds it) is parked and light jobs may
 *     pass it; once the heavy slot is free the oldest job blocks everything
 *     behind it in its pool until it fits (no starvation, bounded wait);
 *   - a job whose limits can never fit is refused at submit, with the reason.
 *
 * Every decision is O(1) in the queue length (two FIFO lists per pool and a
 * hash table by id); snapshots and metrics are O(n).
 *
 * Times are milliseconds since the Unix epoch, from the injected clock.
 */
#ifndef SBX_SCHED_SCHED_H
#define SBX_SCHED_SCHED_H

#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "util/error.h"

enum sbx_pool {
    SBX_POOL_CI = 0,
    SBX_POOL_AGENT = 1,
};
#define SBX_POOL_COUNT 2

enum sbx_job_class {
    SBX_CLASS_LIGHT = 0,
    SBX_CLASS_HEAVY = 1,
};

/* How a running job ended, for the counters. */
enum sbx_job_result {
    SBX_RESULT_OK = 0,      /* exit status 0 */
    SBX_RESULT_FAILED,      /* non-zero exit or sbx failure */
    SBX_RESULT_CANCELLED,   /* cancelled while running */
    SBX_RESULT_INTERRUPTED, /* the runner restarted under it */
};
#define SBX_RESULT_COUNT 4

/* Ids (job and task) are 1..63 characters of [A-Za-z0-9._:-]. */
#define SBX_SCHED_ID_MAX 64

/* Wait histogram bounds in seconds (600 is a bound: "waited <= 10 min" is exact). */
#define SBX_SCHED_WAIT_BUCKETS 11
extern const double sbx_sched_wait_bounds[SBX_SCHED_WAIT_BUCKETS];

const char *sbx_pool_name(enum sbx_pool pool);
/* "ci" / "agent" -> pool; -1 for anything else. */
int sbx_pool_parse(const char *name);
const char *sbx_job_class_name(enum sbx_job_class cls);
/* "light" / "heavy" -> class; -1 for anything else. */
int sbx_job_class_parse(const char *name);
const char *sbx_job_result_name(enum sbx_job_result result);

/* Measured box capacity. */
struct sbx_box_capacity {
    double cpus;    /* online CPUs */
    int64_t memory; /* bytes (MemTotal) */
};

/* Reads sysconf(_SC_NPROCESSORS_ONLN) and MemTotal from meminfo_path
 * (NULL: /proc/meminfo). Returns 0 or -1 with *err naming the file. */
int sbx_box_measure(const char *meminfo_path, struct sbx_box_capacity *out, sbx_error_t **err);

/* The clock: milliseconds since the Unix epoch. */
typedef int64_t (*sbx_clock_fn)(void *ctx);
/* CLOCK_REALTIME in ms; ctx unused. */
int64_t sbx_clock_real(void *ctx);

struct sbx_sched_opts {
    const struct sbx_config *cfg; /* box.*, pools, runner.*; required */
    /* Capacity of this box; NULL: measured with sbx_box_measure(NULL). */
    const struct sbx_box_capacity *capacity;
    sbx_clock_fn clock; /* NULL: sbx_clock_real */
    void *clock_ctx;
};

struct sbx_sched;

/* Creates a scheduler. Fails (-> NULL, *err) when the pools' configured shares
 * exceed the box, a served pool gets no CPU, memory or sandbox, or the box
 * cannot be measured. The box's heavy refusal (memory below
 * box.heavy_min_memory) is not an error: see the snapshot's heavy_refusal. */
struct sbx_sched *sbx_sched_create(const struct sbx_sched_opts *opts, sbx_error_t **err);
void sbx_sched_destroy(struct sbx_sched *s);

/* A job as the scheduler sees it. Strings are copied. */
struct sbx_sched_job {
    const char *id;   /* required, unique among live jobs */
    const char *task; /* NULL: same as id (a CI job is a one-command task) */
    enum sbx_pool pool;
    enum sbx_job_class cls;
    double cpus;         /* > 0: the job's policy limits */
    int64_t memory;      /* > 0, bytes */
    int64_t enqueued_at; /* ms; 0 = now (recovery passes the stored time) */
};

/* Queues a job at the tail of its pool. Refuses (-1, *err with code
 * SBX_E_POLICY and the reason) a job that can never fit this box: pool not
 * served, limits over the pool's share, heavy on a box that takes none.
 * Bad input (id, duplicate, cpus/memory <= 0) is EINVAL / EEXIST. */
int sbx_sched_submit(struct sbx_sched *s, const struct sbx_sched_job *job, sbx_error_t **err);

/* (added) As sbx_sched_submit's refusal, without queueing the job: a fleet box
 * checks a submit for the shared queue (docs/runner.md, "Several boxes"). */
int sbx_sched_check(struct sbx_sched *s, const struct sbx_sched_job *job, sbx_error_t **err);
/* (added) May this box claim a job of the shared queue now (store.h,
 * sbx_claim_fit_fn)? 1: it starts here at once (nothing of the pool waits
 * here and it fits the free capacity); 0: pass over it (a heavy job while the
 * heavy slot is held, or one larger than this box's pool: another box may
 * take it); -1: stop (FIFO: it waits for room; draining; pool not served). */
int sbx_sched_claim_fit(const struct sbx_sched *s, enum sbx_pool pool, enum sbx_job_class cls,
                        double cpus, int64_t memory);
/* (added) A copy of what sbx_sched_claim_fit reads, for a claim decided on
 * another thread while the owner of s goes on (runner/fleet.c, the store
 * thread): only sbx_sched_claim_fit may be given it; sbx_sched_fit_free. */
struct sbx_sched *sbx_sched_fit_copy(const struct sbx_sched *s);
void sbx_sched_fit_free(struct sbx_sched *copy);

/* One grant: the job now holds a slot and must be started by the caller. */
struct sbx_sched_grant {
    char id[SBX_SCHED_ID_MAX];
    char task[SBX_SCHED_ID_MAX];
    enum sbx_pool pool;
    enum sbx_job_class cls;
    int slot;            /* 0..max_sandboxes-1 within the pool */
    int64_t enqueued_at; /* ms */
    int64_t granted_at;  /* ms */
    int64_t wait_ms;
};

/* The scheduling decision: grants at most one job (the pool whose head is
 * oldest goes first). Returns 1 and fills *out, or 0 when nothing can start
 * now. Call it until it returns 0 after each submit and release. O(1). */
int sbx_sched_next_grant(struct sbx_sched *s, struct sbx_sched_grant *out);

/* A running job ended: frees its slot and counts the result. Unknown or
 * queued id: -1 (SBX_E_NOTFOUND / EINVAL). */
int sbx_sched_release(struct sbx_sched *s, const char *id, enum sbx_job_result result,
                      sbx_error_t **err);

/* Removes a queued job. A running job is not touched: -1 with EBUSY (stop its
 * sandbox, then sbx_sched_release(..., SBX_RESULT_CANCELLED)). Unknown id:
 * SBX_E_NOTFOUND. */
int sbx_sched_cancel(struct sbx_sched *s, const char *id, sbx_error_t **err);

/* Recovery: a job that was running before a restart and whose task is
 * re-adopted takes its slot again directly (it bypasses the queue; it may
 * exceed capacity if the config shrank, which the snapshot then shows). */
int sbx_sched_adopt(struct sbx_sched *s, const struct sbx_sched_job *job, int64_t granted_at,
                    sbx_error_t **err);

/* Alerts: every queued job whose wait reached runner.alert_after (wait >=
 * alert_after) fires exactly once. Fills up to max entries and returns how
 * many fired now; call it again if it returned max. O(new alerts). */
struct sbx_sched_alert {
    char id[SBX_SCHED_ID_MAX];
    enum sbx_pool pool;
    enum sbx_job_class cls;
    int64_t enqueued_at;
    int64_t wait_ms;
};
size_t sbx_sched_due_alerts(struct sbx_sched *s, struct sbx_sched_alert *out, size_t max);

/* Autoscaler. Boxes are counted per pool: this box counts once in each pool
 * it serves, an added box serves one pool. The runner pays for
 * 1 + sum(boxes[p] - 1) boxes at runner.box_hour_price. */
enum sbx_scale_action {
    SBX_SCALE_NONE = 0,
    SBX_SCALE_UP,
};

struct sbx_scale_decision {
    enum sbx_scale_action action;
    enum sbx_pool pool;
    int current; /* boxes serving the pool now */
    int wanted;  /* boxes the pool should have (the hook's argument) */
    int capped;  /* 1: wanted was lowered by max_boxes or a spend cap */
    char reason[200];
};

/* Decides for one pool. Scale up only when a job of the pool has waited
 * alert_after, wanted = current + max(ceil(queued / slots per box), queued
 * heavy jobs), then clamped so that the paid boxes stay <= runner.max_boxes and
 * the spend so far plus every paid box running to the end of the UTC day
 * (month) stays <= spend_day_cap (spend_month_cap). Nothing during cooldown
 * after the last scale-up of that pool. A SCALE_UP decision starts the
 * cooldown; the caller runs the hook and reports boxes with
 * sbx_sched_boxes_set(). Never returns a scale-in: see sbx_sched_drain(). */
void sbx_sched_autoscale(struct sbx_sched *s, enum sbx_pool pool, struct sbx_scale_decision *out);
/* (added) The decision itself, pure: what sbx_sched_autoscale decides from
 * this box's scheduler and the fleet's leader decides from the shared rows
 * (docs/runner.md, "Several boxes"). current: boxes serving the pool; paid:
 * boxes paid for (all pools); spent_*: accrued so far (sbx_spend_accrue). */
struct sbx_scale_in {
    int64_t now;
    size_t queued, heavy; /* queued jobs of the pool, heavy ones among them */
    int64_t oldest;       /* enqueued_at of its oldest queued job (ms) */
    int current, paid;
    int max_sandboxes; /* slots of the pool per box */
    int scaled;        /* 1: last_scale_up holds the pool's last scale-up (ms) */
    int64_t last_scale_up;
    int64_t alert_after_ms, cooldown_ms;
    int max_boxes;
    double price, day_cap, month_cap, spent_day, spent_month;
};
/* Fills action, current, wanted, capped and reason; out->pool is left as is. */
void sbx_scale_decide(const struct sbx_scale_in *in, struct sbx_scale_decision *out);
/* (added) Spend so far: accrues rate ($ per ms) from at to now, resetting the
 * day at UTC midnight and the month on the 1st (UTC). */
struct sbx_spend {
    int64_t at; /* ms */
    double day, month;
};
void sbx_spend_accrue(struct sbx_spend *sp, double rate, int64_t now);
/* The caller's count of boxes serving a pool (>= 1 for a served pool). Spend
 * is accrued up to now at the old count first. */
int sbx_sched_boxes_set(struct sbx_sched *s, enum sbx_pool pool, int boxes, sbx_error_t **err);

/* Scale-in: a draining box grants nothing more; running jobs run to the end.
 * sbx_sched_can_stop() is 1 only when draining and no job is running. */
void sbx_sched_drain(struct sbx_sched *s, int on);
int sbx_sched_can_stop(const struct sbx_sched *s);

/* Snapshot for `sbx queue`, the API and /metrics. */
struct sbx_sched_queued {
    char id[SBX_SCHED_ID_MAX];
    char task[SBX_SCHED_ID_MAX];
    enum sbx_job_class cls;
    int64_t enqueued_at;
    int64_t wait_ms;
    int alerted;
};

struct sbx_sched_slot {
    int index;
    int busy;
    char id[SBX_SCHED_ID_MAX]; /* holder, when busy */
    char task[SBX_SCHED_ID_MAX];
    enum sbx_job_class cls;
    double cpus;
    int64_t memory;
    int64_t since; /* ms */
};

struct sbx_sched_pool_snap {
    enum sbx_pool pool;
    int served;
    /* capacity and use */
    double cpus, cpus_used;
    int64_t memory, memory_used;
    int max_sandboxes, running;
    int heavy_busy; /* the heavy slot is held */
    /* queue, oldest first (queued[0] is the oldest) */
    size_t n_queued, n_queued_heavy;
    struct sbx_sched_queued *queued;
    int64_t oldest_enqueued_at; /* 0 when empty */
    int64_t oldest_wait_ms;
    struct sbx_sched_slot *slots; /* max_sandboxes entries */
    /* counters since start */
    uint64_t started;
    uint64_t finished[SBX_RESULT_COUNT];
    uint64_t alerts;
    uint64_t wait_buckets[SBX_SCHED_WAIT_BUCKETS]; /* cumulative, le bound */
    uint64_t wait_count;
    double wait_sum; /* seconds */
    int boxes;
    /* the last autoscaler decision for the pool (reason "" if none yet) */
    int scale_capped;
    char scale_reason[200];
};

struct sbx_sched_snapshot {
    int64_t now; /* ms */
    struct sbx_box_capacity box;
    int64_t host_reserve; /* (added) memory kept for the host; pools split the rest */
    int box_max_sandboxes;
    int heavy_allowed;
    char heavy_refusal[160]; /* why the box takes no heavy jobs, or "" */
    int draining;
    int64_t alert_after; /* seconds */
    int paid_boxes, max_boxes;
    double box_hour_price, spend_day, spend_month, spend_day_cap, spend_month_cap;
    struct sbx_sched_pool_snap pools[SBX_POOL_COUNT];
};

/* Owned by the caller; free with sbx_sched_snapshot_free(). */
struct sbx_sched_snapshot *sbx_sched_snapshot(struct sbx_sched *s);
void sbx_sched_snapshot_free(struct sbx_sched_snapshot *snap);

/* The snapshot as JSON text (for `sbx queue --json` and the API); caller frees. */
char *sbx_sched_snapshot_json(const struct sbx_sched_snapshot *snap);

/* The Prometheus text exposition (format 0.0.4) of a snapshot; caller frees.
 * Serve it with Content-Type SBX_METRICS_CONTENT_TYPE. */
#define SBX_METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
char *sbx_sched_metrics(const struct sbx_sched_snapshot *snap);

#endif
