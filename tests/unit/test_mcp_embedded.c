/* test_mcp_embedded.c - `sbx mcp` with no runner configured (mode
 * "embedded"): sbx_mcp_backend_open starts a private runner (runner/private.h)
 * and every tool goes through its API, with the fake in-memory provider of the
 * ABI fixtures: fresh and kept tasks, job history, timeouts, sandbox_cancel, a
 * client's cancel, sandbox_end during a run, a task the runner ended (idle),
 * `from`, and nothing left behind when the backend is destroyed (no private
 * directory, no task record, no slot held). */
#include "test_common.h"

#include <jansson.h>
#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "fake_config.h"
#include "wait.h"
#include "http/http.h"
#include "mcp/backend.h"
#include "runner/runner.h"
#include "util/xalloc.h"

static char *dir;
static struct sbx_config *cfg;
static struct sbx_mcp_backend b;
static char pdir[256]; /* the private runner's directory */

#define LIMITS "limits = { cpus = 0.25; memory = \"256M\"; "

static void open_backend(const char *extra)
{
    sbx_error_t *err = NULL;
    const char *sock;

    /* small sandboxes: the runner reserves each job's CPUs in its pool */
    cfg = test_fake_config(dir, extra ? extra : LIMITS "};\n");
    assert_null(cfg->runner.listen); /* no runner configured */
    if (sbx_mcp_backend_open(cfg, getenv("SBX_TEST_PLUGINS"), &b, &err) < 0) {
        fail_msg("open: %s", sbx_error_msg(err));
    }
    assert_string_equal(b.ops->mode, "embedded");
    /* cfg now names the private runner's socket, in its own 0700 directory */
    assert_non_null(cfg->runner.listen);
    assert_true(strncmp(cfg->runner.listen, "unix:", 5) == 0);
    sock = cfg->runner.listen + 5;
    assert_true(strlen(sock) > strlen("/runner.sock"));
    snprintf(pdir, sizeof(pdir), "%.*s", (int)(strlen(sock) - strlen("/runner.sock")), sock);
}

static int setup(void **state)
{
    (void)state;
    if (getenv("SBX_TEST_PLUGINS") == NULL) {
        fprintf(stderr, "needs SBX_TEST_PLUGINS (run under ctest)\n");
        return -1;
    }
    dir = test_mkdtemp();
    open_backend(NULL);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    b.ops->shutdown(b.ctx);
    b.ops->destroy(b.ctx);
    sbx_config_destroy(cfg);
    test_rm_rf(dir);
    free(dir);
    return 0;
}

static const char *str(json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));

    return s ? s : "";
}

static json_t *run(const char *task, const char *const *argv, int64_t timeout)
{
    struct sbx_mcp_run r = {.argv = argv, .task = task, .timeout = timeout};
    sbx_error_t *err = NULL;
    json_t *j = b.ops->run(b.ctx, &r, NULL, &err);

    if (j == NULL) {
        fail_msg("run: %s", err->msg);
    }
    return j;
}

static json_t *queue(void)
{
    sbx_error_t *err = NULL;
    json_t *q = b.ops->queue(b.ctx, &err);

    assert_non_null(q);
    return q;
}

/* Kept tasks the runner holds (a one-command task is listed while it ends). */
static size_t n_tasks(void)
{
    json_t *q = queue();
    json_t *t;
    size_t i;
    size_t n = 0;

    json_array_foreach(json_object_get(q, "tasks"), i, t)
    {
        n += json_is_true(json_object_get(t, "kept"));
    }
    json_decref(q);
    return n;
}

/* The number of kept tasks once it is `want` (10 s at most). */
static size_t n_tasks_settle(size_t want)
{
    size_t n = n_tasks();

    wait_for((n = n_tasks()) == want, 10);
    return n;
}

/* The id of the one running job, waiting for it to appear. */
static char *running_job(void)
{
    for (int i = 0; i < 2000; i++) {
        json_t *q = queue();
        json_t *jobs = json_object_get(q, "running_jobs");

        for (size_t k = 0; k < json_array_size(jobs); k++) {
            json_t *j = json_array_get(jobs, k);

            if (strcmp(str(j, "state"), "running") == 0) {
                char *id = xstrdup(str(j, "job"));

                json_decref(q);
                return id;
            }
        }
        json_decref(q);
        usleep(5 * 1000);
    }
    fail_msg("no running job appeared");
    return NULL;
}

