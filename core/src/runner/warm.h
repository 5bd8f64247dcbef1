/* warm.h - the runner's warm pool (warm.c; docs/runner.md, "Warm pool"). */
#ifndef SBX_RUNNER_WARM_H
#define SBX_RUNNER_WARM_H

#include <jansson.h>
#include <stdio.h>

#include "sched/sched.h"

struct sbx_runner;
struct sbx_task;

/* Reads pools.NAME.warm and warm_max_age; refuses (one line naming the key)
 * more warm sandboxes than the pool has slots or memory for. After the
 * scheduler and the small-box clamp exist. */
int runner_warm_init(struct sbx_runner *r, sbx_error_t **err);
/* Ends what is left (when the loop never ran) and frees the pool. */
void runner_warm_free(struct sbx_runner *r);
/* Loop thread, on each tick and after grants: replaces old warm sandboxes,
 * evicts those a running job needs the room of, starts one refill per pool
 * when a slot and the memory are free and no job of the pool waits. When
 * the runner stops, removes them all. */
void runner_warm_tick(struct sbx_runner *r);
/* Loop thread, at a grant: a ready warm sandbox of the pool for the job to
 * claim (the caller owns it now), or NULL. */
struct sbx_task *runner_warm_take(struct sbx_runner *r, enum sbx_pool pool);
/* (added) The job that took a warm sandbox of the pool reached its first
 * output (or its end): the refill held back for it may start. A refill's
 * create and start on the engine (cgroup moves, the storage driver's
 * snapshot) stall the claimed sandbox's first fork for up to a second on a
 * small box, so a pool is not refilled while one of its claims is between
 * its take and its first output (at most WARM_HOLD_MS). Any thread. */
void runner_warm_claim_done(struct sbx_runner *r, enum sbx_pool pool);
/* Ends a warm task that was taken and not claimed, in the background. */
void runner_warm_end(struct sbx_runner *r, struct sbx_task *t);
/* Counts a claim (1) or a miss (0) of a pool that has a warm pool. */
void runner_warm_count(struct sbx_runner *r, enum sbx_pool pool, int claimed);
/* 1 when no warm sandbox is ready or starting (under r->mu). */
int runner_warm_idle(struct sbx_runner *r);
/* `GET /v1/queue` "warm": per pool wanted, ready, starting, claims, misses,
 * refills, expired, evicted, refill times. */
json_t *runner_warm_json(struct sbx_runner *r);
/* (added) Orphan sweeps done since the runner started (runner.orphan_sweep):
 * `orphan_sweeps` of GET /v1/queue. */
uint64_t runner_warm_sweeps(struct sbx_runner *r);
/* The sbx_warm_* lines of /metrics. */
void runner_warm_metrics(struct sbx_runner *r, FILE *f);
/* Recovery: the directories of warm sandboxes whose runner is gone. */
void runner_warm_sweep(const char *state);

#endif
