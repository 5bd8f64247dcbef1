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
    char job[64];

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
    /* (added, issue 31) the job's id: its log lines' "job" */
    snprintf(job, sizeof(job), "%s", json_string_value(json_object_get(rec, "id")));
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
            /* (changed, issue 31) a runner's job: "job" is its j- id, "task" the task */
            assert_string_equal(json_string_value(json_object_get(line, "task")), "eg-1");
        }
        if (host != NULL && strcmp(host, "denied.test") == 0) {
            assert_string_equal(json_string_value(json_object_get(line, "decision")), "deny");
            assert_string_equal(json_string_value(json_object_get(line, "task")), "eg-1");
        }
        json_decref(line);
    }
    free(log);
    fclose(f);
    {
        char *argv[] = {"/bin/grep", "-c", "\"task\":\"eg-1\"", log_path, NULL};
        struct spawn_result g = spawn_run(argv, NULL);

        assert_true(atoi(g.out) >= 2);
        spawn_result_free(&g);
    }
    /* readable per job */
    {
        struct spawn_result e = RT_SBX("job", job, "--egress");

        assert_int_equal(e.rc, 0);
        assert_contains(e.out, "\"host\":\"allowed.test\"");
        assert_contains(e.out, "\"host\":\"denied.test\"");
        spawn_result_free(&e);
    }
    assert_int_equal(rt_sandboxes(), 0);
}

/* Two execs in one kept task each fetch from the local server: their log lines name
 * two different execs (the agent's SBX_EXEC_ID, which each command sees) and the pid
 * inside. */
