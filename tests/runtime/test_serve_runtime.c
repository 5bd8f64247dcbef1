/* test_serve_runtime.c - `sbx serve` as a subprocess against the test engine:
 * kill -9 with jobs queued and running, restart, nothing lost; 10 light and
 * 2 heavy jobs across both pools (heavy exclusivity, pool isolation, the
 * queue view); /metrics through curl --unix-socket checked by the format
 * checker and promtool; the box's egress proxy across a restart. */
#include "rt_common.h"

#include <signal.h>
#include <sys/stat.h>

#include "prom_check.h"
#include "serve_harness.h"
#include "wait.h"

/* <state>/serve.log, the runner's log (the tail a failed wait shows) */
static char serve_log[600];

static char *submit(const char *const *args)
{
    const char *argv[32] = {"submit"};
    size_t n = 1;
    struct spawn_result r;
    char *id;

    for (size_t i = 0; args[i] != NULL; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    r = rt_sbx_argv(argv, 0);
    if (r.rc != 0) {
        fail_msg("submit rc %d: %s", r.rc, r.err);
    }
    id = strdup(r.out);
    id[strcspn(id, "\n")] = '\0';
    spawn_result_free(&r);
    return id;
}

#define SUBMIT(...) submit((const char *const[]){__VA_ARGS__, NULL})

static json_t *job(const char *id)
{
    struct spawn_result r = RT_SBX("job", id, "--json");
    json_t *j;

    if (r.rc != 0) {
        fail_msg("job %s rc %d: %s", id, r.rc, r.err);
    }
    j = json_loads(r.out, 0, NULL);
    assert_non_null(j);
    spawn_result_free(&r);
    return j;
}

static const char *jstr(json_t *j, const char *k)
{
    const char *s = json_string_value(json_object_get(j, k));

    return s ? s : "";
}

/* Reads job ID into *J (dropping the last read): 1 when it is in STATE and,
 * when READY is set, its sandbox is ready. */
static int job_is(json_t **j, const char *id, const char *state, int ready)
{
    json_decref(*j);
    *j = job(id);
    return strcmp(jstr(*j, "state"), state) == 0 &&
           (!ready || json_is_number(json_object_get(json_object_get(*j, "timings"), "ready_at")));
}

/* Waits (up to 120 s) for a job's state; when ready is set, also for its sandbox. */
static json_t *wait_job(const char *id, const char *state, int ready)
{
    json_t *j = NULL;

    snprintf(serve_log, sizeof(serve_log), "%s/serve.log", rt_state);
    wait_until(job_is(&j, id, state, ready), 120, serve_log, "job %s to be %s%s (last seen %s)", id,
               state, ready ? " with its sandbox ready" : "", jstr(j, "state"));
    return j;
}

static size_t serve_sandboxes(void)
{
    json_t *j = rt_containers();
    json_t *c;
    size_t i, n = 0;

    json_array_foreach(j, i, c)
    {
        const char *owner =
            json_string_value(json_object_get(json_object_get(c, "Labels"), "sbx.owner"));

        for (size_t k = 0; owner != NULL && k < n_serve_pids; k++) {
            char want[32];

            snprintf(want, sizeof(want), "pid=%d;", (int)serve_pids[k]);
            n += strstr(owner, want) != NULL;
        }
    }
    json_decref(j);
    return n;
}

static size_t sandboxes_with(const char *label)
{
    json_t *j = rt_containers_with(label);
    size_t n = json_array_size(j);

    json_decref(j);
    return n;
}

/* Ends a kept task through the runner and waits (up to 30 s) for its sandbox to go. */
static void end_task(const char *task)
{
    struct spawn_result r = RT_SBX("cancel", "--task", task);

    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    snprintf(serve_log, sizeof(serve_log), "%s/serve.log", rt_state);
    wait_until(serve_sandboxes() == 0, 30, serve_log,
               "the sandbox of task %s to go after its cancel (%zu of the runner's left)", task,
               serve_sandboxes());
}

/* The length of POOL's queue in `sbx queue --json` (-1: not answered). */
static long queue_length(const char *pool)
{
    struct spawn_result r = RT_SBX("queue", "--json");
    json_t *q = json_loads(r.out, 0, NULL);
    json_t *p;
    size_t i;
    long n = -1;

    json_array_foreach(json_object_get(q, "pools"), i, p)
    {
        if (strcmp(jstr(p, "pool"), pool) == 0) {
            n = (long)json_integer_value(json_object_get(p, "queue_length"));
        }
    }
    json_decref(q);
    spawn_result_free(&r);
    return n;
}

static void test_serve_kill9_restart(void **state)
{
    char *a, *b, *c, *k1, *k2;
    char label[128];
    json_t *j;
    struct spawn_result r;

    (void)state;
    rt_use_config("limits = { cpus = 0.25; memory = \"128M\"; idle = \"1h\"; };\n"
                  "box = { max_sandboxes = 4; heavy_min_memory = \"64M\"; };\n"
                  "pools = { ci = { max_sandboxes = 1; }; };\n");
    serve_start();
    /* an agent task whose command ended: kept, no exec in flight */
    k1 = SUBMIT("--pool", "agent", "--task", "keep-1", "--", "sh", "-c", "echo kept > /tmp/mark");
    j = wait_job(k1, "finished", 1);
    json_decref(j);
    /* a running CI command and two queued behind it (ci has one slot) */
    a = SUBMIT("--label", "what=long", "--", "sleep", "300");
    j = wait_job(a, "running", 1);
    json_decref(j);
    b = SUBMIT("--", "sh", "-c", "echo b");
    c = SUBMIT("--", "sh", "-c", "echo c");
    /* both wait behind the one slot: the scheduler has queued them */
    snprintf(serve_log, sizeof(serve_log), "%s/serve.log", rt_state);
    wait_until(queue_length("ci") == 2, 30, serve_log,
               "jobs %s and %s in the ci queue (queue_length %ld)", b, c, queue_length("ci"));
    j = job(b);
    assert_string_equal(jstr(j, "state"), "queued");
    json_decref(j);
    snprintf(label, sizeof(label), "sbx.job=%s", a);
    assert_int_equal(sandboxes_with(label), 1);

    serve_kill(SIGKILL);
    assert_int_equal(sandboxes_with(label), 1); /* the runner's sandbox outlived it */
    r = RT_SBX("queue");
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "runner not reachable");
    spawn_result_free(&r);
    r = RT_SBX("submit", "--", "true");
    assert_int_equal(r.rc, 125);
    spawn_result_free(&r);

    serve_start();
    j = job(a);
    assert_string_equal(jstr(j, "state"), "interrupted");
    assert_contains(jstr(j, "reason"), "runner restarted");
    json_decref(j);
    assert_int_equal(sandboxes_with(label), 0); /* cleaned up */
    /* the queued ones were kept, in order, and now run */
    j = wait_job(b, "finished", 0);
    assert_int_equal(json_integer_value(json_object_get(j, "exit_status")), 0);
    json_decref(j);
    j = wait_job(c, "finished", 0);
    json_decref(j);
    /* the kept task was re-adopted: its sandbox and files are still there */
    k2 = SUBMIT("--pool", "agent", "--task", "keep-1", "--", "cat", "/tmp/mark");
    r = RT_SBX("job", k2, "--follow");
    if (r.rc != 0) {
        struct spawn_result q = RT_SBX("job", k2, "--json");

        fail_msg("job %s --follow rc %d: %s %s; record %s", k2, r.rc, r.out, r.err, q.out);
    }
    assert_string_equal(r.out, "kept\n");
    spawn_result_free(&r);
    end_task("keep-1");
    serve_kill(SIGTERM);
    free(a);
    free(b);
    free(c);
    free(k1);
    free(k2);
}