static void test_fresh_and_kept_tasks(void **state)
{
    const char *echo[] = {"hello", NULL};
    const char *exit3[] = {"fake-exit", "3", NULL};
    sbx_error_t *err = NULL;
    json_t *j;
    json_t *k;
    json_t *e;

    (void)state;
    j = run(NULL, echo, 0);
    assert_string_equal(str(j, "state"), "finished");
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 0);
    assert_string_equal(str(j, "stdout"), "hello");
    assert_true(json_is_true(json_object_get(j, "task_ended")));
    assert_true(strncmp(str(j, "job"), "j-", 2) == 0);
    assert_string_equal(str(j, "task"), str(j, "job")); /* a one-command task: the job's id */
    /* it went through the private runner: its record, by the unix socket's client */
    assert_string_equal(str(json_object_get(j, "record"), "client"), "local");
    assert_string_equal(str(j, "mode"), "embedded");
    assert_int_equal(json_integer_value(json_object_get(j, "timeout_seconds")),
                     SBX_MCP_DEFAULT_TIMEOUT);
    assert_int_equal(n_tasks_settle(0), 0); /* the fresh task ended with its command */

    k = run("keep-1", exit3, 0);
    assert_string_equal(str(k, "state"), "finished"); /* a non-zero exit is not a failure */
    assert_int_equal(json_integer_value(json_object_get(k, "exit_status")), 3);
    assert_false(json_is_true(json_object_get(k, "task_ended")));
    json_decref(run("keep-1", echo, 0));
    assert_int_equal(n_tasks(), 1);
    {
        json_t *q = queue();
        json_t *t = json_array_get(json_object_get(q, "tasks"), 0);

        assert_string_equal(str(t, "task"), "keep-1");
        assert_string_equal(str(t, "state"), "running");
        assert_true(json_is_true(json_object_get(t, "kept")));
        /* the private runner serves one pool, agent, with the whole box */
        assert_int_equal(json_array_size(json_object_get(q, "pools")), 1);
        assert_string_equal(str(json_array_get(json_object_get(q, "pools"), 0), "pool"), "agent");
        /* the box's slots: one held, by this task */
        t = json_object_get(q, "slots");
        assert_int_equal(json_integer_value(json_object_get(t, "used")), 1);
        assert_int_equal(json_array_size(json_object_get(t, "holders")), 1);
        assert_string_equal(str(json_array_get(json_object_get(t, "holders"), 0), "task"),
                            "keep-1");
        json_decref(q);
    }
    /* the jobs are remembered */
    e = b.ops->job(b.ctx, str(j, "job"), &err);
    assert_non_null(e);
    assert_string_equal(str(e, "stdout"), "hello");
    json_decref(e);
    e = b.ops->end(b.ctx, "keep-1", &err);
    assert_non_null(e);
    assert_string_equal(str(e, "state"), "ended"); /* returned once the runner ended it */
    assert_string_equal(str(e, "task"), "keep-1");
    json_decref(e);
    assert_int_equal(n_tasks(), 0);
    {
        json_t *q = queue();

        assert_int_equal(json_integer_value(json_object_get(json_object_get(q, "slots"), "used")),
                         0);
        json_decref(q);
    }
    assert_null(b.ops->end(b.ctx, "keep-1", &err));
    assert_non_null(strstr(err->msg, "no task 'keep-1'"));
    sbx_error_free(&err);
    assert_null(b.ops->job(b.ctx, "j-000000000000", &err));
    sbx_error_free(&err);
    assert_null(b.ops->cancel(b.ctx, str(j, "job"), &err));
    assert_non_null(strstr(err->msg, "already ended"));
    sbx_error_free(&err);
    json_decref(j);
    json_decref(k);
}

static void test_bad_values(void **state)
{
    const char *echo[] = {"hello", NULL};
    const char *empty[] = {NULL};
    struct sbx_mcp_run r = {.argv = echo, .task = "bad id"};
    sbx_error_t *err = NULL;

    (void)state;
    assert_null(b.ops->run(b.ctx, &r, NULL, &err));
    assert_non_null(strstr(err->msg, "task 'bad id'"));
    sbx_error_free(&err);
    r.task = NULL;
    r.pool = "gpu";
    assert_null(b.ops->run(b.ctx, &r, NULL, &err));
    assert_non_null(strstr(err->msg, "pool"));
    sbx_error_free(&err);
    r.pool = "ci"; /* the private runner serves the agent pool, with the whole box */
    assert_null(b.ops->run(b.ctx, &r, NULL, &err));
    assert_non_null(strstr(err->msg, "agent pool only"));
    sbx_error_free(&err);
    r.pool = NULL;
    r.timeout = 9 * 3600; /* beyond limits.max (8h) */
    assert_null(b.ops->run(b.ctx, &r, NULL, &err));
    assert_non_null(strstr(err->msg, "timeout"));
    sbx_error_free(&err);
    r.timeout = 0;
    r.argv = empty;
    assert_null(b.ops->run(b.ctx, &r, NULL, &err));
    sbx_error_free(&err);
    /* an unknown provider instance: refused before any job exists */
    r.argv = echo;
    r.provider = "nope";
    assert_null(b.ops->run(b.ctx, &r, NULL, &err));
    assert_non_null(strstr(err->msg, "'nope'"));
    sbx_error_free(&err);
    /* a task that cannot start is a failed job, not a missing one */
    r.provider = NULL;
    r.task = "createfail-1";
    {
        json_t *j = b.ops->run(b.ctx, &r, NULL, &err);

        if (j == NULL) {
            fail_msg("run: %s", sbx_error_msg(err));
        }
        assert_string_equal(str(j, "state"), "failed");
        assert_non_null(strstr(str(j, "error"), "createfail-1"));
        json_decref(j);
    }
}

