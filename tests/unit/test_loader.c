/* test_loader.c - every ABI v1 refusal, with the file named, and a good load. */
#include "test_common.h"

#include <sys/stat.h>

#include "plugin/loader.h"

static const char *fixtures;

static int setup(void **state)
{
    (void)state;
    fixtures = getenv("SBX_TEST_PLUGINS");
    return fixtures == NULL ? -1 : 0;
}

/* Loads fixture NAME from the fixture dir and expects a refusal that names
 * the file and contains FRAGMENT. */
static void expect_refusal(const char *name, enum sbx_plugin_kind kind, const char *fragment)
{
    char *path = NULL;
    sbx_error_t *err = NULL;
    struct sbx_plugin *p;

    assert_true(asprintf(&path, "%s/%s.so", fixtures, name) > 0);
    p = sbx_plugin_load(fixtures, path, kind, NULL, &err);
    assert_null(p);
    assert_non_null(err);
    assert_int_equal(err->code, SBX_E_PLUGIN);
    if (strstr(err->msg, path) == NULL || strstr(err->msg, fragment) == NULL) {
        fail_msg("got '%s', wanted the path and '%s'", err->msg, fragment);
    }
    sbx_error_free(&err);
    free(path);
}

static void test_loader_good(void **state)
{
    char *path = NULL;
    sbx_error_t *err = NULL;
    struct sbx_plugin *p;

    (void)state;
    assert_true(asprintf(&path, "%s/provider_good.so", fixtures) > 0);
    p = sbx_plugin_load(fixtures, path, SBX_PLUGIN_PROVIDER, "provider_good", &err);
    if (p == NULL) {
        fail_msg("%s", err->msg);
    }
    assert_string_equal(p->desc.name, "provider_good");
    assert_string_equal(p->desc.version, "9.9.9");
    assert_int_equal(p->desc.abi_major, SBX_PLUGIN_ABI_MAJOR);
    assert_non_null(p->ops.provider.exec);
    assert_null(p->ops.provider.cancel); /* optional and absent */
    sbx_plugin_unload(p);
    free(path);
}

static void test_loader_by_name(void **state)
{
    sbx_error_t *err = NULL;
    struct sbx_plugin *p;

    (void)state;
    p = sbx_plugin_load_name(fixtures, "provider_good", SBX_PLUGIN_PROVIDER, &err);
    assert_non_null(p);
    sbx_plugin_unload(p);
    p = sbx_plugin_load_name(fixtures, "../etc/passwd", SBX_PLUGIN_PROVIDER, &err);
    assert_null(p);
    assert_non_null(strstr(err->msg, "not a plain name"));
    sbx_error_free(&err);
}

static void test_loader_wrong_major(void **state)
{
    (void)state;
    expect_refusal("provider_badmajor", 0, "ABI major 2");
}

static void test_loader_newer_minor(void **state)
{
    (void)state;
    char want[160];

    /* one line naming the plugin, its version and both ABI versions */
    snprintf(want, sizeof(want),
             "provider_newminor 9.9.9 is built for plugin ABI %u.%u, newer than this sbx's %u.%u",
             SBX_PLUGIN_ABI_MAJOR, SBX_PLUGIN_ABI_MINOR + 1, SBX_PLUGIN_ABI_MAJOR,
             SBX_PLUGIN_ABI_MINOR);
    expect_refusal("provider_newminor", 0, want);
}

static void test_loader_ops_too_large(void **state)
{
    (void)state;
    expect_refusal("provider_bigops", 0, "is larger than this sbx's");
}

static void test_loader_ops_too_short(void **state)
{
    (void)state;
    expect_refusal("provider_shortops", 0, "required callback 'init' is missing");
}

static void test_loader_missing_callback(void **state)
{
    (void)state;
    expect_refusal("provider_noexec", 0, "required callback 'exec' is missing");
}

static void test_loader_no_entry(void **state)
{
    (void)state;
    expect_refusal("provider_noentry", 0, "no entry symbol 'sbx_plugin_entry'");
}

static void test_loader_undefined_symbol(void **state)
{
    (void)state;
    expect_refusal("provider_undef", 0, "sbx_fixture_undefined_symbol");
}

static void test_loader_wrong_kind(void **state)
{
    (void)state;
    expect_refusal("provider_good", SBX_PLUGIN_CREDENTIAL, "a credential plugin was expected");
}

