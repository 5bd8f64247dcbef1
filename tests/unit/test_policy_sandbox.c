/* test_policy_sandbox.c - every escape and abuse in tests/lua/ is denied with
 * "policies/NAME.lua:LINE: message", within the caps.
 *
 * Each fixture tests/lua/NAME.lua starts with two comment lines:
 *   -- part: limits|egress|slots    (which script the fixture replaces)
 *   -- expect: FRAGMENT[|FRAGMENT]  (the denial must contain one of them,
 *                                    after the "policies/PART.lua" prefix)
 * The other two scripts are the shipped ones.
 */
#include "test_common.h"

#include <dirent.h>

#include "config/config.h"
#include "egress/rules.h"
#include "policy/policy.h"
#include "policy/policy_internal.h"
#include "policy/sandbox.h"

static char *dir;
static struct sbx_config *cfg;

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    long n;

    if (f == NULL) {
        fail_msg("cannot open %s", path);
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = calloc(1, (size_t)n + 1);
    assert_int_equal(fread(buf, 1, (size_t)n, f), (size_t)n);
    fclose(f);
    return buf;
}

static char *source_path(const char *rel)
{
    const char *src = getenv("SBX_SOURCE_DIR");
    char *p = NULL;

    assert_non_null(src);
    assert_true(asprintf(&p, "%s/%s", src, rel) > 0);
    return p;
}

/* DIR gets the shipped scripts, then PART.lua replaced by TEXT. */
static void setup_policies(const char *part, const char *text, size_t len)
{
    static const char *const parts[] = {"limits", "egress", "slots"};

    for (int i = 0; i < 3; i++) {
        char *rel = NULL;
        char *src;
        char *name = NULL;
        char *path;
        FILE *f;

        assert_true(asprintf(&rel, "policies/%s.lua", parts[i]) > 0);
        assert_true(asprintf(&name, "%s.lua", parts[i]) > 0);
        src = source_path(rel);
        if (strcmp(parts[i], part) == 0) {
            path = NULL;
            assert_true(asprintf(&path, "%s/%s", dir, name) > 0);
            f = fopen(path, "w");
            assert_non_null(f);
            assert_int_equal(fwrite(text, 1, len, f), len);
            fclose(f);
        }
        else {
            char *body = slurp(src);

            path = test_write_file(dir, name, body);
            free(body);
        }
        free(path);
        free(src);
        free(rel);
        free(name);
    }
}

/* Loads DIR and decides a CI job; returns the denial (caller frees) or NULL. */
static char *deny_message(void)
{
    static const char *const argv[] = {"encore", "test", NULL};
    static const struct sbx_kv labels[] = {{"team", "core"}};
    struct sbx_job_desc job = {
        .id = "j1", .task = "t1", .pool = "ci", .argv = argv, .labels = labels, .n_labels = 1};
    struct sbx_policy_decision d;
    sbx_error_t *err = NULL;
    struct sbx_policy *p = sbx_policy_load(dir, cfg, &err);
    char *msg;

    if (p != NULL && sbx_policy_decide(p, &job, &d, &err) == 0) {
        sbx_policy_decision_fini(&d);
        sbx_policy_destroy(p);
        return NULL;
    }
    sbx_policy_destroy(p);
    assert_non_null(err);
    msg = strdup(err->msg);
    sbx_error_free(&err);
    return msg;
}

static int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    cfg = sbx_config_defaults();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    sbx_config_destroy(cfg);
    return 0;
}

static int is_lua(const struct dirent *d)
{
    size_t n = strlen(d->d_name);

    return n > 4 && strcmp(d->d_name + n - 4, ".lua") == 0;
}

static int header(const char *text, const char *key, char *out, size_t len)
{
    const char *p = strstr(text, key);
    size_t n;

    if (p == NULL) {
        return -1;
    }
    p += strlen(key);
    n = strcspn(p, "\n");
    if (n >= len) {
        return -1;
    }
    memcpy(out, p, n);
    out[n] = '\0';
    return 0;
}

/* The policy's wall-clock cap in these tests (main), and the product's own. */
#define TEST_TIMEOUT_MS 10000
static int64_t product_timeout_ms;

static int matches_one(const char *msg, char *expect)
{
    for (char *alt = strtok(expect, "|"); alt != NULL; alt = strtok(NULL, "|")) {
        if (strstr(msg, alt) != NULL) {
            return 1;
        }
    }
    return 0;
}

