/* test_mcp_runner.c - the runner backend of the MCP tools against an
 * in-process runner (tests/support/runner_harness.h) with the fake provider
 * of the ABI fixtures ("fake-env NAME" prints "NAME unset" on stderr and exits
 * 1, "fake-bin" prints bytes that are not UTF-8 on both streams, "fake-wait"
 * prints nothing and runs until cancelled, anything else prints argv[0]):
 * stdout and stderr apart with their counts and every key of the job object,
 * output that is not UTF-8, output over the cap, sandbox_job on a running job,
 * a client's cancel of a silent command, the call's timeout, and a job whose
 * output the runner no longer keeps. */
#include "test_common.h"

#include <jansson.h>
#include <pthread.h>

#include "mcp/backend.h"
#include "mcp/server.h"
#include "util/xalloc.h"
#include "runner_harness.h"

static struct sbx_mcp_backend b;

static int setup(void **state)
{
    sbx_error_t *err = NULL;

    (void)state;
    if (getenv("SBX_TEST_PLUGINS") == NULL) {
        fprintf(stderr, "needs SBX_TEST_PLUGINS (run under ctest)\n");
        return -1;
    }
    rh_start("box = { max_sandboxes = 4; heavy_min_memory = \"1G\"; };\n");
    /* runner.listen set: sbx mcp picks the runner backend */
    rh_cfg->runner.listen = xasprintf("unix:%s", rh_sock);
    if (sbx_mcp_backend_open(rh_cfg, getenv("SBX_TEST_PLUGINS"), &b, &err) < 0) {
        fail_msg("backend: %s", sbx_error_msg(err));
    }
    assert_string_equal(b.ops->mode, "runner");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    b.ops->shutdown(b.ctx);
    b.ops->destroy(b.ctx);
    rh_stop();
    return 0;
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));

    return s ? s : "";
}

static json_int_t num(json_t *o, const char *k)
{
    json_t *v = json_object_get(o, k);

    if (!json_is_integer(v)) {
        fail_msg("'%s' is not an integer", k);
    }
    return json_integer_value(v);
}

static json_t *run(const char *const *argv, int64_t timeout, struct sbx_mcp_call *call)
{
    struct sbx_mcp_run r = {.argv = argv, .timeout = timeout};
    sbx_error_t *err = NULL;
    json_t *j = b.ops->run(b.ctx, &r, call, &err);

    if (j == NULL) {
        fail_msg("run: %s", sbx_error_msg(err));
    }
    return j;
}

/* Every key of the tool's job object (docs/mcp.md). */
static void check_keys(json_t *j)
{
    static const char *const keys[] = {"job",
                                       "task",
                                       "state",
                                       "exit_status",
                                       "command",
                                       "stdout",
                                       "stderr",
                                       "stdout_bytes",
                                       "stderr_bytes",
                                       "stdout_truncated",
                                       "stderr_truncated",
                                       "started_at",
                                       "ended_at",
                                       "duration_seconds",
                                       "timeout_seconds",
                                       "egress",
                                       "task_ended",
                                       "mode",
                                       NULL};

    for (size_t i = 0; keys[i] != NULL; i++) {
        if (json_object_get(j, keys[i]) == NULL) {
            fail_msg("the job object has no '%s'", keys[i]);
        }
    }
    assert_string_equal(str(j, "mode"), "runner");
    assert_true(json_is_object(json_object_get(j, "record")));
    assert_null(json_object_get(j, "note")); /* the old "merged" note */
}

