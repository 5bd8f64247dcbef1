/* test_serve_api.c - the runner's HTTP API (sbx serve) in-process with the
 * fake provider: bad input gets 4xx with its one-line message; jobs, output,
 * cancel, agent tasks, queue, slots and /metrics. */
#include "test_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "prom_check.h"
#include "runner_harness.h"
#include "store/store.h"
#include "wait.h"

/* The length of /v1/queue's tasks[]. */
static long queue_tasks(void)
{
    json_t *j = rh_json("GET", "/v1/queue", NULL, 200);
    long n = (long)json_array_size(json_object_get(j, "tasks"));

    json_decref(j);
    return n;
}

struct bad {
    const char *method, *path, *body;
    long code;
    const char *msg;
};

static void test_api_bad_input(void **state)
{
    static const struct bad cases[] = {
        {"POST", "/v1/jobs", "{\"argv\": [\"x\"", 400, "malformed JSON at line 1"},
        {"POST", "/v1/jobs", "", 400, "malformed JSON"},
        {"POST", "/v1/jobs", "[1]", 400, "the body must be a JSON object"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"colour\":1}", 400, "unknown field 'colour'"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"argv\":[\"y\"]}", 400, "duplicate"},
        {"POST", "/v1/jobs", "{}", 400, "field 'argv' is required"},
        {"POST", "/v1/jobs", "{\"argv\":\"ls -l\"}", 400, "'argv' must be a non-empty array"},
        {"POST", "/v1/jobs", "{\"argv\":[]}", 400, "'argv' must be a non-empty array"},
        {"POST", "/v1/jobs", "{\"argv\":[\"ls\", 3]}", 400, "element 1 must be a string"},
        {"POST", "/v1/jobs", "{\"argv\":[\"\"]}", 400, "command name is empty"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"pool\":\"gpu\"}", 400, "use ci or agent"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"pool\":1}", 400, "'pool' must be a string"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"class\":\"huge\"}", 400, "light or heavy"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"task\":\"../etc\"}", 400, "field 'task'"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"task\":7}", 400, "'task' must be a string"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"labels\":[1]}", 400,
         "'labels' must be an object"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"labels\":{\"a\":1}}", 400,
         "label 'a' must be a string"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"labels\":{\"a b\":\"c\"}}", 400, "label 'a b'"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"worktree\":\"rel/dir\"}", 400, "absolute path"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"provider\":\"nope\"}", 400,
         "no provider instance 'nope'"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"credentials\":\"nope\"}", 400,
         "no credential instance"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"class\":\"heavy\"}", 422, "takes no heavy jobs"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":[\"A=1\"]}", 400,
         "field 'env' must be an object"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":\"A=1\"}", 400,
         "field 'env' must be an object"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":{\"1FOO\":\"x\"}}", 400,
         "env.1FOO: invalid variable name"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":{\"OK\":\"1\",\"A-B\":\"x\"}}", 400,
         "env.A-B: invalid variable name"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":{\"A B\":\"x\"}}", 400,
         "env.A B: invalid variable name"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":{\"\":\"x\"}}", 400,
         "env.: invalid variable name"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":{\"N\":1}}", 400,
         "env.N: the value must be a string"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":{\"N\":null}}", 400,
         "env.N: the value must be a string"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":{\"N\":[\"x\"]}}", 400,
         "env.N: the value must be a string"},
        {"POST", "/v1/jobs", "{\"argv\":[\"x\"],\"env\":{\"A\":\"1\",\"A\":\"2\"}}", 400,
         "duplicate"},
        {"GET", "/v1/jobs/j-000000000000", NULL, 404, "j-000000000000"},
        {"GET", "/v1/jobs/j-000000000000/output", NULL, 404, "j-000000000000"},
        {"POST", "/v1/jobs/j-000000000000/cancel", "{}", 404, "j-000000000000"},
        {"GET", "/v1/jobs/bad%20id", NULL, 400, "job id"},
        {"PUT", "/v1/jobs", "{}", 405, "use GET to list jobs"},
        {"DELETE", "/v1/queue", NULL, 405, "use GET"},
        {"POST", "/metrics", "{}", 405, "use GET"},
        {"GET", "/v1/nothing", NULL, 404, "no endpoint /v1/nothing"},
        {"GET", "/v1/jobs/j-1/frobnicate", NULL, 404, "no endpoint"},
        {"POST", "/v1/tasks/nope/end", "{}", 404, "no task 'nope'"},
    };

    (void)state;
    rh_start("box = { max_sandboxes = 2; heavy_min_memory = \"60G\"; };\n");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        long st = 0;
        char *body = rh_call(cases[i].method, cases[i].path, cases[i].body, &st);
        json_t *j = json_loads(body, 0, NULL);
        const char *msg = json_string_value(json_object_get(j, "error"));

        if (st != cases[i].code || msg == NULL || strstr(msg, cases[i].msg) == NULL ||
            strchr(msg, '\n') != NULL) {
            fail_msg("case %zu: %s %s %s: HTTP %ld %s (want %ld '%s')", i, cases[i].method,
                     cases[i].path, cases[i].body ? cases[i].body : "", st, body, cases[i].code,
                     cases[i].msg);
        }
        json_decref(j);
        free(body);
    }
    {
        /* oversized body: 413 with the limit named */
        size_t n = SBX_RUNNER_MAX_BODY + 10;
        char *big = malloc(n + 1);
        long st = 0;
        char *body;

        memset(big, ' ', n);
        big[n] = '\0';
        body = rh_call_len("POST", "/v1/jobs", big, n, &st);
        assert_int_equal(st, 413);
        assert_non_null(strstr(body, "larger than the limit of 1048576 bytes"));
        free(body);
        free(big);
    }
    {
        /* none of the refused requests queued or stored a job */
        char *dbp = NULL;
        struct sbx_store *stp;
        struct sbx_job_rec *list = NULL;
        size_t n = 99;
        sbx_error_t *err = NULL;
        json_t *q = rh_json("GET", "/v1/queue", NULL, 200);
        char *text = json_dumps(q, JSON_COMPACT);

        assert_true(asprintf(&dbp, "%s/runner.db", rh_dir) > 0);
        stp = sbx_store_open(dbp, &err);
        assert_non_null(stp);
        assert_int_equal(sbx_store_job_list(stp, -1, &list, &n, &err), 0);
        assert_int_equal(n, 0);
        sbx_job_rec_free_array(list, n);
        sbx_store_close(stp);
        free(dbp);
        assert_null(strstr(text, "\"j-"));
        free(text);
        json_decref(q);
    }
    {
        /* the queue view says why this box takes no heavy jobs */
        json_t *q = rh_json("GET", "/v1/queue", NULL, 200);
        json_t *box = json_object_get(q, "box");
        struct stat sb;

        assert_true(json_is_false(json_object_get(box, "heavy_allowed")));
        assert_non_null(strstr(json_string_value(json_object_get(box, "heavy_refusal")),
                               "box.heavy_min_memory"));
        json_decref(q);
        assert_int_equal(stat(rh_sock, &sb), 0);
        assert_int_equal(sb.st_mode & 0777, 0660);
        assert_true(S_ISSOCK(sb.st_mode));
    }
    rh_stop();
}

