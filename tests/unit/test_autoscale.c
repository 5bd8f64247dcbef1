/* test_autoscale.c - the scale-up decision with a fake clock: trigger,
 * cooldown, max boxes, spend caps (day and month, UTC), scale-in safety. */
#include "sched_fixture.h"

#include <errno.h>
#include <string.h>

#include "config/config.h"
#include "sched/sched.h"

#define HOUR 3600000LL

static struct sbx_sched *make(const char *text)
{
    return sched_make(text, 16, 64 * G);
}

/* N jobs of 1 CPU in pool ci; the first 6 get slots. */
static void load(struct sbx_sched *s, const char *prefix, int n, enum sbx_job_class cls)
{
    struct sbx_sched_grant g;

    for (int i = 0; i < n; i++) {
        char id[32];
        struct sbx_sched_job j = {id, NULL, SBX_POOL_CI, cls, 1, 1 * G, 0};
        sbx_error_t *err = NULL;

        snprintf(id, sizeof(id), "%s%d", prefix, i);
        if (sbx_sched_submit(s, &j, &err) < 0) {
            fail_msg("submit: %s", err->msg);
        }
    }
    while (sbx_sched_next_grant(s, &g)) {
    }
}

static void expect(struct sbx_sched *s, enum sbx_scale_action action, int wanted,
                   const char *fragment)
{
    struct sbx_scale_decision d;

    sbx_sched_autoscale(s, SBX_POOL_CI, &d);
    if (d.action != action || d.wanted != wanted || strstr(d.reason, fragment) == NULL) {
        fail_msg("got action %d wanted %d '%s'; expected action %d wanted %d '%s'", (int)d.action,
                 d.wanted, d.reason, (int)action, wanted, fragment);
    }
}

static void boxes(struct sbx_sched *s, int n)
{
    sbx_error_t *err = NULL;

    if (sbx_sched_boxes_set(s, SBX_POOL_CI, n, &err) < 0) {
        fail_msg("boxes_set: %s", err->msg);
    }
}

#define SCALING                                                                                    \
    "box = { pools = [\"ci\"]; };\n"                                                               \
    "runner = { max_boxes = 5; box_hour_price = 1.0; cooldown = \"10m\"; "                         \
    "alert_after = \"10m\"; };\n"

static void test_autoscale_trigger_and_cooldown(void **state)
{
    struct sbx_sched *s = make(SCALING);

    (void)state;
    expect(s, SBX_SCALE_NONE, 1, "queue empty");
    load(s, "j", 14, SBX_CLASS_LIGHT); /* 6 run, 8 queued */
    fake_now += 599 * 1000;
    expect(s, SBX_SCALE_NONE, 1, "oldest wait 599s is under runner.alert_after (600s)");
    fake_now += 1000;
    expect(s, SBX_SCALE_UP, 3, "8 queued (0 heavy), oldest waited 600s: add 2 box(es)");
    expect(s, SBX_SCALE_NONE, 1, "cooldown: 600s left of runner.cooldown (600s)");
    boxes(s, 3);
    fake_now += 599 * 1000;
    expect(s, SBX_SCALE_NONE, 3, "cooldown: 1s left");
    fake_now += 1000;
    /* 2 more wanted, paid boxes 3 of max 5: allowed */
    expect(s, SBX_SCALE_UP, 5, "add 2 box(es)");
    boxes(s, 5);
    fake_now += 600 * 1000;
    expect(s, SBX_SCALE_NONE, 5, "no scale-up: 2 box(es) wanted, 0 allowed by runner.max_boxes");
    sbx_sched_destroy(s);
}

