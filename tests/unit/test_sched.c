/* test_sched.c - the scheduler with a fake clock: pools, slots, FIFO, waits,
 * alerts, refusal. The autoscaler is in test_autoscale.c. */
#include "sched_fixture.h"

#include <errno.h>

#include "config/config.h"
#include "sched/sched.h"

static struct sbx_sched *make(const char *text, double cpus, int64_t mem)
{
    return sched_make(text, cpus, mem);
}

static void submit_ok(struct sbx_sched *s, const char *id, enum sbx_pool pool,
                      enum sbx_job_class cls, double cpus, int64_t mem)
{
    struct sbx_sched_job j = {id, NULL, pool, cls, cpus, mem, 0};
    sbx_error_t *err = NULL;

    if (sbx_sched_submit(s, &j, &err) < 0) {
        fail_msg("submit %s: %s", id, err->msg);
    }
}

/* The next grant's id, or "" */
static const char *grant(struct sbx_sched *s)
{
    static struct sbx_sched_grant g;

    if (!sbx_sched_next_grant(s, &g)) {
        return "";
    }
    return g.id;
}

static void release(struct sbx_sched *s, const char *id)
{
    sbx_error_t *err = NULL;

    if (sbx_sched_release(s, id, SBX_RESULT_OK, &err) < 0) {
        fail_msg("release %s: %s", id, err->msg);
    }
}

static void expect_refused(struct sbx_sched *s, const struct sbx_sched_job *j, int code,
                           const char *fragment)
{
    sbx_error_t *err = NULL;

    assert_int_equal(sbx_sched_submit(s, j, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->code, code);
    if (strstr(err->msg, fragment) == NULL) {
        fail_msg("got '%s', wanted '%s'", err->msg, fragment);
    }
    sbx_error_free(&err);
}

/* Both pools (even split: 8 CPUs, 3 sandboxes and half of the box's memory
 * minus the host reserve each: (64G - 6.4G) / 2 = 28.8G). */
#define RESERVE64 (64 * G / 10) /* the default box.host_reserve of a 64G box */
#define BOTH "box = { pools = [\"ci\", \"agent\"]; };\n"

static void test_sched_split(void **state)
{
    struct sbx_sched *s = make(BOTH, 16, 64 * G);
    struct sbx_sched_snapshot *snap = sbx_sched_snapshot(s);

    (void)state;
    assert_true(snap->pools[SBX_POOL_CI].cpus == 8.0);
    assert_int_equal(snap->pools[SBX_POOL_CI].memory, (64 * G - RESERVE64) / 2);
    assert_int_equal(snap->host_reserve, RESERVE64);
    assert_int_equal(snap->pools[SBX_POOL_CI].max_sandboxes, 3);
    assert_int_equal(snap->pools[SBX_POOL_AGENT].max_sandboxes, 3);
    assert_true(snap->heavy_allowed);
    assert_string_equal(snap->heavy_refusal, "");
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);

    /* configured shares; the rest goes to the unconfigured pool */
    s = make(BOTH "pools = { ci = { cpus = 10.0; memory = \"40G\"; max_sandboxes = 4; }; };\n", 16,
             64 * G);
    snap = sbx_sched_snapshot(s);
    assert_true(snap->pools[SBX_POOL_CI].cpus == 10.0);
    assert_true(snap->pools[SBX_POOL_AGENT].cpus == 6.0);
    assert_int_equal(snap->pools[SBX_POOL_AGENT].memory, 24 * G - RESERVE64);
    assert_int_equal(snap->pools[SBX_POOL_CI].max_sandboxes, 4);
    assert_int_equal(snap->pools[SBX_POOL_AGENT].max_sandboxes, 2);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);

    /* one pool served: it gets the whole box */
    s = make("box = { pools = [\"agent\"]; };\n", 16, 64 * G);
    snap = sbx_sched_snapshot(s);
    assert_false(snap->pools[SBX_POOL_CI].served);
    assert_int_equal(snap->pools[SBX_POOL_AGENT].max_sandboxes, 6);
    assert_int_equal(snap->pools[SBX_POOL_AGENT].memory, 64 * G - RESERVE64);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);
}

static void expect_create_error(const char *text, double cpus, int64_t mem, const char *frag)
{
    char *path = test_write_file(dir, "sbx.conf", text);
    struct sbx_box_capacity cap = {cpus, mem};
    struct sbx_sched_opts o = {NULL, &cap, fake_clock, NULL};
    sbx_error_t *err = NULL;

    sbx_config_destroy(cfg);
    cfg = sbx_config_load_file(path, &err);
    free(path);
    assert_non_null(cfg);
    o.cfg = cfg;
    assert_null(sbx_sched_create(&o, &err));
    assert_non_null(err);
    if (strstr(err->msg, frag) == NULL) {
        fail_msg("got '%s', wanted '%s'", err->msg, frag);
    }
    sbx_error_free(&err);
}

