/* test_egress_tunnel_docker.c - a tunnel's first bytes from inside a real sandbox
 * (docs/egress.md, "What a tunnel may carry"): through the relay, a CONNECT to an
 * allowed name followed by an empty line and a request for another host is refused,
 * and so is an unknown method; both are logged tunnel-protocol under the job; an
 * ordinary request in a tunnel still gets its answer; real TLS 1.3 and 1.2 (curl
 * against a local HTTPS server) pass the followed handshake (issue 25). Only the
 * loopback servers started here are ever reached (system_dns = false). */
#include "rt_common.h"

static pid_t origin_pid;
static int origin_port;
static pid_t tls_pid;
static int tls_port;
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
    {
        char *cert = NULL;
        char *key = NULL;
        char *gen = NULL;
        char *targv[] = {"python3", NULL, "https", NULL, NULL, NULL};

        assert_true(asprintf(&cert, "%s/tls-cert.pem", rt_state) > 0);
        assert_true(asprintf(&key, "%s/tls-key.pem", rt_state) > 0);
        assert_true(asprintf(&gen,
                             "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s' -out '%s' "
                             "-days 1 -subj /CN=allowed.test "
                             "-addext subjectAltName=DNS:allowed.test >/dev/null 2>&1",
                             key, cert) > 0);
        assert_int_equal(system(gen), 0);
        targv[1] = rt_source_path("tests/support/egress_origin.py");
        targv[3] = cert;
        targv[4] = key;
        tls_pid = rt_spawn_server(targv, &tls_port);
        free(targv[1]);
        free(cert);
        free(key);
        free(gen);
        if (tls_pid <= 0) {
            return -1;
        }
    }
    snprintf(cfg, sizeof(cfg),
             "egress = {\n  log = \"%s\";\n  system_dns = false;\n"
             "  registries = [\"allowed.test:%d,%d\"];\n"
             "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; },\n"
             "            { name = \"denied.test\"; address = \"127.0.0.1\"; } );\n};\n",
             log_path, origin_port, tls_port);
    rt_use_config(cfg);
    return 0;
}

static int teardown(void **state)
{
    rt_stop_server(&origin_pid);
    rt_stop_server(&tls_pid);
    free(log_path);
    return rt_teardown(state);
}

/* Log lines of task `job` with reason `reason` ((changed, issue 31) `sbx run`
 * is a runner's job: the lines' "job" is its j- id, "task" the --task). */
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
        j = json_string_value(json_object_get(o, "task"));
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

/* Real TLS through the followed handshake: curl's TLS 1.3 and TLS 1.2 handshakes
 * (ServerHello, certificates, CCS, Finished) pass, and each is logged allowed with its
 * name. */
static void test_real_tls_from_a_sandbox(void **state)
{
    char script[512];
    char want[256];
    struct spawn_result r;
    json_t *rec;
    FILE *f;
    char line[4096];
    int n = 0;

    (void)state;
    snprintf(script, sizeof(script),
             "curl -sk https://allowed.test:%d/a; curl -sk --tlsv1.2 --tls-max 1.2 "
             "https://allowed.test:%d/b",
             tls_port, tls_port);
    r = RT_SBX("run", "--task", "tls-1", "--json", "--", "sh", "-c", script);
    if (r.rc != 0) {
        fail_msg("rc %d: %s %s", r.rc, r.out, r.err);
    }
    rec = json_loads(r.out, 0, NULL);
    assert_non_null(rec);
    snprintf(want, sizeof(want),
             "hello from https allowed.test:%d\nhello from https allowed.test:%d\n", tls_port,
             tls_port);
    assert_string_equal(json_string_value(json_object_get(rec, "stdout")), want);
    json_decref(rec);
    spawn_result_free(&r);
    f = fopen(log_path, "r");
    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        json_t *o = json_loads(line, 0, NULL);
        const char *j = json_string_value(json_object_get(o, "task")); /* (changed, issue 31) */

        if (j != NULL && strcmp(j, "tls-1") == 0) {
            assert_string_equal(json_string_value(json_object_get(o, "decision")), "allow");
            assert_string_equal(json_string_value(json_object_get(o, "sni")), "allowed.test");
            assert_null(json_string_value(json_object_get(o, "reason")));
            n++;
        }
        json_decref(o);
    }
    fclose(f);
    assert_int_equal(n, 2);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tunnel_first_bytes_from_a_sandbox),
        cmocka_unit_test(test_real_tls_from_a_sandbox),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
