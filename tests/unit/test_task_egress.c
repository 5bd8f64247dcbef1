/* test_task_egress.c - a re-adopted task's egress socket comes back from the rules
 * it saved at start (core/src/sandbox/task_egress.c), and a rules file that is
 * missing, holds a bad rule or too many rules fails with one line naming it, leaving
 * the task without a socket (fail closed). The proxy runs in this process. */
#include "test_common.h"
#include "test_proc.h"

#include <sys/stat.h>

#include "config/config.h"
#include "egress/egress.h"
#include "sandbox/task_egress.h"
#include "util/xalloc.h"

static char *dir;
static struct sbx_config *cfg;
static struct sbx_egress *egress;

static int setup(void **state)
{
    sbx_error_t *err = NULL;

    (void)state;
    dir = test_mkdtemp();
    cfg = sbx_config_defaults();
    cfg->egress.system_dns = 0;
    cfg->egress.log = xasprintf_test("%s/egress.log", dir);
    egress = sbx_egress_start(cfg, &err);
    if (egress == NULL) {
        fail_msg("egress: %s", err->msg);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sbx_egress_stop(egress);
    sbx_config_destroy(cfg);
    test_rm_rf(dir);
    free(dir);
    return 0;
}

/* A task as sbx_task_adopt leaves it before the rewire, in its own directory. */
static void task_in(struct sbx_task *t, const char *name, const char *rules)
{
    memset(t, 0, sizeof(*t));
    t->cfg = cfg;
    t->dir = xasprintf_test("%s/%s", dir, name);
    assert_int_equal(mkdir(t->dir, 0700), 0);
    snprintf(t->id, sizeof(t->id), "%s", name);
    snprintf(t->job, sizeof(t->job), "job-%s", name);
    if (rules != NULL) {
        free(test_write_file(t->dir, "egress.rules", rules));
    }
}

static void task_clear(struct sbx_task *t)
{
    for (size_t i = 0; t->egress_allow != NULL && t->egress_allow[i] != NULL; i++) {
        free(t->egress_allow[i]);
    }
    free(t->egress_allow);
    free(t->egress_dir);
    free(t->dir);
}

static void test_rewire_from_saved_rules(void **state)
{
    struct sbx_task_opts o = {.egress = egress};
    struct sbx_task t;
    struct stat st;
    sbx_error_t *err = NULL;
    char *sock;

    (void)state;
    task_in(&t, "good", "allowed.test\n*.wild.test:443\n");
    assert_int_equal(sbx_task_egress_rewire(&t, &o, &err), 0);
    assert_non_null(t.egress_dir);
    assert_string_equal(t.egress_allow[1], "*.wild.test:443");
    assert_null(t.egress_allow[2]);
    sock = xasprintf_test("%s/%s", t.egress_dir, SBX_EGRESS_SOCKET);
    assert_int_equal(stat(sock, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    assert_int_equal(sbx_egress_remove(egress, t.egress_dir, NULL), 0);
    free(sock);
    task_clear(&t);
    /* no egress given (embedded): nothing to do */
    task_in(&t, "none", NULL);
    o.egress = NULL;
    assert_int_equal(sbx_task_egress_rewire(&t, &o, &err), 0);
    assert_null(t.egress_dir);
    task_clear(&t);
}

static void test_rewire_bad_rules_file(void **state)
{
    struct sbx_task_opts o = {.egress = egress};
    struct sbx_task t;
    sbx_error_t *err = NULL;
    char *many;
    size_t len = 0;

    (void)state;
    task_in(&t, "missing", NULL);
    assert_int_equal(sbx_task_egress_rewire(&t, &o, &err), -1);
    assert_non_null(strstr(err->msg, "missing/egress.rules: No such file"));
    assert_null(t.egress_dir);
    assert_null(t.egress);
    sbx_error_free(&err);
    task_clear(&t);

    task_in(&t, "bad", "allowed.test\n*\n");
    assert_int_equal(sbx_task_egress_rewire(&t, &o, &err), -1);
    assert_non_null(strstr(err->msg, "egress rule '*'"));
    assert_null(t.egress_dir);
    assert_null(t.egress);
    sbx_error_free(&err);
    task_clear(&t);

    many = xcalloc(5000, 16);
    for (int i = 0; i < 4097; i++) {
        len += (size_t)sprintf(many + len, "h%d.test\n", i);
    }
    task_in(&t, "many", many);
    assert_int_equal(sbx_task_egress_rewire(&t, &o, &err), -1);
    assert_non_null(strstr(err->msg, "many/egress.rules: more than 4096 rules"));
    assert_null(t.egress_dir);
    sbx_error_free(&err);
    task_clear(&t);
    free(many);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rewire_from_saved_rules),
        cmocka_unit_test(test_rewire_bad_rules_file),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
