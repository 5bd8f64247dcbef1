/* test_docker_files.c - files and pause of a kept task against the test engine
 * (docs/tasks.md, "Files", "Pause and resume"; issue 30):
 *  - in one task kept by the runner: a file written with `sbx cp` is read back
 *    through the API; directories both ways; a symlink planted inside that names a
 *    host file never makes cp or the API read or write that host file; sizes over
 *    the bounds are refused with a clear error;
 *  - a task kept by `sbx task start`: pause stops all CPU (the container's cgroup
 *    usage does not move), execs are refused meanwhile, --to-disk says it is not
 *    available, and resume continues a counting process without a gap. */
#include "rt_common.h"

#include <pthread.h>

#include <sys/stat.h>
#include <sys/wait.h>

#include "serve_harness.h"
#include "wait.h"

/* One call to the runner's API on its unix socket: the status, the body in *body. */
static long api(const char *method, const char *path, const char *body, size_t len, char **out)
{
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char url[2048];
    long status;

    snprintf(url, sizeof(url), "http://localhost%s", path);
    req.method = method;
    req.url = url;
    req.unix_socket = serve_sock;
    req.body = body;
    req.body_len = len;
    req.timeout_ms = 60000;
    if (sbx_http_request(&req, &resp, &err) < 0) {
        fail_msg("runner %s %s: %s", method, path, err->msg);
    }
    status = resp.status;
    if (out != NULL) {
        *out = strndup(resp.body ? resp.body : "", resp.body_len);
    }
    sbx_http_response_free(&resp);
    return status;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 1 << 16);
    size_t n;

    if (f == NULL) {
        free(buf);
        return NULL;
    }
    n = fread(buf, 1, (1 << 16) - 1, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

static int job_done(const char *id)
{
    struct spawn_result r = RT_SBX("job", "--json", id);
    int done = r.rc == 0 && strstr(r.out, "\"state\":\"finished\"") != NULL;

    spawn_result_free(&r);
    return done;
}

/* Runs argv in task (kept by the runner) and waits for its end. */
static void run_in(const char *task, const char *cmd)
{
    struct spawn_result r =
        RT_SBX("submit", "--pool", "agent", "--task", task, "--", "sh", "-c", cmd);
    char id[64];

    assert_int_equal(r.rc, 0);
    snprintf(id, sizeof(id), "%s", r.out);
    id[strcspn(id, "\n")] = '\0';
    spawn_result_free(&r);
    wait_until(job_done(id), 120, NULL, "job %s (%s) to finish", id, cmd);
}

/* (added) The task's holds ("running" in GET /v1/queue), -1 when it is not listed. */
static int holds(const char *task)
{
    char *out = NULL;
    json_t *j;
    json_t *t;
    size_t i;
    int n = -1;

    if (api("GET", "/v1/queue", NULL, 0, &out) != 200) {
        free(out);
        return -1;
    }
    j = json_loads(out, 0, NULL);
    free(out);
    json_array_foreach(json_object_get(j, "tasks"), i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "id")), task) == 0) {
            n = (int)json_integer_value(json_object_get(t, "running"));
        }
    }
    json_decref(j);
    return n;
}

struct get_call {
    const char *path;
    long status;
    size_t len;
};

static void *get_main(void *arg)
{
    struct get_call *g = arg;
    char *out = NULL;

    g->status = api("GET", g->path, NULL, 0, &out);
    g->len = out ? strlen(out) : 0;
    free(out);
    return NULL;
}

/* (added) The runner's file work runs off its loop: while an archive of 60 MB is read
 * out of the task (the task held meanwhile), GET /healthz answers. */
static void loop_free_during_archive(const char *task)
{
    struct get_call g = {.path = "/v1/tasks/f1/files?path=/tmp/big60&archive=1"};
    pthread_t th;
    int before;
    int after;
    long st;

    run_in(task, "head -c 60000000 /dev/urandom > /tmp/big60");
    assert_int_equal(holds(task), 0);
    assert_int_equal(pthread_create(&th, NULL, get_main, &g), 0);
    wait_until(holds(task) == 1 || g.status != 0, 30, NULL, "the archive's request to start");
    before = holds(task);
    st = api("GET", "/healthz", NULL, 0, NULL);
    after = holds(task);
    pthread_join(th, NULL);
    assert_int_equal(st, 200);
    assert_int_equal(g.status, 200);
    if (before != 1 || after != 1) {
        fail_msg("the archive was read before the checks (holds %d then %d): more data needed",
                 before, after);
    }
    wait_until(holds(task) == 0, 30, NULL, "the task to be let go");
    run_in(task, "rm /tmp/big60");
}

