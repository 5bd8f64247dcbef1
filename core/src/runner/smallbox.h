/* smallbox.h - default limits clamped per pool on a small box (smallbox.c). */
#ifndef SBX_RUNNER_SMALLBOX_H
#define SBX_RUNNER_SMALLBOX_H

#include "sched/sched.h"

struct sbx_runner;
struct sbx_limits;

/* After the scheduler split the box: on a box smaller than a default sandbox
 * per pool, each pool's default limits are clamped to what it has (warned). */
void runner_small_box(struct sbx_runner *r);
/* A job whose limits are the configured defaults gets its pool's clamp. */
void runner_fit_limits(struct sbx_runner *r, enum sbx_pool pool, struct sbx_limits *l);

#endif
