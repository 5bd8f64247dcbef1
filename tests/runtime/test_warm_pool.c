/* test_warm_pool.c - the runner's warm pool (docs/runner.md, "Warm pool")
 * against the real engine and the runner's real egress proxy: a claimed warm
 * sandbox has its own task's egress (allowed and denied per its policy, never
 * the other task's), worktree, environment, limits and record; an empty pool
 * still serves (warm: false, a miss counted); kill -9 of the runner with warm
 * and claimed sandboxes leaves none after a restart; bad configuration is a
 * one-line error naming the key. */
#include "rt_common.h"

#include <sys/stat.h>

#include "serve_harness.h"
#include "wait.h"

static pid_t origin_pid;
static char *policy_dir;
static char *wt_root;

/* The queue's "warm" object of pool ci (a new reference). */
static json_t *warm_ci(void)
{
    struct spawn_result r = RT_SBX("queue", "--json");
    json_t *q = json_loads(r.out, 0, NULL);
    json_t *w;

    if (r.rc != 0 || q == NULL) {
        fail_msg("queue rc %d: %s", r.rc, r.err);
    }
    w = json_incref(json_object_get(json_object_get(q, "warm"), "ci"));
    assert_non_null(w);
    json_decref(q);
    spawn_result_free(&r);
    return w;
}

static int64_t warm_get(const char *key)
{
    json_t *w = warm_ci();
    int64_t v = json_integer_value(json_object_get(w, key));

    json_decref(w);
    return v;
}

/* Waits up to 180 s for n warm sandboxes of pool ci. */
static void wait_warm(int n)
{
    char log[600];

    snprintf(log, sizeof(log), "%s/serve.log", rt_state);
    wait_until(warm_get("ready") >= n, 180, log, "%d warm sandbox(es) of pool ci", n);
}

/* Sandboxes on the engine whose sbx.owner is the runner this test started
 * last (other sessions may hold sandboxes on a shared engine). */
static size_t owned_by(pid_t pid)
{
    json_t *j = rt_containers_with("sbx.owner");
    char want[32];
    size_t n = 0;
    size_t i;
    json_t *c;

    snprintf(want, sizeof(want), ";pid=%d;", (int)pid);
    json_array_foreach(j, i, c)
    {
        const char *o =
            json_string_value(json_object_get(json_object_get(c, "Labels"), "sbx.owner"));

        n += o != NULL && strstr(o, want) != NULL;
    }
    json_decref(j);
    return n;
}

/* A policy directory: the shipped limits and slots, and an egress policy
 * that allows a.test or b.test by what the command names. */
static void make_policies(int port)
{
    char *src = rt_source_path("policies");
    char *cmd = NULL;
    char *text = NULL;
    char *p;

    policy_dir = test_mkdtemp();
    assert_true(asprintf(&cmd, "cp '%s/limits.lua' '%s/slots.lua' '%s/'", src, src, policy_dir) >
                0);
    assert_int_equal(system(cmd), 0);
    assert_true(asprintf(&text,
                         "local want = \"b.test:%d\"\n"
                         "for _, a in ipairs(job.argv) do\n"
                         "  if string.find(a, \"side-a\", 1, true) then want = \"a.test:%d\" end\n"
                         "end\n"
                         "return { allow = { want }, reason = \"test: one side\" }\n",
                         port, port) > 0);
    p = test_write_file(policy_dir, "egress.lua", text);
    free(p);
    /* (added) limits: the caps, but another shape for a command that names
     * one (the warm sandboxes are decided with no command: the caps) */
    p = test_write_file(policy_dir, "limits.lua",
                        "for _, a in ipairs(job.argv) do\n"
                        "  if string.find(a, \"shape-b\", 1, true) then\n"
                        "    return { cpus = 0.125, memory = \"128M\", pids = 200,\n"
                        "             reason = \"test: another shape\" }\n"
                        "  end\n"
                        "  if string.find(a, \"shape-tiny\", 1, true) then\n"
                        "    return { memory = \"4M\", reason = \"test: below the engine's "
                        "minimum\" }\n"
                        "  end\n"
                        "end\n"
                        "return { reason = \"test: the caps\" }\n");
    free(p);
    free(text);
    free(cmd);
    free(src);
}