/* Checks the queue view; counts heavy CI holders and whether CI runs while agent waits. */
static void check_queue(int *ci_running_agent_waiting)
{
    struct spawn_result r = RT_SBX("queue", "--json");
    json_t *q = json_loads(r.out, 0, NULL);
    json_t *p;
    size_t i;
    int ci_busy = 0;
    int agent_waiting = 0;

    if (q == NULL) {
        fail_msg("sbx queue --json rc %d: %s %s", r.rc, r.out, r.err);
    }
    json_array_foreach(json_object_get(q, "pools"), i, p)
    {
        json_t *s;
        size_t k;
        int heavy = 0;

        json_array_foreach(json_object_get(p, "slots"), k, s)
        {
            if (strcmp(jstr(s, "state"), "busy") == 0) {
                heavy += strcmp(jstr(s, "class"), "heavy") == 0;
                ci_busy += strcmp(jstr(p, "pool"), "ci") == 0;
                assert_true(json_is_number(json_object_get(s, "since")));
                assert_true(strlen(jstr(s, "job")) > 0);
            }
        }
        if (heavy > 1) {
            fail_msg("two heavy jobs at once in pool %s: %s", jstr(p, "pool"), r.out);
        }
        if (strcmp(jstr(p, "pool"), "agent") == 0) {
            agent_waiting = json_integer_value(json_object_get(p, "queue_length")) > 0;
        }
    }
    if (ci_busy > 0 && agent_waiting) {
        *ci_running_agent_waiting = 1;
    }
    json_decref(q);
    spawn_result_free(&r);
}

