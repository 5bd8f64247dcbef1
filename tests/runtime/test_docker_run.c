/* test_docker_run.c - `sbx run` against a real engine: output, exit status,
 * stream separation, limits seen from inside, isolation, cleanup on every
 * path, and bad input. */
#include "rt_common.h"

#include <sys/stat.h>

static void test_run_hello(void **state)
{
    struct spawn_result r = RT_SBX("run", "--", "echo", "hello");

    (void)state;
    if (r.rc != 0) {
        fail_msg("rc %d: %s", r.rc, r.err);
    }
    assert_string_equal(r.out, "hello\n");
    assert_int_equal(rt_sandboxes(), 0);
    spawn_result_free(&r);
}

static void test_run_exit_status(void **state)
{
    struct spawn_result r = RT_SBX("run", "--", "sh", "-c", "exit 7");

    (void)state;
    assert_int_equal(r.rc, 7);
    spawn_result_free(&r);
    r = RT_SBX("run", "--", "sh", "-c", "kill -9 $$");
    assert_int_equal(r.rc, 137);
    spawn_result_free(&r);
    r = RT_SBX("run", "--", "no-such-command-here");
    assert_int_equal(r.rc, 127);
    assert_contains(r.err, "command not found");
    spawn_result_free(&r);
    r = RT_SBX("run", "--", "/etc/hostname");
    assert_int_equal(r.rc, 126);
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_run_streams_apart(void **state)
{
    struct spawn_result r =
        RT_SBX("run", "--", "sh", "-c", "echo out1; echo err1 >&2; echo out2; echo err2 >&2");

    (void)state;
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "out1\nout2\n");
    assert_string_equal(r.err, "err1\nerr2\n");
    spawn_result_free(&r);
}

/* Prints, one per line, the sandbox's memory limit, memory+swap limit, CPU quota, CPU
 * period and pids limit as cgroup v1 names them, from cgroup v1 or v2 (Debian 12's
 * default: memory.max, memory.swap.max, "QUOTA PERIOD" in cpu.max). */
#define LIMITS_INSIDE                                                                              \
    "if [ -f /sys/fs/cgroup/cgroup.controllers ]; then cd /sys/fs/cgroup; "                        \
    "m=$(cat memory.max); s=$(cat memory.swap.max); "                                              \
    "echo $m; if [ \"$s\" = 0 ]; then echo $m; else echo swap=$s; fi; "                            \
    "tr ' ' '\\n' < cpu.max; cat pids.max; "                                                       \
    "else cat /sys/fs/cgroup/memory/memory.limit_in_bytes "                                        \
    "/sys/fs/cgroup/memory/memory.memsw.limit_in_bytes "                                           \
    "/sys/fs/cgroup/cpu/cpu.cfs_quota_us /sys/fs/cgroup/cpu/cpu.cfs_period_us "                    \
    "/sys/fs/cgroup/pids/pids.max; fi"

static void test_run_default_limits_inside(void **state)
{
    struct spawn_result r = RT_SBX("run", "--", "sh", "-c", LIMITS_INSIDE);
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    double cpus = ncpu >= 2 ? (ncpu - 0.5 < 2.0 ? ncpu - 0.5 : 2.0) : ncpu * 0.75;
    char want[128];

    (void)state;
    if (r.rc != 0) {
        fail_msg("rc %d: %s", r.rc, r.err);
    }
    /* 8 GiB, no swap (memsw == memory), 2 CPUs but never more than the box's
     * CPUs minus box.cpu_reserve (0.5 from 2 CPUs up), 4096 pids */

    snprintf(want, sizeof(want), "8589934592\n8589934592\n%ld\n100000\n4096\n",
             (long)(cpus * 100000 + 0.5));
    assert_string_equal(r.out, want);
    spawn_result_free(&r);
}

static void test_run_configured_limits_inside(void **state)
{
    struct spawn_result r;

    (void)state;
    rt_use_config("limits = { cpus = 0.5; memory = \"256M\"; pids = 100; };\n");
    r = RT_SBX("run", "--", "sh", "-c", LIMITS_INSIDE);
    rt_use_config(NULL);
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "268435456\n268435456\n50000\n100000\n100\n");
    spawn_result_free(&r);
}