static void use_config(int warm, int port)
{
    char cfg[2048];

    snprintf(cfg, sizeof(cfg),
             "policy_dir = \"%s\";\n"
             "runner = { listen = \"unix:%s/runner.sock\"; worktree_roots = [\"%s\"];\n"
             "  orphan_sweep = \"2s\"; };\n"
             "box = { pools = [\"ci\"]; heavy_min_memory = \"1G\"; };\n"
             "limits = { cpus = 0.25; memory = \"256M\"; };\n"
             "pools = { ci = { warm = %d; warm_max_age = \"30m\"; }; };\n"
             "egress = { system_dns = false;\n"
             "  hosts = ( { name = \"a.test\"; address = \"127.0.0.1\"; },\n"
             "            { name = \"b.test\"; address = \"127.0.0.1\"; } ); };\n",
             policy_dir, rt_state, wt_root, warm);
    (void)port;
    rt_use_config(cfg);
}

static char *make_worktree(const char *name, const char *marker)
{
    char *d = NULL;
    char *f;

    assert_true(asprintf(&d, "%s/%s", wt_root, name) > 0);
    assert_int_equal(mkdir(d, 0755), 0);
    assert_int_equal(chown(d, 1000, 1000), 0);
    f = test_write_file(d, "marker", marker);
    assert_int_equal(chown(f, 1000, 1000), 0);
    free(f);
    return d;
}

/* Runs one side's command in a claimed warm sandbox and checks what it saw. */
static void run_side(const char *side, const char *wt, int port)
{
    char script[1024];
    const char *other = strcmp(side, "a") == 0 ? "b" : "a";
    struct spawn_result r;
    json_t *rec;
    const char *out;
    char want[256];
    char *made = NULL;
    struct stat st;

    snprintf(script, sizeof(script),
             "# side-%s\n"
             "curl -s -m 10 -o /dev/null -w 'mine %%{http_code}\\n' http://%s.test:%d/; "
             "curl -s -m 10 -o /dev/null -w 'other %%{http_code}\\n' http://%s.test:%d/; "
             "echo \"env $SIDE\"; echo \"wt $(cat /workspace/marker)\"; "
             "echo \"mem $(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)\"; "
             "echo made > /workspace/made-%s",
             side, side, port, other, port, side);
    {
        char env[32];

        snprintf(env, sizeof(env), "SIDE=%s", side);
        r = RT_SBX("run", "--json", "--pool", "ci", "--worktree", wt, "--env", env, "--", "sh",
                   "-c", script);
    }
    if (r.rc != 0) {
        fail_msg("side %s: rc %d: %s %s", side, r.rc, r.out, r.err);
    }
    rec = json_loads(r.out, 0, NULL);
    assert_non_null(rec);
    out = json_string_value(json_object_get(rec, "stdout"));
    assert_non_null(out);
    assert_contains(out, "mine 200\n");
    assert_contains(out, "other 403\n"); /* the proxy refuses the other side's host */
    snprintf(want, sizeof(want), "env %s\n", side);
    assert_contains(out, want);
    snprintf(want, sizeof(want), "wt %s\n", side);
    assert_contains(out, want);
    assert_contains(out, "mem 268435456\n");
    assert_true(json_is_true(json_object_get(rec, "warm")));
    assert_string_equal(json_string_value(json_object_get(rec, "worktree")), wt);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(rec, "egress"), "allowed")),
                     1);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(rec, "egress"), "denied")),
                     1);
    json_decref(rec);
    spawn_result_free(&r);
    /* written through the idmapped view: the worktree's owner owns it */
    assert_true(asprintf(&made, "%s/made-%s", wt, side) > 0);
    assert_int_equal(stat(made, &st), 0);
    assert_int_equal((int)st.st_uid, 1000);
    free(made);
}

