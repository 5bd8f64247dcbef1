/* test_egress_tunnel_docker.c - a tunnel's first bytes from inside a real sandbox
 * (docs/egress.md, "What a tunnel may carry"): through the relay, a CONNECT to an
 * allowed name followed by an empty line and a request for another host is refused,
 * and so is an unknown method; both are logged tunnel-protocol under the job; an
 * ordinary request in a tunnel still gets its answer. Only the loopback server
 * started here is ever reached (system_dns = false). */
#include "rt_common.h"

static pid_t origin_pid;
static int origin_port;
static char *log_path;

static int setup(void **state)
{
    char cfg[1024];
    char *script;
    char *argv[] = {"python3", NULL, "http", NULL};

    if (rt_setup(state) < 0) {
        return -1;
    }
    script = rt_source_path("tests/support/egress_origin.py");
    argv[1] = script;
    origin_pid = rt_spawn_server(argv, &origin_port);
    free(script);
    if (origin_pid <= 0) {
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

/* Log lines of job `job` with reason `reason`. */
static int count_lines(const char *job, const char *reason)
{
    FILE *f = fopen(log_path, "r");
    char line[4096];
    int n = 0;

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        const char *j;
        const char *r;

        assert_non_null(o);
        j = json_string_value(json_object_get(o, "job"));
        r = json_string_value(json_object_get(o, "reason"));
        if (j != NULL && strcmp(j, job) == 0 && r != NULL && strcmp(r, reason) == 0) {
            assert_string_equal(json_string_value(json_object_get(o, "decision")), "deny");
            assert_string_equal(json_string_value(json_object_get(o, "host")), "allowed.test");
            n++;
        }
        json_decref(o);
    }
    fclose(f);
    return n;
}

static void test_tunnel_first_bytes_from_a_sandbox(void **state)
{
    char *dir = rt_source_path("tests/runtime/tunnel");
    char port[16];
    struct spawn_result r;
    json_t *rec;
    char want[256];

    (void)state;
    snprintf(port, sizeof(port), "%d", origin_port);
    r = RT_SBX("run", "--task", "tun-1", "--worktree", dir, "--json", "--", "node",
               "/workspace/tunnel_probe.js", port);
    if (r.rc != 0) {
        fail_msg("rc %d: %s %s", r.rc, r.out, r.err);
    }
    rec = json_loads(r.out, 0, NULL);
    assert_non_null(rec);
    snprintf(want, sizeof(want),
             "empty-line: \"\"\nunknown-method: \"\"\nallowed: \"HTTP/1.1 200 OK\"\n");
    assert_string_equal(json_string_value(json_object_get(rec, "stdout")), want);
    assert_int_equal(count_lines("tun-1", "tunnel-protocol"), 2);
    json_decref(rec);
    spawn_result_free(&r);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tunnel_first_bytes_from_a_sandbox),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
