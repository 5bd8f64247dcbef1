/* test_runner_private.c - the private one-box runner (runner/private.h) with
 * the fake provider of tests/plugin_abi: it rewrites the configuration to its
 * own socket and store in a 0700 directory, runs jobs and keeps tasks like
 * `sbx serve`, ends every task it holds when it stops, and leaves nothing. */
#include "test_common.h"

#include <jansson.h>
#include <sys/stat.h>

#include "http/http.h"
#include "runner/adopt.h"
#include "runner/private.h"
#include "runner/runner.h"
#include "sandbox/task.h"
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

/* (added, issue 31) What a keeper does: a task this process started, handed to a
 * private runner in a given directory, runs the runner's jobs; a job for another task
 * is refused (404), never started; an end asked through the API is seen by the
 * holder (2), the task stopped with the holder's reason ends, and its record says so. */
static void test_adopted_task(void **state)
{
    char *dir = test_mkdtemp();
    struct sbx_config *cfg = load(dir, "");
    const char *plugins = getenv("SBX_TEST_PLUGINS");
    struct sbx_task_opts o = {.task_id = "kept-1", .pool = "agent"};
    struct sbx_runner_private_opts po = {0};
    struct sbx_http_response resp = {0};
    struct sbx_task *t = NULL;
    struct sbx_runner_private *p;
    struct sbx_runner *r;
    sbx_error_t *err = NULL;
    char rdir[300];
    char path[300];
    json_t *j;
    json_t *rec;

    (void)state;
    if (sbx_task_start(cfg, plugins, &o, &t, &err) < 0) {
        fail_msg("task start: %s", sbx_error_msg(err));
    }
    snprintf(rdir, sizeof(rdir), "%s/r", dir);
    po.dir = rdir;
    po.adopt = t;
    p = sbx_runner_private_start(cfg, plugins, &po, &err);
    if (p == NULL) {
        fail_msg("start: %s", sbx_error_msg(err));
    }
    r = sbx_runner_private_runner(p);
    assert_string_equal(sbx_runner_private_dir(p), rdir);
    assert_int_equal(sbx_runner_task_live(r, "kept-1"), 1);
    assert_int_equal(sbx_runner_task_live(r, "other"), 0);

    /* a command in it: its status, its output */
    j = call(cfg, "POST", "/v1/jobs",
             "{\"argv\":[\"fake-exit\",\"4\"],\"task\":\"kept-1\",\"pool\":\"agent\"}");
    snprintf(path, sizeof(path), "/v1/jobs/%s", json_string_value(json_object_get(j, "id")));
    json_decref(j);
    j = wait_state(cfg, path, "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 4);
    json_decref(j);
    assert_int_equal(sbx_runner_task_live(r, "kept-1"), 1);

    /* another task: refused, nothing started */
    assert_int_equal(sbx_runner_call(cfg, "POST", "/v1/jobs",
                                     "{\"argv\":[\"true\"],\"task\":\"new-1\","
                                     "\"pool\":\"agent\"}",
                                     NULL, NULL, &resp, &err),
                     -1);
    assert_non_null(strstr(sbx_error_msg(err), "no running task 'new-1'"));
    assert_int_equal(err->code, SBX_E_NOTFOUND);
    sbx_error_free(&err);

    /* the end through the API: the holder sees it, stops the task, the runner ends it */
    json_decref(call(cfg, "POST", "/v1/tasks/kept-1/end", "{}"));
    for (int i = 0; i < 6000 && sbx_runner_task_live(r, "kept-1") == 1; i++) {
        usleep(1000);
    }
    if (sbx_runner_task_live(r, "kept-1") == 2) {
        sbx_runner_task_stop(r, "kept-1", "ended by the holder");
    }
    for (int i = 0; i < 6000 && sbx_runner_task_live(r, "kept-1") != 0; i++) {
        usleep(10 * 1000);
    }
    assert_int_equal(sbx_runner_task_live(r, "kept-1"), 0);
    sbx_runner_private_stop(p);
    snprintf(path, sizeof(path), "%s/tasks/kept-1/task.json", dir);
    rec = json_load_file(path, 0, NULL);
    assert_non_null(rec);
    assert_string_equal(json_string_value(json_object_get(rec, "state")), "ended");
    assert_string_equal(json_string_value(json_object_get(rec, "id")), "kept-1");
    json_decref(rec);
    assert_int_equal(access(rdir, F_OK), -1);
    sbx_config_destroy(cfg);
    test_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jobs_tasks_and_nothing_left),
        cmocka_unit_test(test_adopted_task),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
