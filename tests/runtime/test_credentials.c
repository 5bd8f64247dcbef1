/* test_credentials.c - credentials end to end: the Infisical plugin against
 * the local contract server, values only in each exec's environment,
 * redacted output, the guard, revocation, and no value anywhere sbx wrote.
 * The default path /clients/{client}/{pool}: the CLI is client "local", its
 * tasks pool "agent" (docs/credentials.md, The model). */
#include "rt_common.h"

#include <signal.h>

#define SECRET "s3cr3t-value-7f3a9c"

static pid_t server_pid;
static int server_port;

static int start_server(void)
{
    char *script = rt_source_path("tests/contract/infisical_server.py");
    char *argv[] = {"python3", script,     "--port",
                    "0",       "--secret", "dev:/clients/local/agent:API_KEY=" SECRET,
                    NULL};

    server_pid = rt_spawn_server(argv, &server_port);
    free(script);
    return server_pid > 0 ? 0 : -1;
}

static int setup(void **state)
{
    char cfg[512];

    if (rt_setup(state) < 0 || start_server() < 0) {
        return -1;
    }
    snprintf(cfg, sizeof(cfg),
             "credentials = { infisical = { plugin = \"cred_infisical\"; "
             "url = \"http://127.0.0.1:%d\"; project = \"proj-1\"; environment = \"dev\"; "
             "client_secret_env = \"TEST_INF_SECRET\"; }; };\n",
             server_port);
    rt_use_config(cfg);
    setenv("INFISICAL_CLIENT_ID", "test-client-id", 1);
    setenv("TEST_INF_SECRET", "test-client-secret", 1);
    return 0;
}

static int teardown(void **state)
{
    rt_stop_server(&server_pid);
    return rt_teardown(state);
}

static char *server_calls(void)
{
    char *argv[16];
    char url[128];
    struct spawn_result r;
    char *out;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d/_test/calls", server_port);
    argv[0] = "/usr/bin/curl";
    argv[1] = "-s";
    argv[2] = url;
    argv[3] = NULL;
    r = spawn_run(argv, NULL);
    out = strdup(r.out);
    spawn_result_free(&r);
    return out;
}

static void test_cred_value_in_env_and_redacted(void **state)
{
    struct spawn_result r =
        RT_SBX("run", "--credentials", "infisical", "--task", "cred-t", "--", "sh", "-c",
               "test \"$API_KEY\" = '" SECRET "' && echo match; "
               "echo \"$API_KEY\"; echo \"x$API_KEY\" >&2");
    char *calls;
    const char *login;
    const char *fetch;
    const char *revoke;

    (void)state;
    if (r.rc != 0) {
        fail_msg("rc %d: %s", r.rc, r.err);
    }
    assert_string_equal(r.out, "match\n[redacted:API_KEY]\n");
    assert_contains(r.err, "x[redacted:API_KEY]");
    assert_null(strstr(r.err, SECRET));
    spawn_result_free(&r);
    calls = server_calls();
    login = strstr(calls, "universal-auth/login");
    fetch = strstr(calls, "/secrets");
    revoke = strstr(calls, "token/revoke");
    assert_non_null(login);
    assert_non_null(fetch);
    assert_non_null(revoke);
    assert_true(login < fetch && fetch < revoke); /* in that order */
    free(calls);
}

static void test_cred_guard_refuses_env_dump(void **state)
{
    static const char *const dumps[][4] = {
        {"printenv", NULL, NULL, NULL},
        {"env", NULL, NULL, NULL},
        {"sh", "-c", "export -p", NULL},
        {"cat", "/proc/self/environ", NULL, NULL},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(dumps) / sizeof(dumps[0]); i++) {
        const char *args[12] = {"run", "--credentials", "infisical", "--task", "cred-t", "--"};
        struct spawn_result r;

        for (size_t k = 0; k < 4 && dumps[i][k] != NULL; k++) {
            args[6 + k] = dumps[i][k];
        }
        r = rt_sbx_argv(args, 0);
        assert_int_not_equal(r.rc, 0);
        assert_contains(r.err, "credentials guard");
        assert_null(strstr(r.out, SECRET));
        spawn_result_free(&r);
    }
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_cred_value_nowhere_else(void **state)
{
    struct spawn_result r =
        RT_SBX("task", "start", "--credentials", "infisical", "--task", "cred-t");
    json_t *inspect;
    char *text;
    char *grep_argv[] = {"/bin/grep", "-r", "-l", "-a", SECRET, rt_state, NULL};

    (void)state;
    if (r.rc != 0) {
        fail_msg("task start: %s", r.err);
    }
    spawn_result_free(&r);
    /* the sandbox's configuration holds no value */
    inspect = rt_engine_get("/containers/sbx-cred-t/json");
    assert_non_null(inspect);
    text = json_dumps(inspect, 0);
    assert_null(strstr(text, SECRET));
    free(text);
    json_decref(inspect);
    /* the value reaches the exec, and no file in the sandbox holds it */
    r = RT_SBX("exec", "cred-t", "--", "sh", "-c",
               "test -n \"$API_KEY\" && echo set; "
               "grep -r -l -a -F \"$API_KEY\" / --exclude-dir=proc --exclude-dir=sys "
               "--exclude-dir=dev 2>/dev/null | head -n 3; echo scanned");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "set\nscanned\n");
    spawn_result_free(&r);
    r = RT_SBX("task", "end", "cred-t");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    /* nothing sbx wrote on the host (records, keeper log) holds it */
    r = spawn_run(grep_argv, NULL);
    assert_int_equal(r.rc, 1); /* grep: no match */
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cred_value_in_env_and_redacted),
        cmocka_unit_test(test_cred_guard_refuses_env_dump),
        cmocka_unit_test(test_cred_value_nowhere_else),
    };

    return cmocka_run_group_tests_name("credentials", tests, setup, teardown);
}
