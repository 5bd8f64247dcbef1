/* test_cli_json.c - the --json outputs added with the one argument parser:
 * `sbx cancel --json`, `sbx submit/job/queue --json` through an in-process
 * runner, `sbx exec --json` and `sbx task end --json` on an embedded task,
 * with the fake provider of tests/plugin_abi/fixture.c. */
#include "test_common.h"

#include "runner_harness.h"
#include "spawn.h"
#include "cli_harness.h"
#include "wait.h"

#include <sys/stat.h>

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));

    return s ? s : "";
}

static void test_runner_json(void **state)
{
    struct spawn_result r;
    json_t *j;
    char *id;

    (void)state;
    client_conf = NULL; /* freed by the test before */
    assert_true(asprintf(&sbx_bin, "%s/sbx", getenv("SBX_BUILD_DIR")) > 0);
    rh_start(NULL);
    write_client_conf(rh_sock);
    r = SBX_RUN("submit", "--json", "--", "sleep", "600000");
    if (r.rc != 0) {
        fail_msg("submit rc %d: %s", r.rc, r.err);
    }
    j = parse_out(&r);
    id = strdup(str(j, "id"));
    assert_int_equal(strncmp(id, "j-", 2), 0);
    json_decref(j);
    spawn_result_free(&r);
    json_decref(rh_wait_state(id, "running"));

    r = SBX_RUN("queue", "--json");
    assert_int_equal(r.rc, 0);
    j = parse_out(&r);
    assert_true(json_is_array(json_object_get(j, "pools")));
    json_decref(j);
    spawn_result_free(&r);

    /* cancel --json prints the runner's reply; a second cancel fails, no JSON */
    r = SBX_RUN("cancel", id, "--json");
    if (r.rc != 0) {
        fail_msg("cancel rc %d: %s", r.rc, r.err);
    }
    j = parse_out(&r);
    assert_true(json_is_object(j));
    assert_string_equal(str(j, "id"), id);
    json_decref(j);
    spawn_result_free(&r);
    json_decref(rh_wait_state(id, "cancelled"));
    r = SBX_RUN("job", id, "--json");
    assert_int_equal(r.rc, 0);
    j = parse_out(&r);
    assert_string_equal(str(j, "state"), "cancelled");
    json_decref(j);
    spawn_result_free(&r);
    r = SBX_RUN("cancel", "--json", id);
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.out, "");
    spawn_result_free(&r);
    /* an abbreviation is refused here as everywhere */
    r = SBX_RUN("job", id, "--js");
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "unknown option '--js' (did you mean --json?"));
    spawn_result_free(&r);
    free(id);
    rh_stop();
}

static void test_exec_json(void **state)
{
    struct spawn_result r;
    json_t *j;

    (void)state;
    rh_dir = test_mkdtemp();
    write_client_conf(NULL);
    r = SBX_RUN("task", "start", "--task", "t-json");
    if (r.rc != 0) {
        fail_msg("task start rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    /* the command's output and status in one object, nothing streamed */
    r = SBX_RUN("exec", "t-json", "--env", "GREETING=hi", "--json", "--", "fake-env", "GREETING",
                "NOPE");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.err, "");
    j = parse_out(&r);
    assert_string_equal(str(j, "task"), "t-json");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 1);
    assert_string_equal(str(j, "stdout"), "GREETING=hi\n");
    assert_string_equal(str(j, "stderr"), "NOPE unset\n");
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "argv"), 0)),
                        "fake-env");
    json_decref(j);
    spawn_result_free(&r);
    /* without --json the same command streams, stdout and stderr apart */
    r = SBX_RUN("exec", "t-json", "--env", "GREETING=hi", "--", "fake-env", "GREETING", "NOPE");
    assert_int_equal(r.rc, 1);
    assert_string_equal(r.out, "GREETING=hi\n");
    assert_string_equal(r.err, "NOPE unset\n");
    spawn_result_free(&r);
    /* not found: 127, no exit status, the error in the object */
    r = SBX_RUN("exec", "t-json", "--json", "--", "fake-nocmd");
    assert_int_equal(r.rc, 127);
    j = parse_out(&r);
    assert_true(json_is_null(json_object_get(j, "exit_status")));
    assert_true(strlen(str(j, "error")) > 0);
    json_decref(j);
    spawn_result_free(&r);
    /* task end --json: the ended task's record */
    r = SBX_RUN("task", "end", "t-json", "--json");
    if (r.rc != 0) {
        fail_msg("task end rc %d: %s", r.rc, r.err);
    }
    j = parse_out(&r);
    assert_string_equal(str(j, "task"), "t-json");
    json_decref(j);
    spawn_result_free(&r);
    test_rm_rf(rh_dir);
    free(rh_dir);
    free(client_conf);
    free(sbx_bin);
}

/* (added, issue 31) A keeper is a runner whose socket is in the task's directory; past
 * 95 bytes of that path (a socket address holds 108) it is elsewhere and the task's
 * directory has a link to it: every command finds it, the end removes it. */
static void test_keeper_runner_elsewhere(void **state)
{
    struct spawn_result r;
    struct stat st;
    char *base = test_mkdtemp();
    char *link;

    (void)state;
    client_conf = NULL; /* freed by the test before */
    assert_true(asprintf(&sbx_bin, "%s/sbx", getenv("SBX_BUILD_DIR")) > 0);
    rh_dir = xasprintf("%s/%s", base, "a-state-directory-with-a-long-name-0123456789-0123456789");
    assert_int_equal(mkdir(rh_dir, 0700), 0);
    write_client_conf(NULL);
    r = SBX_RUN("task", "start", "--task", "t-elsewhere");
    if (r.rc != 0) {
        fail_msg("task start rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    link = xasprintf("%s/tasks/t-elsewhere/runner", rh_dir);
    assert_true(strlen(link) > 95);
    assert_int_equal(lstat(link, &st), 0);
    assert_true(S_ISLNK(st.st_mode));
    r = SBX_RUN("exec", "t-elsewhere", "--", "fake-exit", "3");
    assert_int_equal(r.rc, 3);
    spawn_result_free(&r);
    r = SBX_RUN("task", "list");
    assert_non_null(strstr(r.out, "t-elsewhere"));
    spawn_result_free(&r);
    r = SBX_RUN("task", "end", "t-elsewhere");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    /* the keeper removes the link as it exits, just after its runner's directory */
    wait_until(lstat(link, &st) < 0, 30, NULL, "the link %s to go", link);
    r = SBX_RUN("exec", "t-elsewhere", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_non_null(strstr(r.err, "no running task 't-elsewhere'"));
    spawn_result_free(&r);
    free(link);
    free(rh_dir);
    rh_dir = NULL;
    test_rm_rf(base);
    free(base);
    free(client_conf);
    client_conf = NULL;
    free(sbx_bin);
    sbx_bin = NULL;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runner_json),
        cmocka_unit_test(test_exec_json),
        cmocka_unit_test(test_keeper_runner_elsewhere),
    };

    return cmocka_run_group_tests_name("cli_json", tests, NULL, NULL);
}
