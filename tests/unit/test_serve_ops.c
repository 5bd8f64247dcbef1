/* test_serve_ops.c - the runner as an operator sees it (issue 20, items 5
 * and 6), in-process with the fake provider: GET /v1/jobs with its filters,
 * paging and scopes; /healthz and /readyz with the engine up and down; the
 * runner's metrics (run and start time, egress, refusals, build, process);
 * and the default configuration on a 2-CPU box running `true`. */
#include "test_common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <time.h>

#include "prom_check.h"
#include "runner/rmetrics.h"
#include "runner_harness.h"

static const char *err_of(json_t *j)
{
    const char *m = json_string_value(json_object_get(j, "error"));

    return m ? m : "";
}

static void wait_finished(const char *id)
{
    json_decref(rh_wait_state(id, "finished"));
}

/* The ids of a list reply, in order, as "id,id,..." (caller frees). */
static char *ids_of(json_t *reply)
{
    json_t *jobs = json_object_get(reply, "jobs");
    json_t *e;
    size_t i;
    char *out = strdup("");

    assert_true(json_is_array(jobs));
    json_array_foreach(jobs, i, e)
    {
        char *n = NULL;

        assert_true(asprintf(&n, "%s%s,", out, json_string_value(json_object_get(e, "id"))) > 0);
        free(out);
        out = n;
    }
    return out;
}

static size_t count_of(const char *query)
{
    char path[256];
    json_t *j;
    size_t n;

    snprintf(path, sizeof(path), "/v1/jobs%s", query);
    j = rh_json("GET", path, NULL, 200);
    n = json_array_size(json_object_get(j, "jobs"));
    json_decref(j);
    return n;
}

static void list_refused(const char *query, const char *want)
{
    char path[256];
    json_t *j;

    snprintf(path, sizeof(path), "/v1/jobs%s", query);
    j = rh_json("GET", path, NULL, 400);
    if (strstr(err_of(j), want) == NULL || strchr(err_of(j), '\n') != NULL) {
        fail_msg("%s: got '%s', want '%s'", query, err_of(j), want);
    }
    json_decref(j);
}

/* ---- listing -------------------------------------------------------------- */

static void test_ops_list(void **state)
{
    char *ids[5];
    char *all, *paged = strdup(""), *cursor = NULL, *q = NULL, *running;
    json_t *j;

    (void)state;
    rh_start("box = { max_sandboxes = 4; };\n");
    for (int i = 0; i < 5; i++) {
        ids[i] = rh_submit(i % 2 ? "{\"argv\":[\"exit\",\"0\"],\"pool\":\"agent\"}"
                                 : "{\"argv\":[\"exit\",\"0\"]}");
        wait_finished(ids[i]);
    }
    running = rh_submit("{\"argv\":[\"sleep\",\"600000\"]}");
    json_decref(rh_wait_state(running, "running"));

    /* newest first, every job, no next page */
    j = rh_json("GET", "/v1/jobs", NULL, 200);
    all = ids_of(j);
    assert_true(json_is_null(json_object_get(j, "next_cursor")));
    assert_int_equal(json_array_size(json_object_get(j, "jobs")), 6);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(j, "jobs"), 0), "id")),
        running);
    json_decref(j);

    /* filters */
    assert_int_equal(count_of("?pool=agent"), 2);
    assert_int_equal(count_of("?pool=ci"), 4);
    assert_int_equal(count_of("?state=finished"), 5);
    assert_int_equal(count_of("?state=running"), 1);
    assert_int_equal(count_of("?state=queued"), 0);
    assert_int_equal(count_of("?state=finished&pool=ci"), 3);
    assert_int_equal(count_of("?since=0"), 6);
    assert_true(asprintf(&q, "?since=%lld", (long long)time(NULL) + 3600) > 0);
    assert_int_equal(count_of(q), 0);
    free(q);
    assert_true(asprintf(&q, "?since=%lld.5", (long long)time(NULL) - 3600) > 0);
    assert_int_equal(count_of(q), 6);
    free(q);

    /* paging: pages of 2 give every job once, in the same order */
    for (int page = 0; page < 10; page++) {
        char path[256];
        char *part, *n = NULL;
        json_t *next;

        snprintf(path, sizeof(path), "/v1/jobs?limit=2%s%s", cursor ? "&cursor=" : "",
                 cursor ? cursor : "");
        j = rh_json("GET", path, NULL, 200);
        assert_true(json_array_size(json_object_get(j, "jobs")) <= 2);
        part = ids_of(j);
        assert_true(asprintf(&n, "%s%s", paged, part) > 0);
        free(paged);
        free(part);
        paged = n;
        next = json_object_get(j, "next_cursor");
        free(cursor);
        cursor = json_is_string(next) ? strdup(json_string_value(next)) : NULL;
        json_decref(j);
        if (cursor == NULL) {
            break;
        }
    }
    assert_null(cursor);
    assert_string_equal(paged, all);
    /* a page exactly at the end says so: no empty last page */
    j = rh_json("GET", "/v1/jobs?limit=6", NULL, 200);
    assert_true(json_is_null(json_object_get(j, "next_cursor")));
    json_decref(j);

    /* bad filters: 400 naming the field */
    list_refused("?state=done", "query 'state' 'done'");
    list_refused("?pool=gpu", "query 'pool' 'gpu'");
    list_refused("?since=yesterday", "query 'since' 'yesterday'");
    list_refused("?since=-5", "query 'since'");
    list_refused("?limit=0", "query 'limit' '0': use 1-500");
    list_refused("?limit=501", "query 'limit' '501'");
    list_refused("?limit=2x", "query 'limit'");
    list_refused("?cursor=42", "query 'cursor'");
    list_refused("?cursor=c1.zz", "query 'cursor'");
    list_refused("?cursor=c1.0", "query 'cursor'");
    list_refused("?colour=red", "unknown query parameter 'colour'");
    list_refused("?state=queued&state=running", "'state' is given twice");

    json_decref(rh_json("POST", "/v1/jobs/", NULL, 400));
    {
        char path[128];

        snprintf(path, sizeof(path), "/v1/jobs/%s/cancel", running);
        json_decref(rh_json("POST", path, "{}", 202));
    }
    json_decref(rh_wait_state(running, "cancelled"));
    assert_int_equal(count_of("?state=cancelled"), 1);
    rh_stop();
    for (int i = 0; i < 5; i++) {
        free(ids[i]);
    }
    free(running);
    free(all);
    free(paged);
}