static void test_serve_ten_light_two_heavy(void **state)
{
    char *ids[12];
    size_t n = 0;
    int seen = 0;
    int done = 0;
    struct spawn_result r;
    json_t *h1, *h2;
    double s1, e1, s2, e2;

    (void)state;
    rt_use_config("limits = { cpus = 0.25; memory = \"128M\"; idle = \"1h\"; };\n"
                  "box = { max_sandboxes = 6; heavy_min_memory = \"64M\"; };\n");
    serve_start();
    /* the agent pool: three kept tasks fill its 3 slots, two more jobs wait */
    for (int i = 0; i < 5; i++) {
        char task[16];

        snprintf(task, sizeof(task), "agent-%d", i);
        ids[n++] = SUBMIT("--pool", "agent", "--task", task, "--", "sleep", "6");
    }
    /* CI: two heavy and five light */
    ids[n++] = SUBMIT("--class", "heavy", "--", "sleep", "3");
    ids[n++] = SUBMIT("--class", "heavy", "--", "sleep", "3");
    for (int i = 0; i < 5; i++) {
        ids[n++] = SUBMIT("--", "sh", "-c", "sleep 1; echo light");
    }
    r = RT_SBX("queue");
    assert_int_equal(r.rc, 0);
    assert_contains(r.out, "pool ci:");
    assert_contains(r.out, "pool agent:");
    assert_contains(r.out, "waiting: light job");
    assert_contains(r.out, "so far");
    assert_contains(r.out, "since 20");
    spawn_result_free(&r);
    snprintf(serve_log, sizeof(serve_log), "%s/serve.log", rt_state);
    for (double end = test_now() + 300; !done; usleep(100 * 1000)) {
        check_queue(&seen);
        done = 1;
        for (size_t i = 5; i < n; i++) {
            json_t *j = job(ids[i]);

            done &= strcmp(jstr(j, "state"), "finished") == 0;
            json_decref(j);
        }
        if (!done && test_now() > end) {
            test_wait_failed(300, serve_log, "the 7 CI jobs to finish");
        }
    }
    assert_true(seen); /* CI jobs ran while agent jobs waited */
    /* the heavy jobs never overlapped */
    h1 = job(ids[5]);
    h2 = job(ids[6]);
    s1 = json_number_value(json_object_get(json_object_get(h1, "timings"), "granted_at"));
    e1 = json_number_value(json_object_get(json_object_get(h1, "timings"), "finished_at"));
    s2 = json_number_value(json_object_get(json_object_get(h2, "timings"), "granted_at"));
    e2 = json_number_value(json_object_get(json_object_get(h2, "timings"), "finished_at"));
    assert_true(e1 <= s2 || e2 <= s1);
    assert_string_equal(jstr(h1, "class"), "heavy");
    json_decref(h1);
    json_decref(h2);
    /* metrics over the unix socket, as an operator would fetch them; a slot is
     * released once the job's sandbox is gone, a moment after its record ends */
    for (int i = 0;; i++) {
        char url[] = "http://localhost/metrics";
        char *argv[] = {"/usr/bin/curl", "-sf", "--unix-socket", serve_sock, url, NULL};
        struct spawn_result m = spawn_run(argv, NULL);

        assert_int_equal(m.rc, 0);
        assert_exposition(m.out);
        if (strstr(m.out, "sbx_jobs_finished_total{pool=\"ci\",result=\"ok\"} 7") == NULL &&
            i < 300) {
            spawn_result_free(&m);
            usleep(100 * 1000);
            continue;
        }
        if (access("/usr/bin/promtool", X_OK) == 0 && getenv("SBX_PROMTOOL") == NULL) {
            setenv("SBX_PROMTOOL", "/usr/bin/promtool", 1);
        }
        promtool_check_in(rt_state, m.out);
        assert_contains(m.out, "sbx_jobs_finished_total{pool=\"ci\",result=\"ok\"} 7");
        assert_contains(m.out, "sbx_job_wait_seconds_bucket{pool=\"ci\",le=\"600\"} 7");
        spawn_result_free(&m);
        break;
    }
    for (size_t i = 0; i < 5; i++) {
        json_t *j = wait_job(ids[i], "finished", 0);
        char task[16];

        json_decref(j);
        snprintf(task, sizeof(task), "agent-%zu", i);
        r = RT_SBX("cancel", "--task", task);
        assert_int_equal(r.rc, 0);
        spawn_result_free(&r);
    }
    wait_until(serve_sandboxes() == 0, 30, serve_log,
               "the runner's sandboxes to go after the cancels (%zu left)", serve_sandboxes());
    serve_kill(SIGTERM);
    for (size_t i = 0; i < n; i++) {
        free(ids[i]);
    }
}

