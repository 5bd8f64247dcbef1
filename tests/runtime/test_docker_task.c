/* test_docker_task.c - tasks (one sandbox, many execs), the idle and maximum
 * lifetime, cleanup after signals and kill -9, concurrent runs, the disk cap. */
#include "rt_common.h"

#include <dirent.h>
#include <sys/stat.h>

#include "wait.h"

/* Loads the task record at PATH into *REC (dropping the last): 1 when its
 * state is "ended". */
static int record_ended(json_t **rec, const char *path)
{
    const char *st;

    json_decref(*rec);
    *rec = json_load_file(path, 0, NULL);
    st = json_string_value(json_object_get(*rec, "state"));
    return st != NULL && strcmp(st, "ended") == 0;
}

static void chomp(char *s)
{
    s[strcspn(s, "\n")] = '\0';
}

static void test_task_three_execs(void **state)
{
    struct spawn_result r = RT_SBX("task", "start");
    char *task;

    (void)state;
    if (r.rc != 0) {
        fail_msg("task start rc %d: %s", r.rc, r.err);
    }
    task = strdup(r.out);
    chomp(task);
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 1);
    r = RT_SBX("exec", task, "--", "sh", "-c", "echo first > /tmp/state");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    r = RT_SBX("exec", task, "--env", "WHO=second", "--", "sh", "-c", "echo $WHO; exit 4");
    assert_int_equal(r.rc, 4);
    assert_string_equal(r.out, "second\n");
    spawn_result_free(&r);
    r = RT_SBX("exec", task, "--", "cat", "/tmp/state");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "first\n");
    spawn_result_free(&r);
    r = RT_SBX("task", "list", "--json");
    assert_contains(r.out, task);
    assert_contains(r.out, "\"running\"");
    spawn_result_free(&r);
    r = RT_SBX("task", "end", task);
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
    r = RT_SBX("exec", task, "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "no running task");
    spawn_result_free(&r);
    r = RT_SBX("task", "end", task);
    assert_int_equal(r.rc, 1);
    spawn_result_free(&r);
    free(task);
}

static void test_task_concurrent_execs(void **state)
{
    struct spawn_result r = RT_SBX("task", "start", "--task", "conc-1");
    pid_t a;

    (void)state;
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    a = fork();
    if (a == 0) {
        struct spawn_result c = RT_SBX("exec", "conc-1", "--", "sh", "-c", "sleep 12; exit 5");

        _exit(c.rc);
    }
    r = RT_SBX("exec", "conc-1", "--", "echo", "meanwhile");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "meanwhile\n");
    /* did not wait for the 12 s command (a loaded machine takes seconds per exec) */
    assert_true(r.secs < 10.0);
    spawn_result_free(&r);
    {
        int st = 0;

        waitpid(a, &st, 0);
        assert_int_equal(WEXITSTATUS(st), 5);
    }
    r = RT_SBX("task", "end", "conc-1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_task_idle_timeout(void **state)
{
    struct spawn_result r;
    json_t *rec;
    char *path = NULL;

    (void)state;
    rt_use_config("limits = { idle = \"3s\"; };\n");
    r = RT_SBX("task", "start", "--task", "idle-1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    /* a silent command longer than the idle time is activity */
    r = RT_SBX("exec", "idle-1", "--", "sleep", "5");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    /* then 3 s without an exec ends it (within 60 s) */
    wait_until(rt_sandboxes() == 0, 60, NULL, "task idle-1 to end after 3 s idle (%zu sandboxes)",
               rt_sandboxes());
    rt_use_config(NULL);
    assert_true(asprintf(&path, "%s/tasks/idle-1/task.json", rt_state) > 0);
    /* the keeper writes the final record just after the sandbox is gone */
    rec = NULL;
    wait_until(record_ended(&rec, path), 10, NULL, "the final record (state ended) in %s", path);
    assert_string_equal(json_string_value(json_object_get(rec, "state")), "ended");
    assert_string_equal(json_string_value(json_object_get(rec, "reason")), "idle for 3s");
    json_decref(rec);
    free(path);
}

static void test_run_max_lifetime(void **state)
{
    struct spawn_result r;

    (void)state;
    rt_use_config("limits = { max = \"3s\"; };\n");
    r = RT_SBX("run", "--", "sleep", "120");
    rt_use_config(NULL);
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "maximum lifetime of 3s reached");
    assert_true(r.secs < 60.0); /* ended by the limit, not by the command */
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

/* (added, issue 31) Where `sbx run`'s private runner makes its directory:
 * TMPDIR of the runs below (XDG_RUNTIME_DIR unset). */
static char *run_tmp;
static char *run_tmpv;

/* The entries of DIR (a missing DIR has none). */
static int dir_entries(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int n = 0;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL) {
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    }
    closedir(d);
    return n;
}

/* The task directories in the state directory (kept tasks' records stay). */
static int task_dirs(void)
{
    char *tasks;
    int n;

    assert_true(asprintf(&tasks, "%s/tasks", rt_state) > 0);
    n = dir_entries(tasks);
    free(tasks);
    return n;
}

/* Nothing of a run is left: no private runner's directory, no sandbox of
 * this test, no task directory more than the BEFORE there were. */
static void assert_nothing_left(int before)
{
    assert_int_equal(dir_entries(run_tmp), 0);
    assert_int_equal(rt_sandboxes(), 0);
    assert_int_equal(task_dirs(), before);
}

/* Starts `sbx run -- sleep 30` in the background; returns its pid once its
 * sandbox exists. */
static pid_t background_run(void)
{
    pid_t pid = fork();

    if (pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);

        dup2(devnull, 1);
        dup2(devnull, 2);
        putenv(rt_host);
        putenv(rt_statev);
        putenv(run_tmpv);
        unsetenv("XDG_RUNTIME_DIR");
        execl(rt_sbx, rt_sbx, "run", "--", "sleep", "30", (char *)NULL);
        _exit(98);
    }
    wait_until(rt_sandboxes() > 0, 60, NULL, "the sandbox of `sbx run -- sleep 30`");
    assert_int_equal(rt_sandboxes(), 1);
    rt_wait_process("sleep 30", 60); /* the exec has started */
    return pid;
}

