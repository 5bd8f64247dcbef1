/* test_exec_agent_docker.c - `sbx exec` through the exec agent in a Docker
 * sandbox gives a command exactly what `docker exec` gives (user and uid map,
 * cgroup, capabilities, no_new_privs, seccomp, environment defaults, working
 * directory, limits), the record says which path ran, and with the agent gone
 * execs fall back to the engine. */
#include "rt_common.h"

#include "wait.h"

/* Everything a command could tell about what it was started with. $$ is the
 * probing shell itself, the process the exec started. */
static const char probe[] =
    "id; cat /proc/$$/uid_map /proc/$$/gid_map /proc/$$/cgroup; "
    "grep -E '^(Uid|Gid|Groups|CapInh|CapPrm|CapEff|CapBnd|CapAmb|NoNewPrivs|Seccomp|"
    "Seccomp_filters|Cpus_allowed_list):' /proc/$$/status; "
    "pwd; ulimit -a; umask; cat /proc/$$/oom_score_adj; "
    "for v in PATH HOME HOSTNAME USER TERM LANG HTTP_PROXY HTTPS_PROXY NO_PROXY; do "
    "eval echo $v=\\${$v-unset}; done; readlink /proc/$$/ns/pid /proc/$$/ns/mnt "
    "/proc/$$/ns/net /proc/$$/ns/user /proc/$$/ns/uts /proc/$$/ns/ipc";

static char *task_json(const char *task)
{
    char *path = NULL;
    FILE *f;
    char *buf = calloc(1, 65536);

    assert_true(asprintf(&path, "%s/tasks/%s/task.json", rt_state, task) > 0);
    f = fopen(path, "r");
    assert_non_null(f);
    assert_true(fread(buf, 1, 65535, f) > 0);
    fclose(f);
    free(path);
    return buf;
}

static struct spawn_result docker_exec(const char *task, const char *script)
{
    char name[128];
    char *argv[] = {"/usr/bin/docker", "exec", name, "sh", "-c", (char *)script, NULL};
    char *env[] = {rt_host, "PATH=/usr/bin:/bin:/usr/sbin:/sbin", NULL};

    snprintf(name, sizeof(name), "sbx-%s", task);
    return spawn_run_as(argv, env, 0);
}

/* How many exec agents run in the task's sandbox (-1: docker exec failed).
 * PID 1 is the engine's init, whose command line holds the entrypoint's
 * (--agent too): it is not an agent and cannot be killed from inside. */
static int agents_left(const char *task)
{
    struct spawn_result d =
        docker_exec(task, "n=0; for p in /proc/[0-9]*; do [ \"$p\" = /proc/1 ] && continue; "
                          "if tr '\\0' ' ' < $p/cmdline 2>/dev/null | "
                          "grep -q -e '--age''nt'; then n=$((n+1)); fi; done; echo $n");
    int n = d.rc == 0 ? atoi(d.out) : -1;

    spawn_result_free(&d);
    return n;
}

