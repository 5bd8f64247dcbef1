/* test_infisical_runner.c - secrets bound to the client and the pool (issue
 * 25, item 2), end to end: an in-process runner (sbx serve, the fake provider
 * of tests/plugin_abi) with cred_infisical against
 * tests/contract/infisical_server.py, two API clients alice and mallory that
 * may both use the instance, and the default path template
 * /clients/{client}/{pool}. Mallory naming alice's task is refused before
 * any lease; her own job reads only /clients/mallory/...; an unknown token
 * never reaches Infisical; the unix socket's client reads /clients/local/....
 * The fake provider's "fake-env NAME..." prints NAME=[redacted:NAME] for a
 * lease value (the runner redacts it) and "NAME unset" otherwise. */
#include "test_common.h"

#include "contract_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>

#include "runner_harness.h"

#define TOK_ALICE "token-of-alice-0123456789abcdef"
#define TOK_MALLORY "token-of-mallory-0123456789abcd"
#define ALICE_VALUE "alice-secret-value-0001"
#define MALLORY_VALUE "mallory-secret-value-0002"
#define LOCAL_VALUE "local-secret-value-0003"

static int tcp_port;
static char *plugin_copy; /* provider_good.so and cred_infisical.so: one plugin dir */

static int free_port(void)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int port;

    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    return port;
}

/* One request over TCP as token; returns the body, *status the HTTP status. */
static char *tcp_call(const char *token, const char *method, const char *path, const char *body,
                      long *status)
{
    char url[256], auth[256];
    const char *hdrs[2] = {auth, NULL};
    struct sbx_http_request req = {.method = method, .url = url, .timeout_ms = 30000};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char *out;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", tcp_port, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token);
    req.headers = hdrs;
    req.body = body;
    req.body_len = body ? strlen(body) : 0;
    if (sbx_http_request(&req, &resp, &err) < 0) {
        fail_msg("%s %s: %s", method, path, sbx_error_msg(err));
    }
    *status = resp.status;
    out = strdup(resp.body);
    sbx_http_response_free(&resp);
    return out;
}

static char *tcp_want(const char *token, const char *method, const char *path, const char *body,
                      long want)
{
    long st = 0;
    char *out = tcp_call(token, method, path, body, &st);

    if (st != want) {
        fail_msg("%s %s: HTTP %ld, want %ld: %s", method, path, st, want, out);
    }
    return out;
}

/* Submits as token (NULL: the unix socket); returns the job id. */
static char *submit_as(const char *token, const char *body)
{
    char *text = token ? tcp_want(token, "POST", "/v1/jobs", body, 201) : NULL;
    json_t *j = token ? json_loads(text, 0, NULL) : rh_json("POST", "/v1/jobs", body, 201);
    char *id = strdup(json_string_value(json_object_get(j, "id")));

    json_decref(j);
    free(text);
    return id;
}

/* Waits until the job is finished; returns its output. */
static char *finished_output(const char *id)
{
    char path[160];
    long st = 0;

    json_decref(rh_wait_state(id, "finished"));
    snprintf(path, sizeof(path), "/v1/jobs/%s/output", id);
    return rh_call("GET", path, NULL, &st);
}

/* The calls the server saw (infisical_server.py: {"calls": [...]}). */
static json_t *server_calls(void)
{
    json_t *j = NULL;
    json_t *calls;

    assert_int_equal(contract_server_call("GET", "/_test/calls", NULL, &j), 200);
    calls = json_incref(json_object_get(j, "calls"));
    json_decref(j);
    assert_true(json_is_array(calls));
    return calls;
}

/* The secretPath of every secrets call the server saw, "|"-joined. */
static char *secret_paths(void)
{
    json_t *all = server_calls();
    char *out = calloc(1, 4096);
    size_t i;
    json_t *c;

    json_array_foreach(all, i, c)
    {
        const char *sp = json_string_value(json_object_get(c, "secret_path"));

        if (sp != NULL) {
            strncat(out, "|", 4095 - strlen(out));
            strncat(out, sp, 4095 - strlen(out));
        }
    }
    json_decref(all);
    return out;
}

