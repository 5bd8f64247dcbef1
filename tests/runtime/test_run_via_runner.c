/* test_run_via_runner.c - docs/architecture.md "One implementation": with runner.listen
 * set, `sbx run` is a runner job (output streamed, the command's exit
 * status), a runner that is down fails with 125 and nothing runs here, and
 * `sbx exec` / `sbx task` refuse instead of falling back. */
#include "rt_common.h"

#include "wait.h"

static pid_t serve_pid;

static void start_serve(void)
{
    char *sock = NULL;

    serve_pid = fork();
    if (serve_pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);

        dup2(devnull, 1);
        dup2(devnull, 2);
        putenv(rt_host);
        putenv(rt_statev);
        putenv(rt_config);
        execl(rt_sbx, rt_sbx, "serve", (char *)NULL);
        _exit(98);
    }
    assert_true(asprintf(&sock, "%s/runner.sock", rt_state) > 0);
    wait_until(access(sock, F_OK) == 0, 30, NULL, "the runner's socket %s", sock);
    free(sock);
}

static void test_run_goes_through_the_runner(void **state)
{
    char cfg[512];
    struct spawn_result r;

    (void)state;
    snprintf(cfg, sizeof(cfg),
             "runner = { listen = \"unix:%s/runner.sock\"; };\n"
             "box = { pools = [\"ci\"]; heavy_min_memory = \"1G\"; };\n",
             rt_state);
    rt_use_config(cfg);
    /* the runner is down: 125, and no sandbox was made here */
    r = RT_SBX("run", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "runner not reachable");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
    start_serve();
    r = RT_SBX("run", "--", "sh", "-c", "echo through the runner; exit 3");
    assert_int_equal(r.rc, 3);
    assert_string_equal(r.out, "through the runner\n");
    spawn_result_free(&r);
    r = RT_SBX("queue", "--json");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    /* the MCP tools go through the runner too (stdin stays open until the
     * call's reply is out, at most 60 s: closing it cancels the call, as a
     * client that leaves would; a fixed 4 s was too short once in CI) */
    {
        char *script = NULL;
        char *argv[] = {"/bin/sh", "-c", NULL, NULL};
        char *env[] = {rt_host, rt_statev, rt_config, NULL};
        struct spawn_result m;

        assert_true(
            asprintf(
                &script,
                "{ printf '%%s\\n' "
                "'{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\","
                "\"params\":{\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},"
                "\"clientInfo\":{\"name\":\"t\",\"version\":\"1\"}}}' "
                "'{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}' "
                "'{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\","
                "\"params\":{\"name\":\"sandbox_run\",\"arguments\":{\"argv\":"
                "[\"sh\",\"-c\",\"echo via mcp; exit 4\"],\"pool\":\"ci\"}}}' "
                "; i=0; while [ $i -lt 600 ] && ! grep -q '\"id\":2' '%s/mcp.out' 2>/dev/null; "
                "do sleep 0.1; i=$((i+1)); done; } | %s mcp > '%s/mcp.out'; "
                "cat '%s/mcp.out'",
                rt_state, rt_sbx, rt_state, rt_state) > 0);
        argv[2] = script;
        m = spawn_run(argv, env);
        assert_int_equal(m.rc, 0);
        assert_contains(m.out, "via mcp");
        assert_contains(m.out, "\"exit_status\":4");
        assert_contains(m.out, "\"mode\":\"runner\"");
        spawn_result_free(&m);
        free(script);
    }
    r = RT_SBX("exec", "some-task", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "does not fall back");
    spawn_result_free(&r);
    r = RT_SBX("task", "start");
    assert_int_equal(r.rc, 2);
    assert_contains(r.err, "does not fall back");
    spawn_result_free(&r);
    rt_stop_server(&serve_pid);
    wait_until(rt_sandboxes() == 0, 5, NULL, "the runner's sandboxes to go (%zu left)",
               rt_sandboxes());
}

/* The runner never outlives the test, also when an assertion failed. */
static int teardown(void **state)
{
    rt_stop_server(&serve_pid);
    return rt_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_goes_through_the_runner),
    };

    return cmocka_run_group_tests_name("run_via_runner", tests, rt_setup, teardown);
}