static void test_autoscale_max_boxes(void **state)
{
    struct sbx_sched *s;
    struct sbx_scale_decision d;

    (void)state;
    /* the default max_boxes = 1: never past this box */
    s = make("box = { pools = [\"ci\"]; };\nrunner = { box_hour_price = 1.0; };\n");
    load(s, "j", 8, SBX_CLASS_LIGHT);
    fake_now += 3600 * 1000;
    expect(s, SBX_SCALE_NONE, 1, "0 allowed by runner.max_boxes (paid boxes 1 of max 1");
    sbx_sched_destroy(s);

    /* capped but not zero: wanted lowered, and it says so */
    s = make("box = { pools = [\"ci\"]; };\n"
             "runner = { max_boxes = 3; box_hour_price = 1.0; };\n");
    load(s, "j", 30, SBX_CLASS_LIGHT); /* 24 queued: 4 boxes wanted */
    fake_now += 600 * 1000;
    sbx_sched_autoscale(s, SBX_POOL_CI, &d);
    assert_int_equal(d.action, SBX_SCALE_UP);
    assert_int_equal(d.current, 1);
    assert_int_equal(d.wanted, 3);
    assert_true(d.capped);
    assert_non_null(strstr(d.reason, "capped: 4 box(es) wanted, 2 allowed by runner.max_boxes"));
    sbx_sched_destroy(s);

    /* heavy jobs: one per box per pool */
    s = make("box = { pools = [\"ci\"]; };\n"
             "runner = { max_boxes = 10; box_hour_price = 1.0; };\n");
    load(s, "h", 4, SBX_CLASS_HEAVY); /* 1 runs, 3 queued */
    fake_now += 600 * 1000;
    expect(s, SBX_SCALE_UP, 4, "3 queued (3 heavy)");
    sbx_sched_destroy(s);

    /* no price: the caps cannot be checked, so nothing is added */
    s = make("box = { pools = [\"ci\"]; };\nrunner = { max_boxes = 10; };\n");
    load(s, "j", 8, SBX_CLASS_LIGHT);
    fake_now += 600 * 1000;
    expect(s, SBX_SCALE_NONE, 1, "runner.box_hour_price is not set");
    sbx_sched_destroy(s);
}

static void test_autoscale_spend_caps(void **state)
{
    struct sbx_sched *s;
    struct sbx_sched_snapshot *snap;
    struct sbx_scale_decision d;

    (void)state;
    /* $1/h at midnight: 150/24 -> 6 paid boxes for the day; 20 wanted */
    s = make("box = { pools = [\"ci\"]; };\n"
             "runner = { max_boxes = 50; box_hour_price = 1.0; alert_after = \"1s\"; };\n");
    load(s, "j", 126, SBX_CLASS_LIGHT);
    fake_now += 1000;
    sbx_sched_autoscale(s, SBX_POOL_CI, &d);
    assert_int_equal(d.action, SBX_SCALE_UP);
    assert_int_equal(d.wanted, 6);
    assert_true(d.capped);
    assert_non_null(strstr(d.reason, "capped: 20 box(es) wanted, 5 allowed by the day spend cap"));
    snap = sbx_sched_snapshot(s); /* the queue view says so */
    assert_true(snap->pools[SBX_POOL_CI].scale_capped);
    assert_string_equal(snap->pools[SBX_POOL_CI].scale_reason, d.reason);
    sbx_sched_snapshot_free(snap);
    boxes(s, 6);
    /* 12 hours later: $72 spent today; 78 left over 12 h -> still 6 boxes */
    fake_now = T0 + 12 * HOUR;
    snap = sbx_sched_snapshot(s);
    assert_true(snap->spend_day > 71.99 && snap->spend_day < 72.01);
    assert_true(snap->spend_month > 71.99 && snap->spend_month < 72.01);
    assert_int_equal(snap->paid_boxes, 6);
    sbx_sched_snapshot_free(snap);
    expect(s, SBX_SCALE_NONE, 6, "0 allowed by the day spend cap");
    /* the day resets at UTC midnight, the month does not */
    fake_now = T0 + 25 * HOUR;
    snap = sbx_sched_snapshot(s);
    assert_true(snap->spend_day > 5.99 && snap->spend_day < 6.01);
    assert_true(snap->spend_month > 149.99 && snap->spend_month < 150.01);
    sbx_sched_snapshot_free(snap);
    /* the month resets on the 1st, UTC: Dec 1 = T0 + 30 days */
    boxes(s, 1);
    fake_now = T0 + 30 * 24 * HOUR + 2 * HOUR;
    snap = sbx_sched_snapshot(s);
    assert_true(snap->spend_day > 1.99 && snap->spend_day < 2.01);
    assert_true(snap->spend_month > 1.99 && snap->spend_month < 2.01);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);

    /* the month cap binds first: 3000 / 720 h -> 4 paid boxes */
    s = make("box = { pools = [\"ci\"]; };\n"
             "runner = { max_boxes = 50; box_hour_price = 1.0; alert_after = \"1s\"; "
             "spend_month_cap = 3000.0; };\n");
    load(s, "j", 66, SBX_CLASS_LIGHT);
    fake_now += 1000;
    expect(s, SBX_SCALE_UP, 4, "3 allowed by the month spend cap");
    sbx_sched_destroy(s);

    /* over the day cap already: nothing */
    s = make("box = { pools = [\"ci\"]; };\n"
             "runner = { max_boxes = 50; box_hour_price = 10.0; alert_after = \"1s\"; };\n");
    load(s, "j", 12, SBX_CLASS_LIGHT);
    fake_now += 1000;
    expect(s, SBX_SCALE_NONE, 1, "no scale-up: 1 box(es) wanted, 0 allowed by the day spend cap");
    sbx_sched_destroy(s);
}