static void test_claimed_sandbox_is_its_tasks(void **state)
{
    char *script = rt_source_path("tests/support/egress_origin.py");
    char *argv[] = {"python3", script, "http", NULL};
    int port = 0;
    char *wa;
    char *wb;
    pid_t pid;

    (void)state;
    origin_pid = rt_spawn_server(argv, &port);
    assert_true(origin_pid > 0);
    wt_root = test_mkdtemp();
    make_policies(port);
    wa = make_worktree("wa", "a");
    wb = make_worktree("wb", "b");
    use_config(2, port);
    serve_start();
    pid = serve_pid;
    wait_warm(2);
    run_side("a", wa, port);
    run_side("b", wb, port);
    assert_true(warm_get("claims") >= 2);

    /* an empty pool still serves: claim both ready (the pool keeps 2), then
     * run at once. A refill waits up to 1 s for its claim's first output (a
     * sleep prints none) and may still win the race on a fast engine (the run
     * then claims the new warm sandbox): try again, a few times, until one
     * run met an empty pool */
    {
        int cold = 0;

        for (int attempt = 0; attempt < 5 && !cold; attempt++) {
            struct spawn_result s;
            struct spawn_result s2;
            struct spawn_result r;
            json_t *rec;

            wait_warm(2);
            s = RT_SBX("submit", "--pool", "ci", "--", "sleep", "3");
            assert_int_equal(s.rc, 0);
            s2 = RT_SBX("submit", "--pool", "ci", "--", "sleep", "3");
            assert_int_equal(s2.rc, 0);
            r = RT_SBX("run", "--json", "--pool", "ci", "--", "echo", "cold");
            assert_int_equal(r.rc, 0);
            rec = json_loads(r.out, 0, NULL);
            assert_non_null(rec);
            assert_string_equal(json_string_value(json_object_get(rec, "stdout")), "cold\n");
            assert_true(json_is_boolean(json_object_get(rec, "warm")));
            cold = json_is_false(json_object_get(rec, "warm"));
            fprintf(stderr, "empty pool, attempt %d: the run was %s\n", attempt + 1,
                    cold ? "cold" : "warm (a refill was ready first)");
            json_decref(rec);
            spawn_result_free(&r);
            spawn_result_free(&s);
            spawn_result_free(&s2);
        }
        assert_true(cold);
    }
    assert_true(warm_get("misses") >= 1);
    {
        /* /metrics carries the warm counters */
        char *cmd = NULL;
        char *sock = NULL;
        char *argv2[] = {"/bin/sh", "-c", NULL, NULL};
        char *env[] = {"PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
        struct spawn_result m;

        assert_true(asprintf(&sock, "%s/runner.sock", rt_state) > 0);
        assert_true(asprintf(&cmd, "curl -s --unix-socket '%s' http://l/metrics", sock) > 0);
        argv2[2] = cmd;
        m = spawn_run(argv2, env);
        assert_int_equal(m.rc, 0);
        assert_contains(m.out, "sbx_warm_claims_total{pool=\"ci\"}");
        assert_contains(m.out, "sbx_warm_misses_total{pool=\"ci\"}");
        assert_contains(m.out, "sbx_warm_sandboxes{pool=\"ci\"}");
        assert_contains(m.out, "sbx_warm_refill_seconds_total{pool=\"ci\"}");
        spawn_result_free(&m);
        free(cmd);
        free(sock);
    }
    serve_kill(SIGTERM);
    assert_int_equal(owned_by(pid), 0);
    rt_stop_server(&origin_pid);
    free(wa);
    free(wb);
    free(script);
}

/* kill -9 with a claimed sandbox running and warm ones ready: after a restart
 * none of them is left, nor their directories. */
static void test_kill9_leaves_none(void **state)
{
    struct spawn_result s;
    char *tasks = NULL;
    char *cmd = NULL;
    pid_t first;

    (void)state;
    if (policy_dir == NULL) {
        make_policies(1);
    }
    if (wt_root == NULL) {
        wt_root = test_mkdtemp();
    }
    use_config(2, 1);
    serve_start();
    first = serve_pid;
    wait_warm(2);
    s = RT_SBX("submit", "--pool", "ci", "--", "sleep", "60");
    assert_int_equal(s.rc, 0);
    spawn_result_free(&s);
    wait_until(warm_get("claims") >= 1, 30, NULL, "the job to claim a warm sandbox");
    assert_true(owned_by(first) >= 2);
    serve_kill(SIGKILL);
    use_config(0, 1); /* no new warm sandboxes: what is left is the old runner's */
    serve_start();
    /* the recovery removes what it lists; a create in flight at the kill can
     * land after that, and the runner's periodic sweep (runner.orphan_sweep,
     * 2 s here) removes it */
    wait_until(owned_by(first) == 0, 60, NULL,
               "the killed runner's sandboxes to go (%zu left; recovery, then the orphan sweep)",
               owned_by(first));
    assert_true(asprintf(&tasks, "%s/tasks", rt_state) > 0);
    assert_true(asprintf(&cmd, "ls '%s' 2>/dev/null | grep -q '^w-'", tasks) > 0);
    assert_int_not_equal(system(cmd), 0); /* no warm directory left */
    serve_kill(SIGTERM);
    free(cmd);
    free(tasks);
}

/* (added) A job whose memory, CPUs and pids differ from the warm sandbox's
 * claims it all the same: the engine's update call sets its own, seen from
 * inside (cgroup v1 or v2); the record says warm and resized. An update the
 * engine refuses (4M: below Docker's minimum) ends that warm sandbox and
 * starts cold, with the reason in the log. */
static void test_other_shape_resized(void **state)
{
    static const char script[] =
        "# shape-b\n"
        "if [ -f /sys/fs/cgroup/memory.max ]; then c=/sys/fs/cgroup; "
        "echo \"mem $(cat $c/memory.max)\"; echo \"cpu $(cat $c/cpu.max)\"; "
        "echo \"pids $(cat $c/pids.max)\"; "
        "else c=/sys/fs/cgroup; echo \"mem $(cat $c/memory/memory.limit_in_bytes)\"; "
        "echo \"cpu $(cat $c/cpu/cpu.cfs_quota_us) $(cat $c/cpu/cpu.cfs_period_us)\"; "
        "echo \"pids $(cat $c/pids/pids.max)\"; fi";
    struct spawn_result r;
    json_t *rec;
    const char *out;
    char *cmd = NULL;
    pid_t pid;

    (void)state;
    if (policy_dir == NULL) {
        make_policies(1);
    }
    if (wt_root == NULL) {
        wt_root = test_mkdtemp();
    }
    use_config(1, 1);
    serve_start();
    pid = serve_pid;
    wait_warm(1);
    r = RT_SBX("run", "--json", "--pool", "ci", "--", "sh", "-c", script);
    if (r.rc != 0) {
        fail_msg("rc %d: %s %s", r.rc, r.out, r.err);
    }
    rec = json_loads(r.out, 0, NULL);
    assert_non_null(rec);
    out = json_string_value(json_object_get(rec, "stdout"));
    assert_non_null(out);
    assert_contains(out, "mem 134217728\n");
    assert_contains(out, "cpu 12500 100000\n");
    assert_contains(out, "pids 200\n");
    assert_true(json_is_true(json_object_get(rec, "warm")));
    assert_true(json_is_true(json_object_get(rec, "resized")));
    json_decref(rec);
    spawn_result_free(&r);

    /* an update the engine refuses: that warm sandbox goes, the job starts
     * cold (and fails there too: the engine refuses 4M at create as well) */
    wait_warm(1);
    r = RT_SBX("run", "--json", "--pool", "ci", "--", "echo", "shape-tiny");
    assert_int_not_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_true(asprintf(&cmd,
                         "grep -q 'resizing warm sandbox.*HTTP 400.*starting one cold' "
                         "'%s/serve.log'",
                         rt_state) > 0);
    if (system(cmd) != 0) {
        fail_msg("no failed update in the log: %s", cmd);
    }
    free(cmd);
    serve_kill(SIGTERM);
    assert_int_equal(owned_by(pid), 0);
}

/* Bad configuration: one line naming the key, non-zero exit. */
static void expect_config_error(const char *pools, const char *want)
{
    char cfg[1024];
    struct spawn_result r;

    snprintf(cfg, sizeof(cfg),
             "runner = { listen = \"unix:%s/bad.sock\"; };\n"
             "box = { pools = [\"ci\"]; heavy_min_memory = \"1G\"; };\n"
             "limits = { cpus = 0.25; memory = \"256M\"; };\n%s\n",
             rt_state, pools);
    rt_use_config(cfg);
    r = RT_SBX("serve");
    assert_int_not_equal(r.rc, 0);
    assert_contains(r.err, want);
    {
        int lines = 0;

        for (const char *c = r.err; *c != '\0'; c++) {
            lines += *c == '\n';
        }
        if (lines != 1) {
            fail_msg("not one line: %s", r.err);
        }
    }
    spawn_result_free(&r);
}

static void test_bad_config(void **state)
{
    (void)state;
    expect_config_error("pools = { ci = { warm = -1; }; };", "'pools.ci.warm' must be 0 or more");
    expect_config_error("pools = { ci = { warm = 3; max_sandboxes = 2; }; };",
                        "'pools.ci.warm' = 3 is more than the pool's 2 sandboxes");
    expect_config_error("pools = { ci = { warm = 1; warm_max_age = \"0s\"; }; };",
                        "'pools.ci.warm_max_age' must be greater than 0");
}

static int cleanup(void **state)
{
    (void)state;
    rt_stop_server(&origin_pid);
    serve_stop_show_log(30);
    return 0;
}

static int group_teardown(void **state)
{
    if (wt_root != NULL) {
        test_rm_rf(wt_root);
        free(wt_root);
    }
    if (policy_dir != NULL) {
        test_rm_rf(policy_dir);
        free(policy_dir);
    }
    return rt_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_claimed_sandbox_is_its_tasks, cleanup),
        cmocka_unit_test_teardown(test_kill9_leaves_none, cleanup),
        cmocka_unit_test_teardown(test_other_shape_resized, cleanup),
        cmocka_unit_test_teardown(test_bad_config, cleanup),
    };

    return cmocka_run_group_tests_name("warm_pool", tests, rt_setup, group_teardown);
}