static void test_sched_create_errors(void **state)
{
    struct sbx_sched_opts o;
    sbx_error_t *err = NULL;

    (void)state;
    expect_create_error(BOTH "pools = { ci = { cpus = 20.0; }; };\n", 16, 64 * G,
                        "pools ask for 20 CPUs but the box has 16");
    expect_create_error(BOTH "pools = { agent = { memory = \"100G\"; }; };\n", 16, 64 * G,
                        "100G of memory but the box has 57.6G for sandboxes (box.memory "
                        "64G - box.host_reserve 6.4G)");
    expect_create_error(BOTH "pools = { ci = { max_sandboxes = 7; }; };\n", 16, 64 * G,
                        "7 sandboxes but box.max_sandboxes is 6");
    expect_create_error(BOTH "pools = { ci = { max_sandboxes = 6; }; };\n", 16, 64 * G,
                        "pool 'agent' gets no sandbox");
    expect_create_error(BOTH "pools = { ci = { cpus = 16.0; }; };\n", 16, 64 * G,
                        "pool 'agent' gets no CPU");
    expect_create_error(BOTH, 0, 64 * G, "capacity must be positive");
    memset(&o, 0, sizeof(o));
    assert_null(sbx_sched_create(&o, &err));
    assert_string_equal(err->msg, "scheduler: no configuration given");
    sbx_error_free(&err);
}

static void test_sched_measure(void **state)
{
    struct sbx_box_capacity cap;
    sbx_error_t *err = NULL;
    char *p = test_write_file(dir, "meminfo", "MemTotal:       65536000 kB\nMemFree: 1 kB\n");
    char *bad = test_write_file(dir, "meminfo.bad", "MemFree: 1 kB\n");

    (void)state;
    assert_int_equal(sbx_box_measure(p, &cap, &err), 0);
    assert_int_equal(cap.memory, 65536000LL * 1024);
    assert_true(cap.cpus >= 1);
    assert_int_equal(sbx_box_measure(NULL, &cap, &err), 0); /* the real /proc/meminfo */
    assert_true(cap.memory > 0);
    assert_int_equal(sbx_box_measure(bad, &cap, &err), -1);
    assert_non_null(strstr(err->msg, "has no MemTotal line"));
    sbx_error_free(&err);
    assert_int_equal(sbx_box_measure("/nonexistent/meminfo", &cap, &err), -1);
    assert_non_null(strstr(err->msg, "cannot open /nonexistent/meminfo"));
    sbx_error_free(&err);
    free(p);
    free(bad);
}

