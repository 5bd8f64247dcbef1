/* test_metrics.c - the Prometheus exposition and the JSON queue view.
 *
 * Every exposition is checked by a strict parser of text format 0.0.4 written
 * here, and also by `promtool check metrics` when CMake found promtool (Debian
 * package `prometheus`; the path comes in $SBX_PROMTOOL). */
#include "sched_fixture.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <sys/wait.h>

#include "config/config.h"
#include "sched/sched.h"

#include "prom_check.h"

#define promtool_check(text) promtool_check_in(dir, (text))

static struct sbx_sched *make(const char *text)
{
    return sched_make(text, 16, 64 * G);
}

static void submit_ok(struct sbx_sched *s, const char *id, enum sbx_pool pool,
                      enum sbx_job_class cls, double cpus)
{
    struct sbx_sched_job j = {id, NULL, pool, cls, cpus, 1 * G, 0};
    sbx_error_t *err = NULL;

    if (sbx_sched_submit(s, &j, &err) < 0) {
        fail_msg("submit %s: %s", id, err->msg);
    }
}

static void expect_line(const char *text, const char *line)
{
    char *want = NULL;

    assert_true(asprintf(&want, "\n%s\n", line) > 0);
    if (strstr(text, want) == NULL) {
        fail_msg("no line '%s' in:\n%s", line, text);
    }
    free(want);
}

static void test_metrics_empty(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\", \"agent\"]; };\n");
    struct sbx_sched_snapshot *snap = sbx_sched_snapshot(s);
    char *text = sbx_sched_metrics(snap);

    (void)state;
    assert_exposition(text);
    promtool_check(text);
    /* every served pool, zeros included */
    expect_line(text, "sbx_queue_jobs{pool=\"agent\",class=\"light\"} 0");
    expect_line(text, "sbx_queue_oldest_enqueued_timestamp_seconds{pool=\"ci\"} 0.000");
    expect_line(text, "sbx_slots{pool=\"agent\",state=\"idle\"} 3");
    expect_line(text, "sbx_job_wait_seconds_bucket{pool=\"ci\",le=\"600\"} 0");
    expect_line(text, "sbx_heavy_slot{pool=\"ci\",state=\"idle\"} 1");
    free(text);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);
}

static void test_metrics_busy(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\", \"agent\"]; };\n");
    struct sbx_sched_grant g;
    struct sbx_sched_alert a[4];
    struct sbx_sched_snapshot *snap;
    sbx_error_t *err = NULL;
    char *text;

    (void)state;
    submit_ok(s, "h1", SBX_POOL_CI, SBX_CLASS_HEAVY, 4);
    submit_ok(s, "h2", SBX_POOL_CI, SBX_CLASS_HEAVY, 1);
    submit_ok(s, "l1", SBX_POOL_CI, SBX_CLASS_LIGHT, 1);
    fake_now += 700 * 1000;
    while (sbx_sched_next_grant(s, &g)) {
    }
    submit_ok(s, "a1", SBX_POOL_AGENT, SBX_CLASS_LIGHT, 8);
    submit_ok(s, "a2", SBX_POOL_AGENT, SBX_CLASS_LIGHT, 8);
    assert_int_equal(sbx_sched_next_grant(s, &g), 1);
    fake_now += 30 * 1000;
    assert_int_equal(sbx_sched_release(s, "l1", SBX_RESULT_FAILED, &err), 0);
    assert_int_equal(sbx_sched_due_alerts(s, a, 4), 1); /* h2: 730 s */
    snap = sbx_sched_snapshot(s);
    text = sbx_sched_metrics(snap);
    assert_exposition(text);
    promtool_check(text);
    expect_line(text, "sbx_queue_jobs{pool=\"ci\",class=\"heavy\"} 1");
    expect_line(text, "sbx_queue_jobs{pool=\"agent\",class=\"light\"} 1");
    expect_line(text, "sbx_queue_oldest_enqueued_timestamp_seconds{pool=\"ci\"} 1793491200.000");
    expect_line(text, "sbx_queue_oldest_wait_seconds{pool=\"ci\"} 730.000");
    expect_line(text, "sbx_queue_oldest_wait_seconds{pool=\"agent\"} 30.000");
    expect_line(text, "sbx_slots{pool=\"ci\",state=\"busy\"} 1");
    expect_line(text, "sbx_heavy_slot{pool=\"ci\",state=\"busy\"} 1");
    expect_line(text, "sbx_job_wait_seconds_bucket{pool=\"ci\",le=\"600\"} 0");
    expect_line(text, "sbx_job_wait_seconds_bucket{pool=\"ci\",le=\"900\"} 2");
    expect_line(text, "sbx_job_wait_seconds_bucket{pool=\"ci\",le=\"+Inf\"} 2");
    expect_line(text, "sbx_job_wait_seconds_count{pool=\"ci\"} 2");
    expect_line(text, "sbx_job_wait_seconds_sum{pool=\"ci\"} 1400.000");
    expect_line(text, "sbx_jobs_started_total{pool=\"agent\"} 1");
    expect_line(text, "sbx_jobs_finished_total{pool=\"ci\",result=\"failed\"} 1");
    expect_line(text, "sbx_job_wait_alerts_total{pool=\"ci\"} 1");
    free(text);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);
}

