/* smallbox.h - default limits clamped per pool on a small box (smallbox.c).
 * The module owns the clamped limits (struct runner_pool_limits, in the
 * runner); it reads the scheduler's snapshot only at start. */
#ifndef SBX_RUNNER_SMALLBOX_H
#define SBX_RUNNER_SMALLBOX_H

#include <stdint.h>

#include "sched/sched.h"

struct sbx_limits;

/* Each pool's default limits on this box: the configured limits.cpus and
 * limits.memory, clamped on a small box. Read-only after runner_small_box. */
struct runner_pool_limits {
    double def_cpus; /* the configured defaults */
    int64_t def_memory;
    double cpus[SBX_POOL_COUNT];
    int64_t memory[SBX_POOL_COUNT];
    int quiet; /* (added, issue 31) set before: the clamp lines at debug level */
};

/* After the scheduler split the box (snap: its snapshot): on a box smaller
 * than a default sandbox per pool, each pool's default limits (def) are
 * clamped to what it has (warned). */
void runner_small_box(struct runner_pool_limits *pl, const struct sbx_limits *def,
                      const struct sbx_sched_snapshot *snap);
/* A job whose limits are the configured defaults gets its pool's clamp. */
void runner_fit_limits(const struct runner_pool_limits *pl, enum sbx_pool pool,
                       struct sbx_limits *l);

#endif