/* An agent pool full of tasks (and more queued) never delays a CI job, and the reverse. */
static void test_sched_pool_isolation(void **state)
{
    struct sbx_sched *s = make(BOTH, 16, 64 * G);
    char id[32];

    (void)state;
    for (int i = 0; i < 20; i++) {
        snprintf(id, sizeof(id), "agent-%d", i);
        submit_ok(s, id, SBX_POOL_AGENT, SBX_CLASS_LIGHT, 2, 8 * G);
    }
    assert_string_equal(grant(s), "agent-0");
    assert_string_equal(grant(s), "agent-1");
    assert_string_equal(grant(s), "agent-2");
    assert_string_equal(grant(s), ""); /* agent pool full: 3 sandboxes */
    submit_ok(s, "ci-1", SBX_POOL_CI, SBX_CLASS_LIGHT, 2, 8 * G);
    assert_string_equal(grant(s), "ci-1");
    submit_ok(s, "ci-h", SBX_POOL_CI, SBX_CLASS_HEAVY, 4, 16 * G);
    assert_string_equal(grant(s), "ci-h");
    for (int i = 2; i < 10; i++) {
        snprintf(id, sizeof(id), "ci-%d", i);
        submit_ok(s, id, SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    }
    assert_string_equal(grant(s), "ci-2");
    assert_string_equal(grant(s), ""); /* ci full too */
    /* an agent slot frees: the agent queue moves, CI's backlog is not in its way */
    release(s, "agent-0");
    assert_string_equal(grant(s), "agent-3");
    release(s, "ci-1");
    assert_string_equal(grant(s), "ci-3");
    sbx_sched_destroy(s);
}

/* At most one heavy job per pool; each pool has its own heavy slot. */
static void test_sched_heavy_exclusive(void **state)
{
    struct sbx_sched *s = make(BOTH, 16, 64 * G);
    struct sbx_sched_snapshot *snap;

    (void)state;
    submit_ok(s, "h1", SBX_POOL_CI, SBX_CLASS_HEAVY, 2, 8 * G);
    submit_ok(s, "h2", SBX_POOL_CI, SBX_CLASS_HEAVY, 2, 8 * G);
    submit_ok(s, "ah", SBX_POOL_AGENT, SBX_CLASS_HEAVY, 2, 8 * G);
    assert_string_equal(grant(s), "h1");
    assert_string_equal(grant(s), "ah"); /* the agent pool's own heavy slot */
    assert_string_equal(grant(s), "");   /* h2 waits although CPU, memory and slots are free */
    snap = sbx_sched_snapshot(s);
    assert_true(snap->pools[SBX_POOL_CI].heavy_busy);
    assert_int_equal(snap->pools[SBX_POOL_CI].running, 1);
    assert_int_equal(snap->pools[SBX_POOL_CI].n_queued_heavy, 1);
    sbx_sched_snapshot_free(snap);
    release(s, "h1");
    assert_string_equal(grant(s), "h2");
    sbx_sched_destroy(s);
}

/* (added) sbx_sched_fit_copy: the store thread's claim decides with a copy
 * (runner/fleet.c); it answers as the scheduler did when copied, whatever the
 * scheduler does after. */
static int fit_both(const struct sbx_sched *s, enum sbx_pool pool, enum sbx_job_class cls)
{
    return sbx_sched_claim_fit(s, pool, cls, 2, 8 * G);
}

static void test_sched_fit_copy(void **state)
{
    struct sbx_sched *s = make(BOTH, 16, 64 * G);
    struct sbx_sched *c;

    (void)state;
    submit_ok(s, "h1", SBX_POOL_CI, SBX_CLASS_HEAVY, 2, 8 * G);
    assert_string_equal(grant(s), "h1"); /* ci's heavy slot held, nothing queued */
    c = sbx_sched_fit_copy(s);
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        for (int k = 0; k < 2; k++) {
            assert_int_equal(fit_both(c, (enum sbx_pool)p, (enum sbx_job_class)k),
                             fit_both(s, (enum sbx_pool)p, (enum sbx_job_class)k));
        }
    }
    assert_int_equal(fit_both(c, SBX_POOL_CI, SBX_CLASS_HEAVY), 0); /* another box may */
    assert_int_equal(fit_both(c, SBX_POOL_CI, SBX_CLASS_LIGHT), 1);
    /* the scheduler goes on: a queued job here, the heavy slot freed */
    submit_ok(s, "l1", SBX_POOL_CI, SBX_CLASS_LIGHT, 2, 8 * G);
    release(s, "h1");
    assert_int_equal(fit_both(s, SBX_POOL_CI, SBX_CLASS_LIGHT), -1); /* l1 starts first */
    assert_int_equal(fit_both(c, SBX_POOL_CI, SBX_CLASS_LIGHT), 1);  /* the copy as it was */
    assert_int_equal(fit_both(c, SBX_POOL_CI, SBX_CLASS_HEAVY), 0);
    sbx_sched_fit_free(c);
    sbx_sched_destroy(s);
}

/* box.max_sandboxes (default 6) caps the box whatever CPU and memory are left. */
static void test_sched_six_cap(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\"]; };\n", 64, 256 * G);
    char id[32];
    int granted = 0;

    (void)state;
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof(id), "j%d", i);
        submit_ok(s, id, SBX_POOL_CI, SBX_CLASS_LIGHT, 0.5, 1 * G);
    }
    while (grant(s)[0] != '\0') {
        granted++;
    }
    assert_int_equal(granted, 6);
    release(s, "j3");
    assert_string_equal(grant(s), "j6");
    assert_string_equal(grant(s), "");
    sbx_sched_destroy(s);

    /* and split between two pools: 3 + 3, never 6 in one pool */
    s = make(BOTH, 64, 256 * G);
    for (int i = 0; i < 10; i++) {
        snprintf(id, sizeof(id), "a%d", i);
        submit_ok(s, id, SBX_POOL_AGENT, SBX_CLASS_LIGHT, 0.5, 1 * G);
    }
    granted = 0;
    while (grant(s)[0] != '\0') {
        granted++;
    }
    assert_int_equal(granted, 3);
    sbx_sched_destroy(s);
}

