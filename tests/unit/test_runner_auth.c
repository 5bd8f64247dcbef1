/* test_runner_auth.c - the runner's clients module alone (runner/auth.c,
 * docs/api.md "Clients and scopes"), without a runner: tokens from the
 * environment and from a file, who a bearer token is, the unix socket's
 * "local" client and its scopes, the credentials a client may name, and the
 * refusals at load (a shared token, a token file others may read). */
#include "test_common.h"

#include <sys/stat.h>

#include "config/config.h"
#include "runner/auth.h"

static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    unsetenv("SBX_TEST_AUTH_DEFAULT");
    unsetenv("SBX_TEST_AUTH_CI");
    return 0;
}

static void test_clients(void **state)
{
    (void)state;
    char *file = test_write_file(dir, "admin.token", "admin-token\n");
    char *ci_creds[] = {"github", NULL};
    struct sbx_runner_client clients[] = {
        {.name = "ci",
         .token_env = "SBX_TEST_AUTH_CI",
         .scopes = SBX_SCOPE_SUBMIT,
         .where = "sbx.conf:3",
         .credentials = ci_creds},
        {.name = "admin", .token_file = file, .scopes = SBX_SCOPE_READ_ALL, .where = "sbx.conf:4"},
        {.name = "local", .scopes = SBX_SCOPE_READ_OWN, .where = "sbx.conf:5"},
    };
    struct sbx_config cfg = {0};
    sbx_error_t *err = NULL;
    struct runner_auth *a;
    const struct runner_client *who;

    chmod(file, 0600);
    setenv("SBX_TEST_AUTH_DEFAULT", "default-token", 1);
    setenv("SBX_TEST_AUTH_CI", "ci-token", 1);
    cfg.runner.token_env = "SBX_TEST_AUTH_DEFAULT";
    cfg.runner.clients = clients;
    cfg.runner.n_clients = 3;
    a = runner_clients_load(&cfg, &err);
    assert_null(err);
    assert_non_null(a);
    assert_int_equal(runner_auth_n_clients(a), 3); /* default, ci, admin: local has no token */

    who = runner_authenticate(a, "Bearer ci-token");
    assert_non_null(who);
    assert_string_equal(who->name, "ci");
    assert_int_equal(who->scopes, SBX_SCOPE_SUBMIT);
    who = runner_authenticate(a, "Bearer admin-token");
    assert_non_null(who);
    assert_string_equal(who->name, "admin");
    who = runner_authenticate(a, "Bearer default-token");
    assert_non_null(who);
    assert_string_equal(who->name, "default");
    assert_int_equal(who->scopes, SBX_SCOPE_ALL);
    assert_null(runner_authenticate(a, "Bearer ci-toke"));
    assert_null(runner_authenticate(a, "Bearer ci-token2"));
    assert_null(runner_authenticate(a, "ci-token"));
    assert_null(runner_authenticate(a, NULL));

    who = runner_local_client(a);
    assert_string_equal(who->name, "local");
    assert_int_equal(who->scopes, SBX_SCOPE_READ_OWN);

    assert_true(runner_may_use_credentials(a, "ci", "github"));
    assert_false(runner_may_use_credentials(a, "ci", "aws"));
    assert_false(runner_may_use_credentials(a, "admin", "github"));
    assert_true(runner_may_use_credentials(a, "default", "aws"));
    assert_false(runner_may_use_credentials(a, "local", "aws")); /* it has an entry */

    assert_true(runner_may_read(&(struct runner_client){"x", SBX_SCOPE_READ_OWN}, "x"));
    assert_false(runner_may_read(&(struct runner_client){"x", SBX_SCOPE_READ_OWN}, "y"));
    assert_true(runner_may_read(&(struct runner_client){"x", SBX_SCOPE_READ_ALL}, "y"));
    assert_true(runner_may_cancel(&(struct runner_client){"x", 0}, "x"));
    assert_false(runner_may_cancel(&(struct runner_client){"x", 0}, "y"));
    runner_clients_free(a);
    free(file);
}

static void test_local_alone(void **state)
{
    (void)state;
    struct sbx_config cfg = {0};
    sbx_error_t *err = NULL;
    struct runner_auth *a = runner_clients_load(&cfg, &err);

    assert_non_null(a);
    assert_int_equal(runner_auth_n_clients(a), 0);
    assert_int_equal(runner_local_client(a)->scopes, SBX_SCOPE_ALL);
    assert_true(runner_may_use_credentials(a, "local", "aws"));
    assert_null(runner_authenticate(a, "Bearer "));
    runner_clients_free(a);
}

static void test_refused(void **state)
{
    (void)state;
    char *file = test_write_file(dir, "open.token", "s3cr3t-value\n");
    struct sbx_runner_client clients[] = {
        {.name = "a", .token_env = "SBX_TEST_AUTH_CI", .scopes = 1, .where = "sbx.conf:3"},
        {.name = "b", .token_env = "SBX_TEST_AUTH_CI", .scopes = 1, .where = "sbx.conf:4"},
    };
    struct sbx_config cfg = {0};
    sbx_error_t *err = NULL;

    setenv("SBX_TEST_AUTH_CI", "same", 1);
    cfg.runner.clients = clients;
    cfg.runner.n_clients = 2;
    assert_null(runner_clients_load(&cfg, &err));
    assert_non_null(err);
    assert_non_null(
        strstr(err->msg, "sbx.conf:4: runner.clients 'b': the same token as client 'a'"));
    sbx_error_free(&err);

    chmod(file, 0644);
    clients[1] = (struct sbx_runner_client){
        .name = "b", .token_file = file, .scopes = 1, .where = "sbx.conf:4"};
    assert_null(runner_clients_load(&cfg, &err));
    assert_non_null(err);
    assert_non_null(strstr(err->msg, "is readable or writable by its group or others"));
    assert_null(strstr(err->msg, "s3cr3t")); /* never the token */
    sbx_error_free(&err);
    free(file);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_clients, setup, teardown),
        cmocka_unit_test_setup_teardown(test_local_alone, setup, teardown),
        cmocka_unit_test_setup_teardown(test_refused, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