static int logins(void)
{
    json_t *all = server_calls();
    int n = contract_count_calls(all, "POST", "universal-auth/login");

    json_decref(all);
    return n;
}

static void copy_file(const char *from, const char *to)
{
    char buf[65536];
    int in = open(from, O_RDONLY | O_CLOEXEC);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0755);
    ssize_t n;

    assert_true(in >= 0 && out >= 0);
    while ((n = read(in, buf, sizeof(buf))) > 0) {
        assert_int_equal(write(out, buf, (size_t)n), n);
    }
    close(in);
    close(out);
}

static int setup(void **state)
{
    char *from = NULL, *to = NULL;

    (void)state;
    setenv("SBX_TEST_INF_ID", "test-client-id", 1);
    setenv("SBX_TEST_INF_SECRET", "test-client-secret", 1);
    setenv("SBX_TEST_TOK_ALICE", TOK_ALICE, 1);
    setenv("SBX_TEST_TOK_MALLORY", TOK_MALLORY, 1);
    /* the runner loads every plugin from one dir (symbolic links are refused) */
    plugin_copy = test_mkdtemp();
    assert_true(asprintf(&from, "%s/provider_good.so", getenv("SBX_TEST_PLUGINS")) > 0);
    assert_true(asprintf(&to, "%s/provider_good.so", plugin_copy) > 0);
    copy_file(from, to);
    free(from);
    free(to);
    assert_true(asprintf(&from, "%s/cred_infisical.so", getenv("SBX_PLUGIN_DIR")) > 0);
    assert_true(asprintf(&to, "%s/cred_infisical.so", plugin_copy) > 0);
    copy_file(from, to);
    free(from);
    free(to);
    setenv("SBX_TEST_PLUGINS", plugin_copy, 1);
    return contract_start_server("infisical_server.py", NULL);
}

static int teardown(void **state)
{
    (void)state;
    contract_stop_server();
    test_rm_rf(plugin_copy);
    free(plugin_copy);
    return 0;
}

static void start_runner(void)
{
    char *conf = NULL;

    tcp_port = free_port();
    assert_true(asprintf(&conf,
                         "credentials = { infisical = { plugin = \"cred_infisical\";\n"
                         "  url = \"http://127.0.0.1:%d\"; client_id_env = \"SBX_TEST_INF_ID\";\n"
                         "  client_secret_env = \"SBX_TEST_INF_SECRET\"; project = \"proj-1\";\n"
                         "  environment = \"dev\"; login_cooldown = 0; }; };\n"
                         "runner = { listen = \"tcp:127.0.0.1:%d\"; clients = (\n"
                         "  { name = \"alice\"; token_env = \"SBX_TEST_TOK_ALICE\"; scopes = "
                         "[\"submit\", \"read-own\"]; credentials = [\"infisical\"]; },\n"
                         "  { name = \"mallory\"; token_env = \"SBX_TEST_TOK_MALLORY\"; scopes = "
                         "[\"submit\", \"read-own\"]; credentials = [\"infisical\"]; }\n); };\n",
                         contract_port, tcp_port) > 0);
    rh_start(conf);
    free(conf);
    assert_int_equal(contract_server_call("POST", "/_test/reset", "{}", NULL), 200);
    assert_int_equal(
        contract_server_call("POST", "/_test/config",
                             "{\"secrets\": {\"dev\": {"
                             "\"/clients/alice/ci\": {\"ALICE_KEY\": \"" ALICE_VALUE "\"},"
                             "\"/clients/alice/agent\": {\"ALICE_KEY\": \"" ALICE_VALUE "\"},"
                             "\"/clients/mallory/ci\": {\"MALLORY_KEY\": \"" MALLORY_VALUE "\"},"
                             "\"/clients/local/ci\": {\"LOCAL_KEY\": \"" LOCAL_VALUE "\"}}}}",
                             NULL),
        200);
}

/* Mallory names alice's task and her pool: refused before any lease; her
 * own task reads /clients/mallory/ci only, never alice's values. */