/* Refusal at submit, with the reason; fit by CPU and memory. */
static void test_sched_fit_and_refusal(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\"]; };\n", 8, 64 * G);
    struct sbx_sched_job j = {"big", NULL, SBX_POOL_CI, SBX_CLASS_LIGHT, 9, 8 * G, 0};
    struct sbx_sched_snapshot *snap;

    (void)state;
    expect_refused(s, &j, SBX_E_POLICY, "refused: job big asks for 9 CPUs but pool 'ci' has 8");
    j.cpus = 2;
    j.memory = 65 * G;
    expect_refused(s, &j, SBX_E_POLICY,
                   "asks for 65G of memory but pool 'ci' has 57.6G on "
                   "this box (box.memory 64G - box.host_reserve 6.4G");
    j.memory = 8 * G;
    j.pool = SBX_POOL_AGENT;
    expect_refused(s, &j, SBX_E_POLICY, "this box does not serve pool 'agent'");
    /* fit: 8 CPUs; 3 + 3 fit, the next 3 waits until 1 frees */
    submit_ok(s, "a", SBX_POOL_CI, SBX_CLASS_LIGHT, 3, 8 * G);
    submit_ok(s, "b", SBX_POOL_CI, SBX_CLASS_LIGHT, 3, 8 * G);
    submit_ok(s, "c", SBX_POOL_CI, SBX_CLASS_LIGHT, 3, 8 * G);
    assert_string_equal(grant(s), "a");
    assert_string_equal(grant(s), "b");
    assert_string_equal(grant(s), "");
    release(s, "a");
    assert_string_equal(grant(s), "c");
    /* memory: 57.6G pool, 2 x 8G used; a 45G job waits */
    submit_ok(s, "m", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 45 * G);
    assert_string_equal(grant(s), "");
    release(s, "b");
    assert_string_equal(grant(s), "m");
    sbx_sched_destroy(s);

    /* a 16G box takes no heavy jobs and says so */
    s = make("box = { pools = [\"ci\"]; };\n", 4, 16 * G);
    snap = sbx_sched_snapshot(s);
    assert_false(snap->heavy_allowed);
    assert_string_equal(snap->heavy_refusal,
                        "this box has 16.0G of memory, less than "
                        "box.heavy_min_memory (60.0G): it takes no heavy jobs");
    sbx_sched_snapshot_free(snap);
    j.pool = SBX_POOL_CI;
    j.cls = SBX_CLASS_HEAVY;
    j.cpus = 1;
    j.memory = 1 * G;
    expect_refused(s, &j, SBX_E_POLICY, "refused: job big is heavy but this box has 16.0G");
    j.cls = SBX_CLASS_LIGHT;
    submit_ok(s, "light", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    assert_string_equal(grant(s), "light");
    sbx_sched_destroy(s);

    /* a lower heavy_min_memory (tests, small boxes) lets it in */
    s = make("box = { pools = [\"ci\"]; heavy_min_memory = \"8G\"; };\n", 4, 16 * G);
    submit_ok(s, "h", SBX_POOL_CI, SBX_CLASS_HEAVY, 1, 1 * G);
    assert_string_equal(grant(s), "h");
    sbx_sched_destroy(s);
}

