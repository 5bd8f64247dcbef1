/* test_policy.c - the policy API on the shipped policies: ADR decisions,
 * clamping by config caps, host rules, JSON in and out, the test harness. */
#include "test_common.h"

#include <jansson.h>
#include <sys/wait.h>

#include "config/config.h"
#include "policy/convert.h"
#include "policy/policy.h"

static char *policies;

static int setup(void **state)
{
    const char *src = getenv("SBX_SOURCE_DIR");

    (void)state;
    assert_non_null(src);
    assert_true(asprintf(&policies, "%s/policies", src) > 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(policies);
    return 0;
}

static struct sbx_config *config_from(const char *text)
{
    char *dir = test_mkdtemp();
    char *path = test_write_file(dir, "sbx.conf", text);
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);

    if (c == NULL) {
        fail_msg("%s", err->msg);
    }
    test_rm_rf(dir);
    free(path);
    free(dir);
    return c;
}

static void decide_argv(struct sbx_policy *p, const char *pool, const char *const *argv,
                        struct sbx_policy_decision *d)
{
    struct sbx_job_desc job = {.id = "j", .task = "t", .pool = pool, .argv = argv};
    sbx_error_t *err = NULL;

    if (sbx_policy_decide(p, &job, d, &err) < 0) {
        fail_msg("%s", err->msg);
    }
}

/* Done-when of issue 4: `encore test` in CI is heavy with the ADR limits,
 * `npm ci` is light. */
static void test_encore_heavy_npm_light(void **state)
{
    static const char *const encore[] = {"encore", "test", NULL};
    static const char *const npm[] = {"npm", "ci", NULL};
    struct sbx_config *c = sbx_config_defaults();
    sbx_error_t *err = NULL;
    struct sbx_policy *p = sbx_policy_load(policies, c, &err);
    struct sbx_policy_decision d;

    (void)state;
    assert_non_null(p);
    decide_argv(p, "ci", encore, &d);
    assert_string_equal(d.slot_class, "heavy");
    assert_true(d.limits.cpus == 2.0);
    assert_int_equal(d.limits.memory, 8LL << 30);
    assert_int_equal(d.limits.disk, 40LL << 30);
    assert_int_equal(d.limits.idle, 3600);
    assert_int_equal(d.limits.max, 8 * 3600);
    assert_int_equal(d.limits.pids, 4096);
    assert_int_equal(d.clamped, 0);
    assert_string_equal(d.decided_by[SBX_POLICY_LIMITS], "policies/limits.lua");
    assert_string_equal(d.decided_by[SBX_POLICY_EGRESS], "policies/egress.lua");
    assert_string_equal(d.decided_by[SBX_POLICY_SLOTS], "policies/slots.lua");
    assert_true(sbx_policy_egress_allows(d.egress_allow, "github.com", 443));
    assert_false(sbx_policy_egress_allows(d.egress_allow, "example.com", 443));
    assert_null(d.egress_allow[d.n_egress_allow]);
    sbx_policy_decision_fini(&d);

    decide_argv(p, "ci", npm, &d);
    assert_string_equal(d.slot_class, "light");
    sbx_policy_decision_fini(&d);
    sbx_policy_destroy(p);
    sbx_config_destroy(c);
}

/* Config caps below the ADR win, and say so; pool caps apply to their pool. */
static void test_clamped_by_config(void **state)
{
    static const char *const argv[] = {"encore", "test", NULL};
    struct sbx_config *c =
        config_from("limits = { cpus = 1.5; memory = \"4G\"; disk = \"10G\"; idle = \"30m\"; };\n"
                    "pools = { agent = { memory = \"2G\"; }; };\n");
    sbx_error_t *err = NULL;
    struct sbx_policy *p = sbx_policy_load(policies, c, &err);
    struct sbx_policy_decision d;

    (void)state;
    assert_non_null(p);
    decide_argv(p, "ci", argv, &d);
    assert_true(d.limits.cpus == 1.5);
    assert_int_equal(d.limits.memory, 4LL << 30);
    assert_int_equal(d.limits.disk, 10LL << 30);
    assert_int_equal(d.limits.idle, 1800);
    assert_int_equal(d.limits.max, 8 * 3600);
    assert_int_equal(d.clamped,
                     SBX_CLAMP_CPUS | SBX_CLAMP_MEMORY | SBX_CLAMP_DISK | SBX_CLAMP_IDLE);
    sbx_policy_decision_fini(&d);
    decide_argv(p, "agent", argv, &d);
    assert_int_equal(d.limits.memory, 2LL << 30);
    sbx_policy_decision_fini(&d);
    sbx_policy_destroy(p);
    sbx_config_destroy(c);
}