static void test_run_cleanup_on_signals(void **state)
{
    int sigs[] = {SIGINT, SIGTERM};
    int want[] = {130, 143};

    (void)state;
    for (int i = 0; i < 2; i++) {
        int before = task_dirs();
        pid_t pid = background_run();
        int st = 0;

        kill(pid, sigs[i]);
        waitpid(pid, &st, 0);
        assert_true(WIFEXITED(st));
        assert_int_equal(WEXITSTATUS(st), want[i]);
        assert_nothing_left(before); /* (added, issue 31) its private runner's too */
    }
}

/* (added, issue 31) With no runner configured, `sbx run` is a job of a private
 * runner in its own process (a job id, the job record's keys), and leaves
 * nothing behind: its directory, its sandbox, its task's record all go. */
static void test_run_private_runner(void **state)
{
    char *argv[] = {rt_sbx, "--log-level", "debug",
                    "run",  "--json",      "--",
                    "sh",   "-c",          "echo hi; echo there >&2; exit 3",
                    NULL};
    char *env[] = {rt_host, rt_statev, run_tmpv, NULL};
    struct spawn_result r;
    json_t *rec;
    char *where;
    int before = task_dirs();

    (void)state;
    r = spawn_run(argv, env);
    assert_int_equal(r.rc, 3);
    assert_true(asprintf(&where, "runner (private): listening in %s/sbx-runner-", run_tmp) > 0);
    assert_contains(r.err, where);
    free(where);
    rec = json_loads(r.out, 0, NULL);
    assert_non_null(rec);
    assert_true(strncmp(json_string_value(json_object_get(rec, "id")), "j-", 2) == 0);
    assert_string_equal(json_string_value(json_object_get(rec, "state")), "finished");
    assert_int_equal(json_integer_value(json_object_get(rec, "exit_status")), 3);
    assert_string_equal(json_string_value(json_object_get(rec, "stdout")), "hi\n");
    assert_string_equal(json_string_value(json_object_get(rec, "stderr")), "there\n");
    assert_non_null(json_object_get(rec, "timings")); /* the runner's record */
    json_decref(rec);
    spawn_result_free(&r);
    assert_nothing_left(before);
}

static void test_run_kill9_then_next_run_cleans(void **state)
{
    int before = task_dirs();
    pid_t pid = background_run();
    struct spawn_result r;
    int st = 0;
    char *argv[] = {rt_sbx, "run", "--", "true", NULL};
    char *env[] = {rt_host, rt_statev, run_tmpv, NULL};

    (void)state;
    kill(pid, SIGKILL);
    waitpid(pid, &st, 0);
    assert_int_equal(rt_sandboxes(), 1);       /* left behind */
    assert_int_equal(dir_entries(run_tmp), 1); /* (added, issue 31) its private runner's too */
    assert_int_equal(task_dirs(), before + 1); /* and its task's directory */
    r = spawn_run(argv, env);
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);       /* its owner is gone: removed */
    assert_int_equal(dir_entries(run_tmp), 0); /* and its directory */
    assert_int_equal(task_dirs(), before);     /* and its task's */
}

static void test_two_runs_never_touch_each_other(void **state)
{
    /* twin-a runs until the test drops a file in its worktree (at most 60 s): a
     * fixed sleep ended before the checks under ASan and load */
    char *dir = test_mkdtemp();
    pid_t pid;
    struct spawn_result r;
    int st = 0;

    (void)state;
    assert_int_equal(chmod(dir, 0755), 0);
    pid = fork();
    if (pid == 0) {
        struct spawn_result c =
            RT_SBX("run", "--task", "twin-a", "--worktree", dir, "--", "sh", "-c",
                   "i=0; while [ ! -e /workspace/go ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i+1)); "
                   "done; echo done");

        _exit(c.rc == 0 && strcmp(c.out, "done\n") == 0 ? 0 : 1);
    }
    wait_until(rt_sandboxes() > 0, 60, NULL, "the sandbox of task twin-a");
    r = RT_SBX("run", "--", "true"); /* reaps orphans: must leave the live one */
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    r = RT_SBX("run", "--task", "twin-a", "--", "true"); /* the same live task id: refused */
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "already exists");
    spawn_result_free(&r);
    free(test_write_file(dir, "go", ""));
    waitpid(pid, &st, 0);
    assert_int_equal(WEXITSTATUS(st), 0);
    assert_int_equal(rt_sandboxes(), 0);
    test_rm_rf(dir);
    free(dir);
}