/* Issue 14: the pools split box.memory minus box.host_reserve; a job whose
 * policy asks for more memory (200M) than its pool's share (1G - 768M = 256M,
 * split: 128M) is refused at submit with the numbers and stores nothing. (A
 * job left at the configured default limits.memory gets the pool's share
 * instead: docs/runner.md, "A small box".) */
static void test_api_memory_reserve(void **state)
{
    long st = 0;
    char *body;
    char *pol = test_mkdtemp();
    char *extra = NULL;
    char *cmd = NULL;
    json_t *q;

    (void)state;
    free(test_write_file(pol, "limits.lua", "return { memory = \"200M\", reason = \"test\" }\n"));
    assert_true(asprintf(&cmd, "cp %s/policies/slots.lua %s/policies/egress.lua %s/",
                         getenv("SBX_SOURCE_DIR"), getenv("SBX_SOURCE_DIR"), pol) > 0);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    assert_true(asprintf(&extra,
                         "policy_dir = \"%s\";\nbox = { max_sandboxes = 2; heavy_min_memory = "
                         "\"60G\"; memory = \"1G\"; host_reserve = \"768M\"; };\n",
                         pol) > 0);
    rh_start(extra);
    free(extra);
    body = rh_call("POST", "/v1/jobs", "{\"argv\":[\"x\"]}", &st);
    assert_int_equal(st, 422);
    if (strstr(body, "asks for 200M of memory but pool 'ci' has 128M on this box (box.memory "
                     "1G - box.host_reserve 768M, split between the pools)") == NULL) {
        fail_msg("refusal: %s", body);
    }
    free(body);
    q = rh_json("GET", "/v1/queue", NULL, 200);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(q, "box"), "host_reserve")),
                     768LL << 20);
    json_decref(q);
    rh_stop();
    test_rm_rf(pol);
    free(pol);
}

