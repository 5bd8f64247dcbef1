/* smallbox.c - a small machine works out of the box (docs/runner.md, "A small
 * box"): the default limits (limits.cpus 2, limits.memory 8G) do not fit a pool
 * of a 2-CPU box split between ci and agent (1 CPU each). Each pool's default
 * is then clamped to what the pool has, with a warning at start; a job whose
 * policy asks for more than its pool still gets the scheduler's refusal. */
#include "runner/smallbox.h"
#include "sbx/sbx_provider.h"
#include "util/log.h"

void runner_small_box(struct runner_pool_limits *pl, const struct sbx_limits *def,
                      const struct sbx_sched_snapshot *snap)
{
    /* (added, issue 31) a one_shot runner (`sbx run`'s own) says it at debug
     * level: every run would repeat it, where the embedded run clamped silently */
    enum sbx_log_level lv = pl->quiet ? SBX_LOG_DEBUG : SBX_LOG_WARN;

    pl->def_cpus = def->cpus;
    pl->def_memory = def->memory;
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        const struct sbx_sched_pool_snap *p = &snap->pools[i];

        pl->cpus[i] = def->cpus;
        pl->memory[i] = def->memory;
        if (!p->served) {
            continue;
        }
        if (def->cpus > p->cpus) {
            pl->cpus[i] = p->cpus;
            sbx_log(lv,
                    "runner: pool '%s' has %.3g CPUs on this box, less than limits.cpus = %.3g: "
                    "its jobs with the default limit get %.3g CPUs",
                    sbx_pool_name(p->pool), p->cpus, def->cpus, p->cpus);
        }
        if (def->memory > p->memory) {
            pl->memory[i] = p->memory;
            sbx_log(lv,
                    "runner: pool '%s' has %.1fG of memory on this box, less than "
                    "limits.memory = %.1fG: its jobs with the default limit get %.1fG",
                    sbx_pool_name(p->pool), (double)p->memory / (1 << 30),
                    (double)def->memory / (1 << 30), (double)p->memory / (1 << 30));
        }
    }
}

void runner_fit_limits(const struct runner_pool_limits *pl, enum sbx_pool pool,
                       struct sbx_limits *l)
{
    if ((unsigned)pool >= SBX_POOL_COUNT) {
        return;
    }
    if (l->cpus == pl->def_cpus) {
        l->cpus = pl->cpus[pool];
    }
    if (l->memory == pl->def_memory) {
        l->memory = pl->memory[pool];
    }
}