static void test_timeout(void **state)
{
    const char *wait[] = {"fake-wait", NULL};
    json_t *j;

    (void)state;
    j = run("slow", wait, 1);
    assert_string_equal(str(j, "state"), "timed_out");
    assert_non_null(strstr(str(j, "error"), "timed out after 1s"));
    json_decref(j);
    assert_int_equal(n_tasks(), 1); /* the task stays */
}

struct bg {
    const char *task;
    const char *const *argv; /* NULL: fake-wait */
    struct sbx_mcp_call call;
    json_t *res;
    char *err;
    pthread_t th;
};

static void *bg_main(void *arg)
{
    struct bg *g = arg;
    const char *wait[] = {"fake-wait", NULL};
    struct sbx_mcp_run r = {.argv = g->argv ? g->argv : wait, .task = g->task};
    sbx_error_t *err = NULL;

    g->res = b.ops->run(b.ctx, &r, &g->call, &err);
    g->err = err != NULL ? xstrdup(sbx_error_msg(err)) : NULL;
    sbx_error_free(&err);
    return NULL;
}

static void test_cancel_paths(void **state)
{
    struct bg g = {.task = "c1"};
    sbx_error_t *err = NULL;
    json_t *j;
    char *id;

    (void)state;
    /* sandbox_cancel */
    pthread_create(&g.th, NULL, bg_main, &g);
    id = running_job();
    j = b.ops->cancel(b.ctx, id, &err);
    assert_non_null(j);
    json_decref(j);
    pthread_join(g.th, NULL);
    assert_string_equal(str(g.res, "state"), "cancelled");
    assert_non_null(strstr(str(g.res, "error"), "sandbox_cancel"));
    json_decref(g.res);
    free(id);
    /* the client cancels its request */
    memset(&g, 0, sizeof(g));
    g.task = "c1";
    pthread_create(&g.th, NULL, bg_main, &g);
    free(running_job());
    sbx_mcp_call_cancel(&g.call);
    pthread_join(g.th, NULL);
    assert_string_equal(str(g.res, "state"), "cancelled");
    assert_non_null(strstr(str(g.res, "error"), "client"));
    json_decref(g.res);
    /* sandbox_end while a command runs */
    memset(&g, 0, sizeof(g));
    g.task = "c1";
    pthread_create(&g.th, NULL, bg_main, &g);
    free(running_job());
    j = b.ops->end(b.ctx, "c1", &err);
    assert_non_null(j);
    json_decref(j);
    pthread_join(g.th, NULL);
    assert_string_equal(str(g.res, "state"), "cancelled");
    assert_non_null(strstr(str(g.res, "error"), "sandbox_end"));
    json_decref(g.res);
    assert_int_equal(n_tasks(), 0); /* sandbox_end returned once the task had ended */
    /* shutdown refuses new calls; the server then cancels the calls in
     * flight (as here); destroy (teardown) ends the held task */
    memset(&g, 0, sizeof(g));
    g.task = "c2";
    pthread_create(&g.th, NULL, bg_main, &g);
    free(running_job());
    b.ops->shutdown(b.ctx);
    sbx_mcp_call_cancel(&g.call);
    pthread_join(g.th, NULL);
    assert_string_equal(str(g.res, "state"), "cancelled");
    assert_non_null(strstr(str(g.res, "error"), "exiting"));
    json_decref(g.res);
    {
        const char *echo[] = {"x", NULL};
        struct sbx_mcp_run r = {.argv = echo};

        assert_null(b.ops->run(b.ctx, &r, NULL, &err)); /* refused once shutting down */
        assert_non_null(strstr(err->msg, "shutting down"));
        sbx_error_free(&err);
    }
    assert_int_equal(n_tasks(), 1);
}

