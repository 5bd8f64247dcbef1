/* test_cli.c - the sbx binary's own surface: --version, --help everywhere,
 * `sbx plugins --json`, `sbx config check` exit codes. */
#include "spawn.h"
#include "test_common.h"

#include <dirent.h>
#include <jansson.h>

#include "sbx/sbx_plugin.h"

/* the header's ABI version, as sbx prints it ("1.3") */
static const char *abi_version(void)
{
    static char v[32];

    snprintf(v, sizeof(v), "%u.%u", (unsigned)SBX_PLUGIN_ABI_MAJOR, (unsigned)SBX_PLUGIN_ABI_MINOR);
    return v;
}

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
    static const char *const cmds[] = {"run",     "task",   "exec",    "image", "info",
                                       "plugins", "config", "version", NULL};
    struct spawn_result r = SBX("--version");

    (void)state;
    assert_int_equal(r.rc, 0);
    {
        char want[64];

        snprintf(want, sizeof(want), "plugin ABI %s", abi_version());
        assert_non_null(strstr(r.out, want));
    }
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
        assert_string_equal(json_string_value(json_object_get(p, "abi")), abi_version());
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

/* Every command parses with the one parser: an unknown option, and an
 * abbreviation of a real one, are refused with the same one-line error. */
static void test_cli_unknown_option(void **state)
{
    static const char *const cmds[][3] = {
        {"plugins", NULL},   {"config", "check"}, {"job", "j-1"},    {"queue", NULL},
        {"cancel", "j-1"},   {"serve", NULL},     {"mcp", NULL},     {"task", "start"},
        {"task", "end"},     {"task", "list"},    {"run", NULL},     {"exec", "t-1"},
        {"submit", NULL},    {"image", "build"},  {"info", NULL},    {"spike", NULL},
        {"policy", "check"}, {"agents", "setup"}, {"version", NULL}, {"egress", "why"},
        {NULL, NULL},
    };

    (void)state;
    for (size_t i = 0; cmds[i][0] != NULL; i++) {
        char *argv[6] = {sbx, (char *)cmds[i][0]};
        int n = 2;
        int want = strcmp(cmds[i][0], "run") == 0 || strcmp(cmds[i][0], "exec") == 0 ? 125 : 2;
        struct spawn_result r;

        if (cmds[i][1] != NULL) {
            argv[n++] = (char *)cmds[i][1];
        }
        argv[n++] = "--bogus";
        argv[n] = NULL;
        r = spawn_run(argv, NULL);
        if (r.rc != want || strstr(r.err, "unknown option '--bogus'") == NULL ||
            strstr(r.err, "--help')") == NULL) {
            fail_msg("sbx %s %s --bogus: rc %d, %s", cmds[i][0], cmds[i][1] ? cmds[i][1] : "", r.rc,
                     r.err);
        }
        spawn_result_free(&r);
    }
    /* plugins and job alike: --js is not --json */
    {
        struct spawn_result r = SBX("plugins", "--js");

        assert_int_equal(r.rc, 2);
        assert_non_null(strstr(r.err, "unknown option '--js' (did you mean --json?"));
        assert_string_equal(r.out, "");
        spawn_result_free(&r);
        r = SBX("job", "j-1", "--js");
        assert_int_equal(r.rc, 2);
        assert_non_null(strstr(r.err, "unknown option '--js' (did you mean --json?"));
        spawn_result_free(&r);
        r = SBX("--conf", "x", "plugins");
        assert_int_equal(r.rc, 2);
        assert_non_null(strstr(r.err, "did you mean --config?"));
        spawn_result_free(&r);
        r = SBX("info", "--json=yes");
        assert_int_equal(r.rc, 2);
        assert_non_null(strstr(r.err, "option '--json' takes no value"));
        spawn_result_free(&r);
        r = SBX("spike", "--runs");
        assert_int_equal(r.rc, 2);
        assert_non_null(strstr(r.err, "option '--runs' needs a value"));
        spawn_result_free(&r);
        r = SBX("job", "j-1", "j-2");
        assert_int_equal(r.rc, 2);
        assert_non_null(strstr(r.err, "unexpected argument 'j-2'"));
        spawn_result_free(&r);
    }
}

/* sbx version [--json]: the version, the git commit, the plugin ABI; --version says the same. */
static void test_cli_version_json(void **state)
{
    struct spawn_result r = SBX("version", "--json");
    struct spawn_result t;
    const char *commit;
    json_t *j;
    size_t n;

    (void)state;
    assert_int_equal(r.rc, 0);
    j = json_loads(r.out, 0, NULL);
    assert_non_null(j);
    {
        char abi[32];

        snprintf(abi, sizeof(abi), "%u.%u", SBX_PLUGIN_ABI_MAJOR, SBX_PLUGIN_ABI_MINOR);
        assert_string_equal(json_string_value(json_object_get(j, "plugin_abi")), abi);
    }
    assert_true(strlen(json_string_value(json_object_get(j, "version"))) > 0);
    commit = json_string_value(json_object_get(j, "commit"));
    assert_non_null(commit);
    n = strspn(commit, "0123456789abcdef");
    assert_true(strcmp(commit, "unknown") == 0 ||
                (n == 12 && (commit[n] == '\0' || strcmp(commit + n, "-dirty") == 0)));
    t = SBX("--version");
    assert_int_equal(t.rc, 0);
    assert_non_null(strstr(t.out, commit));
    spawn_result_free(&t);
    t = SBX("version");
    assert_non_null(strstr(t.out, commit));
    spawn_result_free(&t);
    json_decref(j);
    spawn_result_free(&r);
}

/* config check --json: the instances (what completion offers), or the error. */
static void test_cli_config_check_json(void **state)
{
    char *good = test_write_file(
        dir, "inst.conf", "providers = { ci-docker = { plugin = \"provider_docker\"; }; };\n");
    char *bad = test_write_file(dir, "bad2.conf", "limits = {\n  colour = 1;\n};\n");
    struct spawn_result r = SBX("config", "check", good, "--json");
    json_t *j;
    json_t *inst;
    size_t i;
    int found = 0;

    (void)state;
    assert_int_equal(r.rc, 0);
    j = json_loads(r.out, 0, NULL);
    assert_non_null(j);
    assert_true(json_is_true(json_object_get(j, "ok")));
    json_array_foreach(json_object_get(j, "instances"), i, inst)
    {
        if (strcmp(json_string_value(json_object_get(inst, "name")), "ci-docker") == 0) {
            assert_string_equal(json_string_value(json_object_get(inst, "kind")), "provider");
            assert_string_equal(json_string_value(json_object_get(inst, "plugin")),
                                "provider_docker");
            found = 1;
        }
    }
    assert_true(found);
    json_decref(j);
    spawn_result_free(&r);
    r = SBX("config", "check", "--json", bad);
    assert_int_equal(r.rc, 2);
    j = json_loads(r.out, 0, NULL);
    assert_non_null(j);
    assert_true(json_is_false(json_object_get(j, "ok")));
    assert_non_null(
        strstr(json_string_value(json_object_get(j, "error")), ":2: unknown key 'colour'"));
    json_decref(j);
    spawn_result_free(&r);
    free(good);
    free(bad);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cli_version_and_help), cmocka_unit_test(test_cli_plugins_json),
        cmocka_unit_test(test_cli_config_check),     cmocka_unit_test(test_cli_unknown_option),
        cmocka_unit_test(test_cli_version_json),     cmocka_unit_test(test_cli_config_check_json),
    };

    return cmocka_run_group_tests_name("cli", tests, setup, teardown);
}
