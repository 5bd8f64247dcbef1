/* test_provider_host.c - provider_host through the sbx binary: refused
 * without `unisolated = true` (exit 125, one line naming what is missing);
 * with it, commands run as plain processes in the worktree, their exit status
 * passes through, and the record, --json and `sbx info` say unisolated. Then
 * the plugin's ops directly: list by label, cancel kills the process group,
 * destroy removes the sandbox's own directory and never the worktree. */
#include "spawn.h"
#include "test_common.h"

#include <jansson.h>
#include <pthread.h>
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "plugin/instance.h"
#include "wait.h"

static char *sbx;
static char *refused_conf;
static char *open_conf;
static char *worktree;

static int setup(void **state)
{
    const char *build = getenv("SBX_BUILD_DIR");
    char *text = NULL;

    test_dir_setup(state);
    if (build == NULL || asprintf(&sbx, "%s/sbx", build) < 0 ||
        asprintf(&worktree, "%s/wt", test_dir) < 0 || mkdir(worktree, 0755) < 0) {
        return -1;
    }
    if (asprintf(&text, "state_dir = \"%s/state\";\nprovider = \"host\";\n", test_dir) < 0) {
        return -1;
    }
    refused_conf = test_write_file(test_dir, "refused.conf", text);
    free(text);
    if (asprintf(&text,
                 "state_dir = \"%s/state\";\nprovider = \"host\";\n"
                 "providers = { host = { plugin = \"provider_host\"; unisolated = true;\n"
                 "                       root = \"%s/root\"; }; };\n",
                 test_dir, test_dir) < 0) {
        return -1;
    }
    open_conf = test_write_file(test_dir, "open.conf", text);
    free(text);
    return 0;
}

static int teardown(void **state)
{
    free(sbx);
    free(refused_conf);
    free(open_conf);
    free(worktree);
    return test_dir_teardown(state);
}

#define SBX(conf, ...) spawn_run((char *const[]){sbx, "--config", conf, __VA_ARGS__, NULL}, NULL)

static void test_host_refused_without_opt_in(void **state)
{
    struct spawn_result r = SBX(refused_conf, "run", "--", "echo", "hi");

    (void)state;
    assert_int_equal(r.rc, 125);
    assert_string_equal(r.out, "");
    assert_non_null(strstr(r.err, "provider \"host\" does not enforce memory, cpus, pids, disk, "
                                  "egress, user namespaces that the policy asks for; set "
                                  "unisolated = true on the instance to run anyway\n"));
    spawn_result_free(&r);
    r = SBX(refused_conf, "info", "--json");
    assert_non_null(strstr(r.out, "\"isolation\": \"refused\""));
    spawn_result_free(&r);
}