static void test_task_ended_by_the_core(void **state)
{
    const char *echo[] = {"x", NULL};
    struct sbx_mcp_run r = {.argv = echo, .task = "idle-1"};
    sbx_error_t *err = NULL;
    json_t *j;

    (void)state;
    b.ops->shutdown(b.ctx);
    b.ops->destroy(b.ctx);
    sbx_config_destroy(cfg);
    open_backend(LIMITS "idle = \"1s\"; };\n");
    json_decref(run("idle-1", echo, 0));
    assert_int_equal(n_tasks(), 1);
    assert_int_equal(n_tasks_settle(0), 0); /* idle: the runner ended it */
    j = b.ops->run(b.ctx, &r, NULL, &err);
    assert_null(j);
    assert_non_null(strstr(err->msg, "task idle-1 had ended ("));
    assert_non_null(strstr(err->msg, "idle for 1s"));
    sbx_error_free(&err);
    j = run("idle-1", echo, 0); /* then a fresh sandbox under the same id */
    assert_string_equal(str(j, "state"), "finished");
    json_decref(j);
}

/* (added, issue 30) sandbox_run's `from` and sandbox_snapshot in embedded mode: a
 * snapshot's record (planted: the fake provider has no snapshot op) gives the new
 * task its image; the refusals are one line each. */
static void plant(const char *id, const char *provider)
{
    char *snaps = xasprintf("%s/state/snapshots", dir);
    char *name = xasprintf("%s.json", id);
    char *text = xasprintf("{\"id\":\"%s\",\"ref\":\"sbx-snapshot:%s\",\"provider\":\"%s\","
                           "\"pool\":\"agent\",\"created\":1,\"by\":\"local\"}",
                           id, id, provider);

    mkdir(snaps, 0700);
    free(test_write_file(snaps, name, text));
    free(snaps);
    free(name);
    free(text);
}

static void test_snapshot_and_from(void **state)
{
    const char *argv[] = {"hello", NULL};
    struct sbx_mcp_run r = {.argv = argv, .task = "tf", .from = "s-000000000000"};
    sbx_error_t *err = NULL;
    json_t *j;

    (void)state;
    assert_null(b.ops->run(b.ctx, &r, NULL, &err));
    assert_non_null(strstr(err->msg, "'from': snapshot s-000000000000: no such snapshot"));
    sbx_error_free(&err);
    plant("s-aaaaaaaaaaaa", "other");
    plant("s-bbbbbbbbbbbb", cfg->provider);
    r.from = "s-aaaaaaaaaaaa";
    assert_null(b.ops->run(b.ctx, &r, NULL, &err));
    assert_non_null(strstr(err->msg, "is of provider 'other'"));
    sbx_error_free(&err);
    r.from = "s-bbbbbbbbbbbb";
    j = b.ops->run(b.ctx, &r, NULL, &err);
    assert_non_null(j);
    assert_string_equal(str(j, "state"), "finished");
    json_decref(j);
    /* tf runs: 'from' starts a new task only */
    assert_null(b.ops->run(b.ctx, &r, NULL, &err));
    assert_non_null(strstr(err->msg, "'from': task tf is already running"));
    sbx_error_free(&err);
    assert_null(b.ops->snapshot(b.ctx, "tf", 0, &err));
    assert_non_null(strstr(err->msg, "cannot snapshot"));
    sbx_error_free(&err);
    assert_null(b.ops->snapshot(b.ctx, "nosuch", 0, &err));
    assert_non_null(strstr(err->msg, "no running task 'nosuch'"));
    sbx_error_free(&err);
}

/* A call on a task whose first call is still queued (the runner answers 409,
 * "submit its next command once it runs") waits for it, as docs/mcp.md says:
 * one slot, held by a kept task; two calls on task t2 wait; ending the holder
 * lets both run in t2. */
static int queued_jobs_of(const char *task)
{
    json_t *q = queue();
    json_t *j;
    size_t i;
    int n = 0;

    json_array_foreach(json_object_get(q, "queued"), i, j)
    {
        n += strcmp(str(j, "task"), task) == 0;
    }
    json_decref(q);
    return n;
}

static long long refused_submits(void)
{
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    long long n = 0;
    const char *p;

    if (sbx_runner_call(cfg, "GET", "/metrics", NULL, NULL, NULL, &resp, &err) < 0) {
        fail_msg("metrics: %s", sbx_error_msg(err));
    }
    for (p = resp.body; p != NULL && (p = strstr(p, "\nsbx_jobs_refused_total{")) != NULL; p++) {
        const char *v = strchr(p + 1, ' ');

        n += v != NULL ? strtoll(v + 1, NULL, 10) : 0;
    }
    sbx_http_response_free(&resp);
    return n;
}