static void test_mallory_gets_her_own_path(void **state)
{
    char *id, *out, *paths, *reply;
    int before;

    (void)state;
    start_runner();
    /* alice's job: her values, from her path */
    id = submit_as(TOK_ALICE, "{\"argv\":[\"fake-env\",\"ALICE_KEY\"],\"task\":\"alice-deploy\","
                              "\"pool\":\"ci\",\"credentials\":\"infisical\"}");
    out = finished_output(id);
    assert_non_null(strstr(out, "ALICE_KEY=[redacted:ALICE_KEY]"));
    assert_null(strstr(out, ALICE_VALUE));
    free(out);
    free(id);
    paths = secret_paths();
    assert_string_equal(paths, "|/clients/alice/ci");
    free(paths);
    /* mallory names alice's task in alice's pool: 403, no login, no read */
    before = logins();
    reply = tcp_want(TOK_MALLORY, "POST", "/v1/jobs",
                     "{\"argv\":[\"fake-env\",\"ALICE_KEY\"],\"task\":\"alice-deploy\","
                     "\"pool\":\"ci\",\"credentials\":\"infisical\"}",
                     403);
    assert_non_null(strstr(reply, "alice-deploy"));
    free(reply);
    assert_int_equal(logins(), before);
    /* her own task in the same pool: her path, her values; alice's unset */
    id = submit_as(TOK_MALLORY,
                   "{\"argv\":[\"fake-env\",\"MALLORY_KEY\",\"ALICE_KEY\"],\"task\":\"m-1\","
                   "\"pool\":\"ci\",\"credentials\":\"infisical\"}");
    out = finished_output(id);
    assert_non_null(strstr(out, "MALLORY_KEY=[redacted:MALLORY_KEY]"));
    assert_non_null(strstr(out, "ALICE_KEY unset"));
    assert_null(strstr(out, ALICE_VALUE));
    free(out);
    free(id);
    /* another pool: /clients/mallory/agent, which holds nothing (the job
     * fails at its lease); never /clients/alice/agent */
    id = submit_as(TOK_MALLORY, "{\"argv\":[\"fake-env\",\"ALICE_KEY\"],\"task\":\"m-2\","
                                "\"pool\":\"agent\",\"credentials\":\"infisical\"}");
    out = finished_output(id);
    assert_null(strstr(out, ALICE_VALUE));
    free(out);
    free(id);
    /* after alice's own read, only mallory's paths (a failed start may be
     * tried again, so a path can come twice) */
    paths = secret_paths();
    assert_true(strncmp(paths, "|/clients/alice/ci|", 19) == 0);
    assert_null(strstr(paths + 19, "alice"));
    assert_non_null(strstr(paths, "|/clients/mallory/ci|"));
    assert_non_null(strstr(paths, "|/clients/mallory/agent"));
    free(paths);
    rh_stop();
}

/* An unknown client is refused before any lease: no login at Infisical. */
static void test_unknown_client_refused(void **state)
{
    long st = 0;
    char *reply;

    (void)state;
    start_runner();
    reply =
        tcp_call("token-of-nobody-0123456789abcdef", "POST", "/v1/jobs",
                 "{\"argv\":[\"exit\",\"0\"],\"task\":\"x-1\",\"credentials\":\"infisical\"}", &st);
    assert_int_equal(st, 401);
    free(reply);
    assert_int_equal(logins(), 0);
    rh_stop();
}

/* The unix socket's client is "local": /clients/local/<pool>. */
static void test_local_client_path(void **state)
{
    char *id, *out, *paths;

    (void)state;
    start_runner();
    id = submit_as(NULL, "{\"argv\":[\"fake-env\",\"LOCAL_KEY\"],\"task\":\"l-1\","
                         "\"pool\":\"ci\",\"credentials\":\"infisical\"}");
    out = finished_output(id);
    assert_non_null(strstr(out, "LOCAL_KEY=[redacted:LOCAL_KEY]"));
    free(out);
    free(id);
    paths = secret_paths();
    assert_string_equal(paths, "|/clients/local/ci");
    free(paths);
    rh_stop();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_mallory_gets_her_own_path),
        cmocka_unit_test(test_unknown_client_refused),
        cmocka_unit_test(test_local_client_path),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