/* The checker itself must reject broken expositions. */
static void test_metrics_checker_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "x 1\n",                                        /* no TYPE */
        "# HELP x h\n# TYPE x gauge\nx{a=\"1\"} one\n", /* bad value */
        "# HELP x h\n# TYPE x gauge\nx 1\nx 2\n",       /* duplicate */
        "# HELP x h\n# TYPE x counter\nx 1\n",          /* counter name */
        "# HELP x h\n# TYPE x histogram\nx_bucket{le=\"5\"} 2\nx_bucket{le=\"1\"} 3\n",
        "# HELP x h\n# TYPE x histogram\nx_bucket{le=\"1\"} 2\nx_bucket{le=\"+Inf\"} 1\n",
        "# HELP x h\n# TYPE x histogram\nx_bucket{le=\"+Inf\"} 2\nx_count 3\n",
        "# HELP x h\n# TYPE x gauge\nx 1\n# HELP y h\n# TYPE y gauge\ny 1\n# TYPE x gauge\n",
        "# HELP x h\n# TYPE x gauge\nx{a=1} 1\n",
        "# HELP x h\n# TYPE x gauge\nx 1", /* no final newline */
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[512];

        if (check_exposition(bad[i], err, sizeof(err)) == 0) {
            fail_msg("the checker accepted bad exposition %zu", i);
        }
    }
    assert_int_equal(check_exposition("# HELP x h\n# TYPE x gauge\nx{a=\"1\"} 1\n", NULL, 0), 0);
}

static void test_metrics_json(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\"]; };\n");
    struct sbx_sched_grant g;
    struct sbx_sched_snapshot *snap;
    json_error_t jerr;
    json_t *root, *pool, *slot;
    char *text;

    (void)state;
    submit_ok(s, "run", SBX_POOL_CI, SBX_CLASS_HEAVY, 16);
    assert_int_equal(sbx_sched_next_grant(s, &g), 1);
    submit_ok(s, "wait", SBX_POOL_CI, SBX_CLASS_LIGHT, 1);
    fake_now += 42 * 1000;
    snap = sbx_sched_snapshot(s);
    text = sbx_sched_snapshot_json(snap);
    root = json_loads(text, 0, &jerr);
    assert_non_null(root);
    assert_true(json_is_true(json_object_get(json_object_get(root, "box"), "heavy_allowed")));
    pool = json_array_get(json_object_get(root, "pools"), 0);
    assert_string_equal(json_string_value(json_object_get(pool, "pool")), "ci");
    assert_int_equal(json_integer_value(json_object_get(pool, "queue_length")), 1);
    assert_true(json_real_value(json_object_get(pool, "oldest_wait")) == 42.0);
    assert_string_equal(json_string_value(json_object_get(pool, "heavy_slot")), "busy");
    assert_true(json_real_value(json_object_get(json_array_get(json_object_get(pool, "queued"), 0),
                                                "wait")) == 42.0);
    slot = json_array_get(json_object_get(pool, "slots"), 0);
    assert_string_equal(json_string_value(json_object_get(slot, "job")), "run");
    assert_string_equal(json_string_value(json_object_get(slot, "class")), "heavy");
    assert_true(json_real_value(json_object_get(slot, "held_for")) == 42.0);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(pool, "slots"), 1), "state")),
                        "idle");
    json_decref(root);
    free(text);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_metrics_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_checker_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_json, setup, teardown),
    };

    if (getenv("SBX_PROMTOOL") == NULL || getenv("SBX_PROMTOOL")[0] == '\0') {
        fprintf(stderr, "note: promtool not found at configure time; the strict checker "
                        "alone checks the format\n");
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