static void test_streams_apart(void **state)
{
    const char *argv[] = {"fake-env", "NOPE", NULL};
    json_t *j;
    json_t *eg;

    (void)state;
    j = run(argv, 0, NULL);
    check_keys(j);
    assert_string_equal(str(j, "state"), "finished");
    assert_int_equal(num(j, "exit_status"), 1);
    assert_string_equal(str(j, "stdout"), "");
    assert_string_equal(str(j, "stderr"), "NOPE unset\n");
    assert_int_equal(num(j, "stdout_bytes"), 0);
    assert_int_equal(num(j, "stderr_bytes"), 11);
    assert_false(json_is_true(json_object_get(j, "stdout_truncated")));
    assert_false(json_is_true(json_object_get(j, "stderr_truncated")));
    assert_int_equal(json_array_size(json_object_get(j, "command")), 2);
    assert_string_equal(json_string_value(json_array_get(json_object_get(j, "command"), 1)),
                        "NOPE");
    assert_int_equal(num(j, "timeout_seconds"), SBX_MCP_DEFAULT_TIMEOUT);
    assert_true(json_is_string(json_object_get(j, "started_at")));
    assert_true(json_is_string(json_object_get(j, "ended_at")));
    eg = json_object_get(j, "egress");
    assert_int_equal(num(eg, "allowed"), 0);
    assert_int_equal(num(eg, "denied"), 0);
    assert_string_equal(str(eg, "scope"), "job");
    assert_true(json_is_true(json_object_get(j, "task_ended"))); /* no task: one command */
    assert_null(json_object_get(j, "error"));
    assert_string_equal(str(j, "job"), str(json_object_get(j, "record"), "id"));
    json_decref(j);

    /* a command not found: failed, 127 and the runner's reason, as embedded */
    {
        const char *nocmd[] = {"fake-nocmd", NULL};

        j = run(nocmd, 0, NULL);
        assert_string_equal(str(j, "state"), "failed");
        assert_int_equal(num(j, "exit_status"), 127);
        assert_non_null(strstr(str(j, "error"), "not found"));
        json_decref(j);
    }
}

static void test_not_utf8(void **state)
{
    const char *argv[] = {"fake-bin", NULL};
    json_t *params =
        json_pack("{s:s, s:{s:[s]}}", "name", "sandbox_run", "arguments", "argv", "fake-bin");
    struct sbx_mcp_call call = {0};
    int code = 0;
    char *msg = NULL;
    json_t *res;
    json_t *sc;
    char *text;
    json_t *j;

    (void)state;
    j = run(argv, 0, NULL);
    assert_non_null(j);
    check_keys(j);
    assert_string_equal(str(j, "state"), "finished");
    assert_int_equal(num(j, "stdout_bytes"), 6);
    assert_int_equal(num(j, "stderr_bytes"), 5);
    /* invalid bytes, NUL and the cut characters become U+FFFD */
    assert_string_equal(str(j, "stdout"), "ok\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");
    assert_string_equal(str(j, "stderr"), "err\xef\xbf\xbd\xef\xbf\xbd");
    text = json_dumps(j, JSON_COMPACT);
    assert_non_null(text);
    free(text);
    json_decref(j);

    /* the whole tool call: a result, not an error */
    res = sbx_mcp_tools_call(&b, params, &call, &code, &msg);
    assert_non_null(res);
    assert_null(json_object_get(res, "isError"));
    sc = json_object_get(res, "structuredContent");
    assert_string_equal(str(sc, "state"), "finished");
    assert_int_equal(num(sc, "stdout_bytes"), 6);
    assert_non_null(strstr(json_string_value(json_object_get(
                               json_array_get(json_object_get(res, "content"), 0), "text")),
                           "--- stderr ---\nerr\xef\xbf\xbd"));
    json_decref(res);
    json_decref(params);
}

static void test_over_the_cap(void **state)
{
    /* the fake prints argv[0]: "a" then 50000 two-byte characters, so the
     * head's cut falls inside one */
    size_t n = 1 + 50000 * 2;
    char *big = xmalloc(n + 1);
    const char *argv[] = {big, NULL};
    char omitted[64];
    const char *out;
    json_t *j;

    (void)state;
    big[0] = 'a';
    for (size_t i = 1; i < n; i += 2) {
        big[i] = '\xc3';
        big[i + 1] = '\xa9';
    }
    big[n] = '\0';
    j = run(argv, 0, NULL);
    check_keys(j);
    assert_string_equal(str(j, "state"), "finished");
    assert_int_equal(num(j, "stdout_bytes"), (json_int_t)n);
    assert_int_equal(num(j, "stderr_bytes"), 0);
    assert_true(json_is_true(json_object_get(j, "stdout_truncated")));
    assert_false(json_is_true(json_object_get(j, "stderr_truncated")));
    out = str(j, "stdout");
    snprintf(omitted, sizeof(omitted), "\n[... %zu bytes omitted ...]\n", n - SBX_MCP_OUTPUT_CAP);
    assert_non_null(strstr(out, omitted));
    assert_int_equal(strncmp(out, "a\xc3\xa9\xc3\xa9", 5), 0);
    /* the head ends with the cut character, replaced */
    assert_non_null(strstr(out, "\xc3\xa9\xef\xbf\xbd\n[... "));
    assert_string_equal(out + strlen(out) - 4, "\xc3\xa9\xc3\xa9");
    assert_true(strlen(out) < SBX_MCP_OUTPUT_CAP + 128);
    assert_null(json_object_get(j, "output_dropped_bytes"));
    json_decref(j);
    free(big);
}

