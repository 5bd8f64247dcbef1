/* test_egress_change.c - (added, issue 30) egress.lua's change(task, request, who): the
 * shipped policy's rules (narrowing, ci-fixed, no-runtime-wildcards, agent-adds-hosts),
 * the default without change(), and a change() that fails or answers badly refuses the
 * change (fail closed) with one line naming policies/egress.lua. */
#include "test_common.h"

#include <jansson.h>

#include "config/config.h"
#include "policy/policy.h"

static char *shipped;

static int setup(void **state)
{
    (void)state;
    assert_non_null(getenv("SBX_SOURCE_DIR"));
    assert_true(asprintf(&shipped, "%s/policies", getenv("SBX_SOURCE_DIR")) > 0);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    free(shipped);
    return 0;
}

static const int ports[] = {443};

static int ask(const char *dir, const char *pool, const char *op, const char *host,
               struct sbx_egress_verdict *v, sbx_error_t **err)
{
    struct sbx_config *cfg = sbx_config_defaults();
    struct sbx_policy *p = sbx_policy_load(dir, cfg, err);
    const char *const cur[] = {"github.com:80,443", NULL};
    char rule[128];
    struct sbx_job_desc job = {.id = "j", .task = "t", .pool = pool, .provider = "docker"};
    struct sbx_egress_change req = {.op = op,
                                    .rule = rule,
                                    .host = host,
                                    .ports = ports,
                                    .n_ports = 1,
                                    .current = cur,
                                    .client = "local",
                                    .via = "cli"};
    int r;

    snprintf(rule, sizeof(rule), "%s:443", host);
    if (p == NULL) {
        sbx_config_destroy(cfg);
        return -1;
    }
    r = sbx_policy_egress_change(p, &job, &req, v, err);
    sbx_policy_destroy(p);
    sbx_config_destroy(cfg);
    return r;
}

static void test_shipped_rules(void **state)
{
    struct sbx_egress_verdict v;
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(ask(shipped, "agent", "allow", "x.example.test", &v, &err), 0);
    assert_true(v.allow);
    assert_string_equal(v.rule, "agent-adds-hosts");
    assert_string_equal(v.where, "policies/egress.lua");
    assert_int_equal(ask(shipped, "ci", "allow", "x.example.test", &v, &err), 0);
    assert_false(v.allow);
    assert_string_equal(v.rule, "ci-fixed");
    assert_int_equal(ask(shipped, "agent", "allow", "*.example.test", &v, &err), 0);
    assert_false(v.allow);
    assert_string_equal(v.rule, "no-runtime-wildcards");
    assert_int_equal(ask(shipped, "ci", "deny", "github.com", &v, &err), 0);
    assert_true(v.allow);
    assert_string_equal(v.rule, "narrowing");
}

/* A policy dir whose egress.lua ends with BODY (limits.lua and slots.lua shipped). */
static char *dir_with(const char *body)
{
    char *dir = test_mkdtemp();
    char *text = NULL;
    const char *names[] = {"limits.lua", "slots.lua"};

    for (size_t i = 0; i < 2; i++) {
        char *src = NULL;
        char *data;
        size_t len = 0;
        FILE *f;

        assert_true(asprintf(&src, "%s/%s", shipped, names[i]) > 0);
        f = fopen(src, "r");
        assert_non_null(f);
        data = calloc(1, 1 << 16);
        len = fread(data, 1, (1 << 16) - 1, f);
        fclose(f);
        data[len] = '\0';
        free(test_write_file(dir, names[i], data));
        free(data);
        free(src);
    }
    assert_true(asprintf(&text, "%s\nreturn { allow = { \"github.com\" } }\n", body) > 0);
    free(test_write_file(dir, "egress.lua", text));
    free(text);
    return dir;
}

static void test_default_and_fail_closed(void **state)
{
    static const struct {
        const char *body;
        const char *msg; /* NULL: a verdict */
    } cases[] = {
        {"", NULL},
        {"function change(t, r, w) error('boom') end", "boom"},
        {"function change(t, r, w) return 7 end", "must return"},
        {"function change(t, r, w) return { allow = true } end", "'rule' must be a string"},
        {"function change(t, r, w) return { allow = 1, rule = 'x' } end", "must be a boolean"},
        {"function change(t, r, w) return { allow = true, rule = 'x', y = 1 } end",
         "unknown key 'y'"},
        {"function change(t, r, w) while true do end end", "policies/egress.lua"},
        {"function change(t, r, w) t.pool = 'ci' end", "policies/egress.lua"},
        {"change = 5", "'change' must be a function"},
    };
    struct sbx_egress_verdict v;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *dir = dir_with(cases[i].body);
        sbx_error_t *err = NULL;
        int r = ask(dir, "agent", "allow", "x.example.test", &v, &err);

        if (cases[i].msg == NULL) {
            assert_int_equal(r, 0);
            assert_false(v.allow);
            assert_string_equal(v.rule, "default");
            assert_int_equal(ask(dir, "agent", "deny", "github.com", &v, &err), 0);
            assert_true(v.allow);
        }
        else {
            if (r != -1 || err == NULL || strstr(err->msg, cases[i].msg) == NULL ||
                strchr(err->msg, '\n') != NULL) {
                fail_msg("case %zu: r %d: %s", i, r, err ? err->msg : "(no error)");
            }
            sbx_error_free(&err);
        }
        test_rm_rf(dir);
        free(dir);
    }
}

/* The tables change() sees: the task's rules, the request, who asks. */
static void test_change_sees_task_request_who(void **state)
{
    char *dir = dir_with(
        "function change(t, r, w)\n"
        "  local ok = t.id == 't' and t.pool == 'agent' and t.allow[1] == 'github.com:80,443'\n"
        "    and r.op == 'allow' and r.host == 'x.example.test' and r.rule == "
        "'x.example.test:443'\n"
        "    and r.ports[1] == 443 and w.client == 'local' and w.via == 'cli'\n"
        "  return { allow = ok, rule = 'seen', reason = ok and 'all there' or 'missing' }\n"
        "end");
    struct sbx_egress_verdict v;
    sbx_error_t *err = NULL;

    (void)state;
    if (ask(dir, "agent", "allow", "x.example.test", &v, &err) < 0) {
        fail_msg("%s", err->msg);
    }
    assert_true(v.allow);
    assert_string_equal(v.reason, "all there");
    test_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shipped_rules),
        cmocka_unit_test(test_default_and_fail_closed),
        cmocka_unit_test(test_change_sees_task_request_who),
    };

    return cmocka_run_group_tests_name("egress_change", tests, setup, teardown);
}