/* ---- scopes over TCP ------------------------------------------------------ */

static int tc_port;

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

/* One request over TCP; the body (caller frees) and *status. */
static char *tc(const char *token, const char *method, const char *path, const char *body,
                long *status)
{
    char url[256], auth[256];
    const char *hdrs[2] = {auth, NULL};
    struct sbx_http_request req = {.method = method, .url = url, .timeout_ms = 30000};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char *out;

    snprintf(url, sizeof(url), "http://127.0.0.1:%d%s", tc_port, path);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", token ? token : "");
    req.headers = token ? hdrs : NULL;
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

static json_t *tc_json(const char *token, const char *method, const char *path, const char *body,
                       long want)
{
    long st = 0;
    char *text = tc(token, method, path, body, &st);
    json_t *j = json_loads(text, 0, NULL);

    if (st != want || j == NULL) {
        fail_msg("%s %s: HTTP %ld, want %ld: %s", method, path, st, want, text);
    }
    free(text);
    return j;
}

#define TOK_A "token-of-client-a-0123456789"
#define TOK_B "token-of-client-b-0123456789"
#define TOK_PROM "token-of-prometheus-01234567"
#define TOK_ADMIN "token-of-the-admin-012345678"

static void test_ops_list_scopes(void **state)
{
    char *conf = NULL, *ida, *idb;
    char *text;
    long st = 0;
    json_t *j;

    (void)state;
    setenv("SBX_TEST_TOK_A", TOK_A, 1);
    setenv("SBX_TEST_TOK_B", TOK_B, 1);
    setenv("SBX_TEST_TOK_PROM", TOK_PROM, 1);
    setenv("SBX_TEST_TOK_ADMIN", TOK_ADMIN, 1);
    tc_port = free_port();
    assert_true(asprintf(&conf,
                         "runner = { listen = \"tcp:127.0.0.1:%d\"; clients = (\n"
                         "  { name = \"a\"; token_env = \"SBX_TEST_TOK_A\"; scopes = [\"submit\", "
                         "\"read-own\"]; },\n"
                         "  { name = \"b\"; token_env = \"SBX_TEST_TOK_B\"; scopes = [\"submit\", "
                         "\"read-own\"]; },\n"
                         "  { name = \"prom\"; token_env = \"SBX_TEST_TOK_PROM\"; scopes = "
                         "[\"metrics\"]; },\n"
                         "  { name = \"admin\"; token_env = \"SBX_TEST_TOK_ADMIN\"; scopes = "
                         "[\"read-all\"]; }\n); };\n",
                         tc_port) > 0);
    rh_start(conf);
    j = tc_json(TOK_A, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"]}", 201);
    ida = strdup(json_string_value(json_object_get(j, "id")));
    json_decref(j);
    j = tc_json(TOK_B, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"]}", 201);
    idb = strdup(json_string_value(json_object_get(j, "id")));
    json_decref(j);
    wait_finished(ida);
    wait_finished(idb);

    /* read-own: its own jobs only; read-all: every job */
    j = tc_json(TOK_A, "GET", "/v1/jobs", NULL, 200);
    text = ids_of(j);
    assert_non_null(strstr(text, ida));
    assert_null(strstr(text, idb));
    assert_int_equal(json_array_size(json_object_get(j, "jobs")), 1);
    free(text);
    json_decref(j);
    j = tc_json(TOK_B, "GET", "/v1/jobs?state=finished", NULL, 200);
    text = ids_of(j);
    assert_null(strstr(text, ida));
    assert_non_null(strstr(text, idb));
    free(text);
    json_decref(j);
    j = tc_json(TOK_ADMIN, "GET", "/v1/jobs", NULL, 200);
    assert_int_equal(json_array_size(json_object_get(j, "jobs")), 2);
    json_decref(j);
    /* metrics only: no list, but health and metrics */
    j = tc_json(TOK_PROM, "GET", "/v1/jobs", NULL, 403);
    assert_non_null(strstr(err_of(j), "client 'prom' lacks scope 'read-own'"));
    json_decref(j);
    j = tc_json(TOK_PROM, "GET", "/healthz", NULL, 200);
    json_decref(j);
    j = tc_json(TOK_PROM, "GET", "/readyz", NULL, 200);
    json_decref(j);
    free(tc(NULL, "GET", "/healthz", NULL, &st));
    assert_int_equal(st, 401);
    j = tc_json(TOK_PROM, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"0\"]}", 403);
    json_decref(j);
    text = tc(TOK_PROM, "GET", "/metrics", NULL, &st);
    assert_int_equal(st, 200);
    assert_exposition(text);
    assert_non_null(strstr(text, "sbx_jobs_refused_total{reason=\"forbidden\"} 1\n"));
    assert_non_null(strstr(text, "sbx_jobs_refused_total{reason=\"unauthorized\"} 1\n"));
    free(text);
    rh_stop();
    unsetenv("SBX_TEST_TOK_A");
    unsetenv("SBX_TEST_TOK_B");
    unsetenv("SBX_TEST_TOK_PROM");
    unsetenv("SBX_TEST_TOK_ADMIN");
    free(ida);
    free(idb);
    free(conf);
}

/* ---- health --------------------------------------------------------------- */

/* GET path until it answers want (the engine probe runs every 100 ms in the
 * harness); returns the reply. */
static json_t *health_until(const char *path, long want)
{
    for (int i = 0; i < 1000; i++) {
        long st = 0;
        char *text = rh_call("GET", path, NULL, &st);

        if (st == want) {
            json_t *j = json_loads(text, 0, NULL);

            assert_non_null(j);
            free(text);
            return j;
        }
        free(text);
        usleep(20 * 1000);
    }
    fail_msg("%s never answered %ld", path, want);
    return NULL;
}

static void test_ops_health(void **state)
{
    char *opts = NULL, *down = NULL;
    char *dir = test_mkdtemp();
    json_t *j;
    FILE *f;

    (void)state;
    assert_true(asprintf(&opts, "socket = \"%s/engine.sock\";", dir) > 0);
    assert_true(asprintf(&down, "%s/engine.sock.down", dir) > 0);
    rh_fake_opts = opts;
    rh_start(NULL);
    j = health_until("/healthz", 200);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "ok");
    assert_string_equal(json_string_value(json_object_get(j, "store")), "ok");
    assert_string_equal(json_string_value(json_object_get(j, "engine")), "ok");
    assert_int_equal(json_array_size(json_object_get(j, "down")), 0);
    json_decref(j);
    /* ready also waits for the image check, which may still run (a condition) */
    j = health_until("/readyz", 200);
    assert_false(json_is_true(json_object_get(j, "draining")));
    json_decref(j);
    json_decref(rh_json("POST", "/healthz", "{}", 405));

    /* the engine goes away: 503 naming it, from the next probe on */
    f = fopen(down, "w");
    assert_non_null(f);
    fclose(f);
    j = health_until("/healthz", 503);
    assert_string_equal(json_string_value(json_object_get(j, "status")), "down");
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "down"), 0)), "engine");
    assert_int_equal(json_array_size(json_object_get(j, "down")), 1);
    assert_string_equal(json_string_value(json_object_get(j, "store")), "ok");
    assert_non_null(strstr(json_string_value(json_object_get(j, "engine")),
                           "provider 'fake': fake: engine down"));
    json_decref(j);
    json_decref(rh_json("GET", "/readyz", NULL, 503));

    /* and comes back */
    assert_int_equal(unlink(down), 0);
    json_decref(health_until("/healthz", 200));
    json_decref(health_until("/readyz", 200));

    /* an engine that hangs: after 5 s without an answer it is down, and the
     * API answers at once all along (the probe has its own thread) */
    down[strlen(down) - 5] = '\0';
    strcat(down, ".slow");
    f = fopen(down, "w");
    assert_non_null(f);
    fclose(f);
    {
        struct timespec t0, t1;

        clock_gettime(CLOCK_MONOTONIC, &t0);
        json_decref(rh_json("GET", "/v1/queue", NULL, 200));
        json_decref(rh_json("GET", "/healthz", NULL, 200)); /* not 5 s yet */
        clock_gettime(CLOCK_MONOTONIC, &t1);
        assert_true(t1.tv_sec - t0.tv_sec < 3);
    }
    j = health_until("/healthz", 503);
    assert_non_null(strstr(json_string_value(json_object_get(j, "engine")), "no answer for"));
    json_decref(j);
    assert_int_equal(unlink(down), 0);
    json_decref(health_until("/healthz", 200));
    rh_stop();
    rh_fake_opts = "";
    test_rm_rf(dir);
    free(dir);
    free(opts);
    free(down);
}