static void test_fixtures(void **state)
{
    char *fixtures = source_path("tests/lua");
    struct dirent **list = NULL;
    int n = scandir(fixtures, &list, is_lua, alphasort);

    (void)state;
    assert_true(n >= 40);
    for (int i = 0; i < n; i++) {
        char *path = NULL;
        char *text;
        char part[32];
        char expect[256];
        char prefix[64];
        char *msg;

        assert_true(asprintf(&path, "%s/%s", fixtures, list[i]->d_name) > 0);
        text = slurp(path);
        if (header(text, "-- part: ", part, sizeof(part)) < 0 ||
            header(text, "-- expect: ", expect, sizeof(expect)) < 0) {
            fail_msg("%s: needs '-- part:' and '-- expect:' lines", list[i]->d_name);
        }
        setup_policies(part, text, strlen(text));
        /* a fixture that the wall clock may stop ("limit reached" alone: a
         * slow C loop; "... time limit reached": a memory bomb the clock may
         * stop first) runs under the product's own cap; the others under the
         * raised one, so that only their own cap can stop them */
        sbx_policy_caps.timeout_ms =
            strcmp(expect, "limit reached") == 0 || strstr(expect, "time limit reached") != NULL
                ? product_timeout_ms
                : TEST_TIMEOUT_MS;
        msg = deny_message();
        if (msg == NULL) {
            fail_msg("%s: the job was allowed", list[i]->d_name);
        }
        snprintf(prefix, sizeof(prefix), "policies/%s.lua", part);
        if (strncmp(msg, prefix, strlen(prefix)) != 0 || msg[strlen(prefix)] != ':' ||
            strchr(msg, '\n') != NULL || !matches_one(msg, expect)) {
            fail_msg("%s: got '%s', wanted '%s' and '%s'", list[i]->d_name, msg, prefix, expect);
        }
        free(msg);
        free(text);
        free(path);
        free(list[i]);
    }
    free(list);
    free(fixtures);
}

static void test_binary_chunk(void **state)
{
    static const char bin[] = "\x1bLua\x54\x00\x19\x93\r\n\x1a\n\x04\x08\x08xV";
    char *msg;

    (void)state;
    setup_policies("limits", bin, sizeof(bin) - 1);
    msg = deny_message();
    assert_non_null(msg);
    if (strstr(msg, "policies/limits.lua:") != msg || strstr(msg, "binary chunk") == NULL) {
        fail_msg("got '%s'", msg);
    }
    free(msg);
}

/* Nothing written in one evaluation is seen by the next. */
static void test_fresh_environment(void **state)
{
    static const char text[] = "local ok = pcall(function() return seen_before end)\n"
                               "if ok then error(\"state persisted between evaluations\") end\n"
                               "seen_before = true\n"
                               "return {}\n";
    static const char *const argv[] = {"npm", "ci", NULL};
    struct sbx_job_desc job = {.pool = "ci", .argv = argv};
    struct sbx_policy_decision d;
    sbx_error_t *err = NULL;
    struct sbx_policy *p;

    (void)state;
    setup_policies("limits", text, sizeof(text) - 1);
    p = sbx_policy_load(dir, cfg, &err);
    assert_non_null(p);
    for (int i = 0; i < 3; i++) {
        if (sbx_policy_decide(p, &job, &d, &err) < 0) {
            fail_msg("evaluation %d: %s", i, err->msg);
        }
        sbx_policy_decision_fini(&d);
    }
    sbx_policy_destroy(p);
}

/* A failed evaluation (loop or memory bomb) leaves the state usable, and a
 * denial never leaks a partial decision. */
static void test_recovers_after_kill(void **state)
{
    static const char text[] = "if job.labels.loop == \"yes\" then while true do end end\n"
                               "if job.labels.bomb == \"yes\" then\n"
                               "  local t, s = {}, (\"x\"):rep(1000)\n"
                               "  for i = 1, 1e9 do t[i] = s .. i end\n"
                               "end\n"
                               "return {}\n";
    static const struct sbx_kv loop[] = {{"loop", "yes"}};
    static const struct sbx_kv bomb[] = {{"bomb", "yes"}};
    static const char *const argv[] = {"encore", "test", NULL};
    struct sbx_job_desc bad = {.pool = "ci", .labels = loop, .n_labels = 1};
    struct sbx_job_desc bombed = {.pool = "ci", .labels = bomb, .n_labels = 1};
    struct sbx_job_desc good = {.pool = "ci", .argv = argv};
    struct sbx_policy_decision d;
    sbx_error_t *err = NULL;
    struct sbx_policy *p;

    (void)state;
    setup_policies("limits", text, sizeof(text) - 1);
    p = sbx_policy_load(dir, cfg, &err);
    assert_non_null(p);
    for (int round = 0; round < 2; round++) {
        assert_int_equal(sbx_policy_decide(p, &bad, &d, &err), -1);
        assert_int_equal(err->code, SBX_E_TIMEOUT);
        assert_non_null(strstr(err->msg, "policies/limits.lua:1: instruction limit reached"));
        assert_null(d.egress_allow);
        assert_null(d.slot_class);
        sbx_error_free(&err);
        assert_int_equal(sbx_policy_decide(p, &bombed, &d, &err), -1);
        if (strstr(err->msg, "policies/limits.lua:4: memory limit reached") == NULL &&
            strstr(err->msg, "policies/limits.lua:4: time limit reached") == NULL) {
            fail_msg("got '%s'", err->msg);
        }
        sbx_error_free(&err);
        assert_int_equal(sbx_policy_decide(p, &good, &d, &err), 0);
        assert_string_equal(d.slot_class, "heavy");
        sbx_policy_decision_fini(&d);
    }
    sbx_policy_destroy(p);
}

