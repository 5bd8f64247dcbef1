/* test_egress_docker.c - egress from a real sandbox: the policy's allow-list
 * through the relay and the proxy to a local test server, a denied name gets
 * 403, direct connections have no route, every connection is a JSON log line
 * with the job id, and the task record carries the summary. Only loopback
 * servers started here are ever reached (system_dns = false). */
#include "rt_common.h"

static pid_t origin_pid;
static int origin_port;
static char *log_path;

static int start_origin(void)
{
    char *script = rt_source_path("tests/support/egress_origin.py");
    char *argv[] = {"python3", script, "http", NULL};

    origin_pid = rt_spawn_server(argv, &origin_port);
    free(script);
    return origin_pid > 0 ? 0 : -1;
}

static int setup(void **state)
{
    char cfg[1024];

    if (rt_setup(state) < 0 || start_origin() < 0) {
        return -1;
    }
    assert_true(asprintf(&log_path, "%s/egress.jsonl", rt_state) > 0);
    snprintf(cfg, sizeof(cfg),
             "egress = {\n  log = \"%s\";\n  system_dns = false;\n"
             "  registries = [\"allowed.test:%d\"];\n"
             "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; },\n"
             "            { name = \"denied.test\"; address = \"127.0.0.1\"; } );\n};\n",
             log_path, origin_port);
    rt_use_config(cfg);
    return 0;
}

static int teardown(void **state)
{
    rt_stop_server(&origin_pid);
    free(log_path);
    return rt_teardown(state);
}

static void test_egress_allow_deny_and_no_route(void **state)
{
    char script[1024];
    struct spawn_result r;
    char *log = NULL;
    size_t len = 0;
    FILE *f;
    json_t *rec;

    (void)state;
    snprintf(script, sizeof(script),
             "curl -sS -m 10 -o /dev/null -w '%%{http_code}\\n' http://allowed.test:%d/; "
             "curl -sS -m 10 -o /dev/null -w '%%{http_code}\\n' http://denied.test:%d/; "
             "curl -sS -m 3 --noproxy '*' http://127.0.0.1:%d/ >/dev/null 2>&1 "
             "&& echo direct-reached || echo direct-failed; "
             "curl -sS -m 3 --noproxy '*' http://allowed.test:%d/ >/dev/null 2>&1 "
             "&& echo dns-reached || echo dns-failed; "
             "curl -sS -m 3 --noproxy '*' -g 'http://[::1]:%d/' >/dev/null 2>&1 "
             "&& echo v6-reached || echo v6-failed",
             origin_port, origin_port, origin_port, origin_port, origin_port);
    r = RT_SBX("run", "--task", "eg-1", "--json", "--", "sh", "-c", script);
    if (r.rc != 0) {
        fail_msg("rc %d: %s %s", r.rc, r.out, r.err);
    }
    rec = json_loads(r.out, 0, NULL);
    assert_non_null(rec);
    assert_string_equal(json_string_value(json_object_get(rec, "stdout")),
                        "200\n403\ndirect-failed\ndns-reached\nv6-failed\n");
    assert_true(json_integer_value(json_object_get(json_object_get(rec, "egress"), "allowed")) >=
                1);
    assert_true(json_integer_value(json_object_get(json_object_get(rec, "egress"), "denied")) >= 1);
    json_decref(rec);
    spawn_result_free(&r);
    f = fopen(log_path, "r");
    assert_non_null(f);
    while (getline(&log, &len, f) > 0) {
        json_t *line = json_loads(log, 0, NULL);
        const char *host;

        assert_non_null(line); /* every line is JSON */
        host = json_string_value(json_object_get(line, "host"));
        if (host != NULL && strcmp(host, "allowed.test") == 0) {
            assert_string_equal(json_string_value(json_object_get(line, "decision")), "allow");
            assert_string_equal(json_string_value(json_object_get(line, "job")), "eg-1");
        }
        if (host != NULL && strcmp(host, "denied.test") == 0) {
            assert_string_equal(json_string_value(json_object_get(line, "decision")), "deny");
            assert_string_equal(json_string_value(json_object_get(line, "job")), "eg-1");
        }
        json_decref(line);
    }
    free(log);
    fclose(f);
    {
        char *argv[] = {"/bin/grep", "-c", "\"job\":\"eg-1\"", log_path, NULL};
        struct spawn_result g = spawn_run(argv, NULL);

        assert_true(atoi(g.out) >= 2);
        spawn_result_free(&g);
    }
    /* readable per job */
    {
        struct spawn_result e = RT_SBX("job", "eg-1", "--egress");

        assert_int_equal(e.rc, 0);
        assert_contains(e.out, "\"host\":\"allowed.test\"");
        assert_contains(e.out, "\"host\":\"denied.test\"");
        spawn_result_free(&e);
    }
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_egress_log_unwritable_fails_closed(void **state)
{
    char cfg[512];
    struct spawn_result r;

    (void)state;
    snprintf(cfg, sizeof(cfg),
             "egress = { log = \"/nonexistent-dir/egress.jsonl\"; "
             "system_dns = false; };\n");
    rt_use_config(cfg);
    r = RT_SBX("run", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "cannot open log");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_egress_allow_deny_and_no_route),
        cmocka_unit_test(test_egress_log_unwritable_fails_closed),
    };

    return cmocka_run_group_tests_name("egress_docker", tests, setup, teardown);
}