/* ---- metrics -------------------------------------------------------------- */

static void test_ops_metrics(void **state)
{
    static const char *const want[] = {
        "# TYPE sbx_job_run_seconds histogram\n",
        "sbx_job_run_seconds_count{pool=\"ci\"} 2\n",
        "sbx_job_run_seconds_count{pool=\"agent\"} 0\n",
        "sbx_job_run_seconds_bucket{pool=\"ci\",le=\"0.1\"} ",
        "sbx_sandbox_start_seconds_count{pool=\"ci\"} 2\n",
        "sbx_sandbox_start_seconds_bucket{pool=\"ci\",le=\"+Inf\"} 2\n",
        "sbx_job_run_seconds_sum{pool=\"agent\"} 0.000\n",
        "sbx_egress_connections_total{pool=\"ci\",decision=\"allowed\"} 0\n",
        "sbx_egress_connections_total{pool=\"agent\",decision=\"denied\"} 0\n",
        "sbx_jobs_refused_total{reason=\"invalid\"} 1\n",
        "sbx_jobs_refused_total{reason=\"policy\"} 1\n",
        "sbx_jobs_refused_total{reason=\"too_large\"} 0\n",
        "sbx_build_info{version=\"",
        "\nprocess_resident_memory_bytes ",
        "\nprocess_open_fds ",
        "\nprocess_cpu_seconds_total ",
        "\nprocess_start_time_seconds ",
    };
    char *a, *b, *text;
    char buf[32];
    long st = 0;

    (void)state;
    /* floats: the shortest form that reads back the same */
    assert_string_equal(rm_fmt(buf, sizeof(buf), 0.1), "0.1");
    assert_string_equal(rm_fmt(buf, sizeof(buf), 2.5), "2.5");
    assert_string_equal(rm_fmt(buf, sizeof(buf), 7200), "7200");
    assert_string_equal(rm_fmt(buf, sizeof(buf), 0.1 + 0.2), "0.30000000000000004");
    assert_string_equal(rm_fmt(buf, sizeof(buf), 1793491200.123), "1793491200.123");

    rh_start("box = { heavy_min_memory = \"60G\"; };\n");
    a = rh_submit("{\"argv\":[\"exit\",\"0\"]}");
    b = rh_submit("{\"argv\":[\"exit\",\"3\"]}");
    wait_finished(a);
    wait_finished(b);
    free(rh_call("POST", "/v1/jobs", "{\"argv\":[]}", &st));
    assert_int_equal(st, 400);
    free(rh_call("POST", "/v1/jobs", "{\"argv\":[\"x\"],\"class\":\"heavy\"}", &st));
    assert_int_equal(st, 422);
    text = rh_call("GET", "/metrics", NULL, &st);
    assert_int_equal(st, 200);
    assert_exposition(text);
    promtool_check_in(rh_dir, text);
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        if (strstr(text, want[i]) == NULL) {
            fail_msg("/metrics lacks '%s':\n%s", want[i], text);
        }
    }
    /* no value with binary noise: at most 6 digits after a decimal point */
    for (const char *line = text; *line != '\0';) {
        const char *nl = strchr(line, '\n');
        const char *sp = line[0] != '#' && nl ? memrchr(line, ' ', (size_t)(nl - line)) : NULL;
        const char *dot = sp ? memchr(sp, '.', (size_t)(nl - sp)) : NULL;

        if (dot != NULL && nl - dot - 1 > 6) {
            fail_msg("a value with binary noise: %.*s", (int)(nl - line), line);
        }
        line = nl ? nl + 1 : line + strlen(line);
    }
    free(text);
    /* JSON floats without binary noise: the job's limits as configured */
    {
        char path[128];
        json_t *j;
        char *s;

        snprintf(path, sizeof(path), "/v1/jobs/%s", a);
        text = rh_call("GET", path, NULL, &st);
        assert_int_equal(st, 200);
        j = json_loads(text, 0, NULL);
        assert_non_null(j);
        s = json_dumps(json_object_get(j, "limits"), JSON_COMPACT);
        assert_non_null(strstr(text, "\"cpus\":0.5"));
        assert_null(strstr(text, "0000000"));
        free(s);
        json_decref(j);
        free(text);
    }
    rh_stop();
    free(a);
    free(b);
}