static void test_run_isolation(void **state)
{
    char *wt = test_mkdtemp();
    char *marker = test_write_file(wt, "marker.txt", "from the host\n");
    char *cache = test_mkdtemp();
    char *cfg = NULL;
    struct spawn_result r;

    (void)state;
    chmod(wt, 0777);
    assert_true(asprintf(&cfg, "caches = ( { host = \"%s\"; path = \"/cache\"; } );\n", cache) > 0);
    rt_use_config(cfg);
    /* only /workspace, the read-only cache and the core's egress socket,
     * relay and exec agent socket are mounts from the host's disk (beside the engine's own
     * /etc/hosts, /etc/hostname, /etc/resolv.conf and its init) */
    r = RT_SBX("run", "--worktree", wt, "--", "sh", "-c",
               "cat /workspace/marker.txt; "
               "awk '{for (i = 7; i <= NF; i++) if ($i == \"-\") print $(i + 1), $5}' "
               "/proc/self/mountinfo | grep -E '^(ext[234]|xfs|btrfs) ' | cut -d' ' -f2 | "
               "grep -v -x -e /etc/hosts -e /etc/hostname -e /etc/resolv.conf "
               "-e /usr/sbin/docker-init | sort; "
               "touch /cache/x 2>/dev/null && echo cache-writable || echo cache-ro; "
               "cat /proc/self/uid_map | tr -s ' '; "
               "grep -c CapEff /proc/self/status >/dev/null && "
               "grep NoNewPrivs /proc/self/status | tr -d ' \\t'");
    rt_use_config(NULL);
    if (r.rc != 0) {
        fail_msg("rc %d: %s", r.rc, r.err);
    }
    assert_contains(r.out, "from the host\n");
    /* the egress socket directory, the relay and the exec agent's socket
     * directory are the core's own */
    assert_contains(r.out, "/cache\n/run/sbx-agent\n/run/sbx-egress\n/run/sbx-relay\n/workspace\n");
    assert_contains(r.out, "cache-ro\n");
    assert_contains(r.out, " 0 100000 65536\n"); /* user namespace: root is host uid 100000 */
    assert_contains(r.out, "NoNewPrivs:1\n");
    /* no network but loopback */
    spawn_result_free(&r);
    r = RT_SBX("run", "--", "sh", "-c", "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' '");
    assert_string_equal(r.out, "lo\n");
    spawn_result_free(&r);
    test_rm_rf(wt);
    test_rm_rf(cache);
    free(marker);
    free(wt);
    free(cache);
    free(cfg);
}

static void test_run_bad_input(void **state)
{
    struct spawn_result r;

    (void)state;
    r = RT_SBX("run", "--");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "no command");
    spawn_result_free(&r);
    r = RT_SBX("run", "echo", "hi");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "after '--'");
    spawn_result_free(&r);
    r = RT_SBX("run", "--env", "=x", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "bad --env");
    spawn_result_free(&r);
    r = RT_SBX("run", "--env", "1A=b", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "bad --env name");
    spawn_result_free(&r);
    r = RT_SBX("run", "--task", "../etc", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "task id");
    spawn_result_free(&r);
    /* a bad test scope (docs/testing.md) is one line, and nothing runs */
    setenv("SBX_TEST_LABEL", "not a label", 1);
    r = RT_SBX("run", "--", "true");
    setenv("SBX_TEST_LABEL", rt_scope, 1);
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "SBX_TEST_LABEL: 1 to 63 characters");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
    rt_use_config("image = \"sbx-no-such-image:1\";\n");
    r = RT_SBX("run", "--", "true");
    rt_use_config(NULL);
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "image 'sbx-no-such-image:1' not found");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_run_engine_down(void **state)
{
    char *argv[] = {rt_sbx, "run", "--", "true", NULL};
    char *env[] = {"DOCKER_HOST=unix:///tmp/sbx-no-engine-here.sock", rt_statev, NULL};
    struct spawn_result r = spawn_run(argv, env);

    (void)state;
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "/tmp/sbx-no-engine-here.sock");
    assert_contains(r.err, "is the engine running?");
    spawn_result_free(&r);
}

static void test_run_socket_not_permitted(void **state)
{
    char *argv[] = {rt_sbx, "run", "--", "true", NULL};
    char *statev = NULL;
    char *dir = test_mkdtemp();
    struct spawn_result r;

    (void)state;
    if (geteuid() != 0) {
        fail_msg("this test drops to uid 65534 and needs root");
    }
    chmod(dir, 0777);
    assert_true(asprintf(&statev, "SBX_STATE_DIR=%s/state", dir) > 0);
    {
        char *env[] = {rt_host, statev, NULL};

        r = spawn_run_as(argv, env, 65534);
    }
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "Permission denied");
    spawn_result_free(&r);
    test_rm_rf(dir);
    free(dir);
    free(statev);
}

static void test_info_reports_userns(void **state)
{
    struct spawn_result r = RT_SBX("info", "--json");
    json_t *j;

    (void)state;
    assert_int_equal(r.rc, 0);
    j = json_loads(r.out, 0, NULL);
    assert_non_null(j);
    assert_true(json_is_true(json_object_get(j, "userns")));
    /* which one: test_docker_quota.c */
    assert_true(json_string_length(json_object_get(j, "disk_limit")) > 0);
    json_decref(j);
    spawn_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_run_hello),
        cmocka_unit_test(test_run_exit_status),
        cmocka_unit_test(test_run_streams_apart),
        cmocka_unit_test(test_run_default_limits_inside),
        cmocka_unit_test(test_run_configured_limits_inside),
        cmocka_unit_test(test_run_isolation),
        cmocka_unit_test(test_run_bad_input),
        cmocka_unit_test(test_run_engine_down),
        cmocka_unit_test(test_run_socket_not_permitted),
        cmocka_unit_test(test_info_reports_userns),
    };

    return cmocka_run_group_tests_name("docker_run", tests, rt_setup, rt_teardown);
}