static void test_registries_from_config(void **state)
{
    static const char *const argv[] = {"npm", "ci", NULL};
    struct sbx_config *c = config_from(
        "egress = { registries = [\"https://Registry.Example.Test/\", \"img.example.test:5000\"];"
        " };\n");
    struct sbx_config *bad = config_from("egress = { registries = [\"http://10.0.0.1/\"]; };\n");
    sbx_error_t *err = NULL;
    struct sbx_policy *p = sbx_policy_load(policies, c, &err);
    struct sbx_policy_decision d;

    (void)state;
    assert_non_null(p);
    decide_argv(p, "ci", argv, &d);
    assert_true(sbx_policy_egress_allows(d.egress_allow, "registry.example.test", 443));
    assert_true(sbx_policy_egress_allows(d.egress_allow, "img.example.test", 5000));
    assert_false(sbx_policy_egress_allows(d.egress_allow, "img.example.test", 443));
    sbx_policy_decision_fini(&d);
    sbx_policy_destroy(p);

    assert_null(sbx_policy_load(policies, bad, &err));
    assert_int_equal(err->code, SBX_E_CONFIG);
    assert_non_null(strstr(err->msg, "egress.registries"));
    assert_non_null(strstr(err->msg, "IP literals"));
    sbx_error_free(&err);
    sbx_config_destroy(bad);
    sbx_config_destroy(c);
}

static void test_bad_jobs(void **state)
{
    struct sbx_config *c = sbx_config_defaults();
    sbx_error_t *err = NULL;
    struct sbx_policy *p = sbx_policy_load(policies, c, &err);
    struct sbx_job_desc job = {.pool = "batch"};
    struct sbx_policy_decision d;

    (void)state;
    assert_int_equal(sbx_policy_decide(p, &job, &d, &err), -1);
    assert_non_null(strstr(err->msg, "pool must be \"ci\" or \"agent\""));
    sbx_error_free(&err);
    job.pool = NULL;
    assert_int_equal(sbx_policy_decide(p, &job, &d, &err), -1);
    sbx_error_free(&err);
    sbx_policy_destroy(p);
    sbx_config_destroy(c);
}

static void test_load_errors(void **state)
{
    struct sbx_config *c = sbx_config_defaults();
    char *dir = test_mkdtemp();
    sbx_error_t *err = NULL;
    char *f;

    (void)state;
    assert_null(sbx_policy_load(dir, c, &err));
    assert_non_null(strstr(err->msg, "policies/limits.lua: cannot open"));
    sbx_error_free(&err);
    f = test_write_file(dir, "limits.lua", "return {}\n");
    free(f);
    f = test_write_file(dir, "egress.lua", "return {}\n");
    free(f);
    assert_null(sbx_policy_load(dir, c, &err));
    assert_non_null(strstr(err->msg, "policies/slots.lua: cannot open"));
    sbx_error_free(&err);
    test_rm_rf(dir);
    free(dir);
    sbx_config_destroy(c);
}

static void expect_rule(const char *spec, const char *want)
{
    char why[160] = "";
    char *got = sbx_policy_rule_canon(spec, strlen(spec), NULL, 0, why, sizeof(why));

    if (want == NULL) {
        if (got != NULL) {
            fail_msg("'%s' accepted as '%s'", spec, got);
        }
        assert_true(why[0] != '\0');
        return;
    }
    if (got == NULL) {
        fail_msg("'%s' refused: %s", spec, why);
    }
    assert_string_equal(got, want);
    free(got);
}

static void test_host_rules(void **state)
{
    char *const rules[] = {"example.com:80,443", "*.example.org:443", NULL};

    (void)state;
    expect_rule("Example.COM.", "example.com:80,443");
    expect_rule("*.example.org", "*.example.org:80,443");
    expect_rule("api.example.com:8443,443", "api.example.com:8443,443");
    expect_rule("xn--bcher-kva.example", "xn--bcher-kva.example:80,443");
    expect_rule("*", NULL);
    expect_rule("*.com", NULL);
    expect_rule("a.*.example.com", NULL);
    expect_rule("localhost", NULL);
    expect_rule("10.0.0.1", NULL);
    expect_rule("-bad.example.com", NULL);
    expect_rule("example.com:0", NULL);
    expect_rule("example.com:65536", NULL);
    expect_rule("example.com:", NULL);
    expect_rule("exa mple.com", NULL);
    expect_rule("", NULL);

    assert_true(sbx_policy_egress_allows(rules, "example.com", 80));
    assert_true(sbx_policy_egress_allows(rules, "EXAMPLE.com.", 443));
    assert_false(sbx_policy_egress_allows(rules, "example.com", 22));
    assert_false(sbx_policy_egress_allows(rules, "www.example.com", 443));
    assert_true(sbx_policy_egress_allows(rules, "a.b.example.org", 443));
    assert_false(sbx_policy_egress_allows(rules, "a.example.org", 80));
    assert_false(sbx_policy_egress_allows(rules, "example.org", 443));
    assert_false(sbx_policy_egress_allows(rules, "badexample.org", 443));
    assert_false(sbx_policy_egress_allows(NULL, "example.com", 443));
}