/* (added) The decision as the fleet's leader takes it from the shared rows
 * (sbx_scale_decide) and the spend it accrues (sbx_spend_accrue). */
static void test_autoscale_fleet_pure(void **state)
{
    /* 2026-12-01 12:00 UTC: 12 h left in the day */
    const int64_t noon = 1796126400000LL;
    struct sbx_scale_in in = {
        .now = noon,
        .queued = 10,
        .heavy = 1,
        .oldest = noon - 700000,
        .current = 2,
        .paid = 3,
        .max_sandboxes = 4,
        .alert_after_ms = 600000,
        .cooldown_ms = 600000,
        .max_boxes = 10,
        .price = 1.0,
        .day_cap = 150.0,
        .month_cap = 45000.0,
    };
    struct sbx_scale_decision d = {.pool = SBX_POOL_CI};
    struct sbx_spend sp = {.at = noon - 3600000, .day = 1.0, .month = 5.0};

    (void)state;
    sbx_scale_decide(&in, &d);
    assert_int_equal(d.action, SBX_SCALE_UP);
    assert_int_equal(d.pool, SBX_POOL_CI); /* left as is */
    assert_int_equal(d.current, 2);
    assert_int_equal(d.wanted, 5); /* ceil(10 / 4) = 3 more */
    /* a scale-up recorded by another leader 5 min ago: its cooldown holds */
    in.scaled = 1;
    in.last_scale_up = noon - 300000;
    sbx_scale_decide(&in, &d);
    assert_int_equal(d.action, SBX_SCALE_NONE);
    assert_string_equal(d.reason, "cooldown: 300s left of runner.cooldown (600s)");
    /* the fleet's spend so far: $140 of $150 leaves 10 $/12 h: 0 boxes over the 3 paid */
    in.scaled = 0;
    in.spent_day = 140.0;
    sbx_scale_decide(&in, &d);
    assert_int_equal(d.action, SBX_SCALE_NONE);
    assert_true(d.capped);
    assert_non_null(strstr(d.reason, "allowed by the day spend cap (paid boxes 3 of max 10"));
    /* max_boxes counts the paid boxes of the fleet */
    in.spent_day = 0;
    in.paid = 9;
    sbx_scale_decide(&in, &d);
    assert_int_equal(d.action, SBX_SCALE_UP);
    assert_int_equal(d.wanted, 3);
    assert_true(d.capped);
    /* under alert_after, or nothing queued: nothing */
    in.oldest = noon - 1000;
    sbx_scale_decide(&in, &d);
    assert_int_equal(d.action, SBX_SCALE_NONE);
    in.queued = 0;
    sbx_scale_decide(&in, &d);
    assert_string_equal(d.reason, "queue empty");
    /* 3 boxes at $1/h for an hour; across midnight the day resets, the month goes on */
    sbx_spend_accrue(&sp, 3.0 / 3600000.0, noon);
    assert_true(sp.day > 3.999 && sp.day < 4.001);
    assert_true(sp.month > 7.999 && sp.month < 8.001);
    assert_int_equal(sp.at, noon);
    sbx_spend_accrue(&sp, 1.0 / 3600000.0, noon + 13 * 3600000LL);
    assert_true(sp.day > 0.999 && sp.day < 1.001);       /* 1 h after midnight */
    assert_true(sp.month > 20.999 && sp.month < 21.001); /* + 13 h */
    sbx_spend_accrue(&sp, 1.0, noon);                    /* the past: nothing */
    assert_int_equal(sp.at, noon + 13 * 3600000LL);
}

static void test_autoscale_bad_input(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\"]; };\n");
    struct sbx_scale_decision d;
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(sbx_sched_boxes_set(s, SBX_POOL_AGENT, 2, &err), -1);
    assert_non_null(strstr(err->msg, "not served"));
    sbx_error_free(&err);
    assert_int_equal(sbx_sched_boxes_set(s, SBX_POOL_CI, 0, &err), -1);
    assert_non_null(strstr(err->msg, "needs at least this box"));
    sbx_error_free(&err);
    sbx_sched_autoscale(s, SBX_POOL_AGENT, &d);
    assert_int_equal(d.action, SBX_SCALE_NONE);
    assert_string_equal(d.reason, "pool is not served by this box");
    sbx_sched_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_autoscale_trigger_and_cooldown, setup, teardown),
        cmocka_unit_test_setup_teardown(test_autoscale_max_boxes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_autoscale_spend_caps, setup, teardown),
        cmocka_unit_test_setup_teardown(test_autoscale_bad_input, setup, teardown),
        cmocka_unit_test(test_autoscale_fleet_pure),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
