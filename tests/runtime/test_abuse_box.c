/* test_abuse_box.c - issue 14 items 2 and 4 against the real engine: memory
 * admission across processes (sbx run, sbx task start), the CPU clamp and
 * weight, a fork bomb while the host must still answer, and inotify
 * instances capped per sandbox while the host and a second sandbox still get
 * theirs. Each part runs in seconds. */
#include "rt_common.h"

#include <sys/inotify.h>
#include <sys/wait.h>
#include <time.h>

#include "wait.h"

/* Sandboxes of this file's tasks (ids "abx-..."): the engine may be shared. */
static size_t ours(void)
{
    json_t *j = rt_containers();
    size_t n = 0, i;
    json_t *c;

    json_array_foreach(j, i, c)
    {
        const char *t =
            json_string_value(json_object_get(json_object_get(c, "Labels"), "sbx.task"));

        n += t != NULL && strncmp(t, "abx-", 4) == 0;
    }
    json_decref(j);
    return n;
}

static void chomp(char *s)
{
    s[strcspn(s, "\n")] = '\0';
}

static double now_s(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The path <state>/NAME.EXT (caller frees). */
static char *bg_path(const char *name, const char *ext)
{
    char *path = NULL;

    assert_true(asprintf(&path, "%s/%s.%s", rt_state, name, ext) > 0);
    return path;
}

/* sbx ARGS in a child process; its stdout/stderr go to <state>/NAME.out/.err
 * as it writes them (a test waits for a line there). */
static pid_t sbx_bg(const char *name, const char *const *args)
{
    char *o = bg_path(name, "out");
    char *e = bg_path(name, "err");
    pid_t pid = fork();

    if (pid == 0) {
        char *argv[64] = {rt_sbx};
        size_t n = 1;
        int fo = open(o, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        int fe = open(e, O_WRONLY | O_CREAT | O_TRUNC, 0600);

        for (size_t i = 0; args[i] != NULL && n < 63; i++) {
            argv[n++] = (char *)args[i];
        }
        argv[n] = NULL;
        if (fo < 0 || fe < 0 || dup2(fo, 1) < 0 || dup2(fe, 2) < 0) {
            _exit(127);
        }
        putenv(rt_host);
        putenv(rt_statev);
        if (rt_config != NULL) {
            putenv(rt_config);
        }
        execv(rt_sbx, argv);
        _exit(127);
    }
    free(o);
    free(e);
    return pid;
}

static char *bg_file(const char *name, const char *ext)
{
    char *path = bg_path(name, ext), *buf;
    FILE *f;
    long n;

    f = fopen(path, "r");
    free(path);
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    rewind(f);
    buf = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static int bg_wait(pid_t pid)
{
    int st = 0;

    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

static void task_start(const char *id)
{
    struct spawn_result r = RT_SBX("task", "start", "--task", id);

    if (r.rc != 0) {
        fail_msg("task start %s: rc %d: %s", id, r.rc, r.err);
    }
    spawn_result_free(&r);
}

static void task_end(const char *id)
{
    struct spawn_result r = RT_SBX("task", "end", id);

    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
}

/* A 3G box with 1G kept for the host admits two 1G sandboxes; the third
 * (`sbx run --json`) and fourth (`sbx task start`) wait and say so with the
 * numbers, and proceed as others end; a 3G sandbox is refused at once. */
static void test_admission_memory(void **state)
{
    static const char *wait_line = "waits for memory: it needs 1G; 2G of 2G are admitted to 2 "
                                   "sandboxes (box.memory 3G - box.host_reserve 1G)";
    pid_t run, start;
    struct spawn_result r;
    int st = 0;
    json_t *j;
    char *out, *err;

    (void)state;
    rt_use_config("box = { memory = \"3G\"; host_reserve = \"1G\"; };\n"
                  "limits = { memory = \"1G\"; };\n");
    task_start("abx-a");
    task_start("abx-b");
    assert_int_equal(ours(), 2);
    run = sbx_bg("run", (const char *const[]){"run", "--json", "--task", "abx-run", "--", "echo",
                                              "hi", NULL});
    start = sbx_bg("start", (const char *const[]){"task", "start", "--task", "abx-d", NULL});
    /* both wait: each says so on its stderr */
    {
        char *rerr = bg_path("run", "err");
        char *derr = bg_path("start", "err");

        wait_until(test_file_has(rerr, "task abx-run waits for memory"), 60, rerr,
                   "sbx run --task abx-run to say it waits for memory");
        wait_until(test_file_has(derr, "task abx-d waits for memory"), 60, derr,
                   "sbx task start --task abx-d to say it waits for memory");
        free(rerr);
        free(derr);
    }
    assert_int_equal(ours(), 2); /* both still wait */
    assert_int_equal(waitpid(run, NULL, WNOHANG), 0);
    assert_int_equal(waitpid(start, NULL, WNOHANG), 0);

    /* 1G frees: one of them proceeds (waiters have no order), the other
     * still waits until a second one ends */
    task_end("abx-a");
    for (int i = 0; i < 600; i++) {
        if (waitpid(run, &st, WNOHANG) == run) {
            run = 0;
            break;
        }
        if (waitpid(start, &st, WNOHANG) == start) {
            start = 0;
            break;
        }
        usleep(200 * 1000);
    }
    assert_true(run == 0 || start == 0);
    assert_int_equal(WIFEXITED(st) ? WEXITSTATUS(st) : -1, 0);
    if (start != 0) { /* the run came and went: its memory freed again */
        assert_int_equal(bg_wait(start), 0);
    }
    else {
        assert_int_equal(ours(), 2); /* abx-b and abx-d: the run still waits */
        assert_int_equal(waitpid(run, NULL, WNOHANG), 0);
        task_end("abx-b");
        assert_int_equal(bg_wait(run), 0);
    }
    out = bg_file("run", "out");
    err = bg_file("run", "err");
    j = json_loads(out, 0, NULL); /* --json: stdout is the record alone */
    if (j == NULL) {
        fail_msg("sbx run --json stdout is not JSON: %s", out);
    }
    assert_string_equal(json_string_value(json_object_get(j, "stdout")), "hi\n");
    json_decref(j);
    assert_contains(err, wait_line);
    free(out);
    free(err);
    err = bg_file("start", "err");
    assert_contains(err, "task abx-d waits for memory: it needs 1G;");
    assert_contains(err, "(box.memory 3G - box.host_reserve 1G)");
    free(err);

    /* never fits: refused at once with the numbers */
    rt_use_config("box = { memory = \"3G\"; host_reserve = \"1G\"; };\n"
                  "limits = { memory = \"3G\"; };\n");
    r = RT_SBX("run", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "needs 3G of memory but this box admits at most 2G (box.memory 3G - "
                           "box.host_reserve 1G)");
    assert_true(r.secs < 30.0);
    spawn_result_free(&r);
    r = RT_SBX("task", "start", "--task", "abx-huge");
    assert_int_equal(r.rc, 1); /* sbx task start: 1 when the task cannot start */
    assert_contains(r.err, "needs 3G of memory but this box admits at most 2G");
    spawn_result_free(&r);
    /* a starter that goes away while its keeper waits (Ctrl-C, here timeout):
     * the keeper stops waiting and never creates the sandbox */
    rt_use_config("box = { memory = \"3G\"; host_reserve = \"1G\"; };\n"
                  "limits = { memory = \"1G\"; };\n");
    if (ours() == 1) { /* abx-b ended above: fill the budget again */
        task_start("abx-b");
    }
    assert_int_equal(ours(), 2);
    {
        char *argv[] = {"/usr/bin/timeout", "2",        rt_sbx, "task", "start",
                        "--task",           "abx-gone", NULL};
        char *env[] = {rt_host, rt_statev, rt_config, "PATH=/usr/bin:/bin", NULL};

        r = spawn_run_as(argv, env, 0);
        assert_int_equal(r.rc, 124);
        assert_contains(r.err, "task abx-gone waits for memory");
        spawn_result_free(&r);
        /* its keeper stops waiting: it says so in its log as it exits */
        {
            char *glog = NULL;

            assert_true(asprintf(&glog, "%s/logs/abx-gone.log", rt_state) > 0);
            wait_until(test_file_has(glog, "cancelled while waiting for memory"), 60, glog,
                       "the keeper of abx-gone to stop waiting (its log)");
            free(glog);
        }
        r = RT_SBX("task", "end", "abx-d"); /* memory frees: nobody may take it now */
        assert_int_equal(r.rc, 0);
        spawn_result_free(&r);
        assert_int_equal(ours(), 1);
        r = RT_SBX("task", "end", "abx-gone");
        assert_int_equal(r.rc, 1);
        assert_contains(r.err, "no running task 'abx-gone'");
        spawn_result_free(&r);
    }
    rt_use_config(NULL);
    r = RT_SBX("task", "end", "abx-b"); /* ended above when the run waited longest */
    spawn_result_free(&r);
    r = RT_SBX("task", "end", "abx-d"); /* ended above when two held the budget */
    spawn_result_free(&r);
    assert_int_equal(ours(), 0);
}

/* The sandbox's cgroup (cgroup v1 under the engine's parent, or v2). */
static char *cgroup_file(const char *sandbox, const char *v1, const char *file)
{
    static const char *const fmts[] = {"/sys/fs/cgroup/%s/docker/%s/%s",
                                       "/sys/fs/cgroup/%s/system.slice/docker-%s.scope/%s"};
    char *path = NULL, *buf = calloc(1, 64);

    for (size_t i = 0; i < 2; i++) {
        FILE *f;

        free(path);
        assert_true(asprintf(&path, fmts[i], v1, sandbox, file) > 0);
        f = fopen(path, "r");
        if (f != NULL) {
            if (fgets(buf, 64, f) == NULL) {
                buf[0] = '\0';
            }
            fclose(f);
            chomp(buf);
            free(path);
            return buf;
        }
    }
    fail_msg("no cgroup file %s of sandbox %s (%s)", file, sandbox, path);
    return NULL;
}

static char *sandbox_of(const char *task)
{
    struct spawn_result r = RT_SBX("task", "list", "--json");
    json_t *j = json_loads(r.out, 0, NULL);
    char *id = NULL;
    size_t i;
    json_t *t;

    json_array_foreach(j, i, t)
    {
        if (strcmp(json_string_value(json_object_get(t, "task")) ?: "", task) == 0) {
            id = strdup(json_string_value(json_object_get(t, "sandbox")));
        }
    }
    json_decref(j);
    spawn_result_free(&r);
    if (id == NULL) {
        fail_msg("task %s has no sandbox in sbx task list --json", task);
    }
    return id;
}

/* CPU: the 2-CPU default is clamped below the box's CPUs (box.cpu_reserve)
 * and the weight is half the host's. A fork bomb (pids capped at 200) runs
 * for seconds while host commands answer promptly; the box is intact after. */
static void test_fork_bomb_and_cpu(void **state)
{
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    char *sb, *v;
    pid_t bomb;
    double worst = 0.0;
    struct spawn_result r;

    (void)state;
    rt_use_config("limits = { pids = 200; };\n");
    task_start("abx-bomb");
    sb = sandbox_of("abx-bomb");
    v = cgroup_file(sb, "cpu", "cpu.shares");
    assert_string_equal(v, "512");
    free(v);
    v = cgroup_file(sb, "cpu", "cpu.cfs_quota_us");
    if (ncpu <= 2) {
        /* limits.cpus 2 on a box of <= 2 CPUs: at most the box minus the reserve */
        long want = ncpu == 2 ? 150000 : (long)(ncpu * 0.75 * 100000);

        assert_int_equal(atol(v), want);
    }
    else {
        assert_int_equal(atol(v), 200000);
    }
    free(v);
    v = cgroup_file(sb, "pids", "pids.max");
    assert_string_equal(v, "200");
    free(v);

    bomb = sbx_bg("abx-bomb",
                  (const char *const[]){"exec", "abx-bomb", "--", "timeout", "-s", "KILL", "15",
                                        "bash", "-c", "f() { f | f & }; f; wait", NULL});
    /* the bomb fills its cap within seconds; a loaded machine starts the exec
     * later, so wait for it (up to 10 s of the bomb's 15) */
    v = NULL;
    for (int i = 0; i < 100; i++) {
        free(v);
        v = cgroup_file(sb, "pids", "pids.current");
        if (atol(v) >= 150) {
            break;
        }
        usleep(100 * 1000);
    }
    if (atol(v) < 150) {
        fail_msg("the fork bomb did not fill its pids cap in 10 s: pids.current %s", v);
    }
    free(v);
    /* while it runs, host commands answer */
    for (int i = 0; i < 10; i++) {
        char *argv[] = {"/bin/sh", "-c", "true", NULL};
        char *env[] = {"PATH=/usr/bin:/bin", NULL};
        double t0 = now_s();
        struct spawn_result h = spawn_run_as(argv, env, 0);
        double dt = now_s() - t0;

        assert_int_equal(h.rc, 0);
        spawn_result_free(&h);
        worst = dt > worst ? dt : worst;
        usleep(300 * 1000);
    }
    fprintf(stderr, "fork bomb: worst host 'sh -c true' %.3fs\n", worst);
    assert_true(worst < 2.0);
    /* the box's own sbx still answers too */
    r = RT_SBX("task", "list", "--json");
    assert_int_equal(r.rc, 0);
    assert_true(r.secs < 20.0);
    spawn_result_free(&r);
    task_end("abx-bomb");
    bg_wait(bomb);
    assert_int_equal(ours(), 0);
    rt_use_config(NULL);
    free(sb);
}

/* Counts the inotify instances of a task's processes (each `tail -f` holds
 * one; one that gets none says so on its stderr and falls back to polling),
 * once every tail holds one or has said so (at most 60 s, else what it saw). */
#define INOTIFY_FLOOD(n)                                                                           \
    "for i in $(seq " #n "); do tail -f /etc/hostname >/dev/null 2>/tmp/ino.$i & done; "           \
    "d=$(($(date +%s) + 60)); while :; do "                                                        \
    "c=$(ls -l /proc/[0-9]*/fd 2>/dev/null | grep -c 'anon_inode:inotify'); "                      \
    "p=0; for f in /tmp/ino.*; do [ -s $f ] && p=$((p+1)); done; "                                 \
    "[ $((c+p)) -ge " #n " ] && break; "                                                           \
    "[ $(date +%s) -ge $d ] && { echo \"waited 60 s for " #n " tails to hold inotify or say "      \
    "they poll: $c hold, $p poll\"; exit; }; sleep 0.1; done; echo $c"

/* inotify: one sandbox asking for 300 instances gets its cap (128); a second
 * sandbox and host root still get theirs. */
static void test_inotify_flood(void **state)
{
    struct spawn_result r = RT_SBX("info", "--json");
    json_t *j = json_loads(r.out, 0, NULL);
    json_t *k = json_object_get(j, "kernel");
    int fd;

    (void)state;
    rt_use_config(NULL);
    if (!json_is_true(json_object_get(k, "ok"))) {
        fail_msg("the box's inotify pool is below what box.max_sandboxes needs: run "
                 "scripts/kernel-limits.sh (sbx info: %s)",
                 r.err);
    }
    json_decref(j);
    spawn_result_free(&r);
    task_start("abx-ino-a");
    task_start("abx-ino-b");
    /* ino-a floods: its processes hold 128 instances at most */
    r = RT_SBX("exec", "abx-ino-a", "--", "bash", "-c", INOTIFY_FLOOD(300));
    assert_int_equal(r.rc, 0);
    chomp(r.out);
    assert_string_equal(r.out, "128");
    spawn_result_free(&r);
    /* meanwhile host root gets one ... */
    fd = inotify_init1(IN_CLOEXEC);
    if (fd < 0) {
        fail_msg("host root: inotify_init1: %s", strerror(errno));
    }
    close(fd);
    /* ... and so does the second sandbox, several */
    r = RT_SBX("exec", "abx-ino-b", "--", "bash", "-c", INOTIFY_FLOOD(20));
    assert_int_equal(r.rc, 0);
    chomp(r.out);
    assert_string_equal(r.out, "20");
    spawn_result_free(&r);
    task_end("abx-ino-a");
    task_end("abx-ino-b");
    assert_int_equal(ours(), 0);
}

/* After each test, pass or fail: no task of this file is left running. */
static int end_ours(void **state)
{
    static const char *const ids[] = {"abx-a",    "abx-b",     "abx-d",     "abx-gone",
                                      "abx-bomb", "abx-ino-a", "abx-ino-b", NULL};

    (void)state;
    rt_use_config(NULL);
    for (size_t i = 0; ids[i] != NULL; i++) {
        struct spawn_result r = RT_SBX("task", "end", ids[i]);

        spawn_result_free(&r);
    }
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_admission_memory, end_ours),
        cmocka_unit_test_teardown(test_fork_bomb_and_cpu, end_ours),
        cmocka_unit_test_teardown(test_inotify_flood, end_ours),
    };

    return cmocka_run_group_tests(tests, rt_setup, rt_teardown);
}