static void test_job_json(void **state)
{
    static const char good[] =
        "{\"id\": \"j1\", \"task\": \"t1\", \"pool\": \"ci\", \"argv\": [\"encore\", \"test\"],"
        " \"workdir\": \"/workspace\", \"repository\": \"org/repo\", \"provider\": \"docker\","
        " \"labels\": {\"sbx.class\": \"light\"}, \"requested\": {\"cpus\": 1, \"memory\": \"2G\","
        " \"idle\": \"10m\", \"pids\": 100}}";
    static const char *const bad[] = {
        "[]",
        "{\"pool\": \"ci\", \"argv\": \"encore test\"}",
        "{\"pool\": \"ci\", \"argv\": [1]}",
        "{\"pool\": \"ci\", \"labels\": {\"a\": 1}}",
        "{\"pool\": \"ci\", \"requested\": {\"memory\": -1}}",
        "{\"pool\": \"ci\", \"requested\": {\"memory\": \"8GB\"}}",
        "{\"pool\": \"ci\", \"requested\": {\"gpus\": 1}}",
        "{\"pool\": \"ci\", \"extra\": true}",
        "{\"argv\": []}",
    };
    struct sbx_config *c = sbx_config_defaults();
    sbx_error_t *err = NULL;
    json_t *j = json_loads(good, 0, NULL);
    struct sbx_job_desc *job = sbx_policy_job_from_json(j, &err);
    struct sbx_policy *p = sbx_policy_load(policies, c, &err);
    struct sbx_policy_decision d;
    json_t *out;
    char *text;

    (void)state;
    assert_non_null(job);
    assert_string_equal(job->argv[1], "test");
    assert_null(job->argv[2]);
    assert_int_equal(job->requested.memory, 2LL << 30);
    assert_int_equal(job->requested.idle, 600);
    assert_int_equal(sbx_policy_decide(p, job, &d, &err), 0);
    assert_string_equal(d.slot_class, "light"); /* the label overrides */
    assert_true(d.limits.cpus == 1.0);
    assert_int_equal(d.limits.pids, 100);
    out = sbx_policy_decision_to_json(&d);
    text = json_dumps(out, JSON_SORT_KEYS | JSON_COMPACT);
    assert_non_null(strstr(text, "\"slot\":{\"class\":\"light\",\"decided_by\":"
                                 "\"policies/slots.lua\",\"reason\":\"label sbx.class\"}"));
    assert_non_null(strstr(text, "\"memory\":2147483648"));
    assert_non_null(strstr(text, "\"allow\":[\"github.com:80,443\""));
    free(text);
    json_decref(out);
    sbx_policy_decision_fini(&d);
    sbx_policy_job_free(job);
    json_decref(j);

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        j = json_loads(bad[i], 0, NULL);
        assert_non_null(j);
        job = sbx_policy_job_from_json(j, &err);
        if (job != NULL) {
            fail_msg("accepted %s", bad[i]);
        }
        assert_true(strncmp(err->msg, "job: ", 5) == 0);
        sbx_error_free(&err);
        json_decref(j);
    }
    sbx_policy_destroy(p);
    sbx_config_destroy(c);
}

static void test_dir_resolve(void **state)
{
    char *dir = test_mkdtemp();
    sbx_error_t *err = NULL;
    char *got;

    (void)state;
    got = sbx_policy_dir_resolve(dir, &err);
    assert_string_equal(got, dir);
    free(got);
    setenv("SBX_POLICY_DIR", dir, 1);
    got = sbx_policy_dir_resolve(NULL, &err);
    assert_string_equal(got, dir);
    free(got);
    unsetenv("SBX_POLICY_DIR");
    assert_null(sbx_policy_dir_resolve("/nonexistent/sbx-policies", &err));
    assert_int_equal(err->code, SBX_E_CONFIG);
    sbx_error_free(&err);
    test_rm_rf(dir);
    free(dir);
}

struct failures {
    int n;
    char last[512];
};

static void on_failure(void *userdata, const char *file, const char *test, const char *message)
{
    struct failures *f = userdata;

    f->n++;
    snprintf(f->last, sizeof(f->last), "%s: %s: %s", file, test, message);
}