static void test_host_runs_with_opt_in(void **state)
{
    struct spawn_result r = SBX(open_conf, "run", "--", "echo", "hi");
    char *want = NULL;
    json_t *j;

    (void)state;
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "hi\n");
    assert_non_null(strstr(r.err, "provider \"host\" is UNISOLATED (isolation: none)"));
    spawn_result_free(&r);

    /* exit status and signals pass through; stderr apart; cwd is the worktree */
    r = SBX(open_conf, "run", "--worktree", worktree, "--", "sh", "-c",
            "pwd; echo oops >&2; exit 7");
    assert_int_equal(r.rc, 7);
    assert_true(asprintf(&want, "%s\n", worktree) > 0);
    assert_string_equal(r.out, want);
    assert_non_null(strstr(r.err, "oops\n"));
    free(want);
    spawn_result_free(&r);
    r = SBX(open_conf, "run", "--", "sh", "-c", "kill -TERM $$");
    assert_int_equal(r.rc, 143);
    spawn_result_free(&r);
    r = SBX(open_conf, "run", "--", "no-such-command-here");
    assert_int_equal(r.rc, 127);
    spawn_result_free(&r);

    /* --env reaches the command; sbx's own environment does not */
    setenv("SBX_TEST_HOST_PARENT", "parent-value", 1);
    r = SBX(open_conf, "run", "--env", "GREETING=hello", "--", "sh", "-c",
            "echo \"$GREETING:${SBX_TEST_HOST_PARENT:-unset}\"");
    unsetenv("SBX_TEST_HOST_PARENT");
    assert_int_equal(r.rc, 0);
    assert_string_equal(r.out, "hello:unset\n");
    spawn_result_free(&r);

    /* the record says unisolated */
    r = SBX(open_conf, "run", "--json", "--", "true");
    assert_int_equal(r.rc, 0);
    j = json_loads(r.out, 0, NULL);
    assert_non_null(j);
    assert_string_equal(json_string_value(json_object_get(j, "isolation")), "none");
    assert_int_equal(json_array_size(json_object_get(j, "unenforced")), 6);
    json_decref(j);
    spawn_result_free(&r);

    /* a kept task: start says it, execs run in the same directory, end */
    r = SBX(open_conf, "task", "start", "--task", "kept-1", "--worktree", worktree);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.err, "task kept-1: provider \"host\" is UNISOLATED"));
    spawn_result_free(&r);
    r = SBX(open_conf, "exec", "kept-1", "--", "sh", "-c", "echo kept > f.txt; exit 5");
    assert_int_equal(r.rc, 5);
    spawn_result_free(&r);
    r = SBX(open_conf, "exec", "kept-1", "--", "cat", "f.txt");
    assert_string_equal(r.out, "kept\n");
    spawn_result_free(&r);
    r = SBX(open_conf, "task", "end", "kept-1");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);

    r = SBX(open_conf, "info");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "isolation:   UNISOLATED (none, unisolated = true)"));
    assert_non_null(strstr(r.out, "(NOT ENFORCED: memory, cpus, pids, disk)"));
    spawn_result_free(&r);
}

/* image building is an optional provider op: the host provider has none */
static void test_host_cannot_build_images(void **state)
{
    struct spawn_result r = SBX(open_conf, "image", "build", "--provider", "host");

    (void)state;
    assert_int_equal(r.rc, 2);
    if (strstr(r.err, "provider 'host' (provider_host) cannot build images") == NULL) {
        fail_msg("stderr: %s", r.err);
    }
    spawn_result_free(&r);
}

struct bg_exec {
    struct sbx_open_instance *oi;
    const char *id;
    const char *script;
    struct sbx_exec_ctl ctl;
    int rc;
    int code;
};

static void *bg_main(void *arg)
{
    struct bg_exec *b = arg;
    const char *const argv[] = {"sh", "-c", b->script, NULL};
    struct sbx_exec_spec spec = {.argv = argv};
    sbx_error_t *err = NULL;
    int status = 0;

    b->rc = sbx_instance_provider(b->oi)->exec(b->oi->ctx, b->id, &spec, &b->ctl, &status, &err);
    b->code = err ? err->code : 0;
    sbx_error_free(&err);
    return NULL;
}

static void on_sandbox(void *ud, const char *id, const struct sbx_kv *labels, size_t n)
{
    (void)labels;
    (void)n;
    snprintf(ud, 128, "%s", id);
}