static void test_api_jobs(void **state)
{
    char *a, *b, *ag, *ag2;
    json_t *j;
    long st = 0;
    char *text;
    char path[128];

    (void)state;
    rh_start("box = { max_sandboxes = 4; heavy_min_memory = \"1G\"; };\n");
    a = rh_submit("{\"argv\":[\"exit\",\"3\"],\"labels\":{\"repo\":\"x\"}}");
    j = rh_wait_state(a, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 3);
    assert_string_equal(json_string_value(json_object_get(j, "pool")), "ci");
    assert_string_equal(json_string_value(json_object_get(j, "provider")), "fake");
    assert_true(json_is_number(json_object_get(json_object_get(j, "timings"), "ready_at")));
    assert_true(json_is_array(json_object_get(j, "credential_leases")));
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/jobs/%s/output", a);
    text = rh_call("GET", path, NULL, &st);
    assert_int_equal(st, 200);
    assert_string_equal(text, "exit");
    free(text);
    snprintf(path, sizeof(path), "/v1/jobs/%s/cancel", a);
    text = rh_call("POST", path, "{}", &st);
    assert_int_equal(st, 409);
    assert_non_null(strstr(text, "already ended (finished)"));
    free(text);

    /* cancel a running job */
    b = rh_submit("{\"argv\":[\"sleep\",\"600000\"]}");
    j = rh_wait_state(b, "running");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/jobs/%s/cancel", b);
    json_decref(rh_json("POST", path, "{}", 202));
    j = rh_wait_state(b, "cancelled");
    assert_string_equal(json_string_value(json_object_get(j, "reason")), "cancelled by request");
    json_decref(j);

    /* an agent task: kept after its command, later jobs run in its sandbox */
    ag = rh_submit("{\"argv\":[\"sleep\",\"600000\"],\"pool\":\"agent\",\"task\":\"ag-1\"}");
    json_decref(rh_wait_state(ag, "running"));
    ag2 = rh_submit("{\"argv\":[\"exit\",\"5\"],\"pool\":\"agent\",\"task\":\"ag-1\"}");
    j = rh_wait_state(ag2, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 5);
    assert_string_equal(json_string_value(json_object_get(j, "task")), "ag-1");
    json_decref(j);
    snprintf(path, sizeof(path), "/v1/jobs/%s/cancel", ag);
    json_decref(rh_json("POST", path, "{}", 202));
    json_decref(rh_wait_state(ag, "cancelled"));
    j = rh_json("GET", "/v1/queue", NULL, 200);
    text = json_dumps(json_object_get(j, "tasks"), JSON_COMPACT);
    assert_non_null(strstr(text, "\"id\":\"ag-1\"")); /* still held */
    assert_non_null(strstr(text, "\"kept\":true"));
    free(text);
    json_decref(j);
    j = rh_json("GET", "/v1/slots", NULL, 200);
    text = json_dumps(j, JSON_COMPACT);
    assert_non_null(strstr(text, "\"task\":\"ag-1\""));
    free(text);
    json_decref(j);
    json_decref(rh_json("POST", "/v1/tasks/ag-1/end", "{}", 202));
    wait_until(queue_tasks() == 0, 20, NULL, "task ag-1 to leave /v1/queue's tasks (%ld left)",
               queue_tasks());

    /* metrics: the exposition passes the strict checker and promtool */
    text = rh_call("GET", "/metrics", NULL, &st);
    assert_int_equal(st, 200);
    assert_exposition(text);
    promtool_check_in(rh_dir, text);
    assert_non_null(strstr(text, "sbx_jobs_finished_total{pool=\"ci\",result=\"failed\"} 1"));
    assert_non_null(strstr(text, "sbx_jobs_finished_total{pool=\"ci\",result=\"cancelled\"} 1"));
    free(text);
    free(a);
    free(b);
    free(ag);
    free(ag2);
    rh_stop();
}

