/* rmetrics.h - the runner's own metrics beside the scheduler's (docs/runner.md,
 * "Metrics"): job run time and sandbox start time histograms, egress and
 * refusal counters, build and process facts. Any thread may record. */
#ifndef SBX_RUNNER_RMETRICS_H
#define SBX_RUNNER_RMETRICS_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "sched/sched.h"

/* Why a request to submit was refused: a fixed set, so series stay bounded. */
enum rm_refusal {
    RM_REFUSED_INVALID,      /* 400 */
    RM_REFUSED_UNAUTHORIZED, /* 401, any endpoint */
    RM_REFUSED_FORBIDDEN,    /* 403: scope or owner */
    RM_REFUSED_CONFLICT,     /* 409 */
    RM_REFUSED_TOO_LARGE,    /* 413 */
    RM_REFUSED_POLICY,       /* 422: the policy or the box's capacity */
    RM_REFUSED_ERROR,        /* 5xx */
    RM_REFUSED_COUNT
};

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

void rm_init(struct runner_metrics *m);
void rm_destroy(struct runner_metrics *m);
void rm_job_run(struct runner_metrics *m, enum sbx_pool pool, int64_t ms);
void rm_sandbox_start(struct runner_metrics *m, enum sbx_pool pool, int64_t ms);
void rm_egress(struct runner_metrics *m, enum sbx_pool pool, int64_t allowed, int64_t denied);
void rm_refused(struct runner_metrics *m, enum rm_refusal why);
/* The refusal reason of an HTTP status of a refused submit. */
enum rm_refusal rm_refusal_of(int http_status);
/* Appends the runner's families (served pools only) to f. */
void rm_write(struct runner_metrics *m, FILE *f, const int served[SBX_POOL_COUNT]);
/* A double in its shortest form that reads back equal (no "0.1000000001"). */
const char *rm_fmt(char *buf, size_t len, double v);

#endif
