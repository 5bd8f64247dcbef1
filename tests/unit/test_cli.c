/* test_cli.c - the sbx binary's own surface: --version, --help everywhere,
 * `sbx plugins --json`, `sbx config check` exit codes. */
#include "spawn.h"
#include "test_common.h"

#include <jansson.h>

static char *sbx;
static char *dir;

static int setup(void **state)
{
    const char *build = getenv("SBX_BUILD_DIR");

    (void)state;
    if (build == NULL || asprintf(&sbx, "%s/sbx", build) < 0) {
        return -1;
    }
    dir = test_mkdtemp();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    free(sbx);
    return 0;
}

#define SBX(...) spawn_run((char *const[]){sbx, __VA_ARGS__, NULL}, NULL)

static void test_cli_version_and_help(void **state)
{
    static const char *const cmds[] = {"run", "task", "exec", "image", "info", "plugins",
                                       "config", NULL};
    struct spawn_result r = SBX("--version");

    (void)state;
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "plugin ABI 1.0"));
    spawn_result_free(&r);
    r = SBX("--help");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "Exit status"));
    spawn_result_free(&r);
    for (size_t i = 0; cmds[i] != NULL; i++) {
        r = SBX((char *)cmds[i], "--help");
        if (r.rc != 0 || strstr(r.out, "usage: sbx") == NULL) {
            fail_msg("sbx %s --help: rc %d, %s", cmds[i], r.rc, r.out);
        }
        spawn_result_free(&r);
        r = SBX("help", (char *)cmds[i]);
        assert_int_equal(r.rc, 0);
        spawn_result_free(&r);
    }
    r = SBX("frobnicate");
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "unknown command 'frobnicate'"));
    spawn_result_free(&r);
    r = SBX("--log-level", "loud", "plugins");
    assert_int_equal(r.rc, 2);
    spawn_result_free(&r);
}

static void test_cli_plugins_json(void **state)
{
    static const struct {
        const char *name;
        const char *kind;
    } want[] = {
        {"cred_agentvault", "credential"}, {"cred_infisical", "credential"},
        {"provider_daytona", "provider"},  {"provider_docker", "provider"},
        {"provider_e2b", "provider"},      {"provider_opensandbox", "provider"},
    };
    struct spawn_result r = SBX("plugins", "--json");
    json_t *arr;

    (void)state;
    assert_int_equal(r.rc, 0);
    arr = json_loads(r.out, 0, NULL);
    assert_int_equal(json_array_size(arr), 6);
    for (size_t i = 0; i < 6; i++) {
        json_t *p = json_array_get(arr, i);
        const char *st = json_string_value(json_object_get(p, "state"));

        assert_string_equal(json_string_value(json_object_get(p, "name")), want[i].name);
        assert_string_equal(json_string_value(json_object_get(p, "kind")), want[i].kind);
        assert_string_equal(json_string_value(json_object_get(p, "abi")), "1.0");
        assert_true(strcmp(st, "ready") == 0 || strcmp(st, "stub") == 0 ||
                    strcmp(st, "deferred") == 0);
        if (strcmp(st, "ready") != 0) {
            assert_non_null(json_string_value(json_object_get(p, "reason")));
        }
    }
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 0), "state")),
                        "deferred");
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 2), "state")),
                        "stub");
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 3), "state")),
                        "ready");
    assert_string_equal(json_string_value(json_object_get(json_array_get(arr, 4), "state")),
                        "deferred");
    json_decref(arr);
    spawn_result_free(&r);
}

static void test_cli_config_check(void **state)
{
    char *bad = test_write_file(dir, "bad.conf", "limits = {\n  cpus = 2.0;\n  colour = 1;\n};\n");
    char *typ = test_write_file(dir, "type.conf", "box = { max_sandboxes = \"six\"; };\n");
    char *opt = test_write_file(dir, "opt.conf",
                                "providers = {\n  d = { plugin = \"provider_docker\";\n"
                                "    sockett = \"/x\"; };\n};\n");
    char *good = test_write_file(dir, "good.conf", "limits = { memory = \"4G\"; };\n");
    char *want = NULL;
    struct spawn_result r;

    (void)state;
    r = SBX("config", "check", bad);
    assert_int_equal(r.rc, 2);
    assert_true(asprintf(&want, "%s:3: unknown key 'colour' in 'limits'", bad) > 0);
    assert_non_null(strstr(r.err, want));
    free(want);
    spawn_result_free(&r);
    r = SBX("config", "check", typ);
    assert_int_equal(r.rc, 2);
    assert_true(asprintf(&want, "%s:1: 'max_sandboxes' must be an integer", typ) > 0);
    assert_non_null(strstr(r.err, want));
    free(want);
    spawn_result_free(&r);
    r = SBX("config", "check", opt);
    assert_int_equal(r.rc, 2);
    assert_true(asprintf(&want, "%s:3: unknown option 'sockett'", opt) > 0);
    assert_non_null(strstr(r.err, want));
    free(want);
    spawn_result_free(&r);
    r = SBX("config", "check", good);
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    r = SBX("config", "check", "/nonexistent.conf");
    assert_int_equal(r.rc, 2);
    spawn_result_free(&r);
    free(bad);
    free(typ);
    free(opt);
    free(good);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_version_and_help),
        cmocka_unit_test(test_cli_plugins_json),
        cmocka_unit_test(test_cli_config_check),
    };

    return cmocka_run_group_tests_name("cli", tests, setup, teardown);
}
