/* test_snapshot_docker.c - (added, issue 30) snapshots, forks and egress changes of
 * running tasks against the test engine (docs/tasks.md, "Snapshots and forks";
 * docs/egress.md, "Changing a running task's egress"): start --from sees the files, a
 * fork sees its parent's files and its own changes only, a snapshot never holds a value
 * of the task's lease (the fake Infisical server's), `task allow` makes a denied local
 * host reachable on the next connection and a refusal names the policy's rule; bad
 * input is one line. Only loopback servers started here are reached. */
#include "rt_common.h"

#define SECRET "s3cr3t-snap-5e1d0b"

static pid_t origin_pid;
static int origin_port;
static pid_t cred_pid;
static int cred_port;

static char cfg[2048]; /* the file's configuration (test_quota_and_age adds to it) */

static int setup(void **state)
{
    char *origin = rt_source_path("tests/support/egress_origin.py");
    char *cred = rt_source_path("tests/contract/infisical_server.py");
    char *oargv[] = {"python3", origin, "http", NULL};
    char *cargv[] = {"python3", cred,       "--port",
                     "0",       "--secret", "dev:/clients/local/agent:API_KEY=" SECRET,
                     NULL};

    if (rt_setup(state) < 0) {
        return -1;
    }
    origin_pid = rt_spawn_server(oargv, &origin_port);
    cred_pid = rt_spawn_server(cargv, &cred_port);
    free(origin);
    free(cred);
    if (origin_pid <= 0 || cred_pid <= 0) {
        return -1;
    }
    snprintf(cfg, sizeof(cfg),
             "limits = { memory = \"256M\"; cpus = 0.5; };\n"
             "egress = {\n  system_dns = false;\n"
             "  hosts = ( { name = \"later.test\"; address = \"127.0.0.1\"; } );\n};\n"
             "credentials = { infisical = { plugin = \"cred_infisical\"; "
             "url = \"http://127.0.0.1:%d\"; project = \"proj-1\"; environment = \"dev\"; "
             "client_secret_env = \"TEST_INF_SECRET\"; }; };\n",
             cred_port);
    rt_use_config(cfg);
    setenv("INFISICAL_CLIENT_ID", "test-client-id", 1);
    setenv("TEST_INF_SECRET", "test-client-secret", 1);
    return 0;
}

static int teardown(void **state)
{
    rt_stop_server(&origin_pid);
    rt_stop_server(&cred_pid);
    return rt_teardown(state);
}

/* sbx ARGS... that must succeed; its stdout (caller frees). */
static char *ok_out(const char *const *args)
{
    struct spawn_result r = rt_sbx_argv(args, 0);
    char *out;

    if (r.rc != 0) {
        fail_msg("sbx %s %s: rc %d: %s", args[0], args[1] ? args[1] : "", r.rc, r.err);
    }
    out = strdup(r.out);
    spawn_result_free(&r);
    out[strcspn(out, "\n")] = '\0';
    return out;
}

#define OK(...) ok_out((const char *const[]){__VA_ARGS__, NULL})

static void end_task(const char *id)
{
    struct spawn_result r = RT_SBX("task", "end", id);

    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
}

static void rm_snapshot(const char *id)
{
    struct spawn_result r = RT_SBX("snapshot", "rm", id);

    if (r.rc != 0) {
        fail_msg("snapshot rm %s: %s", id, r.err);
    }
    spawn_result_free(&r);
}