static void test_sched_bad_input(void **state)
{
    struct sbx_sched *s = make(BOTH, 16, 64 * G);
    struct sbx_sched_job j = {"ok", NULL, SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G, 0};
    sbx_error_t *err = NULL;
    char longid[80];

    (void)state;
    expect_refused(s, NULL, EINVAL, "no job given");
    j.id = "";
    expect_refused(s, &j, EINVAL, "job id must be 1-63 characters");
    j.id = "a b";
    expect_refused(s, &j, EINVAL, "job id must be");
    memset(longid, 'x', sizeof(longid) - 1);
    longid[sizeof(longid) - 1] = '\0';
    j.id = longid;
    expect_refused(s, &j, EINVAL, "job id must be");
    j.id = "ok";
    j.task = "bad/task";
    expect_refused(s, &j, EINVAL, "task id must be");
    j.task = NULL;
    j.cpus = 0;
    expect_refused(s, &j, EINVAL, "cpus and memory must be positive");
    j.cpus = 1;
    j.memory = -1;
    expect_refused(s, &j, EINVAL, "cpus and memory must be positive");
    j.memory = 1 * G;
    j.pool = (enum sbx_pool)7;
    expect_refused(s, &j, EINVAL, "unknown pool 7");
    j.pool = SBX_POOL_CI;
    j.cls = (enum sbx_job_class)3;
    expect_refused(s, &j, EINVAL, "unknown class 3");
    j.cls = SBX_CLASS_LIGHT;
    submit_ok(s, "ok", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    expect_refused(s, &j, EEXIST, "job ok already exists");
    /* release and cancel */
    assert_int_equal(sbx_sched_release(s, "nope", SBX_RESULT_OK, &err), -1);
    assert_int_equal(err->code, SBX_E_NOTFOUND);
    sbx_error_free(&err);
    assert_int_equal(sbx_sched_release(s, NULL, SBX_RESULT_OK, &err), -1);
    sbx_error_free(&err);
    assert_int_equal(sbx_sched_release(s, "ok", SBX_RESULT_OK, &err), -1);
    assert_non_null(strstr(err->msg, "is queued, not running"));
    sbx_error_free(&err);
    assert_string_equal(grant(s), "ok");
    assert_int_equal(sbx_sched_release(s, "ok", (enum sbx_job_result)9, &err), -1);
    assert_non_null(strstr(err->msg, "unknown result 9"));
    sbx_error_free(&err);
    assert_int_equal(sbx_sched_cancel(s, "ok", &err), -1);
    assert_int_equal(err->code, EBUSY);
    sbx_error_free(&err);
    assert_int_equal(sbx_sched_cancel(s, "nope", &err), -1);
    assert_int_equal(err->code, SBX_E_NOTFOUND);
    sbx_error_free(&err);
    assert_int_equal(sbx_sched_release(s, "ok", SBX_RESULT_FAILED, &err), 0);
    /* the id is free again after release */
    submit_ok(s, "ok", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    assert_int_equal(sbx_sched_cancel(s, "ok", &err), 0);
    assert_string_equal(grant(s), "");
    sbx_sched_destroy(s);
}

/* FIFO within a pool; a cancelled job leaves no hole. */
static void test_sched_fifo(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\"]; };\n", 2, 64 * G);
    sbx_error_t *err = NULL;
    char id[16];

    (void)state;
    for (int i = 0; i < 6; i++) {
        snprintf(id, sizeof(id), "j%d", i);
        submit_ok(s, id, SBX_POOL_CI, SBX_CLASS_LIGHT, 2, 1 * G);
        fake_now += 1000;
    }
    assert_int_equal(sbx_sched_cancel(s, "j2", &err), 0);
    assert_string_equal(grant(s), "j0");
    assert_string_equal(grant(s), "");
    release(s, "j0");
    assert_string_equal(grant(s), "j1");
    release(s, "j1");
    assert_string_equal(grant(s), "j3");
    release(s, "j3");
    assert_string_equal(grant(s), "j4");
    release(s, "j4");
    assert_string_equal(grant(s), "j5");
    sbx_sched_destroy(s);

    /* a big head is not passed by smaller jobs behind it (no starvation) */
    s = make("box = { pools = [\"ci\"]; };\n", 4, 64 * G);
    submit_ok(s, "small1", SBX_POOL_CI, SBX_CLASS_LIGHT, 2, 1 * G);
    submit_ok(s, "big", SBX_POOL_CI, SBX_CLASS_LIGHT, 4, 1 * G);
    submit_ok(s, "small2", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    assert_string_equal(grant(s), "small1");
    assert_string_equal(grant(s), ""); /* small2 would fit, but big is first */
    release(s, "small1");
    assert_string_equal(grant(s), "big");
    release(s, "big");
    assert_string_equal(grant(s), "small2");
    sbx_sched_destroy(s);
}

/* The passing rule: light jobs pass a heavy job parked behind the busy heavy
 * slot; once the slot is free, the heavy head holds the pool until it fits. */
static void test_sched_light_passes_parked_heavy(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\"]; };\n", 8, 64 * G);

    (void)state;
    submit_ok(s, "h1", SBX_POOL_CI, SBX_CLASS_HEAVY, 4, 16 * G);
    submit_ok(s, "h2", SBX_POOL_CI, SBX_CLASS_HEAVY, 4, 16 * G);
    submit_ok(s, "l1", SBX_POOL_CI, SBX_CLASS_LIGHT, 2, 4 * G);
    submit_ok(s, "l2", SBX_POOL_CI, SBX_CLASS_LIGHT, 2, 4 * G);
    submit_ok(s, "l3", SBX_POOL_CI, SBX_CLASS_LIGHT, 2, 4 * G);
    assert_string_equal(grant(s), "h1");
    /* h2 is parked (the heavy slot is held): l1 and l2 pass it */
    assert_string_equal(grant(s), "l1");
    assert_string_equal(grant(s), "l2");
    assert_string_equal(grant(s), ""); /* 8 CPUs used */
    release(s, "h1");
    /* heavy slot free: h2 (older than l3) is the head; it needs 4 CPUs, 4 free */
    assert_string_equal(grant(s), "h2");
    assert_string_equal(grant(s), "");
    release(s, "h2");
    release(s, "l1");
    submit_ok(s, "h3", SBX_POOL_CI, SBX_CLASS_HEAVY, 8, 16 * G);
    submit_ok(s, "l4", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    assert_string_equal(grant(s), "l3"); /* older than h3 */
    /* h3 needs all 8 CPUs; l2 and l3 hold 4: h3 blocks l4 instead of starving */
    assert_string_equal(grant(s), "");
    release(s, "l2");
    assert_string_equal(grant(s), "");
    release(s, "l3");
    assert_string_equal(grant(s), "h3");
    assert_string_equal(grant(s), ""); /* l4 needs 1 CPU, h3 holds all 8 */
    release(s, "h3");
    assert_string_equal(grant(s), "l4");
    sbx_sched_destroy(s);
}

/* Waits: the grant's wait, the queued jobs' wait so far, the histogram. */
static void test_sched_wait_accounting(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\"]; };\n", 2, 64 * G);
    struct sbx_sched_grant g;
    struct sbx_sched_snapshot *snap;
    const struct sbx_sched_pool_snap *p;

    (void)state;
    submit_ok(s, "a", SBX_POOL_CI, SBX_CLASS_LIGHT, 2, 1 * G);
    assert_int_equal(sbx_sched_next_grant(s, &g), 1);
    assert_int_equal(g.wait_ms, 0);
    assert_int_equal(g.enqueued_at, T0);
    fake_now += 5000;
    submit_ok(s, "b", SBX_POOL_CI, SBX_CLASS_LIGHT, 2, 1 * G);
    fake_now += 10000;
    submit_ok(s, "c", SBX_POOL_CI, SBX_CLASS_HEAVY, 2, 1 * G);
    fake_now += 300000;
    snap = sbx_sched_snapshot(s);
    p = &snap->pools[SBX_POOL_CI];
    assert_int_equal(p->n_queued, 2);
    assert_string_equal(p->queued[0].id, "b");
    assert_int_equal(p->queued[0].wait_ms, 310000);
    assert_string_equal(p->queued[1].id, "c");
    assert_int_equal(p->queued[1].wait_ms, 300000);
    assert_int_equal(p->oldest_enqueued_at, T0 + 5000);
    assert_int_equal(p->oldest_wait_ms, 310000);
    assert_true(p->slots[0].busy);
    assert_string_equal(p->slots[0].id, "a");
    assert_int_equal(p->slots[0].since, T0);
    sbx_sched_snapshot_free(snap);
    release(s, "a");
    assert_int_equal(sbx_sched_next_grant(s, &g), 1);
    assert_string_equal(g.id, "b");
    assert_int_equal(g.wait_ms, 310000);
    fake_now += 400000; /* c waits 700 s */
    release(s, "b");
    assert_int_equal(sbx_sched_next_grant(s, &g), 1);
    assert_int_equal(g.wait_ms, 700000);
    snap = sbx_sched_snapshot(s);
    p = &snap->pools[SBX_POOL_CI];
    assert_int_equal(p->wait_count, 3);
    assert_true(p->wait_sum == 1010.0);
    assert_int_equal(p->wait_buckets[0], 1); /* le 1: a */
    assert_int_equal(p->wait_buckets[6], 1); /* le 300 */
    assert_int_equal(p->wait_buckets[7], 2); /* le 600: a, b */
    assert_int_equal(p->wait_buckets[8], 3); /* le 900 */
    assert_int_equal(p->started, 3);
    assert_int_equal(p->finished[SBX_RESULT_OK], 2);
    assert_int_equal(p->n_queued, 0);
    assert_int_equal(p->oldest_enqueued_at, 0);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);
}