static void test_second_call_waits_for_the_task(void **state)
{
    const char *x[] = {"x", NULL};
    const char *y[] = {"y", NULL};
    struct bg a = {.task = "t2", .argv = x};
    struct bg g = {.task = "t2", .argv = y};
    sbx_error_t *err = NULL;
    long long refused;
    json_t *j;

    (void)state;
    b.ops->shutdown(b.ctx);
    b.ops->destroy(b.ctx);
    sbx_config_destroy(cfg);
    open_backend(LIMITS "};\nbox = { max_sandboxes = 1; };\n");
    json_decref(run("hold", x, 0)); /* the one slot */
    refused = refused_submits();
    pthread_create(&a.th, NULL, bg_main, &a);
    wait_until(queued_jobs_of("t2") == 1, 10, NULL, "t2's first job queued");
    pthread_create(&g.th, NULL, bg_main, &g);
    wait_until(refused_submits() > refused, 10, NULL, "the second call refused once (409)");
    j = b.ops->end(b.ctx, "hold", &err);
    assert_non_null(j);
    json_decref(j);
    pthread_join(a.th, NULL);
    pthread_join(g.th, NULL);
    if (a.res == NULL || g.res == NULL) {
        fail_msg("a: %s; b: %s", a.err ? a.err : "ok", g.err ? g.err : "ok");
    }
    assert_string_equal(str(a.res, "state"), "finished");
    assert_string_equal(str(g.res, "state"), "finished");
    assert_string_equal(str(g.res, "task"), "t2");
    assert_string_equal(str(g.res, "stdout"), "y");
    json_decref(a.res);
    json_decref(g.res);
}

/* Nothing of the private runner outlives the backend: its directory (socket,
 * store), the task records of the tasks it held, the box's slot locks. */
static int dir_entries(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;
    int n = 0;

    while (d != NULL && (e = readdir(d)) != NULL) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    if (d != NULL) {
        closedir(d);
    }
    return n;
}

static int slots_held(void)
{
    char *path = xasprintf("%s/state/slots", dir);
    DIR *d = opendir(path);
    struct dirent *e;
    int held = 0;

    while (d != NULL && (e = readdir(d)) != NULL) {
        char *f = xasprintf("%s/%s", path, e->d_name);
        int fd = e->d_name[0] != '.' ? open(f, O_RDONLY | O_CLOEXEC) : -1;

        if (fd >= 0 && flock(fd, LOCK_EX | LOCK_NB) < 0) {
            held++;
        }
        if (fd >= 0) {
            close(fd);
        }
        free(f);
    }
    if (d != NULL) {
        closedir(d);
    }
    free(path);
    return held;
}

static void test_nothing_left(void **state)
{
    const char *echo[] = {"x", NULL};
    struct bg g = {.task = "left-2"};
    char *tasks = xasprintf("%s/state/tasks", dir);
    struct stat st;

    (void)state;
    assert_int_equal(stat(pdir, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0700);
    json_decref(run("left-1", echo, 0));
    pthread_create(&g.th, NULL, bg_main, &g); /* a command still running at exit */
    free(running_job());
    assert_int_equal(n_tasks(), 2);
    {
        json_t *q = queue(); /* each kept task holds a slot of the runner */

        assert_int_equal(json_integer_value(json_object_get(json_object_get(q, "slots"), "used")),
                         2);
        json_decref(q);
    }
    /* as sbx mcp exits: refuse, cancel the calls, then destroy */
    b.ops->shutdown(b.ctx);
    sbx_mcp_call_cancel(&g.call);
    pthread_join(g.th, NULL);
    assert_string_equal(str(g.res, "state"), "cancelled");
    json_decref(g.res);
    b.ops->destroy(b.ctx);
    assert_int_equal(stat(pdir, &st), -1);
    assert_int_equal(errno, ENOENT);
    assert_int_equal(dir_entries(tasks), 0);
    assert_int_equal(slots_held(), 0);
    free(tasks);
    sbx_config_destroy(cfg);
    open_backend(NULL); /* for teardown */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fresh_and_kept_tasks, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_values, setup, teardown),
        cmocka_unit_test_setup_teardown(test_timeout, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_paths, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_ended_by_the_core, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_and_from, setup, teardown),
        cmocka_unit_test_setup_teardown(test_second_call_waits_for_the_task, setup, teardown),
        cmocka_unit_test_setup_teardown(test_nothing_left, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