static void test_host_ops(void **state)
{
    struct sbx_config *cfg;
    struct sbx_open_instance *oi;
    sbx_error_t *err = NULL;
    struct sbx_kv labels[] = {{"sbx.task", "ops-1"}};
    struct sbx_sandbox_spec spec = {.task_id = "ops-1", .labels = labels, .n_labels = 1};
    struct bg_exec b = {0};
    pthread_t th;
    char id[128] = "";
    char found[128] = "";
    char *dir = NULL;
    char *pidfile = NULL;
    char *script = NULL;
    struct stat st;
    FILE *f;
    int pgid = 0;

    (void)state;
    cfg = sbx_config_load_file(open_conf, &err);
    assert_non_null(cfg);
    oi = sbx_instance_open(cfg, getenv("SBX_PLUGIN_DIR"), "host", SBX_PLUGIN_PROVIDER, &err);
    if (oi == NULL) {
        fail_msg("%s", err->msg);
    }
    assert_int_equal(sbx_instance_provider(oi)->flags, 0);
    assert_int_equal(sbx_instance_provider(oi)->create(oi->ctx, &spec, id, sizeof(id), &err), 0);
    assert_int_equal(
        sbx_instance_provider(oi)->list(oi->ctx, "sbx.task", "ops-1", on_sandbox, found, &err), 0);
    assert_string_equal(found, id);
    /* no worktree: a fresh directory of the sandbox's own */
    assert_true(asprintf(&dir, "%s/root/%s/work", test_dir, id) > 0);
    assert_int_equal(stat(dir, &st), 0);

    /* cancel kills the whole group, the background sleep too */
    b.oi = oi;
    b.id = id;
    assert_true(asprintf(&pidfile, "%s/pgid", test_dir) > 0);
    /* the pid file appears (whole) once the background sleep runs */
    assert_true(asprintf(&script, "sleep 60 & echo $$ > %s.tmp && mv %s.tmp %s; sleep 60", pidfile,
                         pidfile, pidfile) > 0);
    b.script = script;
    pthread_create(&th, NULL, bg_main, &b);
    wait_until(stat(pidfile, &st) == 0, 30, NULL, "%s (the command's pid file)", pidfile);
    b.ctl.cancelled = 1;
    sbx_instance_provider(oi)->cancel(oi->ctx, &b.ctl);
    pthread_join(th, NULL);
    assert_int_equal(b.rc, -1);
    assert_int_equal(b.code, SBX_E_CANCELLED);
    f = fopen(pidfile, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d", &pgid), 1);
    fclose(f);
    /* the orphaned sleep is reaped by whoever adopts it */
    wait_until(kill(-pgid, 0) == -1, 5, NULL, "process group %d (the cancelled command) to go",
               pgid);
    free(script);
    free(pidfile);

    assert_int_equal(sbx_instance_provider(oi)->destroy(oi->ctx, id, &err), 0);
    assert_int_equal(stat(dir, &st), -1);
    /* gone twice is fine; an id not this provider's is refused */
    assert_int_equal(sbx_instance_provider(oi)->destroy(oi->ctx, id, &err), 0);
    assert_int_equal(sbx_instance_provider(oi)->destroy(oi->ctx, "../../etc", &err), -1);
    sbx_error_free(&err);
    found[0] = '\0';
    sbx_instance_provider(oi)->list(oi->ctx, "sbx.task", NULL, on_sandbox, found, NULL);
    assert_string_equal(found, "");
    /* a worktree that went away is the sandbox's failure, not "command not found" */
    {
        char *gone = NULL;
        static const char *const argv[] = {"true", NULL};
        struct sbx_exec_spec es = {.argv = argv};
        struct sbx_exec_ctl ctl = {0};
        int status = 0;

        assert_true(asprintf(&gone, "%s/gone", test_dir) > 0);
        assert_int_equal(mkdir(gone, 0755), 0);
        spec.worktree = gone;
        assert_int_equal(sbx_instance_provider(oi)->create(oi->ctx, &spec, id, sizeof(id), &err),
                         0);
        assert_int_equal(rmdir(gone), 0);
        assert_int_equal(sbx_instance_provider(oi)->exec(oi->ctx, id, &es, &ctl, &status, &err),
                         -1);
        assert_int_equal(err->code, SBX_E_ENGINE);
        assert_non_null(strstr(err->msg, "cannot enter"));
        sbx_error_free(&err);
        assert_int_equal(sbx_instance_provider(oi)->destroy(oi->ctx, id, &err), 0);
        free(gone);
    }
    /* the worktree of a task is never removed */
    spec.worktree = worktree;
    assert_int_equal(sbx_instance_provider(oi)->create(oi->ctx, &spec, id, sizeof(id), &err), 0);
    assert_int_equal(sbx_instance_provider(oi)->destroy(oi->ctx, id, &err), 0);
    assert_int_equal(stat(worktree, &st), 0);
    free(dir);
    sbx_instance_close(oi);
    sbx_config_destroy(cfg);
}

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

/* (added, issue 31) With no runner configured, `sbx run` is a job of a private
 * runner in its process: its directory (under TMPDIR here), its sandbox (the
 * provider's directory under root) and its task's directory are gone after a
 * run, and after a SIGINT in the middle of one, which exits 130 with the
 * command killed; 6 MB of output come through byte for byte. */
static void test_host_run_private_nothing_left(void **state)
{
    char *tmp = NULL;
    char *root = NULL;
    char *tasks = NULL;
    char *pidfile = NULL;
    char *script = NULL;
    char *tmpv = NULL;
    struct stat st;
    pid_t child;
    int status = 0;
    int pid = 0;
    int kept;
    FILE *f;

    (void)state;
    assert_true(asprintf(&tmp, "%s/tmp", test_dir) > 0 && mkdir(tmp, 0700) == 0);
    assert_true(asprintf(&root, "%s/root", test_dir) > 0);
    assert_true(asprintf(&tasks, "%s/state/tasks", test_dir) > 0);
    assert_true(asprintf(&pidfile, "%s/run.pid", test_dir) > 0);
    assert_true(asprintf(&script, "echo $$ > %s.tmp && mv %s.tmp %s; exec sleep 60", pidfile,
                         pidfile, pidfile) > 0);
    assert_true(asprintf(&tmpv, "TMPDIR=%s", tmp) > 0);
    kept = dir_entries(tasks); /* kept tasks' records (test_host_runs_with_opt_in) stay */
    {
        char *argv[] = {sbx, "--config", open_conf, "run", "--json", "--", "true", NULL};
        char *env[] = {tmpv, NULL};
        struct spawn_result r = spawn_run(argv, env);
        json_t *j = json_loads(r.out, 0, NULL);

        assert_int_equal(r.rc, 0);
        assert_non_null(j); /* the runner's job record */
        assert_true(strncmp(json_string_value(json_object_get(j, "id")), "j-", 2) == 0);
        assert_non_null(json_object_get(j, "timings"));
        json_decref(j);
        spawn_result_free(&r);
    }
    assert_int_equal(dir_entries(tmp), 0);
    assert_int_equal(dir_entries(root), 0);
    assert_int_equal(dir_entries(tasks), kept);
    {
        /* more than the runner's 1 MiB of kept output, written at once: every
         * byte arrives, in order (output_wait) */
        char *argv[] = {sbx, "--config", open_conf, "run", "--", "seq", "1", "800000", NULL};
        char *env[] = {tmpv, NULL};
        struct spawn_result r = spawn_run(argv, env);
        size_t at = 0;
        int ok = r.rc == 0;

        for (int i = 1; ok && i <= 800000; i++) {
            char line[16];
            int n = snprintf(line, sizeof(line), "%d\n", i);

            ok = strncmp(r.out + at, line, (size_t)n) == 0;
            at += (size_t)n;
        }
        if (!ok || r.out[at] != '\0') {
            fail_msg("sbx run -- seq 1 800000: rc %d, %zu bytes of output, wrong at byte %zu", r.rc,
                     strlen(r.out), at);
        }
        spawn_result_free(&r);
    }

    child = fork();
    if (child == 0) {
        int devnull = open("/dev/null", O_WRONLY);

        dup2(devnull, 1);
        dup2(devnull, 2);
        unsetenv("XDG_RUNTIME_DIR");
        setenv("TMPDIR", tmp, 1);
        execl(sbx, sbx, "--config", open_conf, "run", "--", "sh", "-c", script, (char *)NULL);
        _exit(98);
    }
    wait_until(stat(pidfile, &st) == 0, 30, NULL, "%s (the command's pid file)", pidfile);
    f = fopen(pidfile, "r");
    assert_non_null(f);
    assert_int_equal(fscanf(f, "%d", &pid), 1);
    fclose(f);
    assert_int_equal(dir_entries(tmp), 1); /* the private runner's directory */
    kill(child, SIGINT);
    assert_int_equal(waitpid(child, &status, 0), child);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 130);
    wait_until(kill(pid, 0) == -1, 5, NULL, "the command (pid %d) to be killed", pid);
    assert_int_equal(dir_entries(tmp), 0);
    assert_int_equal(dir_entries(root), 0);
    assert_int_equal(dir_entries(tasks), kept);
    free(tmp);
    free(root);
    free(tasks);
    free(pidfile);
    free(script);
    free(tmpv);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_host_refused_without_opt_in),
        cmocka_unit_test(test_host_runs_with_opt_in),
        cmocka_unit_test(test_host_run_private_nothing_left),
        cmocka_unit_test(test_host_ops),
        cmocka_unit_test(test_host_cannot_build_images),
    };

    return cmocka_run_group_tests_name("provider_host", tests, setup, teardown);
}