static void test_egress_attribution(void **state)
{
    char script[512];
    char *ids[2] = {NULL, NULL};
    struct spawn_result r = RT_SBX("task", "start", "--task", "eg-attr");
    char *line = NULL;
    size_t len = 0;
    size_t seen = 0;
    FILE *f;

    (void)state;
    if (r.rc != 0) {
        fail_msg("task start rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    snprintf(script, sizeof(script),
             "echo $SBX_EXEC_ID; curl -sS -m 10 -o /dev/null http://allowed.test:%d/x",
             origin_port);
    for (int i = 0; i < 2; i++) {
        r = RT_SBX("exec", "eg-attr", "--", "sh", "-c", script);
        if (r.rc != 0) {
            fail_msg("exec rc %d: %s %s", r.rc, r.out, r.err);
        }
        r.out[strcspn(r.out, "\n")] = '\0';
        assert_true(strncmp(r.out, "exec-", 5) == 0);
        ids[i] = strdup(r.out);
        spawn_result_free(&r);
    }
    assert_string_not_equal(ids[0], ids[1]);
    r = RT_SBX("task", "end", "eg-attr");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    f = fopen(log_path, "r");
    assert_non_null(f);
    while (getline(&line, &len, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        const char *task = json_string_value(json_object_get(o, "task"));
        const char *exec = json_string_value(json_object_get(o, "exec"));

        if (task != NULL && strcmp(task, "eg-attr") == 0) {
            assert_non_null(exec);
            assert_true(json_integer_value(json_object_get(o, "pid")) > 1);
            assert_non_null(json_string_value(json_object_get(o, "job")));
            assert_string_equal(exec, ids[seen < 2 ? seen : 1]);
            seen++;
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    assert_int_equal(seen, 2);
    free(ids[0]);
    free(ids[1]);
    assert_int_equal(rt_sandboxes(), 0);
}

/* egress.ca_bundle: a local HTTPS server whose certificate a test CA signed, reached
 * through the proxy by curl and by Node, fails without the bundle and works with it. */
static void test_egress_ca_bundle(void **state)
{
    char *cmd = NULL;
    char *script = NULL;
    char cfg[1536];
    char *argv[] = {"python3", NULL, "https", NULL, NULL, NULL};
    struct spawn_result r;
    pid_t https_pid;
    int https_port = 0;
    const char *want[2][2] = {{"curl-fail\n", "node-fail "}, {"200\n", "node-ok\n"}};

    (void)state;
    assert_true(
        asprintf(&cmd,
                 "cd %s && openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=sbx-test-ca "
                 "-keyout ca.key -out ca.pem && openssl req -newkey rsa:2048 -nodes "
                 "-subj /CN=ca.test -keyout srv.key -out srv.csr && printf "
                 "'subjectAltName=DNS:ca.test\\n' > ext && openssl x509 -req -in srv.csr "
                 "-CA ca.pem -CAkey ca.key -CAcreateserial -days 1 -extfile ext -out srv.pem",
                 rt_state) > 0);
    {
        char *sh[] = {"/bin/sh", "-c", cmd, NULL};

        r = spawn_run(sh, NULL);
        if (r.rc != 0) {
            fail_msg("openssl: %s", r.err);
        }
        spawn_result_free(&r);
    }
    free(cmd);
    argv[1] = rt_source_path("tests/support/egress_origin.py");
    assert_true(asprintf(&argv[3], "%s/srv.pem", rt_state) > 0);
    assert_true(asprintf(&argv[4], "%s/srv.key", rt_state) > 0);
    https_pid = rt_spawn_server(argv, &https_port);
    assert_true(https_pid > 0);
    assert_true(
        asprintf(
            &script,
            "curl -sS -m 10 -o /dev/null -w '%%{http_code}\\n' https://ca.test:%d/ 2>/dev/null "
            "|| echo curl-fail; node -e \"const http = require('http'), tls = require('tls'); "
            "http.request({host: '127.0.0.1', port: 3128, method: 'CONNECT', path: "
            "'ca.test:%d', headers: {host: 'ca.test:%d'}}).on('connect', (res, sock) => { "
            "const s = tls.connect({socket: sock, servername: 'ca.test'}, () => { "
            "console.log('node-ok'); process.exit(0); }); s.on('error', (e) => { "
            "console.log('node-fail ' + e.code); process.exit(0); }); }).end()\"",
            https_port, https_port, https_port) > 0);
    for (int with = 0; with < 2; with++) {
        char bundle[600] = "";

        if (with) {
            snprintf(bundle, sizeof(bundle), "  ca_bundle = \"%s/ca.pem\";\n", rt_state);
        }
        snprintf(cfg, sizeof(cfg),
                 "egress = {\n  log = \"%s\";\n  system_dns = false;\n%s"
                 "  registries = [\"ca.test:%d\"];\n"
                 "  hosts = ( { name = \"ca.test\"; address = \"127.0.0.1\"; } );\n};\n",
                 log_path, bundle, https_port);
        rt_use_config(cfg);
        r = RT_SBX("run", "--", "sh", "-c", script);
        if (strstr(r.out, want[with][0]) == NULL || strstr(r.out, want[with][1]) == NULL ||
            (with && strstr(r.out, "fail") != NULL)) {
            fail_msg("ca_bundle %s: got '%s' (%s), want '%s' and '%s'", with ? "set" : "unset",
                     r.out, r.err, want[with][0], want[with][1]);
        }
        spawn_result_free(&r);
    }
    /* a file that is not PEM: a one-line error naming the config line and the file */
    snprintf(cfg, sizeof(cfg), "egress = {\n  log = \"%s\";\n  ca_bundle = \"%s/srv.csr\";\n};\n",
             log_path, rt_state);
    rt_use_config(cfg);
    r = RT_SBX("run", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, ":3: 'egress.ca_bundle': '");
    assert_contains(r.err, "srv.csr' line 1: only CERTIFICATE blocks belong in a CA bundle");
    spawn_result_free(&r);
    rt_stop_server(&https_pid);
    free(script);
    free(argv[1]);
    free(argv[3]);
    free(argv[4]);
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
        cmocka_unit_test(test_egress_attribution),
        cmocka_unit_test(test_egress_ca_bundle),
        cmocka_unit_test(test_egress_log_unwritable_fails_closed),
    };

    return cmocka_run_group_tests_name("egress_docker", tests, setup, teardown);
}
