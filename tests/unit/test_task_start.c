/* test_task_start.c - task start as named phases (core/src/sandbox/task_start.c): a
 * failing phase is named in one log line, the phases before it are undone (no task
 * directory, no slot, no provider left), a live task's id is refused without touching
 * it, and a range of phases can run and be undone on its own (what a claim-time binding
 * of a sandbox started ahead of its task uses). The fake provider of the ABI fixtures
 * refuses to create a sandbox for a task named "createfail*". */
#include "test_common.h"

#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fake_config.h"
#include "sandbox/task_int.h"
#include "util/log.h"
#include "util/xalloc.h"

/* Starts a task with stderr (the log, at info) captured; returns sbx_task_start's
 * result, *log gets what was logged (free it). */
static int start_logged(const struct sbx_task_opts *o, struct sbx_task **t, sbx_error_t **err,
                        char **log)
{
    char *path = xasprintf("%s/stderr.log", test_fake_dir);
    int saved = dup(2);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int rc;
    FILE *f;
    long len;

    assert_true(saved >= 0 && fd >= 0);
    fflush(stderr);
    dup2(fd, 2);
    close(fd);
    sbx_log_setup(SBX_LOG_INFO, SBX_LOG_TEXT);
    rc = sbx_task_start(test_fake_cfg, getenv("SBX_TEST_PLUGINS"), o, t, err);
    sbx_log_setup(SBX_LOG_WARN, SBX_LOG_TEXT);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    f = fopen(path, "r");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    len = ftell(f);
    rewind(f);
    *log = xcalloc(1, (size_t)len + 1);
    assert_int_equal(fread(*log, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    free(path);
    return rc;
}

static int task_dir_exists(const char *id)
{
    char *p = xasprintf("%s/state/tasks/%s", test_fake_dir, id);
    int r = access(p, F_OK) == 0;

    free(p);
    return r;
}

/* The provider cannot create the sandbox: the phase is named, everything the phases
 * before it did is undone, and the same id starts cleanly afterwards (no slot, no
 * directory, no record left to say it exists). */
static void test_failed_create_is_named_and_undone(void **state)
{
    struct sbx_task_opts o = {.task_id = "createfail-1"};
    struct sbx_task *t = NULL;
    sbx_error_t *err = NULL;
    char *log = NULL;

    (void)state;
    assert_int_equal(start_logged(&o, &t, &err, &log), -1);
    assert_null(t);
    assert_non_null(err);
    assert_non_null(strstr(err->msg, "task createfail-1: creating the sandbox"));
    assert_non_null(strstr(err->msg, "fake: no sandbox for createfail-1"));
    assert_non_null(strstr(log, "task createfail-1: start failed in phase 'sandbox'"));
    assert_false(task_dir_exists("createfail-1"));
    sbx_error_free(&err);
    free(log);

    /* nothing of it is left: the id is free, a slot is free */
    o.task_id = "after-1";
    assert_int_equal(start_logged(&o, &t, &err, &log), 0);
    assert_non_null(strstr(log, "task after-1: sandbox fake-after-1 ready"));
    assert_true(task_dir_exists("after-1"));
    assert_string_equal(sbx_task_sandbox(t), "fake-after-1");
    assert_int_equal(sbx_task_end(t, NULL, NULL, &err), 0);
    free(log);
}

/* A bad pool fails in the first phase, before any directory exists. */
static void test_bad_pool_fails_in_identity(void **state)
{
    struct sbx_task_opts o = {.task_id = "badpool-1", .pool = "nope"};
    struct sbx_task *t = NULL;
    sbx_error_t *err = NULL;
    char *log = NULL;

    (void)state;
    assert_int_equal(start_logged(&o, &t, &err, &log), -1);
    assert_string_equal(err->msg, "--pool nope: use ci or agent");
    assert_non_null(strstr(log, "start failed in phase 'identity'"));
    assert_false(task_dir_exists("badpool-1"));
    sbx_error_free(&err);
    free(log);
}

/* A live task's id is refused in the 'task id' phase, and the unwinding leaves the
 * live task's directory alone. */
static void test_live_id_refused_and_left_alone(void **state)
{
    struct sbx_task_opts o = {.task_id = "live-1"};
    struct sbx_task *t = NULL;
    struct sbx_task *t2 = NULL;
    sbx_error_t *err = NULL;
    char *log = NULL;

    (void)state;
    assert_int_equal(start_logged(&o, &t, &err, &log), 0);
    free(log);
    assert_int_equal(start_logged(&o, &t2, &err, &log), -1);
    assert_null(t2);
    assert_non_null(strstr(err->msg, "task 'live-1' already exists"));
    assert_non_null(strstr(log, "task live-1: start failed in phase 'task id'"));
    assert_true(task_dir_exists("live-1"));
    sbx_error_free(&err);
    free(log);
    assert_int_equal(sbx_task_end(t, NULL, NULL, &err), 0);
}

/* Every phase has a name and a run function, in the enum's order. */
static void test_phase_table_complete(void **state)
{
    (void)state;
    for (int i = 0; i < SBX_TASK_PHASE_N; i++) {
        assert_non_null(sbx_task_phases[i].name);
        assert_non_null(sbx_task_phases[i].run);
        for (int j = 0; j < i; j++) {
            assert_string_not_equal(sbx_task_phases[i].name, sbx_task_phases[j].name);
        }
    }
    assert_string_equal(sbx_task_phases[SBX_TASK_PHASE_CREATE].name, "sandbox");
    assert_non_null(sbx_task_phases[SBX_TASK_PHASE_CREDENTIALS].undo);
    assert_non_null(sbx_task_phases[SBX_TASK_PHASE_EGRESS].undo);
    assert_non_null(sbx_task_phases[SBX_TASK_PHASE_AGENT].undo);
}

/* A range of phases runs on its own and its undo takes back exactly what it did: the
 * task directory, the provider, the slot. */
static void test_phase_range_runs_and_undoes(void **state)
{
    struct sbx_task_opts o = {.task_id = "range-1"};
    struct sbx_task_start s = {
        .t = xcalloc(1, sizeof(*s.t)),
        .o = &o,
        .plugin_dir = getenv("SBX_TEST_PLUGINS"),
        .provider = "fake",
        .now = time(NULL),
    };
    sbx_error_t *err = NULL;

    (void)state;
    sbx_task_init(s.t, test_fake_cfg, &o);
    if (sbx_task_phases_run(&s, SBX_TASK_PHASE_IDENTITY, SBX_TASK_PHASE_CREDENTIALS, &err) < 0) {
        fail_msg("phases: %s", err->msg);
    }
    assert_true(task_dir_exists("range-1"));
    assert_non_null(s.t->prov);
    assert_true(s.t->slot_fd >= 0);
    /* the binding phases bind nothing a task does not ask for */
    assert_int_equal(sbx_task_bind_credentials(&s, &err), 0);
    assert_int_equal(s.t->have_lease, 0);
    assert_int_equal(sbx_task_bind_egress(&s, &err), 0);
    assert_null(s.t->egress_dir);
    sbx_task_phases_undo(&s, SBX_TASK_PHASE_IDENTITY, SBX_TASK_PHASE_CREDENTIALS);
    assert_false(task_dir_exists("range-1"));
    assert_null(s.t->prov);
    assert_int_equal(s.t->slot_fd, -1);
    sbx_task_start_fini(&s);
    sbx_task_free(s.t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_failed_create_is_named_and_undone),
        cmocka_unit_test(test_bad_pool_fails_in_identity),
        cmocka_unit_test(test_live_id_refused_and_left_alone),
        cmocka_unit_test(test_phase_table_complete),
        cmocka_unit_test(test_phase_range_runs_and_undoes),
    };

    return cmocka_run_group_tests(tests, test_fake_setup, test_fake_teardown);
}