/* A task still queued cannot take a second job yet; a refused job stores nothing. */
static void test_api_conflicts(void **state)
{
    char *a, *b;
    long st = 0;
    char *text;

    (void)state;
    rh_start("box = { max_sandboxes = 2; heavy_min_memory = \"1G\"; };\n");
    a = rh_submit("{\"argv\":[\"sleep\",\"600000\"],\"pool\":\"agent\",\"task\":\"t-a\"}");
    json_decref(rh_wait_state(a, "running"));
    b = rh_submit("{\"argv\":[\"sleep\",\"600000\"],\"pool\":\"agent\",\"task\":\"t-b\"}");
    text =
        rh_call("POST", "/v1/jobs", "{\"argv\":[\"x\"],\"pool\":\"agent\",\"task\":\"t-b\"}", &st);
    assert_int_equal(st, 409);
    assert_non_null(strstr(text, "task t-b is still queued"));
    free(text);
    free(a);
    free(b);
    rh_stop();
}

/* The output of ended jobs is kept for the newest runner.keep_output only
 * (10 here, 1000 by default); records stay. */
static void test_api_output_bounded(void **state)
{
    char *first = NULL;
    char *last = NULL;
    char path[128];
    long st = 0;
    char *text;

    (void)state;
    rh_start("box = { max_sandboxes = 4; heavy_min_memory = \"1G\"; };\n"
             "runner = { keep_output = 10; };\n");
    for (int i = 0; i < 13; i++) {
        char *id = rh_submit("{\"argv\":[\"exit\",\"0\"]}");

        if (i == 0) {
            first = id;
        }
        else {
            free(last);
            last = id;
        }
    }
    json_decref(rh_wait_state(last, "finished"));
    snprintf(path, sizeof(path), "/v1/jobs/%s/output", first);
    wait_until((free(rh_call("GET", path, NULL, &st)), st == 410), 20, NULL,
               "GET %s to answer 410 (its output dropped; last HTTP %ld)", path, st);
    json_decref(rh_wait_state(first, "finished")); /* the record stays */
    snprintf(path, sizeof(path), "/v1/jobs/%s/output", last);
    text = rh_call("GET", path, NULL, &st);
    assert_int_equal(st, 200);
    assert_string_equal(text, "exit");
    free(text);
    free(first);
    free(last);
    rh_stop();
}

static void test_api_listen_config(void **state)
{
    static const struct {
        const char *listen, *msg;
    } bad[] = {
        {"foo", "use unix:/PATH or tcp:HOST:PORT"},
        {"unix:relative.sock", "needs an absolute path"},
        {"tcp:127.0.0.1", "use tcp:HOST:PORT"},
        {"tcp:127.0.0.1:0", "port 1-65535"},
        {"tcp:127.0.0.1:99999", "port 1-65535"},
        {"tcp::80", "use tcp:HOST:PORT"},
    };
    struct sbx_config *c = sbx_config_defaults();
    struct sbx_runner_endpoint ep;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sbx_error_t *err = NULL;

        free(c->runner.listen);
        c->runner.listen = strdup(bad[i].listen);
        assert_int_equal(sbx_runner_endpoint(c, &ep, &err), -1);
        assert_int_equal(err->code, SBX_E_CONFIG);
        if (strstr(sbx_error_msg(err), bad[i].msg) == NULL) {
            fail_msg("%s: %s", bad[i].listen, sbx_error_msg(err));
        }
        sbx_error_free(&err);
    }
    free(c->runner.listen);
    c->runner.listen = strdup("tcp:127.0.0.1:8787");
    assert_int_equal(sbx_runner_endpoint(c, &ep, NULL), 0);
    assert_string_equal(ep.tcp_host, "127.0.0.1");
    assert_int_equal(ep.tcp_port, 8787);
    assert_non_null(strstr(ep.unix_path, "/runner.sock"));
    sbx_runner_endpoint_clear(&ep);
    sbx_config_destroy(c);
}

