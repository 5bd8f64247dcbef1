/* sched_fixture.h - the scheduler tests' shared fixture: a temp dir, a fake
 * clock, and a scheduler made from a config text and a box capacity. */
#ifndef SBX_TEST_SCHED_FIXTURE_H
#define SBX_TEST_SCHED_FIXTURE_H

#include "test_common.h"

#include "config/config.h"
#include "sched/sched.h"

#define G (1LL << 30)
#define T0 1793491200000LL /* 2026-11-01T00:00:00Z (a 30-day month) */

static char *dir;
static int64_t fake_now;
static struct sbx_config *cfg;

static inline int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static inline int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    fake_now = T0;
    cfg = NULL;
    return 0;
}

static inline int teardown(void **state)
{
    (void)state;
    sbx_config_destroy(cfg);
    cfg = NULL;
    test_rm_rf(dir);
    free(dir);
    return 0;
}

/* A scheduler for config TEXT on a box of CPUS and MEM (the config is kept
 * in `cfg` until the next call or teardown). */
static inline struct sbx_sched *sched_make(const char *text, double cpus, int64_t mem)
{
    char *path = test_write_file(dir, "sbx.conf", text);
    struct sbx_box_capacity cap = {cpus, mem};
    struct sbx_sched_opts o = {NULL, &cap, fake_clock, NULL};
    sbx_error_t *err = NULL;
    struct sbx_sched *s;

    sbx_config_destroy(cfg);
    cfg = sbx_config_load_file(path, &err);
    free(path);
    if (cfg == NULL) {
        fail_msg("config: %s", err->msg);
    }
    o.cfg = cfg;
    s = sbx_sched_create(&o, &err);
    if (s == NULL) {
        fail_msg("create: %s", err->msg);
    }
    return s;
}

#endif
