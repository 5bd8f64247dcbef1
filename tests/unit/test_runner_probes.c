/* test_runner_probes.c - the runner's probe modules alone (runner/health.h),
 * without a runner: the store probe on a SQLite store (the first answer
 * before start returns, the gate it keeps on the loop's connection, given
 * back at free), the image check with no image configured (ready at once,
 * no thread), and each module's answer when it is not running (NULL). */
#include "test_common.h"

#include "config/config.h"
#include "runner/health.h"
#include "store/store.h"

static void test_storeprobe_sqlite(void **state)
{
    (void)state;
    char *dir = test_mkdtemp();
    char *path = NULL;
    struct sbx_config cfg = {0};
    sbx_error_t *err = NULL;
    struct sbx_store *loop;
    struct runner_storeprobe *p;
    char why[200];
    double age = -1;

    assert_true(asprintf(&path, "%s/state.db", dir) > 0);
    loop = sbx_store_open(path, &err);
    assert_non_null(loop);
    p = runner_storeprobe_start(&cfg, path, loop, 50, &err);
    assert_null(err);
    assert_non_null(p);
    /* the first read answered before start returned */
    assert_int_equal(runner_storeprobe_state(p, why, sizeof(why), &age), 0);
    assert_string_equal(why, "");
    assert_true(age >= 0 && age < 60);
    assert_int_equal(runner_store_stalled(p), 0);
    assert_non_null(runner_store_gate(p));
    runner_storeprobe_free(p);
    /* the loop's connection still works without the gate */
    assert_int_equal(sbx_store_ping(loop, &err), 0);
    sbx_store_close(loop);
    test_rm_rf(dir);
    free(path);
    free(dir);
}

static void test_not_running(void **state)
{
    (void)state;
    char why[200];
    double age = -1;

    assert_int_equal(runner_storeprobe_state(NULL, why, sizeof(why), &age), -1);
    assert_string_equal(why, "the store probe is not running");
    assert_true(age == 0);
    assert_int_equal(runner_store_stalled(NULL), 0);
    assert_null(runner_store_gate(NULL));
    assert_int_equal(runner_health_engine(NULL, why, sizeof(why)), -1);
    assert_string_equal(why, "the engine probe is not running");
    assert_int_equal(runner_health_backlog(NULL), -1);
    assert_int_equal(runner_image_ready(NULL, why, sizeof(why)), 1);
    runner_health_free(NULL);
    runner_storeprobe_free(NULL);
    runner_image_free(NULL);
}

static int ready_calls;

static void on_ready(void *arg)
{
    (void)arg;
    ready_calls++;
}

static void test_image_none(void **state)
{
    (void)state;
    struct sbx_config cfg = {0}; /* no provider instance: no image to check */
    sbx_error_t *err = NULL;
    struct runner_image *im = runner_image_start(&cfg, "/nonexistent", on_ready, NULL, &err);
    char why[100] = "x";

    assert_null(err);
    assert_non_null(im);
    assert_int_equal(runner_image_ready(im, why, sizeof(why)), 1);
    assert_string_equal(why, "");
    assert_int_equal(ready_calls, 0); /* no thread: nothing to tell the loop */
    runner_image_free(im);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_storeprobe_sqlite),
        cmocka_unit_test(test_not_running),
        cmocka_unit_test(test_image_none),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