static void test_files_through_cp_and_api(void **state)
{
    char *conf = NULL;
    char *hostdir = NULL;
    char *secret = NULL;
    char *got = NULL;
    char *p = NULL;
    char *big;
    struct spawn_result r;
    long st;

    (void)state;
    assert_true(asprintf(&conf,
                         "runner = { listen = \"unix:%s/runner.sock\"; };\n"
                         "box = { pools = [\"ci\", \"agent\"]; heavy_min_memory = \"1G\"; };\n",
                         rt_state) > 0);
    rt_use_config(conf);
    free(conf);
    serve_start();
    run_in("f1", "true");

    /* a file written with sbx cp, read back through the API */
    hostdir = test_mkdtemp();
    free(test_write_file(hostdir, "in.txt", "written by sbx cp\n"));
    assert_true(asprintf(&p, "%s/in.txt", hostdir) > 0);
    r = RT_SBX("cp", p, "f1:/tmp/in.txt");
    free(p);
    if (r.rc != 0) {
        fail_msg("cp in: rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    assert_int_equal(api("GET", "/v1/tasks/f1/files?path=/tmp/in.txt", NULL, 0, &got), 200);
    assert_string_equal(got, "written by sbx cp\n");
    free(got);

    /* and one written through the API, copied out with sbx cp */
    assert_int_equal(api("PUT", "/v1/tasks/f1/files?path=/tmp/api.txt", "by the API", 10, NULL),
                     200);
    assert_true(asprintf(&p, "%s/api-out.txt", hostdir) > 0);
    r = RT_SBX("cp", "f1:/tmp/api.txt", p);
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    got = slurp(p);
    assert_string_equal(got, "by the API");
    free(got);
    free(p);

    /* a directory both ways */
    run_in("f1", "mkdir -p /tmp/tree/sub && echo deep > /tmp/tree/sub/f && ln -s sub /tmp/tree/l");
    assert_true(asprintf(&p, "%s/tree-out", hostdir) > 0);
    r = RT_SBX("cp", "f1:/tmp/tree", p);
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    free(p);
    assert_true(asprintf(&p, "%s/tree-out/sub/f", hostdir) > 0);
    got = slurp(p);
    assert_string_equal(got, "deep\n");
    free(got);
    free(p);
    assert_true(asprintf(&p, "%s/tree-out", hostdir) > 0);
    r = RT_SBX("cp", p, "f1:/tmp/tree-back");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    free(p);
    assert_int_equal(api("GET", "/v1/tasks/f1/files?path=/tmp/tree-back/sub/f", NULL, 0, &got),
                     200);
    assert_string_equal(got, "deep\n");
    free(got);

    /* a symlink planted inside naming a host file: never the host's file */
    secret = test_write_file(rt_state, "host-secret", "HOST SECRET\n");
    assert_true(asprintf(&p, "ln -s %s /tmp/evil && ln -s / /tmp/root", secret) > 0);
    run_in("f1", p);
    free(p);
    assert_int_equal(api("GET", "/v1/tasks/f1/files?path=/tmp/evil", NULL, 0, &got), 400);
    assert_null(strstr(got, "HOST SECRET"));
    free(got);
    assert_true(asprintf(&p, "/v1/tasks/f1/files?path=/tmp/root%s", secret) > 0);
    assert_int_equal(api("GET", p, NULL, 0, &got), 404);
    assert_null(strstr(got, "HOST SECRET"));
    free(got);
    st = api("PUT", p, "PWNED\n", 6, NULL); /* resolved inside: written there, if at all */
    assert_true(st == 200 || st == 404);
    free(p);
    assert_true(asprintf(&p, "%s/in.txt", hostdir) > 0);
    r = RT_SBX("cp", p, "f1:/tmp/evil"); /* replaces the link inside */
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    free(p);
    got = slurp(secret);
    assert_string_equal(got, "HOST SECRET\n"); /* untouched by every write above */
    free(got);
    assert_true(asprintf(&p, "%s/evil-out", hostdir) > 0);
    run_in("f1", "ln -sf /etc/hostname /tmp/evil2");
    r = RT_SBX("cp", "f1:/tmp/evil2", p);
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    {
        struct stat sb;

        assert_int_equal(lstat(p, &sb), 0);
        assert_true(S_ISLNK(sb.st_mode)); /* the link itself, never the file it names */
    }
    free(p);

    /* sizes over the bounds */
    big = calloc(1, (1 << 20) + 2);
    memset(big, 'x', (1 << 20) + 1);
    assert_int_equal(api("PUT", "/v1/tasks/f1/files?path=/tmp/big", big, (1 << 20) + 1, &got), 413);
    free(got);
    run_in("f1", "head -c 2097152 /dev/zero > /tmp/big2");
    assert_int_equal(api("GET", "/v1/tasks/f1/files?path=/tmp/big2", NULL, 0, &got), 413);
    assert_non_null(strstr(got, "1 MiB"));
    free(got);
    p = test_write_file(hostdir, "big.bin", big);
    r = RT_SBX("cp", p, "f1:/tmp/big3");
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "1 MiB");
    spawn_result_free(&r);
    free(p);
    free(big);
    loop_free_during_archive("f1");
    /* not this client's path: a relative one is refused before anything runs */
    assert_int_equal(api("GET", "/v1/tasks/f1/files?path=tmp/in.txt", NULL, 0, NULL), 400);
    assert_int_equal(api("GET", "/v1/tasks/nosuch/files?path=/tmp/in.txt", NULL, 0, NULL), 404);

    r = RT_SBX("cancel", "--task", "f1");
    spawn_result_free(&r);
    serve_stop_show_log(30);
    rt_use_config(NULL);
    test_rm_rf(hostdir);
    free(hostdir);
    free(secret);
}

/* The container's cgroup CPU usage in ns (the engine's stats). */
static int64_t cpu_usage(const char *task)
{
    char path[256];
    json_t *j;
    int64_t v;

    snprintf(path, sizeof(path), "/containers/sbx-%s/stats?stream=false&one-shot=true", task);
    j = rt_engine_get(path);
    v = json_integer_value(json_object_get(
        json_object_get(json_object_get(j, "cpu_stats"), "cpu_usage"), "total_usage"));
    json_decref(j);
    return v;
}

static long count_lines(const char *task)
{
    struct spawn_result r = RT_SBX("exec", task, "--", "sh", "-c", "wc -l < /tmp/count");
    long n = r.rc == 0 ? strtol(r.out, NULL, 10) : -1;

    spawn_result_free(&r);
    return n;
}

static pid_t counter; /* the counting exec's client, killed by the teardown if still there */

/* A failed assertion leaves the test function at once: what it started goes here. */
static int teardown_all(void **state)
{
    if (counter > 0) {
        kill(counter, SIGKILL);
        waitpid(counter, NULL, 0);
        counter = 0;
    }
    {
        struct spawn_result r = RT_SBX("task", "end", "p1");

        spawn_result_free(&r);
    }
    serve_kill(SIGTERM);
    return rt_teardown(state);
}

/* (added) `sbx cp` into a kept task streams the archive through the keeper to the
 * engine in pieces: a directory with a file of several pieces arrives whole; an archive
 * on stdin past the 256 MiB bound is refused in one line while it streams. */
static void streamed_copy_in(const char *task)
{
    char *dir = test_mkdtemp();
    char *cmd = NULL;
    char dest[96];
    struct spawn_result r;
    char sum[65] = "";
    FILE *p;

    assert_true(asprintf(&cmd,
                         "mkdir %s/tree && head -c 5000000 /dev/urandom > %s/tree/big && "
                         "echo small > %s/tree/small && cat %s/tree/big %s/tree/small | sha256sum",
                         dir, dir, dir, dir, dir) > 0);
    p = popen(cmd, "r");
    assert_non_null(p);
    assert_non_null(fgets(sum, sizeof(sum), p));
    pclose(p);
    free(cmd);
    cmd = NULL;
    assert_true(asprintf(&cmd, "%s/tree", dir) > 0);
    snprintf(dest, sizeof(dest), "%s:/tmp/streamed", task);
    r = RT_SBX("cp", cmd, dest);
    if (r.rc != 0) {
        fail_msg("cp of a 5 MB tree: %s", r.err);
    }
    spawn_result_free(&r);
    free(cmd);
    r = RT_SBX("exec", task, "--", "sh", "-c",
               "cat /tmp/streamed/big /tmp/streamed/small | sha256sum");
    assert_int_equal(r.rc, 0);
    assert_true(strncmp(r.out, sum, 64) == 0);
    spawn_result_free(&r);
    /* 300 MiB of archive on stdin (a sparse file: nothing on the host's disk) */
    assert_true(
        asprintf(&cmd,
                 "cd %s && truncate -s 300M sparse && tar cf - sparse | env '%s' '%s' '%s' cp "
                 "- %s:/tmp 2>&1; echo \"rc=$?\"",
                 dir, rt_host, rt_statev, rt_sbx, task) > 0);
    p = popen(cmd, "r");
    assert_non_null(p);
    {
        char out[1024];
        size_t n = fread(out, 1, sizeof(out) - 1, p);

        out[n] = '\0';
        pclose(p);
        if (strstr(out, "larger than 256 MiB") == NULL || strstr(out, "rc=1") == NULL) {
            fail_msg("300 MiB on stdin: %s", out);
        }
    }
    free(cmd);
    test_rm_rf(dir);
    free(dir);
}

static void test_pause_and_resume(void **state)
{
    struct spawn_result r;
    int64_t u1, u2;
    long before;
    double t0;

    (void)state;
    r = RT_SBX("task", "start", "--task", "p1");
    if (r.rc != 0) {
        fail_msg("task start: %s", r.err);
    }
    spawn_result_free(&r);
    counter = fork();
    if (counter == 0) {
        /* counts as fast as it can, one number a line, and burns CPU doing it */
        struct spawn_result c = RT_SBX("exec", "p1", "--", "sh", "-c",
                                       "i=0; while :; do i=$((i+1)); echo $i >> /tmp/count; done");

        _exit(c.rc);
    }
    wait_until(count_lines("p1") > 100, 60, NULL, "the counter in p1 to start");
    r = RT_SBX("task", "pause", "p1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    r = RT_SBX("task", "list", "--json");
    assert_contains(r.out, "\"paused\"");
    spawn_result_free(&r);
    /* no CPU while paused: the usage does not move over a second and a half */
    u1 = cpu_usage("p1");
    t0 = test_now();
    while (test_now() - t0 < 1.5) {
        test_poll_step(t0);
    }
    u2 = cpu_usage("p1");
    assert_true(u1 > 0);
    if (u2 != u1) {
        fail_msg("a paused sandbox used CPU: %lld ns", (long long)(u2 - u1));
    }
    r = RT_SBX("exec", "p1", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "paused");
    spawn_result_free(&r);
    r = RT_SBX("task", "pause", "--to-disk", "p1");
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "not available");
    assert_true(strchr(r.err, '\n') == r.err + strlen(r.err) - 1); /* one line */
    spawn_result_free(&r);
    /* a paused task's files can be copied */
    r = RT_SBX("cp", "p1:/etc/hostname", "-");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    r = RT_SBX("task", "resume", "p1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    before = count_lines("p1");
    wait_until(count_lines("p1") > before + 100, 60, NULL, "the counter in p1 to go on");
    /* every number once, in order: no gap and nothing lost across the pause */
    r = RT_SBX("exec", "p1", "--", "sh", "-c",
               "head -n $(( $(wc -l < /tmp/count) - 1 )) /tmp/count | "
               "awk 'NR != $1 { print \"gap at line \" NR \": \" $1; exit 1 }'");
    if (r.rc != 0) {
        fail_msg("the count has a gap: %s%s", r.out, r.err);
    }
    spawn_result_free(&r);
    streamed_copy_in("p1");
    /* ending a paused task works too */
    r = RT_SBX("task", "pause", "p1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    r = RT_SBX("task", "end", "p1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    waitpid(counter, NULL, 0);
    counter = 0;
    assert_int_equal(rt_sandboxes(), 0);
}

/* (added) sbx cp into the worktree (an idmapped view the engine cannot extract
 * into: EOVERFLOW before): the files are the worktree owner's on the host, the
 * destination keeps its mode, a symlink the sandbox planted there resolves in the
 * sandbox, a new protected path is quarantined, no staging dir is left. */
static void test_cp_into_worktree(void **state)
{
    struct spawn_result r;
    char *wt = test_mkdtemp();
    char *src = test_mkdtemp();
    char *p = NULL;
    char *q = NULL;
    struct stat st;
    FILE *f;

    (void)state;
    assert_true(asprintf(&p, "%s/sub", wt) > 0);
    assert_int_equal(mkdir(p, 0755), 0);
    assert_int_equal(chown(p, 65534, 65534), 0);
    free(p);
    assert_int_equal(chown(wt, 65534, 65534), 0);
    assert_int_equal(chmod(wt, 0755), 0);
    assert_true(asprintf(&p, "%s/d", src) > 0);
    assert_int_equal(mkdir(p, 0700), 0);
    free(p);
    assert_true(asprintf(&p, "%s/d/f", src) > 0);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs("in-dir\n", f);
    fclose(f);
    free(p);
    assert_true(asprintf(&p, "%s/.hidden", src) > 0);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs("dot\n", f);
    fclose(f);
    r = RT_SBX("task", "start", "--task", "cpw", "--worktree", wt);
    if (r.rc != 0) {
        fail_msg("task start: %s", r.err);
    }
    spawn_result_free(&r);
    r = RT_SBX("cp", p, "cpw:/workspace/sub/");
    if (r.rc != 0) {
        fail_msg("sbx cp into the worktree: rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    free(p);
    assert_true(asprintf(&p, "%s/d", src) > 0);
    r = RT_SBX("cp", p, "cpw:/workspace/");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    free(p);
    /* the owner's on the host; the destinations keep their modes */
    assert_true(asprintf(&p, "%s/sub/.hidden", wt) > 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_uid, 65534);
    free(p);
    assert_true(asprintf(&p, "%s/d/f", wt) > 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_uid, 65534);
    free(p);
    assert_int_equal(stat(wt, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    assert_true(asprintf(&p, "%s/sub", wt) > 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    free(p);
    /* a symlink planted in the worktree names the sandbox's /etc, never the host's */
    r = RT_SBX("exec", "cpw", "--", "ln", "-s", "/etc", "/workspace/evil");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_true(asprintf(&p, "%s/sbx-cp-planted", src) > 0);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs("x\n", f);
    fclose(f);
    r = RT_SBX("cp", p, "cpw:/workspace/evil/");
    spawn_result_free(&r);
    free(p);
    assert_int_not_equal(access("/etc/sbx-cp-planted", F_OK), 0);
    /* a new protected path: quarantined, not in place */
    assert_true(asprintf(&p, "%s/.hidden", src) > 0);
    assert_true(asprintf(&q, "%s/.mcp.json", src) > 0);
    assert_int_equal(rename(p, q), 0);
    r = RT_SBX("cp", q, "cpw:/workspace/");
    spawn_result_free(&r);
    free(p);
    assert_true(asprintf(&p, "%s/.mcp.json.sbx-quarantine-cpw", wt) > 0);
    wait_until(access(p, F_OK) == 0, 10, NULL, "%s", p);
    free(p);
    /* nothing staged is left inside */
    r = RT_SBX("exec", "cpw", "--", "sh", "-c", "ls -a /tmp | grep -c sbx-put || true");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "0\n");
    spawn_result_free(&r);
    r = RT_SBX("task", "end", "cpw");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    free(q);
    test_rm_rf(wt);
    test_rm_rf(src);
    free(wt);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_files_through_cp_and_api),
        cmocka_unit_test(test_pause_and_resume),
        cmocka_unit_test(test_cp_into_worktree),
    };

    return cmocka_run_group_tests(tests, rt_setup, teardown_all);
}