/* The alert fires at exactly alert_after (600 s of fake time), once per job. */
static void test_sched_alert_threshold(void **state)
{
    struct sbx_sched *s = make(BOTH, 2, 64 * G);
    struct sbx_sched_alert a[4];
    struct sbx_sched_snapshot *snap;

    (void)state;
    submit_ok(s, "run", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    assert_string_equal(grant(s), "run");
    submit_ok(s, "w1", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    fake_now += 60000;
    submit_ok(s, "w2", SBX_POOL_CI, SBX_CLASS_HEAVY, 1, 1 * G);
    fake_now = T0 + 599999;
    assert_int_equal(sbx_sched_due_alerts(s, a, 4), 0);
    fake_now = T0 + 600000;
    assert_int_equal(sbx_sched_due_alerts(s, a, 4), 1);
    assert_string_equal(a[0].id, "w1");
    assert_int_equal(a[0].wait_ms, 600000);
    assert_int_equal(a[0].pool, SBX_POOL_CI);
    assert_int_equal(sbx_sched_due_alerts(s, a, 4), 0); /* once */
    fake_now = T0 + 660000;
    assert_int_equal(sbx_sched_due_alerts(s, a, 4), 1);
    assert_string_equal(a[0].id, "w2");
    assert_int_equal(a[0].cls, SBX_CLASS_HEAVY);
    fake_now += 3600000;
    assert_int_equal(sbx_sched_due_alerts(s, a, 4), 0);
    snap = sbx_sched_snapshot(s);
    assert_int_equal(snap->pools[SBX_POOL_CI].alerts, 2);
    assert_true(snap->pools[SBX_POOL_CI].queued[0].alerted);
    sbx_sched_snapshot_free(snap);
    /* a job granted before its threshold never fires; max bounds the batch */
    release(s, "run");
    assert_string_equal(grant(s), "w1");
    submit_ok(s, "x1", SBX_POOL_AGENT, SBX_CLASS_LIGHT, 1, 1 * G);
    submit_ok(s, "x2", SBX_POOL_AGENT, SBX_CLASS_LIGHT, 1, 1 * G);
    submit_ok(s, "x3", SBX_POOL_AGENT, SBX_CLASS_LIGHT, 1, 1 * G);
    assert_string_equal(grant(s), "x1");
    fake_now += 600000;
    assert_int_equal(sbx_sched_due_alerts(s, a, 1), 1);
    assert_string_equal(a[0].id, "x2");
    assert_int_equal(sbx_sched_due_alerts(s, a, 4), 1);
    assert_string_equal(a[0].id, "x3");
    /* cancelling the job at the alert cursor keeps the cursor on the next one */
    submit_ok(s, "y1", SBX_POOL_AGENT, SBX_CLASS_LIGHT, 1, 1 * G);
    submit_ok(s, "y2", SBX_POOL_AGENT, SBX_CLASS_LIGHT, 1, 1 * G);
    assert_int_equal(sbx_sched_cancel(s, "y1", NULL), 0);
    fake_now += 600000;
    assert_int_equal(sbx_sched_due_alerts(s, a, 4), 1);
    assert_string_equal(a[0].id, "y2");
    sbx_sched_destroy(s);
}

/* Issue 14: the pools split box.memory minus box.host_reserve; a job larger
 * than its pool's share is refused at submit with the numbers; the rest wait. */
static void test_sched_host_reserve(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\"]; memory = \"3G\"; host_reserve = "
                               "\"1G\"; heavy_min_memory = \"1G\"; };\n",
                               2, 64 * G);
    struct sbx_sched_snapshot *snap = sbx_sched_snapshot(s);
    struct sbx_sched_job j = {"huge", NULL, SBX_POOL_CI, SBX_CLASS_LIGHT, 0.5, 3 * G, 0};

    (void)state;
    assert_int_equal(snap->box.memory, 3 * G); /* box.memory wins over the measured 64G */
    assert_int_equal(snap->host_reserve, 1 * G);
    assert_int_equal(snap->pools[SBX_POOL_CI].memory, 2 * G);
    sbx_sched_snapshot_free(snap);
    expect_refused(s, &j, SBX_E_POLICY,
                   "refused: job huge asks for 3G of memory but pool 'ci' has 2G on this "
                   "box (box.memory 3G - box.host_reserve 1G, split between the pools)");
    submit_ok(s, "a", SBX_POOL_CI, SBX_CLASS_LIGHT, 0.5, 1 * G);
    submit_ok(s, "b", SBX_POOL_CI, SBX_CLASS_LIGHT, 0.5, 1 * G);
    submit_ok(s, "c", SBX_POOL_CI, SBX_CLASS_LIGHT, 0.5, 1 * G);
    assert_string_equal(grant(s), "a");
    assert_string_equal(grant(s), "b");
    assert_string_equal(grant(s), ""); /* 2G of 2G admitted: c waits */
    release(s, "a");
    assert_string_equal(grant(s), "c");
    sbx_sched_destroy(s);

    /* both pools: the sum of their memory stays within box.memory - reserve */
    s = make("box = { pools = [\"ci\", \"agent\"]; memory = \"10G\"; host_reserve = "
             "\"2G\"; };\npools = { ci = { memory = \"5G\"; }; };\n",
             16, 64 * G);
    snap = sbx_sched_snapshot(s);
    assert_int_equal(snap->pools[SBX_POOL_CI].memory + snap->pools[SBX_POOL_AGENT].memory, 8 * G);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);

    /* a reserve of 0 gives the pools the whole box */
    s = make("box = { pools = [\"agent\"]; host_reserve = 0; };\n", 16, 64 * G);
    snap = sbx_sched_snapshot(s);
    assert_int_equal(snap->pools[SBX_POOL_AGENT].memory, 64 * G);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);

    /* configured pools over the budget, and a reserve that leaves nothing */
    expect_create_error("box = { pools = [\"ci\", \"agent\"]; memory = \"10G\"; "
                        "host_reserve = \"2G\"; };\npools = { ci = { memory = \"9G\"; }; };\n",
                        16, 64 * G,
                        "pools ask for 9G of memory but the box has 8G for sandboxes "
                        "(box.memory 10G - box.host_reserve 2G)");
    expect_create_error("box = { pools = [\"ci\"]; host_reserve = \"64G\"; };\n", 16, 64 * G,
                        "box.host_reserve (64.0G) leaves nothing of the box's 64.0G");
}

