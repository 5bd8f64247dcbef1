/* test_runner_roots.c - the runner's worktree-roots module alone
 * (runner/roots.c, docs/runner.md "Worktree roots"), without a runner: the
 * roots from the configuration (a bad one refused naming where it was
 * configured), and what the runner reads kept out of any worktree: its store
 * (not a PostgreSQL one), socket, policy and plugin directories, the
 * configuration file and a client's token file. */
#include "test_common.h"

#include <sys/stat.h>

#include "config/config.h"
#include "runner/roots.h"

static char *mkdir_in(const char *dir, const char *name)
{
    char *p = NULL;

    assert_true(asprintf(&p, "%s/%s", dir, name) > 0);
    assert_int_equal(mkdir(p, 0700), 0);
    return p;
}

static void test_deny(void **state)
{
    (void)state;
    char *dir = test_mkdtemp();
    char *root = mkdir_in(dir, "work");
    char *sdir = mkdir_in(dir, "state");
    char *store_wt = mkdir_in(root, "a"), *policy_wt = mkdir_in(root, "b");
    char *token_wt = mkdir_in(root, "c"), *fine = mkdir_in(root, "d");
    char *store = NULL, *policy = NULL, *token = NULL, *out = NULL;
    char *roots[] = {root};
    struct sbx_runner_client client = {.name = "ci", .token_file = NULL};
    struct sbx_config cfg = {0};
    struct sbx_confine c = {0};
    sbx_error_t *err = NULL;
    char why[512];

    assert_true(asprintf(&store, "%s/runner.db", store_wt) > 0);
    assert_true(asprintf(&policy, "%s/policy", policy_wt) > 0);
    assert_true(asprintf(&token, "%s/ci.token", token_wt) > 0);
    client.token_file = token;
    cfg.state_dir = sdir;
    cfg.runner.worktree_roots = roots;
    cfg.runner.n_worktree_roots = 1;
    cfg.runner.clients = &client;
    cfg.runner.n_clients = 1;
    assert_int_equal(runner_roots_init(&c, &cfg, &err), 0);
    assert_null(err);
    runner_roots_deny(&c, &cfg,
                      &(struct runner_roots_paths){.store = store,
                                                   .socket = "/nonexistent/sbx.sock",
                                                   .policy_dir = policy,
                                                   .plugin_dir = "/nonexistent/plugins"});
    assert_int_equal(sbx_confine_dir(&c, store_wt, &out, why, sizeof(why)), 403);
    assert_non_null(strstr(why, "the runner's store"));
    assert_int_equal(sbx_confine_dir(&c, policy_wt, &out, why, sizeof(why)), 403);
    assert_non_null(strstr(why, "the policy directory"));
    assert_int_equal(sbx_confine_dir(&c, token_wt, &out, why, sizeof(why)), 403);
    assert_non_null(strstr(why, "a client's token file"));
    assert_int_equal(sbx_confine_dir(&c, fine, &out, why, sizeof(why)), 0);
    assert_non_null(out);
    free(out);
    out = NULL;
    assert_int_equal(sbx_confine_dir(&c, dir, &out, why, sizeof(why)), 403); /* outside */
    sbx_confine_clear(&c);

    /* a PostgreSQL store is no file: nothing denied for it */
    memset(&c, 0, sizeof(c));
    assert_int_equal(runner_roots_init(&c, &cfg, &err), 0);
    runner_roots_deny(&c, &cfg,
                      &(struct runner_roots_paths){.store = "postgresql://db/sbx",
                                                   .socket = "/nonexistent/sbx.sock",
                                                   .policy_dir = "/nonexistent/policy",
                                                   .plugin_dir = "/nonexistent/plugins"});
    assert_int_equal(sbx_confine_dir(&c, store_wt, &out, why, sizeof(why)), 0);
    free(out);
    sbx_confine_clear(&c);

    test_rm_rf(dir);
    free(store), free(policy), free(token);
    free(store_wt), free(policy_wt), free(token_wt), free(fine);
    free(root), free(sdir), free(dir);
}

static void test_bad_root(void **state)
{
    (void)state;
    char *dir = test_mkdtemp();
    char *sdir = mkdir_in(dir, "state");
    char *roots[] = {"relative/path"};
    struct sbx_config cfg = {0};
    struct sbx_confine c = {0};
    sbx_error_t *err = NULL;

    cfg.state_dir = sdir;
    cfg.runner.worktree_roots = roots;
    cfg.runner.n_worktree_roots = 1;
    cfg.runner.worktree_roots_where = "sbx.conf:7";
    assert_int_equal(runner_roots_init(&c, &cfg, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->code, SBX_E_CONFIG);
    assert_non_null(strstr(err->msg, "sbx.conf:7: "));
    sbx_error_free(&err);
    sbx_confine_clear(&c);
    test_rm_rf(dir);
    free(sdir), free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_deny),
        cmocka_unit_test(test_bad_root),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