/* After a failed test: no runner left behind for the next one. */
/* Egress lines of the log for one job. */
static int egress_lines(const char *log, const char *job_id, const char *decision)
{
    FILE *f = fopen(log, "r");
    char *line = NULL;
    size_t cap = 0;
    int n = 0;

    if (f == NULL) {
        return 0;
    }
    while (getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);

        assert_non_null(o);
        n += strcmp(jstr(o, "job"), job_id) == 0 && strcmp(jstr(o, "decision"), decision) == 0;
        json_decref(o);
    }
    free(line);
    fclose(f);
    return n;
}

static void follow_expect(const char *id, const char *out)
{
    struct spawn_result r = RT_SBX("job", id, "--follow");

    if (r.rc != 0 || strcmp(r.out, out) != 0) {
        struct spawn_result q = RT_SBX("job", id, "--json");

        fail_msg("job %s --follow rc %d: '%s' %s; record %s", id, r.rc, r.out, r.err, q.out);
    }
    spawn_result_free(&r);
}

/* The runner's one egress proxy: a kept task's curl through it is logged with each
 * job's id and counted per job; after kill -9 and a restart the re-adopted task's
 * socket is back on the new runner's proxy (same directory, new socket); a ci
 * job's denied connection and the agent job's allowed one in /metrics, per pool. */
