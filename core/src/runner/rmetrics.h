/* rmetrics.h - the runner's own metrics beside the scheduler's (docs/runner.md,
 * "Metrics"): job run time and sandbox start time histograms, egress and
 * refusal counters, build and process facts. Any thread may record.
 * (changed) struct runner_metrics is opaque: made by rm_new. */
#ifndef SBX_RUNNER_RMETRICS_H
#define SBX_RUNNER_RMETRICS_H

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

/* The metrics themselves: the module's own (opaque); any thread records. */
struct runner_metrics;

struct runner_metrics *rm_new(void);
void rm_free(struct runner_metrics *m);
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