/* sandbox_job on a job that runs: its status at once, never its end. */
static void test_job_while_running(void **state)
{
    sbx_error_t *err = NULL;
    char *id;
    json_t *j;

    (void)state;
    id = rh_submit("{\"argv\":[\"fake-wait\"],\"pool\":\"agent\"}");
    json_decref(rh_wait_state(id, "running"));
    j = b.ops->job(b.ctx, id, &err);
    if (j == NULL) {
        fail_msg("job: %s", sbx_error_msg(err));
    }
    check_keys(j);
    assert_string_equal(str(j, "state"), "running");
    assert_true(json_is_null(json_object_get(j, "exit_status")));
    assert_true(json_is_null(json_object_get(j, "ended_at")));
    assert_true(json_is_null(json_object_get(j, "timeout_seconds")));
    assert_false(json_is_true(json_object_get(j, "task_ended")));
    assert_null(json_object_get(j, "error"));
    json_decref(j);

    /* sandbox_cancel, then the job is cancelled, saying who cancelled it (both modes) */
    j = b.ops->cancel(b.ctx, id, &err);
    assert_non_null(j);
    json_decref(j);
    json_decref(rh_wait_state(id, "cancelled"));
    j = b.ops->job(b.ctx, id, &err);
    assert_non_null(j);
    assert_string_equal(str(j, "state"), "cancelled");
    assert_non_null(strstr(str(j, "error"), "sandbox_cancel asked for it"));
    assert_string_equal(str(json_object_get(j, "record"), "state"), "cancelled");
    assert_true(json_is_true(json_object_get(j, "task_ended")));
    json_decref(j);

    /* an unknown job */
    assert_null(b.ops->job(b.ctx, "j-000000000000", &err));
    assert_int_equal(err->code, SBX_E_NOTFOUND);
    sbx_error_free(&err);
    free(id);
}

struct bg {
    struct sbx_mcp_call call;
    int64_t timeout;
    json_t *res;
    pthread_t th;
};

static void *bg_main(void *arg)
{
    struct bg *g = arg;
    const char *wait[] = {"fake-wait", NULL};

    g->res = run(wait, g->timeout, &g->call);
    return NULL;
}

/* The id of the job holding a runner task, once there is one. */
static char *running_job(void)
{
    for (int i = 0; i < 6000; i++) {
        json_t *q = rh_json("GET", "/v1/queue", NULL, 200);
        json_t *t = json_array_get(json_object_get(q, "tasks"), 0);
        char *id = t != NULL ? strdup(str(t, "holder")) : NULL;

        json_decref(q);
        if (id != NULL) {
            return id;
        }
        usleep(10 * 1000);
    }
    fail_msg("no job started");
    return NULL;
}

/* A command that prints nothing: the client's cancel stops the call and the job. */
static void test_cancel_silent(void **state)
{
    struct bg g = {0};
    char *id;

    (void)state;
    assert_int_equal(pthread_create(&g.th, NULL, bg_main, &g), 0);
    id = running_job();
    json_decref(rh_wait_state(id, "running"));
    usleep(100 * 1000); /* the call is following the silent output by now */
    sbx_mcp_call_cancel(&g.call);
    pthread_join(g.th, NULL);
    check_keys(g.res);
    assert_string_equal(str(g.res, "job"), id);
    assert_string_equal(str(g.res, "state"), "cancelled");
    assert_non_null(strstr(str(g.res, "error"), "client cancelled"));
    assert_true(json_is_null(json_object_get(g.res, "exit_status")));
    assert_string_equal(str(json_object_get(g.res, "record"), "state"), "cancelled");
    json_decref(g.res);
    free(id);
}