static void test_loader_name_mismatch(void **state)
{
    char *path = NULL;
    sbx_error_t *err = NULL;

    (void)state;
    expect_refusal("provider_misnamed", 0, "does not match the file name");
    assert_true(asprintf(&path, "%s/provider_good.so", fixtures) > 0);
    assert_null(sbx_plugin_load(fixtures, path, SBX_PLUGIN_PROVIDER, "provider_docker", &err));
    assert_non_null(strstr(err->msg, "does not match the configured 'provider_docker'"));
    sbx_error_free(&err);
    free(path);
}

static void test_loader_symlink(void **state)
{
    char *dir = test_mkdtemp();
    char *target = NULL;
    char *link = NULL;
    sbx_error_t *err = NULL;

    (void)state;
    assert_true(asprintf(&target, "%s/provider_good.so", fixtures) > 0);
    assert_true(asprintf(&link, "%s/provider_good.so", dir) > 0);
    assert_int_equal(symlink(target, link), 0);
    assert_null(sbx_plugin_load(dir, link, 0, NULL, &err));
    assert_non_null(strstr(err->msg, link));
    assert_non_null(strstr(err->msg, "is a symbolic link"));
    sbx_error_free(&err);
    test_rm_rf(dir);
    free(dir);
    free(target);
    free(link);
}

static void test_loader_outside_dir(void **state)
{
    char *dir = test_mkdtemp();
    char *path = NULL;
    sbx_error_t *err = NULL;

    (void)state;
    assert_true(asprintf(&path, "%s/provider_good.so", fixtures) > 0);
    assert_null(sbx_plugin_load(dir, path, 0, NULL, &err));
    assert_non_null(strstr(err->msg, "not inside the plugin dir"));
    sbx_error_free(&err);
    free(path);
    /* a ".." path that leaves the dir */
    assert_true(asprintf(&path, "%s/../provider_good.so", fixtures) > 0);
    assert_null(sbx_plugin_load(fixtures, path, 0, NULL, &err));
    assert_non_null(strstr(err->msg, "not inside the plugin dir"));
    sbx_error_free(&err);
    free(path);
    test_rm_rf(dir);
    free(dir);
}

static void test_loader_relative_path(void **state)
{
    sbx_error_t *err = NULL;

    (void)state;
    assert_null(sbx_plugin_load(fixtures, "provider_good.so", 0, NULL, &err));
    assert_non_null(strstr(err->msg, "provider_good.so"));
    assert_non_null(strstr(err->msg, "not absolute"));
    sbx_error_free(&err);
}

static void test_loader_missing_file(void **state)
{
    (void)state;
    expect_refusal("provider_nothere", 0, "No such file");
}

static void test_loader_not_regular(void **state)
{
    char *dir = test_mkdtemp();
    char *sub = NULL;
    sbx_error_t *err = NULL;

    (void)state;
    assert_true(asprintf(&sub, "%s/provider_dir.so", dir) > 0);
    assert_int_equal(mkdir(sub, 0700), 0);
    assert_null(sbx_plugin_load(dir, sub, 0, NULL, &err));
    assert_non_null(strstr(err->msg, "not a regular file"));
    sbx_error_free(&err);
    test_rm_rf(dir);
    free(dir);
    free(sub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loader_good),
        cmocka_unit_test(test_loader_by_name),
        cmocka_unit_test(test_loader_wrong_major),
        cmocka_unit_test(test_loader_newer_minor),
        cmocka_unit_test(test_loader_ops_too_large),
        cmocka_unit_test(test_loader_ops_too_short),
        cmocka_unit_test(test_loader_missing_callback),
        cmocka_unit_test(test_loader_no_entry),
        cmocka_unit_test(test_loader_undefined_symbol),
        cmocka_unit_test(test_loader_wrong_kind),
        cmocka_unit_test(test_loader_name_mismatch),
        cmocka_unit_test(test_loader_symlink),
        cmocka_unit_test(test_loader_outside_dir),
        cmocka_unit_test(test_loader_relative_path),
        cmocka_unit_test(test_loader_missing_file),
        cmocka_unit_test(test_loader_not_regular),
    };

    return cmocka_run_group_tests_name("loader", tests, setup, NULL);
}
