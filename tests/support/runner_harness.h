/* runner_harness.h - an in-process runner (sbx serve) on a fake clock with
 * the fake provider of tests/plugin_abi (provider_good: "sleep MS" runs until
 * cancelled, "exit N" exits N), and HTTP calls to it over its unix socket.
 * Include after test_common.h. */
#ifndef SBX_TEST_RUNNER_HARNESS_H
#define SBX_TEST_RUNNER_HARNESS_H

#include <jansson.h>
#include <pthread.h>
#include <sys/stat.h>

#include "http/http.h"
#include "runner/runner.h"

#define RH_T0 1793491200000LL /* 2026-11-01T00:00:00Z */

static char *rh_dir;
static struct sbx_config *rh_cfg;
static struct sbx_runner *rh_runner;
static pthread_t rh_thread;
static int64_t rh_now = RH_T0;
static char *rh_sock;
/* What rh_start writes as the fake provider's options and the limits (a test
 * may change them before rh_start: "" leaves the default limits). */
static const char *rh_fake_opts = "";
static const char *rh_limits = "limits = { cpus = 0.5; memory = \"256M\"; idle = \"1h\"; };";

static int64_t rh_clock(void *ctx)
{
    (void)ctx;
    return __atomic_load_n(&rh_now, __ATOMIC_SEQ_CST);
}

__attribute__((unused)) static void rh_advance(int64_t ms)
{
    __atomic_add_fetch(&rh_now, ms, __ATOMIC_SEQ_CST);
}

static void *rh_main(void *arg)
{
    sbx_error_t *err = NULL;

    (void)arg;
    if (sbx_runner_run(rh_runner, &err) < 0) {
        fprintf(stderr, "runner: %s\n", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    return NULL;
}

/* Starts a runner; box 2 CPUs, 4G; `extra` is appended to the config. */
static void rh_start(const char *extra)
{
    const char *plugins = getenv("SBX_TEST_PLUGINS");
    struct sbx_box_capacity cap = {.cpus = 2.0, .memory = 4LL << 30};
    sbx_error_t *err = NULL;
    char *text = NULL;
    char *path;

    assert_non_null(plugins);
    rh_dir = test_mkdtemp();
    rh_now = RH_T0;
    assert_true(asprintf(&text,
                         "plugin_dir = \"%s\";\nstate_dir = \"%s\";\nprovider = \"fake\";\n"
                         "providers = { fake = { plugin = \"provider_good\"; %s }; };\n"
                         "%s\n%s\n",
                         plugins, rh_dir, rh_fake_opts, rh_limits, extra ? extra : "") > 0);
    path = test_write_file(rh_dir, "sbx.conf", text);
    rh_cfg = sbx_config_load_file(path, &err);
    if (rh_cfg == NULL) {
        fail_msg("config: %s\n%s", sbx_error_msg(err), text);
    }
    free(text);
    free(path);
    rh_runner = sbx_runner_create(&(struct sbx_runner_opts){.cfg = rh_cfg,
                                                            .plugin_dir = plugins,
                                                            .capacity = &cap,
                                                            .clock = rh_clock,
                                                            .alert_interval_ms = 50,
                                                            .health_interval_ms = 100},
                                  &err);
    if (rh_runner == NULL) {
        fail_msg("runner: %s", sbx_error_msg(err));
    }
    assert_true(asprintf(&rh_sock, "%s/runner.sock", rh_dir) > 0);
    assert_int_equal(pthread_create(&rh_thread, NULL, rh_main, NULL), 0);
}

static void rh_stop(void)
{
    sbx_runner_stop(rh_runner);
    pthread_join(rh_thread, NULL);
    sbx_runner_destroy(rh_runner);
    sbx_config_destroy(rh_cfg);
    test_rm_rf(rh_dir);
    free(rh_dir);
    free(rh_sock);
    rh_runner = NULL;
}

/* One request; returns the body (caller frees) and sets *status. */
static char *rh_call_len(const char *method, const char *path, const char *body, size_t len,
                         long *status)
{
    char url[512];
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char *out;

    snprintf(url, sizeof(url), "http://localhost%s", path);
    req.method = method;
    req.url = url;
    req.unix_socket = rh_sock;
    req.body = body;
    req.body_len = len;
    req.timeout_ms = 30000;
    if (sbx_http_request(&req, &resp, &err) < 0) {
        fail_msg("%s %s: %s", method, path, sbx_error_msg(err));
    }
    *status = resp.status;
    out = strdup(resp.body);
    sbx_http_response_free(&resp);
    return out;
}

static char *rh_call(const char *method, const char *path, const char *body, long *status)
{
    return rh_call_len(method, path, body, body ? strlen(body) : 0, status);
}

static json_t *rh_json(const char *method, const char *path, const char *body, long want)
{
    long st = 0;
    char *text = rh_call(method, path, body, &st);
    json_t *j;

    if (st != want) {
        fail_msg("%s %s: HTTP %ld, want %ld: %s", method, path, st, want, text);
    }
    j = json_loads(text, 0, NULL);
    if (j == NULL) {
        fail_msg("%s %s: not JSON: %s", method, path, text);
    }
    free(text);
    return j;
}

/* Submits; returns the job id (caller frees). */
__attribute__((unused)) static char *rh_submit(const char *body)
{
    json_t *j = rh_json("POST", "/v1/jobs", body, 201);
    char *id = strdup(json_string_value(json_object_get(j, "id")));

    json_decref(j);
    return id;
}

/* Waits (up to 60 s, polling) until the job's state is `state`; returns its record. */
__attribute__((unused)) static json_t *rh_wait_state(const char *id, const char *state)
{
    char path[128];

    snprintf(path, sizeof(path), "/v1/jobs/%s", id);
    for (int i = 0; i < 6000; i++) {
        json_t *j = rh_json("GET", path, NULL, 200);

        if (strcmp(json_string_value(json_object_get(j, "state")), state) == 0) {
            return j;
        }
        json_decref(j);
        usleep(10 * 1000);
    }
    fail_msg("job %s never reached state %s", id, state);
    return NULL;
}

#endif