static void test_snapshot_then_start_from(void **state)
{
    struct spawn_result r;
    char *snap;
    char *out;
    json_t *ls;

    (void)state;
    free(OK("task", "start", "--task", "sn-a"));
    free(OK("exec", "sn-a", "--", "sh", "-c", "echo kept > /root/kept; echo ws > /workspace/w"));
    snap = OK("task", "snapshot", "sn-a");
    assert_int_equal(strncmp(snap, "s-", 2), 0);
    /* listed, with its task and pool */
    r = RT_SBX("snapshot", "ls", "--json");
    assert_int_equal(r.rc, 0);
    ls = json_loads(r.out, 0, NULL);
    assert_int_equal(json_array_size(ls), 1);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 0), "id")), snap);
    assert_string_equal(json_string_value(json_object_get(json_array_get(ls, 0), "task")), "sn-a");
    json_decref(ls);
    spawn_result_free(&r);
    end_task("sn-a");
    /* a task from it sees the files, and runs sbx's own entrypoint (the relay) */
    free(OK("task", "start", "--task", "sn-b", "--from", snap));
    out = OK("exec", "sn-b", "--", "sh", "-c",
             "cat /root/kept /workspace/w | tr '\\n' ' '; "
             "tr '\\0' ' ' < /proc/1/cmdline | grep -c sbx-relay");
    assert_string_equal(out, "kept ws 1");
    free(out);
    /* in use: not removed, one line */
    r = RT_SBX("snapshot", "rm", snap);
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "in use");
    assert_int_equal(strchr(r.err, '\n') - r.err, (long)strlen(r.err) - 1);
    spawn_result_free(&r);
    end_task("sn-b");
    rm_snapshot(snap);
    r = RT_SBX("snapshot", "ls", "--json");
    assert_string_equal(r.out, "[]\n");
    spawn_result_free(&r);
    free(snap);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_fork_sees_parent_and_own_changes_only(void **state)
{
    struct spawn_result r;
    char *out;
    json_t *rec;
    const char *snap;

    (void)state;
    free(OK("task", "start", "--task", "fk-p"));
    free(OK("exec", "fk-p", "--", "sh", "-c", "echo parent > /root/a"));
    r = RT_SBX("task", "fork", "fk-p", "--task", "fk-c", "--json");
    if (r.rc != 0) {
        fail_msg("fork: %s", r.err);
    }
    rec = json_loads(r.out, 0, NULL);
    assert_non_null(rec);
    assert_string_equal(json_string_value(json_object_get(rec, "task")), "fk-c");
    assert_string_equal(json_string_value(json_object_get(rec, "fork_of")), "fk-p");
    snap = json_string_value(json_object_get(rec, "snapshot"));
    assert_non_null(snap);
    spawn_result_free(&r);
    free(OK("exec", "fk-c", "--", "sh", "-c", "echo child > /root/b"));
    free(OK("exec", "fk-p", "--", "sh", "-c", "echo later > /root/c"));
    out = OK("exec", "fk-c", "--", "sh", "-c", "ls /root | tr '\\n' ' '; cat /root/a");
    assert_string_equal(out, "a b parent");
    free(out);
    out = OK("exec", "fk-p", "--", "sh", "-c", "ls /root | tr '\\n' ' '");
    assert_string_equal(out, "a c ");
    free(out);
    end_task("fk-c");
    end_task("fk-p");
    rm_snapshot(snap);
    json_decref(rec);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_snapshot_holds_no_leased_value(void **state)
{
    struct spawn_result r;
    char *snap;
    char *out;

    (void)state;
    free(OK("task", "start", "--credentials", "infisical", "--task", "ls-a"));
    /* a process that writes the value to a file: refused, nothing kept */
    free(OK("exec", "ls-a", "--", "sh", "-c", "echo \"$API_KEY\" > /root/leak"));
    r = RT_SBX("task", "snapshot", "ls-a");
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "credential lease");
    assert_null(strstr(r.err, SECRET));
    spawn_result_free(&r);
    r = RT_SBX("snapshot", "ls", "--json");
    assert_string_equal(r.out, "[]\n");
    spawn_result_free(&r);
    /* once it is gone, the snapshot is made, scanned, and holds no value */
    free(OK("exec", "ls-a", "--", "sh", "-c", "rm /root/leak; echo fine > /root/ok"));
    snap = OK("task", "snapshot", "ls-a");
    end_task("ls-a");
    free(OK("task", "start", "--task", "ls-b", "--from", snap));
    out = OK("exec", "ls-b", "--", "sh", "-c",
             "printf '%s ' \"$(cat /root/ok)\"; grep -r -l -a -F " SECRET
             " / --exclude-dir=proc --exclude-dir=sys --exclude-dir=dev 2>/dev/null | wc -l");
    assert_string_equal(out, "fine 0");
    free(out);
    end_task("ls-b");
    rm_snapshot(snap);
    free(snap);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_allow_takes_effect_on_next_connection(void **state)
{
    char curl[256];
    struct spawn_result r;
    char rule[64];
    char *out;

    (void)state;
    snprintf(curl, sizeof(curl),
             "curl -sS -m 10 -o /dev/null -w '%%{http_code}' http://later.test:%d/", origin_port);
    snprintf(rule, sizeof(rule), "later.test:%d", origin_port);
    free(OK("task", "start", "--task", "eg-a"));
    out = OK("exec", "eg-a", "--", "sh", "-c", curl);
    assert_string_equal(out, "403");
    free(out);
    out = OK("task", "allow", "eg-a", rule);
    assert_contains(out, "agent-adds-hosts");
    free(out);
    out = OK("exec", "eg-a", "--", "sh", "-c", curl);
    assert_string_equal(out, "200");
    free(out);
    free(OK("task", "deny", "eg-a", rule));
    out = OK("exec", "eg-a", "--", "sh", "-c", curl);
    assert_string_equal(out, "403");
    free(out);
    /* a refused change names the rule that refused it, in one line */
    r = RT_SBX("task", "allow", "eg-a", "*.later.test");
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "refused by policies/egress.lua rule 'no-runtime-wildcards'");
    assert_int_equal(strchr(r.err, '\n') - r.err, (long)strlen(r.err) - 1);
    spawn_result_free(&r);
    /* every change asked is noted */
    {
        char *path = NULL;
        FILE *f;
        char line[1024];
        int n = 0;

        assert_true(asprintf(&path, "%s/tasks/eg-a/egress.changes", rt_state) > 0);
        f = fopen(path, "r");
        assert_non_null(f);
        while (fgets(line, sizeof(line), f) != NULL) {
            n++;
        }
        fclose(f);
        free(path);
        assert_int_equal(n, 3);
    }
    end_task("eg-a");
    /* a CI task's egress is fixed */
    free(OK("task", "start", "--task", "eg-ci", "--pool", "ci"));
    r = RT_SBX("task", "allow", "eg-ci", rule);
    assert_int_equal(r.rc, 1);
    assert_contains(r.err, "rule 'ci-fixed'");
    spawn_result_free(&r);
    end_task("eg-ci");
    assert_int_equal(rt_sandboxes(), 0);
}

