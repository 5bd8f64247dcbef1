/* test_egress_why.c - a refusal's text (deny.c): every reason reads differently, none
 * carries a CR or LF, a host the client sent is never copied unless valid; and
 * `sbx egress why` explains allow and deny from a rules file, a task's allow-list and
 * a pool's policy, with its exit codes. */
#include "test_common.h"
#include "test_proc.h"

#include <stdlib.h>
#include <string.h>

#include "egress/deny.h"

static const char *const reasons[] = {
    "not-allowed",    "ip-literal",       "private-address",       "resolve-failed",
    "connect-failed", "log-unavailable",  "budget-buffer",         "budget-connections",
    "host-mismatch",  "chunked-body",     "use-connect-for-https", "not-a-proxy-request",
    "header-timeout", "header-too-large", "malformed-head",        "host-numeric",
    "no-such-reason",
};

static void test_texts_distinct(void **state)
{
    size_t n = sizeof(reasons) / sizeof(reasons[0]);
    char texts[sizeof(reasons) / sizeof(reasons[0])][SBX_EGRESS_DENY_TEXT_MAX];

    (void)state;
    for (size_t i = 0; i < n; i++) {
        size_t len = sbx_egress_deny_text(reasons[i], "registry.example", 443, 0, texts[i],
                                          sizeof(texts[i]));

        assert_int_equal(len, strlen(texts[i]));
        assert_null(strpbrk(texts[i], "\r\n"));
        assert_non_null(strstr(texts[i], reasons[i])); /* the code itself is in the text */
        for (size_t j = 0; j < i; j++) {
            assert_string_not_equal(texts[i], texts[j]);
        }
    }
    assert_string_equal(texts[0], "sbx egress not-allowed: registry.example:443 is not in this "
                                  "task's egress allow-list (ask for egress.allow "
                                  "\"registry.example\")");
    assert_non_null(strstr(texts[2], "resolves only to private addresses"));
    /* a port that is not 80/443 is part of the rule to ask for; an address is a CIDR */
    sbx_egress_deny_text("not-allowed", "a.test", 8443, 0, texts[0], sizeof(texts[0]));
    assert_non_null(strstr(texts[0], "egress.allow \"a.test:8443\""));
    sbx_egress_deny_text("ip-literal", "fd00::1", 443, 1, texts[0], sizeof(texts[0]));
    assert_non_null(strstr(texts[0], "[fd00::1]:443"));
    assert_non_null(strstr(texts[0], "\"[fd00::1]/128\""));
    /* nothing but a valid host is copied: no CR/LF/quote from a client */
    sbx_egress_deny_text("not-allowed", "evil\r\nX-Injected: 1", 80, 0, texts[0], sizeof(texts[0]));
    assert_null(strpbrk(texts[0], "\r\n"));
    assert_null(strstr(texts[0], "evil"));
}

/* egress.private_allow addresses: IPs and CIDRs, v4 and v6; bad ones are refused. */
static void test_private_match(void **state)
{
    struct sbx_egress_addr a;

    (void)state;
    assert_true(sbx_egress_private_addr_ok("10.1.2.3"));
    assert_true(sbx_egress_private_addr_ok("10.1.0.0/16"));
    assert_true(sbx_egress_private_addr_ok("fd00::/8"));
    assert_false(sbx_egress_private_addr_ok("10.1.0.0/33"));
    assert_false(sbx_egress_private_addr_ok("mirror.test"));
    assert_false(sbx_egress_private_addr_ok("[fd00::]/8"));
    assert_false(sbx_egress_private_addr_ok(""));
    assert_true(sbx_egress_addr_parse("10.1.200.7", &a));
    assert_true(sbx_egress_private_match("10.1.0.0/16", &a));
    assert_false(sbx_egress_private_match("10.2.0.0/16", &a));
    assert_false(sbx_egress_private_match("10.1.200.8", &a));
    assert_true(sbx_egress_addr_parse("fd12::5", &a));
    assert_true(sbx_egress_private_match("fd00::/8", &a));
}

static char *sbx_cmd(const char *dir, const char *args, int *st)
{
    char *cmd = xasprintf_test("%s/sbx --config %s/sbx.conf egress %s 2>&1",
                               getenv("SBX_BUILD_DIR"), dir, args);
    char *out = test_run(cmd, st);

    free(cmd);
    return out;
}

