/* test_opensandbox_cli.c - `sbx run --provider opensandbox` end to end
 * against the OpenSandbox contract server (issue 9's done-when). The provider
 * enforces no pids, disk or user namespaces, so its instance is configured
 * `unisolated = true` (docs/providers.md); without it, runs are refused. */
#include "rt_common.h"

#include "osb_server.h"

static int setup(void **state)
{
    char cfg[256];

    if (rt_setup(state) < 0 || osb_start() < 0) {
        return -1;
    }
    snprintf(cfg, sizeof(cfg),
             "providers = { opensandbox = { plugin = \"provider_opensandbox\"; "
             "url = \"http://127.0.0.1:%d\"; image = \"test\"; unisolated = true; }; };\n",
             osb_port);
    rt_use_config(cfg);
    return 0;
}

static int teardown(void **state)
{
    osb_stop();
    return rt_teardown(state);
}

static void test_osb_run_streams_and_status(void **state)
{
    struct spawn_result r = RT_SBX("run", "--provider", "opensandbox", "--", "sh", "-c",
                                   "echo out; echo err >&2; exit 3");
    char *argv[] = {"/usr/bin/curl", "-s", NULL, NULL};
    char url[128];
    struct spawn_result calls;

    (void)state;
    assert_int_equal(r.rc, 3);
    assert_string_equal(r.out, "out\n");
    assert_contains(r.err, "err\n");
    spawn_result_free(&r);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/_test/calls", osb_port);
    argv[2] = url;
    calls = spawn_run(argv, NULL);
    assert_contains(calls.out, "DELETE");
    spawn_result_free(&calls);
}

static void test_osb_task_three_execs(void **state)
{
    struct spawn_result r = RT_SBX("task", "start", "--provider", "opensandbox", "--task", "osb-t");

    (void)state;
    if (r.rc != 0) {
        fail_msg("task start: %s", r.err);
    }
    spawn_result_free(&r);
    r = RT_SBX("exec", "osb-t", "--", "sh", "-c", "echo kept > state.txt");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    r = RT_SBX("exec", "osb-t", "--", "cat", "state.txt");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "kept\n");
    spawn_result_free(&r);
    r = RT_SBX("task", "end", "osb-t");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
}

static void test_osb_server_down(void **state)
{
    struct spawn_result r;

    (void)state;
    /* without the opt-in the run is refused before the server is asked */
    rt_use_config("providers = { opensandbox = { plugin = \"provider_opensandbox\"; "
                  "url = \"http://127.0.0.1:1\"; image = \"test\"; }; };\n");
    r = RT_SBX("run", "--provider", "opensandbox", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "provider \"opensandbox\" does not enforce pids, disk, user namespaces "
                           "that the policy asks for");
    spawn_result_free(&r);
    rt_use_config("providers = { opensandbox = { plugin = \"provider_opensandbox\"; "
                  "url = \"http://127.0.0.1:1\"; image = \"test\"; unisolated = true; }; };\n");
    r = RT_SBX("run", "--provider", "opensandbox", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "127.0.0.1:1");
    spawn_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_osb_run_streams_and_status),
        cmocka_unit_test(test_osb_task_three_execs),
        cmocka_unit_test(test_osb_server_down),
    };

    return cmocka_run_group_tests_name("opensandbox_cli", tests, setup, teardown);
}