/* `sbx policy test` on the shipped policies passes; a failing test fails. */
static void test_harness(void **state)
{
    struct sbx_config *c = sbx_config_defaults();
    struct failures f = {0};
    sbx_error_t *err = NULL;
    char *dir = test_mkdtemp();
    int passed;
    int failed;
    char *path;

    (void)state;
    assert_int_equal(sbx_policy_test_dir(policies, c, on_failure, &f, &passed, &failed, &err), 0);
    if (failed != 0) {
        fail_msg("%d failed, last: %s", failed, f.last);
    }
    assert_true(passed >= 25);

    for (int i = 0; i < 3; i++) {
        static const char *const parts[] = {"limits.lua", "egress.lua", "slots.lua"};
        char *src = NULL;
        FILE *in;
        char buf[16384];
        size_t n;

        assert_true(asprintf(&src, "%s/%s", policies, parts[i]) > 0);
        in = fopen(src, "r");
        assert_non_null(in);
        n = fread(buf, 1, sizeof(buf) - 1, in);
        buf[n] = '\0';
        fclose(in);
        path = test_write_file(dir, parts[i], buf);
        free(path);
        free(src);
    }
    path = test_write_file(dir, "x_test.lua",
                           "test('passes', function() ok(true) end)\n"
                           "test('fails', function()\n"
                           "  eq(decide({pool = 'ci', argv = {'npm', 'ci'}}).slot, 'heavy')\n"
                           "end)\n"
                           "test('loops', function() while true do end end)\n"
                           "test('denied', function() denied({pool = 'ci'}) end)\n");
    free(path);
    assert_int_equal(sbx_policy_test_dir(dir, c, on_failure, &f, &passed, &failed, &err), 0);
    assert_int_equal(passed, 1);
    assert_int_equal(failed, 3);
    assert_non_null(strstr(f.last, "expected the job to be denied"));
    test_rm_rf(dir);
    free(dir);
    sbx_config_destroy(c);
}

/* Runs `sbx ARGS` from the build tree; returns its exit status and stdout. */
static int run_sbx(const char *args, char *out, size_t len)
{
    const char *build = getenv("SBX_BUILD_DIR");
    char *cmd = NULL;
    FILE *p;
    size_t n;
    int st;

    assert_non_null(build);
    assert_true(asprintf(&cmd, "SBX_CONFIG=/dev/null '%s/sbx' %s", build, args) > 0);
    p = popen(cmd, "r");
    assert_non_null(p);
    n = fread(out, 1, len - 1, p);
    out[n] = '\0';
    st = pclose(p);
    free(cmd);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* The CLI: eval prints heavy for `encore test` in CI and light for `npm ci`;
 * test passes on the shipped policies; a denial exits 1. */
static void test_cli(void **state)
{
    char *dir = test_mkdtemp();
    char *encore = test_write_file(dir, "encore.json",
                                   "{\"id\": \"j1\", \"pool\": \"ci\", \"argv\": [\"encore\", "
                                   "\"test\"]}");
    char *npm = test_write_file(dir, "npm.json", "{\"pool\": \"ci\", \"argv\": [\"npm\", \"ci\"]}");
    char *bad =
        test_write_file(dir, "bad.json", "{\"pool\": \"ci\", \"labels\": {\"sbx.class\": \"x\"}}");
    char out[16384];
    char *args = NULL;

    (void)state;
    assert_true(asprintf(&args, "policy eval --dir '%s' --job '%s'", policies, encore) > 0);
    assert_int_equal(run_sbx(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"class\": \"heavy\""));
    assert_non_null(strstr(out, "\"memory\": 8589934592"));
    assert_non_null(strstr(out, "\"decided_by\": \"policies/slots.lua\""));
    free(args);
    assert_true(asprintf(&args, "policy eval --dir '%s' --job '%s'", policies, npm) > 0);
    assert_int_equal(run_sbx(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, "\"class\": \"light\""));
    free(args);
    assert_true(
        asprintf(&args, "policy eval --dir '%s' --job '%s' --json 2>/dev/null", policies, bad) > 0);
    assert_int_equal(run_sbx(args, out, sizeof(out)), 1);
    assert_non_null(strstr(out, "policies/slots.lua:"));
    free(args);
    assert_true(asprintf(&args, "policy test '%s'", policies) > 0);
    assert_int_equal(run_sbx(args, out, sizeof(out)), 0);
    assert_non_null(strstr(out, " passed, 0 failed"));
    free(args);
    assert_int_equal(run_sbx("policy eval --job /nonexistent.json 2>/dev/null", out, sizeof(out)),
                     2);
    free(encore);
    free(npm);
    free(bad);
    test_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_encore_heavy_npm_light),
        cmocka_unit_test(test_clamped_by_config),
        cmocka_unit_test(test_registries_from_config),
        cmocka_unit_test(test_bad_jobs),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_host_rules),
        cmocka_unit_test(test_job_json),
        cmocka_unit_test(test_dir_resolve),
        cmocka_unit_test(test_harness),
        cmocka_unit_test(test_cli),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