/* ---- a small box ---------------------------------------------------------- */

/* The default configuration (limits.cpus 2, limits.memory 8G, both pools) on
 * a 2-CPU 4G box: each pool has 1 CPU and its share of the memory left after
 * box.host_reserve; `true` runs and ends 0, within
 * its pool's clamp; a job whose policy asks for more than its pool is still
 * refused with the numbers. */
static void test_ops_small_box(void **state)
{
    char *pol = test_mkdtemp();
    char *extra = NULL, *id;
    json_t *j;
    FILE *f;
    char path[4096];

    (void)state;
    rh_limits = "";
    rh_start(NULL);
    id = rh_submit("{\"argv\":[\"true\"]}");
    j = rh_wait_state(id, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 0);
    {
        char *t = json_dumps(j, JSON_COMPACT);

        json_t *q = rh_json("GET", "/v1/queue", NULL, 200);
        json_int_t pool_mem = json_integer_value(
            json_object_get(json_array_get(json_object_get(q, "pools"), 0), "memory"));
        json_int_t mem =
            json_integer_value(json_object_get(json_object_get(j, "limits"), "memory"));

        json_decref(q);
        if (strstr(t, "\"cpus\":1.0,") == NULL || mem != pool_mem || mem >= (8LL << 30)) {
            fail_msg("not clamped to the pool (pool memory %lld): %s", (long long)pool_mem, t);
        }
        free(t);
    }
    json_decref(j);
    free(id);
    id = rh_submit("{\"argv\":[\"true\"],\"pool\":\"agent\"}");
    j = rh_wait_state(id, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 0);
    json_decref(j);
    free(id);
    rh_stop();

    /* a policy that asks for 1.5 CPUs: more than the pool's 1, refused */
    snprintf(path, sizeof(path), "%s/limits.lua", pol);
    f = fopen(path, "w");
    assert_non_null(f);
    fputs("return { cpus = 1.5, reason = \"test\" }\n", f);
    fclose(f);
    snprintf(path, sizeof(path), "cp %s/policies/slots.lua %s/policies/egress.lua %s/",
             getenv("SBX_SOURCE_DIR"), getenv("SBX_SOURCE_DIR"), pol);
    assert_int_equal(system(path), 0);
    assert_true(asprintf(&extra, "policy_dir = \"%s\";\n", pol) > 0);
    rh_start(extra);
    j = rh_json("POST", "/v1/jobs", "{\"argv\":[\"true\"]}", 422);
    if (strstr(err_of(j), "asks for 1.5 CPUs but pool 'ci' has 1 on this box") == NULL) {
        fail_msg("got '%s'", err_of(j));
    }
    json_decref(j);
    rh_stop();
    rh_limits = "limits = { cpus = 0.5; memory = \"256M\"; idle = \"1h\"; };";
    test_rm_rf(pol);
    free(pol);
    free(extra);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ops_list),      cmocka_unit_test(test_ops_list_scopes),
        cmocka_unit_test(test_ops_health),    cmocka_unit_test(test_ops_metrics),
        cmocka_unit_test(test_ops_small_box),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