static void test_serve_egress_and_readopt(void **state)
{
    char *script = rt_source_path("tests/support/egress_origin.py");
    char *argv[] = {"python3", script, "http", NULL};
    char cfg[1024];
    char curl[256];
    char *log = NULL;
    char *k1;
    char *k2;
    char *k3;
    int port = 0;
    pid_t origin = rt_spawn_server(argv, &port);
    json_t *j;

    (void)state;
    assert_true(origin > 0);
    assert_true(asprintf(&log, "%s/egress-serve.jsonl", rt_state) > 0);
    snprintf(cfg, sizeof(cfg),
             "limits = { cpus = 0.25; memory = \"128M\"; idle = \"1h\"; };\n"
             "egress = {\n  log = \"%s\";\n  system_dns = false;\n"
             "  registries = [\"allowed.test:%d\"];\n"
             "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; } );\n};\n",
             log, port);
    rt_use_config(cfg);
    snprintf(curl, sizeof(curl),
             "curl -sS -m 10 -o /dev/null -w '%%{http_code}\\n' "
             "http://allowed.test:%d/",
             port);
    serve_start();
    k1 = SUBMIT("--pool", "agent", "--task", "eg-keep", "--", "sh", "-c", curl);
    follow_expect(k1, "200\n");
    j = wait_job(k1, "finished", 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "egress"), "allowed")),
                     1);
    json_decref(j);
    assert_int_equal(egress_lines(log, k1, "allow"), 1);

    serve_kill(SIGKILL);
    serve_start();
    k2 = SUBMIT("--pool", "agent", "--task", "eg-keep", "--", "sh", "-c", curl);
    follow_expect(k2, "200\n"); /* "000" and curl's error if the socket was not back */
    j = wait_job(k2, "finished", 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "egress"), "allowed")),
                     1); /* this job's */
    json_decref(j);
    assert_int_equal(egress_lines(log, k2, "allow"), 1);
    assert_int_equal(egress_lines(log, k1, "allow"), 1);

    /* a ci job denied a host: the runner's egress counters per pool and decision
     * (this runner's: k2 allowed in agent, k3 denied in ci) */
    snprintf(curl, sizeof(curl),
             "curl -sS -m 10 -o /dev/null -w '%%{http_code}\\n' http://denied.test:%d/", port);
    k3 = SUBMIT("--pool", "ci", "--", "sh", "-c", curl);
    follow_expect(k3, "403\n");
    j = wait_job(k3, "finished", 0);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "egress"), "denied")),
                     1);
    json_decref(j);
    assert_int_equal(egress_lines(log, k3, "deny"), 1);
    {
        char url[] = "http://localhost/metrics";
        char *margv[] = {"/usr/bin/curl", "-sf", "--unix-socket", serve_sock, url, NULL};
        struct spawn_result m = spawn_run(margv, NULL);

        assert_int_equal(m.rc, 0);
        assert_exposition(m.out);
        assert_contains(m.out,
                        "sbx_egress_connections_total{pool=\"agent\",decision=\"allowed\"} 1\n");
        assert_contains(m.out,
                        "sbx_egress_connections_total{pool=\"agent\",decision=\"denied\"} 0\n");
        assert_contains(m.out,
                        "sbx_egress_connections_total{pool=\"ci\",decision=\"allowed\"} 0\n");
        assert_contains(m.out, "sbx_egress_connections_total{pool=\"ci\",decision=\"denied\"} 1\n");
        spawn_result_free(&m);
    }

    end_task("eg-keep");
    serve_kill(SIGTERM);
    rt_stop_server(&origin);
    rt_use_config(NULL);
    free(script);
    free(log);
    free(k1);
    free(k2);
    free(k3);
}

static int serve_cleanup(void **state)
{
    (void)state;
    serve_stop_show_log(40); /* shown by ctest --output-on-failure only */
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_serve_kill9_restart, serve_cleanup),
        cmocka_unit_test_teardown(test_serve_ten_light_two_heavy, serve_cleanup),
        cmocka_unit_test_teardown(test_serve_egress_and_readopt, serve_cleanup),
    };

    return cmocka_run_group_tests(tests, rt_setup, rt_teardown);
}
