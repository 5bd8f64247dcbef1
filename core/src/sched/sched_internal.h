/* sched_internal.h - the scheduler's private state, shared by sched.c,
 * autoscale.c and metrics.c only. */
#ifndef SBX_SCHED_SCHED_INTERNAL_H
#define SBX_SCHED_SCHED_INTERNAL_H

#include "sched/sched.h"

enum sched_state {
    SCHED_QUEUED = 0,
    SCHED_RUNNING,
};

struct sched_job {
    char id[SBX_SCHED_ID_MAX];
    char task[SBX_SCHED_ID_MAX];
    enum sbx_pool pool;
    enum sbx_job_class cls;
    enum sched_state state;
    int64_t mcpu; /* milli-CPUs: integer accounting, no drift */
    int64_t memory;
    uint64_t seq; /* submit order, global */
    int64_t enqueued_at, granted_at;
    int alerted;
    int slot;
    struct sched_job *prev, *next; /* FIFO list of its pool and class */
    struct sched_job *hnext;       /* id table chain */
};

struct sched_list {
    struct sched_job *head, *tail;
    size_t n;
    /* the first queued job not yet alerted; all before it have fired */
    struct sched_job *alert_next;
};

struct sched_pool {
    int served;
    int64_t mcpu, memory;
    int max_sandboxes;
    int64_t mcpu_used, memory_used;
    int running;
    struct sched_job *heavy;    /* holder of the heavy slot */
    struct sched_list queue[2]; /* by class: light, heavy */
    struct sched_job **slots;   /* max_sandboxes entries */
    uint64_t started, finished[SBX_RESULT_COUNT], alerts;
    uint64_t wait_buckets[SBX_SCHED_WAIT_BUCKETS], wait_count;
    double wait_sum;
    /* autoscaler */
    int boxes;
    int scaled;                     /* a scale-up was decided */
    int64_t last_scale_up;          /* ms, when scaled */
    struct sbx_scale_decision last; /* the last decision, for the queue view */
};

struct sbx_sched {
    sbx_clock_fn clock;
    void *clock_ctx;
    struct sbx_box_capacity box; /* memory: box.memory when set, else measured */
    int64_t host_reserve;        /* box.host_reserve or its default (admit.h) */
    int64_t admit_memory;        /* box.memory - host_reserve: what the pools split */
    int box_max_sandboxes;
    int64_t heavy_min_memory;
    char heavy_refusal[160];
    int64_t alert_after_ms, cooldown_ms;
    int max_boxes;
    double box_hour_price, spend_day_cap, spend_month_cap;
    int draining;
    uint64_t seq;
    struct sched_pool pools[SBX_POOL_COUNT];
    struct sched_job **buckets;
    size_t n_buckets, n_jobs;
    /* spend, accrued up to spend_at */
    int64_t spend_at;
    double spend_day, spend_month;
};

struct sched_job *sbx_sched_find(const struct sbx_sched *s, const char *id);
void sbx_sched_spend_init(struct sbx_sched *s, int64_t now);
void sbx_sched_spend_accrue(struct sbx_sched *s, int64_t now);
int sbx_sched_paid_boxes(const struct sbx_sched *s);

#endif
