/* test_runner_smallbox.c - the runner's small-box module alone
 * (runner/smallbox.c, docs/runner.md "A small box"): each pool's default
 * limits clamped to what the pool has on this box, a pool the box does not
 * serve left at the defaults, and a job's limits fitted only where they are
 * the configured defaults. */
#include "test_common.h"

#include "runner/smallbox.h"
#include "sbx/sbx_provider.h"

#define GIB ((int64_t)1 << 30)

static void test_clamped_per_pool(void **state)
{
    (void)state;
    struct sbx_sched_snapshot snap = {0};
    struct runner_pool_limits pl = {0};
    const struct sbx_limits def = {.cpus = 2, .memory = 8 * GIB};

    /* a 2-CPU, 6G box split between ci and agent; agent not served */
    snap.pools[SBX_POOL_CI] = (struct sbx_sched_pool_snap){
        .pool = SBX_POOL_CI, .served = 1, .cpus = 1, .memory = 3 * GIB};
    snap.pools[SBX_POOL_AGENT] = (struct sbx_sched_pool_snap){
        .pool = SBX_POOL_AGENT, .served = 0, .cpus = 1, .memory = 3 * GIB};
    runner_small_box(&pl, &def, &snap);
    assert_true(pl.cpus[SBX_POOL_CI] == 1);
    assert_int_equal(pl.memory[SBX_POOL_CI], 3 * GIB);
    assert_true(pl.cpus[SBX_POOL_AGENT] == 2);
    assert_int_equal(pl.memory[SBX_POOL_AGENT], 8 * GIB);
    assert_true(pl.def_cpus == 2);
    assert_int_equal(pl.def_memory, 8 * GIB);

    /* a big box: nothing clamped */
    snap.pools[SBX_POOL_CI].cpus = 16;
    snap.pools[SBX_POOL_CI].memory = 64 * GIB;
    runner_small_box(&pl, &def, &snap);
    assert_true(pl.cpus[SBX_POOL_CI] == 2);
    assert_int_equal(pl.memory[SBX_POOL_CI], 8 * GIB);
}

static void test_fit_defaults_only(void **state)
{
    (void)state;
    struct sbx_sched_snapshot snap = {0};
    struct runner_pool_limits pl = {0};
    const struct sbx_limits def = {.cpus = 2, .memory = 8 * GIB};
    struct sbx_limits l;

    snap.pools[SBX_POOL_CI] = (struct sbx_sched_pool_snap){
        .pool = SBX_POOL_CI, .served = 1, .cpus = 1, .memory = 3 * GIB};
    runner_small_box(&pl, &def, &snap);

    l = (struct sbx_limits){.cpus = 2, .memory = 8 * GIB, .pids = 7};
    runner_fit_limits(&pl, SBX_POOL_CI, &l);
    assert_true(l.cpus == 1);
    assert_int_equal(l.memory, 3 * GIB);
    assert_int_equal(l.pids, 7);

    /* a policy's own limits stay (the scheduler refuses them if too big) */
    l = (struct sbx_limits){.cpus = 4, .memory = GIB};
    runner_fit_limits(&pl, SBX_POOL_CI, &l);
    assert_true(l.cpus == 4);
    assert_int_equal(l.memory, GIB);

    /* a pool out of range is left alone */
    l = (struct sbx_limits){.cpus = 2, .memory = 8 * GIB};
    runner_fit_limits(&pl, (enum sbx_pool)SBX_POOL_COUNT, &l);
    assert_true(l.cpus == 2);
    assert_int_equal(l.memory, 8 * GIB);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_clamped_per_pool),
        cmocka_unit_test(test_fit_defaults_only),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
