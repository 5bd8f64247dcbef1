/* test_runner_private.c - the private one-box runner (runner/private.h) with
 * the fake provider of tests/plugin_abi: it rewrites the configuration to its
 * own socket and store in a 0700 directory, runs jobs and keeps tasks like
 * `sbx serve`, ends every task it holds when it stops, and leaves nothing. */
#include "test_common.h"

#include <jansson.h>
#include <sys/stat.h>

#include "http/http.h"
#include "runner/private.h"
#include "runner/runner.h"
#include "util/xalloc.h"

static struct sbx_config *load(const char *dir, const char *extra)
{
    const char *plugins = getenv("SBX_TEST_PLUGINS");
    sbx_error_t *err = NULL;
    char *text = NULL;
    char *path;
    struct sbx_config *cfg;

    assert_non_null(plugins);
    assert_true(asprintf(&text,
                         "plugin_dir = \"%s\";\nstate_dir = \"%s\";\nprovider = \"fake\";\n"
                         "providers = { fake = { plugin = \"provider_good\"; }; };\n"
                         "limits = { cpus = 0.5; memory = \"256M\"; idle = \"1h\"; };\n"
                         "box = { pools = [\"ci\"]; };\n%s\n",
                         plugins, dir, extra) > 0);
    path = test_write_file(dir, "sbx.conf", text);
    cfg = sbx_config_load_file(path, &err);
    if (cfg == NULL) {
        fail_msg("config: %s\n%s", sbx_error_msg(err), text);
    }
    free(text);
    free(path);
    return cfg;
}

static json_t *call(struct sbx_config *cfg, const char *method, const char *path, const char *body)
{
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    json_t *j;

    if (sbx_runner_call(cfg, method, path, body, NULL, NULL, &resp, &err) < 0) {
        fail_msg("%s %s: %s", method, path, sbx_error_msg(err));
    }
    j = json_loads(resp.body ? resp.body : "null", JSON_DECODE_ANY, NULL);
    sbx_http_response_free(&resp);
    assert_non_null(j);
    return j;
}

static json_t *wait_state(struct sbx_config *cfg, const char *path, const char *state)
{
    for (int i = 0; i < 6000; i++) {
        json_t *j = call(cfg, "GET", path, NULL);
        const char *s = json_string_value(json_object_get(j, "state"));

        if (s != NULL && strcmp(s, state) == 0) {
            return j;
        }
        json_decref(j);
        usleep(10 * 1000);
    }
    fail_msg("%s never reached state %s", path, state);
    return NULL;
}

static void test_jobs_tasks_and_nothing_left(void **state)
{
    char *dir = test_mkdtemp();
    struct sbx_config *cfg = load(dir, "runner = { listen = \"tcp:127.0.0.1:1\"; "
                                       "alert_command = \"/bin/false\"; };");
    sbx_error_t *err = NULL;
    struct sbx_runner_private *p;
    char pdir[256];
    char path[300];
    struct stat st;
    json_t *j;

    (void)state;
    p = sbx_runner_private_start(cfg, getenv("SBX_TEST_PLUGINS"), NULL, &err);
    if (p == NULL) {
        fail_msg("start: %s", sbx_error_msg(err));
    }
    snprintf(pdir, sizeof(pdir), "%s", sbx_runner_private_dir(p));
    assert_int_equal(stat(pdir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    snprintf(path, sizeof(path), "unix:%s/runner.sock", pdir);
    assert_string_equal(cfg->runner.listen, path); /* the TCP listener is gone */
    assert_null(cfg->runner.alert_command);

    /* a ci job; then an agent task (box.pools said ci only: the private runner serves both) */
    j = call(cfg, "POST", "/v1/jobs", "{\"argv\":[\"exit\",\"3\"]}");
    snprintf(path, sizeof(path), "/v1/jobs/%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    j = wait_state(cfg, path, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 3);
    json_decref(j);
    j = call(cfg, "POST", "/v1/jobs", "{\"argv\":[\"true\"],\"task\":\"kept\",\"pool\":\"agent\"}");
    snprintf(path, sizeof(path), "/v1/jobs/%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    json_decref(wait_state(cfg, path, "finished"));

    /* stopping ends the kept task and removes the directory */
    sbx_runner_private_stop(p);
    assert_int_equal(stat(pdir, &st), -1);
    assert_int_equal(errno, ENOENT);
    sbx_config_destroy(cfg);
    test_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_tasks_and_nothing_left),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
