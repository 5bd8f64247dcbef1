/* test_cli.c - the sbx binary's own surface: --version, --help everywhere,
 * `sbx plugins --json`, `sbx config check` exit codes. */
#include "spawn.h"
#include "test_common.h"

#include <dirent.h>
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
    static const char *const cmds[] = {"run",  "task",    "exec",   "image",
                                       "info", "plugins", "config", NULL};
    struct spawn_result r = SBX("--version");

    (void)state;
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "plugin ABI 1.1"));
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

static int cmp_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The plugins the build wrote (the .so files in $SBX_PLUGIN_DIR), sorted: what `sbx plugins`
 * must list, whatever plugins the tree holds. */
static size_t built_plugins(char **names, size_t max)
{
    DIR *d = opendir(getenv("SBX_PLUGIN_DIR"));
    struct dirent *e;
    size_t n = 0;

    assert_non_null(d);
    while ((e = readdir(d)) != NULL && n < max) {
        size_t len = strlen(e->d_name);

        if (len > 3 && strcmp(e->d_name + len - 3, ".so") == 0) {
            names[n++] = strndup(e->d_name, len - 3);
        }
    }
    closedir(d);
    qsort(names, n, sizeof(char *), cmp_name);
    return n;
}

static const char *state_of(json_t *arr, const char *name)
{
    size_t i;
    json_t *p;

    json_array_foreach(arr, i, p)
    {
        if (strcmp(json_string_value(json_object_get(p, "name")), name) == 0) {
            return json_string_value(json_object_get(p, "state"));
        }
    }
    return "absent";
}

static void test_cli_plugins_json(void **state)
{
    char *want[64];
    size_t n = built_plugins(want, 64);
    struct spawn_result r = SBX("plugins", "--json");
    json_t *arr;

    (void)state;
    assert_true(n >= 1);
    assert_int_equal(r.rc, 0);
    arr = json_loads(r.out, 0, NULL);
    assert_int_equal(json_array_size(arr), n);
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_array_get(arr, i);
        const char *st = json_string_value(json_object_get(p, "state"));

        assert_string_equal(json_string_value(json_object_get(p, "name")), want[i]);
        assert_string_equal(json_string_value(json_object_get(p, "kind")),
                            strncmp(want[i], "cred_", 5) == 0 ? "credential" : "provider");
        assert_string_equal(json_string_value(json_object_get(p, "abi")), "1.1");
        assert_true(strcmp(st, "ready") == 0 || strcmp(st, "stub") == 0 ||
                    strcmp(st, "deferred") == 0);
        if (strcmp(st, "ready") != 0) {
            assert_non_null(json_string_value(json_object_get(p, "reason")));
        }
        free(want[i]);
    }
    /* the states the docs promise, for the plugins this build has */
    assert_true(strcmp(state_of(arr, "cred_agentvault"), "deferred") == 0 ||
                strcmp(state_of(arr, "cred_agentvault"), "absent") == 0);
    assert_true(strcmp(state_of(arr, "provider_daytona"), "stub") == 0 ||
                strcmp(state_of(arr, "provider_daytona"), "absent") == 0);
    assert_true(strcmp(state_of(arr, "provider_e2b"), "deferred") == 0 ||
                strcmp(state_of(arr, "provider_e2b"), "absent") == 0);
    assert_true(strcmp(state_of(arr, "provider_docker"), "ready") == 0 ||
                strcmp(state_of(arr, "provider_docker"), "absent") == 0);
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
