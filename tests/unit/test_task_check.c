/* test_task_check.c - the provider's check op (the Docker disk watchdog's
 * place in the core, core/src/sandbox/task.c): a sandbox the provider cannot
 * measure ends its task with the provider's reason while no command runs
 * (fail closed), a command that takes the sandbox past its limit fails and
 * ends the task, and a sandbox that passes its checks runs on. The fake
 * provider of the ABI fixtures decides by task name. */
#include "test_common.h"

#include <jansson.h>
#include <time.h>

#include "fake_config.h"
#include "sandbox/task.h"
#include "util/xalloc.h"
#include "wait.h"

static struct sbx_task *start(const char *id)
{
    struct sbx_task_opts o = {.task_id = id};
    struct sbx_task *t = NULL;
    sbx_error_t *err = NULL;

    if (sbx_task_start(test_fake_cfg, getenv("SBX_TEST_PLUGINS"), &o, &t, &err) < 0) {
        fail_msg("task start %s: %s", id, err->msg);
    }
    return t;
}

static const char *reason_of(json_t *rec)
{
    const char *r = json_string_value(json_object_get(rec, "reason"));

    return r ? r : "";
}

/* No command runs: the timer's check ends the task within seconds. */
static void test_unmeasurable_sandbox_ends_its_task(void **state)
{
    struct sbx_task *t = start("checkfail-1");
    const char *const argv[] = {"fake-exit", "0", NULL};
    sbx_error_t *err = NULL;
    json_t *rec = NULL;
    int status = -1;
    char why[256] = "";

    (void)state;
    wait_until(sbx_task_stopped(t, why, sizeof(why)), 10, NULL,
               "the timer's check to stop task checkfail-1");
    assert_non_null(strstr(why, "cannot measure sandbox fake-checkfail-1: fails closed"));
    /* a command after that is refused with the reason */
    assert_int_equal(sbx_task_exec(t, argv, NULL, 0, NULL, NULL, NULL, &status, &err), -1);
    assert_non_null(strstr(err->msg, "fails closed"));
    sbx_error_free(&err);
    assert_int_equal(sbx_task_end(t, "ended", &rec, &err), 0);
    /* the record keeps the first reason, not the end's */
    assert_non_null(strstr(reason_of(rec), "fails closed"));
    json_decref(rec);
}

/* A command that took the sandbox past its limit fails, and the task ends. */
static void test_command_past_limit_fails_and_ends_task(void **state)
{
    struct sbx_task *t = start("checkafter-1");
    const char *const argv[] = {"fake-exit", "0", NULL};
    sbx_error_t *err = NULL;
    json_t *rec = NULL;
    int status = -1;

    (void)state;
    assert_int_equal(sbx_task_exec(t, argv, NULL, 0, NULL, NULL, NULL, &status, &err), -1);
    assert_non_null(err);
    assert_non_null(strstr(err->msg, "task checkafter-1 stopped: fake: the last command took"));
    sbx_error_free(&err);
    assert_true(sbx_task_stopped(t, NULL, 0));
    assert_int_equal(sbx_task_end(t, "ended", &rec, &err), 0);
    assert_non_null(strstr(reason_of(rec), "past its limit"));
    json_decref(rec);
}

/* Checks that pass change nothing: commands run, the task lives on. */
static void test_passing_checks_change_nothing(void **state)
{
    struct sbx_task *t = start("fine-1");
    const char *const argv[] = {"fake-exit", "3", NULL};
    sbx_error_t *err = NULL;
    int status = -1;

    (void)state;
    /* the timer checks at least once (and passes) */
    wait_until(sbx_task_timer_checks(t) >= 1, 10, NULL, "the timer's first check of task fine-1");
    assert_int_equal(sbx_task_exec(t, argv, NULL, 0, NULL, NULL, NULL, &status, &err), 0);
    assert_int_equal(status, 3);
    assert_false(sbx_task_stopped(t, NULL, 0));
    assert_int_equal(sbx_task_end(t, NULL, NULL, &err), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unmeasurable_sandbox_ends_its_task),
        cmocka_unit_test(test_command_past_limit_fails_and_ends_task),
        cmocka_unit_test(test_passing_checks_change_nothing),
    };

    return cmocka_run_group_tests_name("task_check", tests, test_fake_setup, test_fake_teardown);
}