/* Scale-in: draining grants nothing; the box may stop only when no job runs. */
static void test_sched_drain(void **state)
{
    struct sbx_sched *s = make(BOTH, 16, 64 * G);

    (void)state;
    submit_ok(s, "a", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    submit_ok(s, "b", SBX_POOL_CI, SBX_CLASS_LIGHT, 1, 1 * G);
    assert_string_equal(grant(s), "a");
    assert_false(sbx_sched_can_stop(s));
    sbx_sched_drain(s, 1);
    assert_string_equal(grant(s), "");
    assert_false(sbx_sched_can_stop(s)); /* a is running */
    release(s, "a");
    assert_true(sbx_sched_can_stop(s));
    sbx_sched_drain(s, 0);
    assert_false(sbx_sched_can_stop(s));
    assert_string_equal(grant(s), "b");
    sbx_sched_destroy(s);
}

/* Recovery: a re-adopted running job takes its slot back directly. */
static void test_sched_adopt(void **state)
{
    struct sbx_sched *s =
        make("box = { pools = [\"ci\"]; heavy_min_memory = \"1G\"; };\n", 4, 64 * G);
    struct sbx_sched_job j = {"old", "task-1", SBX_POOL_CI, SBX_CLASS_HEAVY, 2, 1 * G, T0 - 50000};
    struct sbx_sched_snapshot *snap;
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(sbx_sched_adopt(s, &j, T0 - 40000, &err), 0);
    j.id = "old2";
    assert_int_equal(sbx_sched_adopt(s, &j, T0 - 40000, &err), -1);
    assert_non_null(strstr(err->msg, "heavy slot of pool 'ci' is held by old"));
    sbx_error_free(&err);
    j.cls = SBX_CLASS_LIGHT;
    j.enqueued_at = T0 - 90000; /* a queued job re-submitted with its stored time */
    assert_int_equal(sbx_sched_submit(s, &j, &err), 0);
    snap = sbx_sched_snapshot(s);
    assert_string_equal(snap->pools[SBX_POOL_CI].slots[0].task, "task-1");
    assert_int_equal(snap->pools[SBX_POOL_CI].slots[0].since, T0 - 40000);
    assert_int_equal(snap->pools[SBX_POOL_CI].oldest_wait_ms, 90000);
    sbx_sched_snapshot_free(snap);
    assert_string_equal(grant(s), "old2");
    assert_int_equal(sbx_sched_release(s, "old", SBX_RESULT_INTERRUPTED, &err), 0);
    sbx_sched_destroy(s);
}

/* 10,000 queued jobs drain in submit order within each pool; ids are found
 * again after the table grows; cancel from the middle keeps the order. */
static void test_sched_large_queue(void **state)
{
    struct sbx_sched *s = make(BOTH, 16, 64 * G);
    struct sbx_sched_grant g;
    sbx_error_t *err = NULL;
    char id[32];
    int last[SBX_POOL_COUNT] = {-1, -1}, granted = 0;

    (void)state;
    for (int i = 0; i < 10000; i++) {
        snprintf(id, sizeof(id), "j%05d", i);
        submit_ok(s, id, i % 3 ? SBX_POOL_CI : SBX_POOL_AGENT,
                  i % 7 ? SBX_CLASS_LIGHT : SBX_CLASS_HEAVY, 1, 1 * G);
    }
    for (int i = 1; i < 10000; i += 100) {
        snprintf(id, sizeof(id), "j%05d", i);
        assert_int_equal(sbx_sched_cancel(s, id, &err), 0);
    }
    for (;;) {
        int n = 0, k;

        while (sbx_sched_next_grant(s, &g)) {
            k = atoi(g.id + 1);
            assert_true(k % 100 != 1);
            /* FIFO per pool among light jobs, heavy jobs never overlap */
            if (g.cls == SBX_CLASS_LIGHT) {
                assert_true(k > last[g.pool]);
                last[g.pool] = k;
            }
            n++;
            granted++;
            release(s, g.id);
        }
        if (n == 0) {
            break;
        }
    }
    assert_int_equal(granted, 10000 - 100);
    sbx_sched_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sched_split, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_create_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_measure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_pool_isolation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_heavy_exclusive, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_fit_copy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_six_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_fit_and_refusal, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_fifo, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_light_passes_parked_heavy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_wait_accounting, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_alert_threshold, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_drain, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_host_reserve, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_adopt, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sched_large_queue, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
