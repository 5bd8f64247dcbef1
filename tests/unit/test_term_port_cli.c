/* test_term_port_cli.c - what `sbx exec -it` (--keep too), `sbx attach` and `sbx port` refuse
 * before any sandbox is involved (one line, exit 125), the terminal request's "tty" field
 * (sbx_tty_parse), and the runner's port URL parsing errors are covered by the
 * engine test (runtime_test_term_port_docker). */
#include "spawn.h"
#include "test_common.h"

#include <jansson.h>

#include "sandbox/pty.h"

static char *sbx;
static char *dir;
static char *state_env;

static int setup(void **state)
{
    const char *build = getenv("SBX_BUILD_DIR");

    (void)state;
    if (build == NULL || asprintf(&sbx, "%s/sbx", build) < 0) {
        return -1;
    }
    dir = test_mkdtemp();
    assert_true(asprintf(&state_env, "SBX_STATE_DIR=%s", dir) > 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    free(sbx);
    free(state_env);
    return 0;
}

static struct spawn_result run(char *const *args)
{
    char *argv[16] = {sbx};
    char *env[] = {state_env, "SBX_CONFIG=/dev/null", NULL};
    size_t n = 1;

    for (size_t i = 0; args[i] != NULL && n < 15; i++) {
        argv[n++] = args[i];
    }
    argv[n] = NULL;
    return spawn_run(argv, env);
}

#define RUN(...) run((char *const[]){__VA_ARGS__, NULL})

static void refused(struct spawn_result r, const char *text)
{
    if (r.rc != 125 || strstr(r.err, text) == NULL ||
        strchr(r.err, '\n') != r.err + strlen(r.err) - 1) {
        fail_msg("want exit 125 and one line with '%s': rc %d, stderr %s", text, r.rc, r.err);
    }
    spawn_result_free(&r);
}

static void test_cli_refusals(void **state)
{
    (void)state;
    refused(RUN("exec", "-it", "--", "bash"), "no task");
    refused(RUN("exec", "-it", "t-1"), "no command");
    refused(RUN("exec", "-it", "t-1", "--json", "--", "true"), "--json cannot go with a terminal");
    refused(RUN("exec", "-it", "bad/id", "--", "true"), "not a valid task id");
    refused(RUN("exec", "-it", "t-1", "--", "true"), "no running task 't-1'");
    /* (added) kept sessions */
    refused(RUN("exec", "--keep", "t-1", "--", "sh"), "--keep goes with -it");
    refused(RUN("exec", "-it", "--keep", "t-1", "--", "sh"), "no running task 't-1'");
    refused(RUN("attach"), "no task");
    refused(RUN("attach", "t-1", "t-2"), "one task, nothing more");
    refused(RUN("attach", "--bogus", "t-1"), "unknown option '--bogus'");
    refused(RUN("attach", "bad/id"), "not a valid task id");
    refused(RUN("attach", "t-1"), "no running task 't-1'");
    refused(RUN("port", "t-1"), "missing TASK PORT");
    refused(RUN("port", "t-1", "0"), "'0' is not a port (1-65535)");
    refused(RUN("port", "t-1", "65536"), "is not a port");
    refused(RUN("port", "t-1", "80", "--bogus"), "unknown option '--bogus'");
    refused(RUN("port", "bad/id", "80"), "not a valid task id");
    refused(RUN("port", "t-1", "80"), "no running task 't-1'");
    refused(RUN("port", "t-1", "80", "--listen", "1.2.3.4:0", "--unix", "/tmp/x"),
            "--listen and --unix exclude each other");
}

static void test_tty_parse(void **state)
{
    static const char *const bad[] = {
        "{\"rows\": 0, \"cols\": 80}",
        "{\"rows\": 24}",
        "{\"rows\": 5000, \"cols\": 80}",
        "{\"rows\": -1, \"cols\": 80}",
        "\"yes\"",
        "{\"rows\": \"24\", \"cols\": 80}",
        "[24, 80]",
        NULL,
    };
    struct sbx_tty_req rq = {0};
    sbx_error_t *err = NULL;
    json_t *j;

    (void)state;
    assert_int_equal(sbx_tty_parse(NULL, &rq, &err), 0);
    j = json_false();
    assert_int_equal(sbx_tty_parse(j, &rq, &err), 0);
    json_decref(j);
    j = json_true();
    assert_int_equal(sbx_tty_parse(j, &rq, &err), 1);
    assert_int_equal(rq.rows, 0); /* the default, 24 x 80 */
    json_decref(j);
    j = json_loads("{\"rows\": 40, \"cols\": 120}", JSON_DECODE_ANY, NULL);
    assert_int_equal(sbx_tty_parse(j, &rq, &err), 1);
    assert_int_equal(rq.rows, 40);
    assert_int_equal(rq.cols, 120);
    json_decref(j);
    for (size_t i = 0; bad[i] != NULL; i++) {
        j = json_loads(bad[i], JSON_DECODE_ANY, NULL);
        assert_non_null(j);
        if (sbx_tty_parse(j, &rq, &err) != -1 || strstr(sbx_error_msg(err), "'tty'") == NULL) {
            fail_msg("tty %s: not refused naming the field", bad[i]);
        }
        sbx_error_free(&err);
        json_decref(j);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_refusals),
        cmocka_unit_test(test_tty_parse),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