/* sandbox_run's timeout kills a command that prints nothing. */
static void test_timeout(void **state)
{
    struct bg g = {.timeout = 1};
    sbx_error_t *err = NULL;
    const char *argv[] = {"fake-wait", NULL};
    struct sbx_mcp_run bad = {.argv = argv, .timeout = -1};

    (void)state;
    assert_int_equal(pthread_create(&g.th, NULL, bg_main, &g), 0);
    pthread_join(g.th, NULL);
    check_keys(g.res);
    assert_string_equal(str(g.res, "state"), "timed_out");
    assert_string_equal(str(g.res, "error"), "timed out after 1s: the command was killed");
    assert_int_equal(num(g.res, "timeout_seconds"), 1);
    json_decref(g.res);

    /* a timeout below 1 is refused before anything is submitted */
    assert_null(b.ops->run(b.ctx, &bad, NULL, &err));
    assert_int_equal(err->code, SBX_E_USAGE);
    assert_non_null(strstr(sbx_error_msg(err), "timeout -1"));
    sbx_error_free(&err);
}

/* A job whose output the runner no longer keeps (it restarted): sandbox_job
 * still gives the job from its record, and says why the output is missing. */
static void test_output_gone(void **state)
{
    struct sbx_box_capacity cap = {.cpus = 2.0, .memory = 4LL << 30};
    const char *argv[] = {"fake-env", "NOPE", NULL};
    sbx_error_t *err = NULL;
    char *id;
    json_t *j;

    (void)state;
    j = run(argv, 0, NULL);
    id = strdup(str(j, "job"));
    json_decref(j);
    sbx_runner_stop(rh_runner);
    pthread_join(rh_thread, NULL);
    sbx_runner_destroy(rh_runner);
    rh_runner =
        sbx_runner_create(&(struct sbx_runner_opts){.cfg = rh_cfg,
                                                    .plugin_dir = getenv("SBX_TEST_PLUGINS"),
                                                    .capacity = &cap,
                                                    .clock = rh_clock,
                                                    .alert_interval_ms = 50},
                          &err);
    if (rh_runner == NULL) {
        fail_msg("runner: %s", sbx_error_msg(err));
    }
    assert_int_equal(pthread_create(&rh_thread, NULL, rh_main, NULL), 0);
    j = b.ops->job(b.ctx, id, &err);
    if (j == NULL) {
        fail_msg("job: %s", sbx_error_msg(err));
    }
    check_keys(j);
    assert_string_equal(str(j, "state"), "finished");
    assert_int_equal(num(j, "exit_status"), 1);
    assert_string_equal(str(j, "stderr"), "");
    assert_int_equal(num(j, "stderr_bytes"), 0);
    assert_non_null(strstr(str(j, "output_error"), "no longer kept"));
    json_decref(j);
    free(id);
}

/* (added, issue 30) sandbox_snapshot and sandbox_run's `from` through the runner:
 * its refusals come back whole (the fake provider has no snapshot op) */
static void test_snapshot_and_from(void **state)
{
    const char *argv[] = {"true", NULL};
    struct sbx_mcp_run r = {.argv = argv, .task = "mk", .from = "s-000000000000"};
    sbx_error_t *err = NULL;
    json_t *j;

    (void)state;
    j = b.ops->run(b.ctx, &r, NULL, &err);
    assert_null(j);
    assert_non_null(strstr(sbx_error_msg(err), "field 'from': snapshot s-000000000000: no such"));
    sbx_error_free(&err);
    r.from = NULL;
    json_decref(run(argv, 0, NULL));
    j = b.ops->run(b.ctx, &r, NULL, &err); /* keeps task mk */
    assert_non_null(j);
    json_decref(j);
    j = b.ops->snapshot(b.ctx, "mk", 1, &err);
    assert_null(j);
    assert_non_null(strstr(sbx_error_msg(err), "cannot snapshot"));
    sbx_error_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_streams_apart, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_utf8, setup, teardown),
        cmocka_unit_test_setup_teardown(test_over_the_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_job_while_running, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_silent, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_output_gone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_and_from, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