static void test_agent_same_as_docker_exec(void **state)
{
    struct spawn_result r = RT_SBX("task", "start", "--task", "agent-probe");
    struct spawn_result a;
    struct spawn_result d;
    char *rec;

    (void)state;
    if (r.rc != 0) {
        fail_msg("task start rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    a = RT_SBX("exec", "agent-probe", "--", "sh", "-c", probe);
    assert_int_equal(a.rc, 0);
    rec = task_json("agent-probe");
    assert_contains(rec, "\"exec_path\": \"agent\"");
    free(rec);
    d = docker_exec("agent-probe", probe);
    if (d.rc != 0) {
        fail_msg("docker exec rc %d: %s", d.rc, d.err);
    }
    /* sanity: the probe printed what it is meant to compare */
    assert_contains(a.out, "CapEff:");
    assert_contains(a.out, "CapBnd:");
    assert_contains(a.out, "NoNewPrivs:\t1");
    assert_contains(a.out, "Seccomp:\t2");
    assert_contains(a.out, "PATH=/");
    assert_contains(a.out, "HOSTNAME=");
    assert_contains(a.out, "/workspace\n");
    if (strcmp(a.out, d.out) != 0) {
        fail_msg("the agent's exec differs from docker exec:\n--- agent\n%s\n--- docker exec\n%s",
                 a.out, d.out);
    }
    spawn_result_free(&a);
    spawn_result_free(&d);

    /* exit codes and streams as through the engine */
    a = RT_SBX("exec", "agent-probe", "--env", "WHO=x", "--", "sh", "-c",
               "echo $WHO; echo e >&2; exit 9");
    assert_int_equal(a.rc, 9);
    assert_string_equal(a.out, "x\n");
    assert_string_equal(a.err, "e\n");
    spawn_result_free(&a);
    a = RT_SBX("exec", "agent-probe", "--", "no-such-command");
    assert_int_equal(a.rc, 127);
    assert_contains(a.err, "command not found");
    spawn_result_free(&a);

    /* the agent goes away (a sandboxed process can kill it: here one the
     * engine starts, the same user and namespaces as the agent's exec, as
     * compared above): execs fall back to the engine and the record says so.
     * The test waits until no agent process is left (before: the killer ran
     * through the agent after a fixed 1 s and the test waited a fixed 3 s) */
    d = docker_exec("agent-probe",
                    "for p in /proc/[0-9]*; do "
                    "if tr '\\0' ' ' < $p/cmdline 2>/dev/null | "
                    "grep -q -e '--age''nt'; then kill -9 ${p#/proc/}; fi; done; true");
    assert_int_equal(d.rc, 0);
    spawn_result_free(&d);
    wait_until(agents_left("agent-probe") == 0, 60, NULL,
               "the exec agent of task agent-probe to be gone after kill -9");
    a = RT_SBX("exec", "agent-probe", "--", "echo", "still");
    assert_int_equal(a.rc, 0);
    assert_string_equal(a.out, "still\n");
    spawn_result_free(&a);
    rec = task_json("agent-probe");
    assert_contains(rec, "\"exec_path\": \"engine\"");
    free(rec);
    a = RT_SBX("exec", "agent-probe", "--", "echo", "again");
    assert_int_equal(a.rc, 0);
    assert_string_equal(a.out, "again\n");
    spawn_result_free(&a);
    r = RT_SBX("task", "end", "agent-probe");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    d = docker_exec("agent-probe", "true");
    assert_int_not_equal(d.rc, 0); /* the sandbox is gone */
    spawn_result_free(&d);
}

/* Ctrl-C of `sbx exec` cancels the command's whole process group through the
 * agent. */
static void test_agent_ctrl_c_cancels(void **state)
{
    struct spawn_result r = RT_SBX("task", "start", "--task", "agent-cancel");
    pid_t c;
    int st = 0;

    (void)state;
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    c = fork();
    if (c == 0) {
        struct spawn_result x =
            RT_SBX("exec", "agent-cancel", "--", "sh", "-c", "sleep 60 & sleep 60");

        _exit(x.rc);
    }
    rt_wait_process("sleep 60", 60); /* the command runs: a Ctrl-C now cancels it */
    /* the sbx exec client (our grandchild) gets SIGINT like a Ctrl-C */
    {
        char cmd[160];

        snprintf(cmd, sizeof(cmd), "pkill -INT -P %d -f 'exec agent-cancel'", (int)c);
        assert_int_equal(system(cmd), 0);
    }
    waitpid(c, &st, 0);
    assert_int_equal(WEXITSTATUS(st), 130);
    /* the command's whole group is gone in the sandbox */
    r = RT_SBX("exec", "agent-cancel", "--", "sh", "-c",
               "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done | "
               "grep -c '^sleep 60' || true");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "0\n");
    spawn_result_free(&r);
    r = RT_SBX("task", "end", "agent-cancel");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agent_same_as_docker_exec),
        cmocka_unit_test(test_agent_ctrl_c_cancels),
    };

    return cmocka_run_group_tests(tests, rt_setup, rt_teardown);
}