static void test_pattern_cost(void **state)
{
    (void)state;
    /* Plain and anchored patterns are cheap; stacked quantifiers are not. */
    assert_true(sbx_lua_pattern_cost("abc", 3, 1000) < 1e5);
    assert_true(sbx_lua_pattern_cost("%S+", 3, 100000) < 1e6);
    assert_true(sbx_lua_pattern_cost("^(.-)=(.*)$", 11, 200) < SBX_LUA_PATTERN_MAX_COST);
    assert_true(sbx_lua_pattern_cost("a*a*a*a*b", 9, 40) > SBX_LUA_PATTERN_MAX_COST);
    assert_true(sbx_lua_pattern_cost("[%]*]*x", 7, 10) < SBX_LUA_PATTERN_MAX_COST);
}

/* {host=..., ports=..., opaque=true} comes out as "host:ports opaque", which the
 * egress rules and the policy's own matching both read; opaque = false adds nothing. */
static void test_opaque_rule(void **state)
{
    static const char text[] =
        "return { allow = { { host = \"Git.Example.com\", ports = { 22 }, opaque = true },\n"
        "                   { host = \"example.org\", opaque = false } } }\n";
    static const char *const argv[] = {"git", "fetch", NULL};
    struct sbx_job_desc job = {.id = "j1", .task = "t1", .pool = "ci", .argv = argv};
    struct sbx_policy_decision d;
    sbx_error_t *err = NULL;
    struct sbx_policy *p;
    struct sbx_egress_rules rules;

    (void)state;
    setup_policies("egress", text, sizeof(text) - 1);
    p = sbx_policy_load(dir, cfg, &err);
    assert_non_null(p);
    assert_int_equal(sbx_policy_decide(p, &job, &d, &err), 0);
    assert_int_equal(d.n_egress_allow, 2);
    assert_string_equal(d.egress_allow[0], "git.example.com:22 opaque");
    assert_string_equal(d.egress_allow[1], "example.org:80,443");
    assert_true(sbx_policy_egress_allows(d.egress_allow, "git.example.com", 22));
    assert_false(sbx_policy_egress_allows(d.egress_allow, "git.example.com", 443));
    assert_int_equal(sbx_egress_rules_parse((const char *const *)d.egress_allow, &rules, &err), 0);
    assert_int_equal(rules.v[0].opaque, 1);
    assert_int_equal(rules.v[1].opaque, 0);
    assert_non_null(sbx_egress_rules_match_opaque(&rules, "git.example.com", NULL, 22));
    assert_null(sbx_egress_rules_match_opaque(&rules, "example.org", NULL, 443));
    sbx_egress_rules_free(&rules);
    sbx_policy_decision_fini(&d);
    sbx_policy_destroy(p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fixtures, setup, teardown),
        cmocka_unit_test_setup_teardown(test_opaque_rule, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_chunk, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh_environment, setup, teardown),
        cmocka_unit_test_setup_teardown(test_recovers_after_kill, setup, teardown),
        cmocka_unit_test(test_pattern_cost),
    };

    /* the wall-clock cap (100 ms) raised: under ASan on a loaded machine a
     * million VM instructions or one costly pattern took longer than that, and
     * the fixtures check which cap stops each script (the instruction, memory
     * and pattern caps do not depend on the machine's load) */
    product_timeout_ms = sbx_policy_caps.timeout_ms;
    sbx_policy_caps.timeout_ms = TEST_TIMEOUT_MS;
    return cmocka_run_group_tests(tests, NULL, NULL);
}