static void test_why(void **state)
{
    char *dir = test_mkdtemp();
    char *conf = xasprintf_test(
        "state_dir = \"%s/state\";\negress = { log = \"%s/e.log\"; system_dns = false;\n"
        "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; } ); };\n",
        dir, dir);
    char *args;
    char *out;
    int st;

    (void)state;
    free(test_write_file(dir, "sbx.conf", conf));
    free(test_write_file(dir, "rules",
                         "allowed.test:8080\n*.wild.test\n10.0.0.0/8:5432\n"
                         "git.test:22 opaque\n"));
    args = xasprintf_test("why allowed.test:8080 --policy %s/rules", dir);
    out = sbx_cmd(dir, args, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "allowed.test:8080: allow by rule \"allowed.test:8080\""));
    assert_non_null(strstr(out, "address: 127.0.0.1 (egress.hosts; private, trusted)"));
    free(out);
    free(args);

    args = xasprintf_test("why registry.example --policy %s/rules", dir);
    out = sbx_cmd(dir, args, &st);
    assert_int_equal(st, 1);
    assert_non_null(strstr(out, "registry.example:443: deny (not-allowed)"));
    assert_non_null(strstr(out, "ask for egress.allow \"registry.example\""));
    free(out);
    free(args);

    args = xasprintf_test("why git.test:22 --json --policy %s/rules", dir);
    out = sbx_cmd(dir, args, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "\"opaque\": true"));
    assert_non_null(strstr(out, "\"rule\": \"git.test:22 opaque\""));
    free(out);
    free(args);

    args = xasprintf_test("why 10.1.2.3:5432 --policy %s/rules", dir);
    out = sbx_cmd(dir, args, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "private, allowed by the rule"));
    free(out);
    free(args);

    /* a task's allow-list, as the task's start wrote it */
    args = xasprintf_test("mkdir -p %s/state/tasks/t1", dir);
    free(test_run(args, &st));
    free(args);
    free(test_write_file(dir, "state/tasks/t1/egress.rules", "allowed.test:8080\n"));
    out = sbx_cmd(dir, "why allowed.test:8081 --task t1", &st);
    assert_int_equal(st, 1);
    assert_non_null(strstr(out, "ask for egress.allow \"allowed.test:8081\""));
    free(out);

    /* the shipped policy for a pool */
    out = sbx_cmd(dir, "why github.com --pool ci", &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "egress.lua (pool ci)"));
    free(out);

    /* usage and configuration errors: 2, one line */
    out = sbx_cmd(dir, "why x.test --task nope", &st);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "task 'nope' has no allow-list"));
    free(out);
    out = sbx_cmd(dir, "why x.test --task ../etc", &st);
    assert_int_equal(st, 2);
    free(out);
    out = sbx_cmd(dir, "why fd00::1 --pool ci", &st);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "want HOST[:PORT] or [IPV6][:PORT]"));
    free(out);
    out = sbx_cmd(dir, "why", &st);
    assert_int_equal(st, 2);
    free(out);
    out = sbx_cmd(dir, "why a.test --pool big", &st);
    assert_int_equal(st, 2);
    free(out);
    /* egress.private_allow in the config: why shows it; bad entries are FILE:LINE */
    free(conf);
    conf = xasprintf_test("state_dir = \"%s/state\";\negress = { log = \"%s/e.log\";\n"
                          "  private_allow = ( { name = \"mirror.test\"; addresses = "
                          "[\"10.1.2.3\", \"10.1.0.0/16\"]; } ); };\n",
                          dir, dir);
    free(test_write_file(dir, "sbx.conf", conf));
    free(test_write_file(dir, "rules2", "mirror.test\n"));
    args = xasprintf_test("why mirror.test --policy %s/rules2", dir);
    out = sbx_cmd(dir, args, &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "address: 10.1.2.3 (egress.private_allow; private, trusted)"));
    assert_non_null(strstr(out, "address: 10.1.0.0/16 (egress.private_allow; private, trusted)"));
    free(out);
    free(conf);
    conf = xasprintf_test("egress = {\n  log = \"%s/e.log\";\n"
                          "  private_allow = ( { name = \"mirror.test\";\n"
                          "    addresses = [\"10.1.2.3\", \"mirror.other\"]; } ); };\n",
                          dir);
    free(test_write_file(dir, "sbx.conf", conf));
    out = sbx_cmd(dir, args, &st);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "sbx.conf:4: 'egress.private_allow' 'mirror.test': address "
                                "'mirror.other' is not an IP address or CIDR"));
    free(out);
    free(conf);
    conf = xasprintf_test("egress = {\n  log = \"%s/e.log\";\n"
                          "  private_allow = ( { name = \"10.0.0.1\"; addresses = [\"10.0.0.1\"]; "
                          "} ); };\n",
                          dir);
    free(test_write_file(dir, "sbx.conf", conf));
    out = sbx_cmd(dir, args, &st);
    assert_int_equal(st, 2);
    assert_non_null(strstr(out, "sbx.conf:3: 'egress.private_allow' name '10.0.0.1'"));
    free(out);
    free(args);
    out = sbx_cmd(dir, "--help", &st);
    assert_int_equal(st, 0);
    assert_non_null(strstr(out, "Exit status: 0 allowed, 1 denied, 2"));
    free(out);
    test_rm_rf(dir);
    free(dir);
    free(conf);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_texts_distinct),
        cmocka_unit_test(test_why),
        cmocka_unit_test(test_private_match),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