/* TCP needs the bearer token: 401 without it, the token is never echoed. */
static void test_api_tcp_token(void **state)
{
    struct sockaddr_in sa = {.sin_family = AF_INET};
    socklen_t len = sizeof(sa);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    char *conf = NULL;
    char url[128];
    int port;

    (void)state;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
    port = ntohs(sa.sin_port);
    close(fd);
    setenv("SBX_TEST_RUNNER_TOKEN", "s3cret-token-value", 1);
    assert_true(asprintf(&conf,
                         "runner = { listen = \"tcp:127.0.0.1:%d\"; "
                         "token_env = \"SBX_TEST_RUNNER_TOKEN\"; };\n",
                         port) > 0);
    rh_start(conf);
    snprintf(url, sizeof(url), "http://127.0.0.1:%d/v1/queue", port);
    {
        const char *good[] = {"Authorization: Bearer s3cret-token-value", NULL};
        const char *wrong[] = {"Authorization: Bearer s3cret-token-valuX", NULL};
        const char *const *hdrs[] = {NULL, wrong, good};
        long want[] = {401, 401, 200};

        for (int i = 0; i < 3; i++) {
            struct sbx_http_request req = {
                .method = "GET", .url = url, .headers = hdrs[i], .timeout_ms = 10000};
            struct sbx_http_response resp = {0};

            assert_int_equal(sbx_http_request(&req, &resp, NULL), 0);
            assert_int_equal(resp.status, want[i]);
            assert_null(strstr(resp.body, "s3cret"));
            if (want[i] == 401) {
                assert_non_null(strstr(resp.body, "bearer token"));
            }
            sbx_http_response_free(&resp);
        }
    }
    rh_stop();
    free(conf);
    /* no token in the environment: the runner refuses to start */
    unsetenv("SBX_TEST_RUNNER_TOKEN");
    {
        struct sbx_config *c = sbx_config_defaults();
        sbx_error_t *err = NULL;
        struct sbx_runner *r;

        c->runner.listen = strdup("tcp:127.0.0.1:1");
        c->runner.token_env = strdup("SBX_TEST_RUNNER_TOKEN");
        r = sbx_runner_create(&(struct sbx_runner_opts){.cfg = c, .plugin_dir = "/nonexistent"},
                              &err);
        assert_null(r);
        assert_non_null(strstr(sbx_error_msg(err), "needs a bearer token"));
        sbx_error_free(&err);
        sbx_config_destroy(c);
    }
}

/* Policy decides each job at submit: encore test in the ci pool is heavy
 * and npm ci is light; a policy error refuses the job (fail closed); a
 * reload with a broken policy is refused and the old policy stays. */
static void test_api_policy_and_reload(void **state)
{
    char *pol = test_mkdtemp();
    char *extra = NULL;
    char *cmd = NULL;
    const char *src = getenv("SBX_SOURCE_DIR");
    sbx_error_t *err = NULL;
    json_t *j;

    (void)state;
    assert_true(asprintf(&cmd, "cp %s/policies/*.lua %s/", src, pol) > 0);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    assert_true(
        asprintf(&extra, "policy_dir = \"%s\";\nbox = { heavy_min_memory = \"1G\"; };\n", pol) > 0);
    rh_start(extra);
    j = rh_json("POST", "/v1/jobs", "{\"argv\": [\"encore\", \"test\"], \"pool\": \"ci\"}", 201);
    assert_string_equal(json_string_value(json_object_get(j, "class")), "heavy");
    json_decref(j);
    j = rh_json("POST", "/v1/jobs", "{\"argv\": [\"npm\", \"ci\"], \"pool\": \"ci\"}", 201);
    assert_string_equal(json_string_value(json_object_get(j, "class")), "light");
    json_decref(j);
    /* a broken policy on disk: the reload is refused, the old one decides */
    free(test_write_file(pol, "slots.lua", "return {\n"));
    assert_int_equal(sbx_runner_reload_policy(rh_runner, &err), -1);
    assert_non_null(strstr(err->msg, "slots.lua"));
    assert_non_null(strstr(err->msg, "previous policy stays"));
    sbx_error_free(&err);
    j = rh_json("POST", "/v1/jobs", "{\"argv\": [\"encore\", \"test\"], \"pool\": \"ci\"}", 201);
    assert_string_equal(json_string_value(json_object_get(j, "class")), "heavy");
    json_decref(j);
    /* a policy that denies: the submit is refused with the script's message */
    free(test_write_file(pol, "slots.lua", "error('no jobs today')\n"));
    assert_int_equal(sbx_runner_reload_policy(rh_runner, &err), 0);
    j = rh_json("POST", "/v1/jobs", "{\"argv\": [\"true\"], \"pool\": \"ci\"}", 422);
    assert_non_null(strstr(json_string_value(json_object_get(j, "error")), "no jobs today"));
    json_decref(j);
    rh_stop();
    test_rm_rf(pol);
    free(pol);
    free(extra);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_api_bad_input),      cmocka_unit_test(test_api_memory_reserve),
        cmocka_unit_test(test_api_jobs),           cmocka_unit_test(test_api_conflicts),
        cmocka_unit_test(test_api_output_bounded), cmocka_unit_test(test_api_listen_config),
        cmocka_unit_test(test_api_tcp_token),      cmocka_unit_test(test_api_policy_and_reload),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