/* snapshot.quota per pool, and removal by age (sbx snapshot rm --older-than). */
static void test_quota_and_age(void **state)
{
    char quota[2200];
    struct spawn_result r;
    char *first;
    char *second;
    int gone = 0;

    (void)state;
    snprintf(quota, sizeof(quota), "%ssnapshot = { quota = 1; max_age = 0; };\n", cfg);
    rt_use_config(quota);
    free(OK("task", "start", "--task", "qa"));
    first = OK("task", "snapshot", "qa");
    r = RT_SBX("task", "snapshot", "qa");
    assert_int_equal(r.rc, 2);
    assert_contains(r.err, "snapshot quota of pool agent reached (1 of 1, snapshot.quota)");
    spawn_result_free(&r);
    /* by age: once it is more than a second old (waited for, with a deadline) */
    for (int i = 0; i < 100 && !gone; i++) {
        r = RT_SBX("snapshot", "rm", "--older-than", "1s", "--json");
        assert_int_equal(r.rc, 0);
        gone = strstr(r.out, first) != NULL;
        spawn_result_free(&r);
        if (!gone) {
            usleep(200 * 1000);
        }
    }
    assert_true(gone);
    second = OK("task", "snapshot", "qa");
    end_task("qa");
    rm_snapshot(second);
    free(first);
    free(second);
    rt_use_config(cfg);
    assert_int_equal(rt_sandboxes(), 0);
}

static void test_bad_input_one_line(void **state)
{
    static const char *const cases[][5] = {
        {"task", "allow", "no-such-task", "x.test", "no running task 'no-such-task'"},
        {"task", "snapshot", "no-such-task", NULL, "no running task 'no-such-task'"},
        {"task", "fork", "no-such-task", NULL, "no running task 'no-such-task'"},
        {"task", "allow", "bad/../id", "x.test", "not a valid task id"},
        {"snapshot", "rm", "s-000000000000", NULL, "no such snapshot"},
        {"snapshot", "rm", "nope", NULL, "not a snapshot id"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct spawn_result r = cases[i][3]
                                    ? RT_SBX(cases[i][0], cases[i][1], cases[i][2], cases[i][3])
                                    : RT_SBX(cases[i][0], cases[i][1], cases[i][2]);

        if (r.rc != 2 || strstr(r.err, cases[i][4]) == NULL ||
            strchr(r.err, '\n') != r.err + strlen(r.err) - 1) {
            fail_msg("case %zu: rc %d: %s", i, r.rc, r.err);
        }
        spawn_result_free(&r);
    }
    {
        struct spawn_result r = RT_SBX("task", "start", "--from", "s-000000000000");

        assert_int_equal(r.rc, 2);
        assert_contains(r.err, "no such snapshot");
        spawn_result_free(&r);
    }
    /* a bad host on a running task */
    free(OK("task", "start", "--task", "bad-h"));
    {
        struct spawn_result r = RT_SBX("task", "allow", "bad-h", "not a host");

        assert_int_equal(r.rc, 2);
        assert_contains(r.err, "invalid character");
        spawn_result_free(&r);
        r = RT_SBX("task", "deny", "bad-h", "10.0.0.1");
        assert_int_equal(r.rc, 2);
        assert_contains(r.err, "IP literals");
        spawn_result_free(&r);
    }
    end_task("bad-h");
    assert_int_equal(rt_sandboxes(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_snapshot_then_start_from),
        cmocka_unit_test(test_fork_sees_parent_and_own_changes_only),
        cmocka_unit_test(test_snapshot_holds_no_leased_value),
        cmocka_unit_test(test_allow_takes_effect_on_next_connection),
        cmocka_unit_test(test_quota_and_age),
        cmocka_unit_test(test_bad_input_one_line),
    };

    return cmocka_run_group_tests_name("snapshot", tests, setup, teardown);
}