static void test_run_disk_cap(void **state)
{
    struct spawn_result r;

    (void)state;
    /* the watchdog (the test engine has a quota: test_docker_quota.c) */
    rt_use_config("limits = { disk = \"20M\"; };\n"
                  "providers = { docker = { plugin = \"provider_docker\"; "
                  "disk_enforcement = \"watchdog\"; disk_check_interval = \"1s\"; }; };\n");
    r = RT_SBX("run", "--", "sh", "-c", "head -c 60000000 /dev/zero > /tmp/big; sleep 120");
    rt_use_config(NULL);
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "disk cap exceeded");
    assert_true(r.secs < 60.0); /* ended by the watchdog, not by the command */
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_exec_interrupt_while_silent(void **state)
{
    struct spawn_result r = RT_SBX("task", "start", "--task", "intr-1");
    pid_t child;
    int st = 0;
    double a;

    (void)state;
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    child = fork();
    if (child == 0) {
        int devnull = open("/dev/null", O_WRONLY);

        dup2(devnull, 1);
        dup2(devnull, 2);
        putenv(rt_host);
        putenv(rt_statev);
        execl(rt_sbx, rt_sbx, "exec", "intr-1", "--", "sleep", "30", (char *)NULL);
        _exit(98);
    }
    rt_wait_process("sleep 30", 60); /* the exec has started */
    a = (double)time(NULL);
    kill(child, SIGINT);
    waitpid(child, &st, 0);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 130);
    assert_true((double)time(NULL) - a < 10.0);
    /* the task goes on, and the cancelled command was killed, not left running */
    r = RT_SBX("exec", "intr-1", "--", "echo", "still here");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "still here\n");
    spawn_result_free(&r);
    /* (the keeper kills it just after the client returned: allow it a few seconds) */
    r = RT_SBX("exec", "intr-1", "--", "sh", "-c",
               "for i in $(seq 50); do n=$(for p in /proc/[0-9]*; do tr '\\000' ' ' "
               "< $p/cmdline 2>/dev/null; echo; done | grep -c '^sleep 30'); "
               "[ \"$n\" = 0 ] && break; sleep 0.1; done; echo $n");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "0\n");
    spawn_result_free(&r);
    r = RT_SBX("task", "end", "intr-1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_task_id_reused_after_keeper_killed(void **state)
{
    struct spawn_result r = RT_SBX("task", "start", "--task", "reuse-1");
    json_t *c;
    const char *owner;
    int pid = 0;

    (void)state;
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    c = rt_engine_get("/containers/sbx-reuse-1/json");
    owner = json_string_value(
        json_object_get(json_object_get(json_object_get(c, "Config"), "Labels"), "sbx.owner"));
    assert_non_null(owner);
    assert_non_null(strstr(owner, ";pid="));
    pid = atoi(strstr(owner, ";pid=") + 5);
    json_decref(c);
    assert_true(pid > 1);
    kill(pid, SIGKILL);
    wait_until(kill(pid, 0) != 0, 5, NULL, "the keeper (pid %d) to die of SIGKILL", pid);
    r = RT_SBX("task", "start", "--task", "reuse-1");
    if (r.rc != 0) {
        fail_msg("restart after kill -9 of the keeper: %s", r.err);
    }
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 1);
    r = RT_SBX("task", "end", "reuse-1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

static int setup(void **state)
{
    if (rt_setup(state) < 0) {
        return -1;
    }
    run_tmp = test_mkdtemp();
    return asprintf(&run_tmpv, "TMPDIR=%s", run_tmp) > 0 ? 0 : -1;
}

static int teardown(void **state)
{
    test_rm_rf(run_tmp);
    free(run_tmp);
    free(run_tmpv);
    return rt_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_task_three_execs),
        cmocka_unit_test(test_task_concurrent_execs),
        cmocka_unit_test(test_task_idle_timeout),
        cmocka_unit_test(test_run_max_lifetime),
        cmocka_unit_test(test_run_private_runner),
        cmocka_unit_test(test_run_cleanup_on_signals),
        cmocka_unit_test(test_run_kill9_then_next_run_cleans),
        cmocka_unit_test(test_two_runs_never_touch_each_other),
        cmocka_unit_test(test_run_disk_cap),
        cmocka_unit_test(test_exec_interrupt_while_silent),
        cmocka_unit_test(test_task_id_reused_after_keeper_killed),
    };

    return cmocka_run_group_tests_name("docker_task", tests, setup, teardown);
}
