/* smallbox.c - a small machine works out of the box (docs/runner.md, "A small
 * box"): the default limits (limits.cpus 2, limits.memory 8G) do not fit a pool
 * of a 2-CPU box split between ci and agent (1 CPU each). Each pool's default
 * is then clamped to what the pool has, with a warning at start; a job whose
 * policy asks for more than its pool still gets the scheduler's refusal. */
#include "runner/state.h"
#include "runner/smallbox.h"
#include "util/log.h"

void runner_small_box(struct sbx_runner *r)
{
    struct sbx_sched_snapshot *snap = sbx_sched_snapshot(r->sched);
    /* (added, issue 31) a one_shot runner (`sbx run`'s own) says it at debug
     * level: every run would repeat it, where the embedded run clamped silently */
    enum sbx_log_level lv = r->one_shot ? SBX_LOG_DEBUG : SBX_LOG_WARN;

    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        const struct sbx_sched_pool_snap *p = &snap->pools[i];

        r->pool_cpus[i] = r->cfg->limits.cpus;
        r->pool_memory[i] = r->cfg->limits.memory;
        if (!p->served) {
            continue;
        }
        if (r->cfg->limits.cpus > p->cpus) {
            r->pool_cpus[i] = p->cpus;
            sbx_log(lv,
                    "runner: pool '%s' has %.3g CPUs on this box, less than limits.cpus = %.3g: "
                    "its jobs with the default limit get %.3g CPUs",
                    sbx_pool_name(p->pool), p->cpus, r->cfg->limits.cpus, p->cpus);
        }
        if (r->cfg->limits.memory > p->memory) {
            r->pool_memory[i] = p->memory;
            sbx_log(lv,
                    "runner: pool '%s' has %.1fG of memory on this box, less than "
                    "limits.memory = %.1fG: its jobs with the default limit get %.1fG",
                    sbx_pool_name(p->pool), (double)p->memory / (1 << 30),
                    (double)r->cfg->limits.memory / (1 << 30), (double)p->memory / (1 << 30));
        }
    }
    sbx_sched_snapshot_free(snap);
}

void runner_fit_limits(struct sbx_runner *r, enum sbx_pool pool, struct sbx_limits *l)
{
    if ((unsigned)pool >= SBX_POOL_COUNT) {
        return;
    }
    if (l->cpus == r->cfg->limits.cpus) {
        l->cpus = r->pool_cpus[pool];
    }
    if (l->memory == r->cfg->limits.memory) {
        l->memory = r->pool_memory[pool];
    }
}
