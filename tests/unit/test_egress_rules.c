/* test_egress_rules.c - egress rule parsing and matching, host checks, and the
 * proxy's request head parser, fed every bad input we know of. */
#include "test_common.h"

#include <sys/socket.h>

#include "egress/request.h"
#include "egress/rules.h"

static struct sbx_egress_rules parse_ok(const char *const *texts)
{
    struct sbx_egress_rules r;
    sbx_error_t *err = NULL;

    if (sbx_egress_rules_parse(texts, &r, &err) < 0) {
        fail_msg("rules refused: %s", err->msg);
    }
    return r;
}

static void test_rules_bad(void **state)
{
    static const char *const bad[] = {
        "",
        "*",
        "*.",
        "**.example.com",
        "exa mple.com",
        "example..com",
        "-a.example.com",
        "a-.example.com",
        "example.com:",
        "example.com:0",
        "example.com:65536",
        "example.com:80,",
        "example.com:x",
        "example.com:80:443",
        "10.0.0.0/33",
        "10.0.0.0/",
        "10.0.0.0/x",
        "[::1",
        "[::1]x",
        "[10.0.0.1]/8",
        "[fd00::]/129",
        "fd00::/8",
        "ex\xc3\xa4mple.com",
        "1.2.3",
        "example.123",
        "a.0x7f",
        "example.com:22 opaq",
        "example.com:22  opaque",
        "example.com:22 opaque ",
        "example.com opaque opaque",
        NULL,
    };

    (void)state;
    for (size_t i = 0; bad[i] != NULL; i++) {
        const char *one[] = {bad[i], NULL};
        struct sbx_egress_rules r;
        sbx_error_t *err = NULL;

        if (sbx_egress_rules_parse(one, &r, &err) == 0) {
            fail_msg("rule '%s' was accepted", bad[i]);
        }
        assert_non_null(strstr(err->msg, "egress rule '"));
        assert_int_equal(r.n, 0);
        sbx_error_free(&err);
    }
}

static void test_rules_match_names(void **state)
{
    static const char *const texts[] = {"Example.COM.", "*.svc.test:8443", "api.test:80,443",
                                        "any.test:*", NULL};
    struct sbx_egress_rules r = parse_ok(texts);
    const struct sbx_egress_rule *m;

    (void)state;
    m = sbx_egress_rules_match_name(&r, "example.com", 443);
    assert_non_null(m);
    assert_string_equal(m->text, "Example.COM.");
    assert_non_null(sbx_egress_rules_match_name(&r, "example.com", 80));
    assert_null(sbx_egress_rules_match_name(&r, "example.com", 8080));
    assert_null(sbx_egress_rules_match_name(&r, "www.example.com", 443));
    assert_null(sbx_egress_rules_match_name(&r, "badexample.com", 443));
    /* Wildcards: subdomains at any depth, never the apex, only their port. */
    assert_non_null(sbx_egress_rules_match_name(&r, "a.svc.test", 8443));
    assert_non_null(sbx_egress_rules_match_name(&r, "a.b.svc.test", 8443));
    assert_null(sbx_egress_rules_match_name(&r, "svc.test", 8443));
    assert_null(sbx_egress_rules_match_name(&r, "xsvc.test", 8443));
    assert_null(sbx_egress_rules_match_name(&r, "a.svc.test", 443));
    assert_non_null(sbx_egress_rules_match_name(&r, "any.test", 1));
    assert_non_null(sbx_egress_rules_match_name(&r, "any.test", 65535));
    /* Names never match CIDR rules and addresses never match name rules. */
    {
        struct sbx_egress_addr a;

        assert_true(sbx_egress_addr_parse("93.184.216.34", &a));
        assert_null(sbx_egress_rules_match_addr(&r, &a, 443));
    }
    sbx_egress_rules_free(&r);
}

static void test_rules_match_cidr(void **state)
{
    static const char *const texts[] = {"10.0.0.0/8:5432", "192.0.2.7", "[fd00::]/8:*",
                                        "[::ffff:172.16.0.0]/108", NULL};
    struct sbx_egress_rules r = parse_ok(texts);
    struct sbx_egress_addr a;

    (void)state;
    assert_true(sbx_egress_addr_parse("10.1.2.3", &a));
    assert_non_null(sbx_egress_rules_match_addr(&r, &a, 5432));
    assert_null(sbx_egress_rules_match_addr(&r, &a, 443));
    assert_true(sbx_egress_addr_parse("11.1.2.3", &a));
    assert_null(sbx_egress_rules_match_addr(&r, &a, 5432));
    assert_true(sbx_egress_addr_parse("192.0.2.7", &a));
    assert_non_null(sbx_egress_rules_match_addr(&r, &a, 443));
    assert_true(sbx_egress_addr_parse("192.0.2.8", &a));
    assert_null(sbx_egress_rules_match_addr(&r, &a, 443));
    assert_true(sbx_egress_addr_parse("fd12::1", &a));
    assert_non_null(sbx_egress_rules_match_addr(&r, &a, 9));
    assert_true(sbx_egress_addr_parse("fe80::1", &a));
    assert_null(sbx_egress_rules_match_addr(&r, &a, 443));
    /* IPv4-mapped IPv6 is IPv4, for rules and for addresses. */
    assert_true(sbx_egress_addr_parse("::ffff:10.9.9.9", &a));
    assert_int_equal(a.family, AF_INET);
    assert_non_null(sbx_egress_rules_match_addr(&r, &a, 5432));
    assert_true(sbx_egress_addr_parse("172.31.0.1", &a));
    assert_non_null(sbx_egress_rules_match_addr(&r, &a, 80));
    sbx_egress_rules_free(&r);
}

static void test_addr_public(void **state)
{
    static const char *const private[] = {
        "127.0.0.1",
        "10.0.0.1",
        "172.16.5.4",
        "192.168.1.1",
        "169.254.169.254",
        "0.0.0.0",
        "100.64.0.1",
        "224.0.0.1",
        "255.255.255.255",
        "::1",
        "::",
        "fe80::1",
        "fd00::1",
        "::ffff:127.0.0.1",
        "64:ff9b::7f00:1",
        "2002:7f00:1::",
        NULL,
    };
    static const char *const public[] = {"93.184.216.34", "8.8.8.8", "2606:4700::1111", NULL};
    struct sbx_egress_addr a;

    (void)state;
    for (size_t i = 0; private[i] != NULL; i++) {
        assert_true(sbx_egress_addr_parse(private[i], &a));
        if (sbx_egress_addr_is_public(&a)) {
            fail_msg("%s counted as public", private[i]);
        }
    }
    for (size_t i = 0; public[i] != NULL; i++) {
        assert_true(sbx_egress_addr_parse(public[i], &a));
        assert_true(sbx_egress_addr_is_public(&a));
    }
}

static void test_host_normalize(void **state)
{
    char out[SBX_EGRESS_HOST_MAX + 1];
    char longname[300];
    char label[70];

    (void)state;
    assert_null(sbx_egress_host_normalize("API.Example.COM.", 16, out));
    assert_string_equal(out, "api.example.com");
    assert_null(sbx_egress_host_normalize("a_b.test", 8, out));
    assert_string_equal(sbx_egress_host_normalize("", 0, out), "host-empty");
    assert_string_equal(sbx_egress_host_normalize(".", 1, out), "host-empty");
    assert_string_equal(sbx_egress_host_normalize("a..b", 4, out), "host-malformed");
    assert_string_equal(sbx_egress_host_normalize(".a", 2, out), "host-malformed");
    assert_string_equal(sbx_egress_host_normalize("a.b..", 5, out), "host-malformed");
    assert_string_equal(sbx_egress_host_normalize("a b", 3, out), "host-malformed");
    assert_string_equal(sbx_egress_host_normalize("a\x01", 2, out), "host-malformed");
    assert_string_equal(sbx_egress_host_normalize("\xc3\xa4.test", 7, out), "host-malformed");
    assert_string_equal(sbx_egress_host_normalize("-a.test", 7, out), "host-malformed");
    assert_string_equal(sbx_egress_host_normalize("a-.test", 7, out), "host-malformed");
    assert_string_equal(sbx_egress_host_normalize("127.1", 5, out), "host-numeric");
    assert_string_equal(sbx_egress_host_normalize("2130706433", 10, out), "host-numeric");
    assert_string_equal(sbx_egress_host_normalize("0x7f.0x1", 8, out), "host-numeric");
    memset(label, 'a', 64);
    label[64] = '\0';
    assert_string_equal(sbx_egress_host_normalize(label, 64, out), "host-malformed");
    for (size_t i = 0; i < sizeof(longname) - 1; i++) {
        longname[i] = i % 10 == 9 ? '.' : 'a';
    }
    longname[sizeof(longname) - 1] = '\0';
    assert_string_equal(sbx_egress_host_normalize(longname, 254, out), "host-too-long");
}

/* Parses a complete head; returns the status (0 when accepted). */
static int parse(const char *head, struct sbx_egress_request *r, const char **reason)
{
    int status = 0;
    long end = sbx_egress_head_end(head, strlen(head));

    *reason = NULL;
    if (end <= 0) {
        fail_msg("head not complete or malformed (%ld): %s", end, head);
    }
    if (sbx_egress_request_parse(head, (size_t)end, r, &status, reason) < 0) {
        assert_non_null(*reason);
        return status;
    }
    return 0;
}

static void test_request_connect(void **state)
{
    struct sbx_egress_request r;
    const char *reason;

    (void)state;
    assert_int_equal(parse("CONNECT API.test.:443 HTTP/1.1\r\nHost: api.test:443\r\n"
                           "User-Agent: x\r\n\r\n",
                           &r, &reason),
                     0);
    assert_true(r.connect);
    assert_string_equal(r.host, "api.test");
    assert_int_equal(r.port, 443);
    assert_false(r.host_is_ip);
    sbx_egress_request_clear(&r);

    assert_int_equal(parse("CONNECT [2001:db8::1]:443 HTTP/1.1\r\n\r\n", &r, &reason), 0);
    assert_true(r.host_is_ip);
    assert_string_equal(r.host, "2001:db8::1");
    sbx_egress_request_clear(&r);

    assert_int_equal(parse("CONNECT 10.0.0.1:22 HTTP/1.0\r\n\r\n", &r, &reason), 0);
    assert_true(r.host_is_ip);
    assert_int_equal(r.port, 22);
    sbx_egress_request_clear(&r);
}

static void test_request_absolute(void **state)
{
    struct sbx_egress_request r;
    const char *reason;

    (void)state;
    assert_int_equal(parse("GET http://Api.Test:8080/a/b?c=d HTTP/1.1\r\nHost: api.test:8080"
                           "\r\nProxy-Connection: keep-alive\r\nProxy-Authorization: x\r\n"
                           "Accept: */*\r\n\r\n",
                           &r, &reason),
                     0);
    assert_false(r.connect);
    assert_string_equal(r.host, "api.test");
    assert_int_equal(r.port, 8080);
    assert_string_equal(r.forward, "GET /a/b?c=d HTTP/1.1\r\nHost: api.test:8080\r\n"
                                   "Accept: */*\r\nConnection: close\r\n\r\n");
    sbx_egress_request_clear(&r);

    assert_int_equal(parse("POST http://api.test HTTP/1.0\r\n\r\n", &r, &reason), 0);
    assert_int_equal(r.port, 80);
    assert_string_equal(r.forward, "POST / HTTP/1.0\r\nHost: api.test:80\r\n"
                                   "Connection: close\r\n\r\n");
    sbx_egress_request_clear(&r);
}

static void test_request_bad(void **state)
{
    static const struct {
        const char *head;
        int status;
        const char *reason;
    } bad[] = {
        {"GET\r\n\r\n", 400, "bad-request-line"},
        {"CONNECT api.test:443\r\n\r\n", 400, "bad-request-line"},
        {"CONNECT  api.test:443 HTTP/1.1\r\n\r\n", 400, "bad-request-line"},
        {"CONNECT api.test:443  HTTP/1.1\r\n\r\n", 400, "bad-request-line"},
        {"CONNECT api.test:443 HTTP/2.0\r\n\r\n", 400, "bad-request-line"},
        {"CONNECT api.test:443 HTTP/1.1 x\r\n\r\n", 400, "bad-request-line"},
        {"CON(NECT api.test:443 HTTP/1.1\r\n\r\n", 400, "bad-request-line"},
        {"AVERYVERYVERYLONGMETHODNAME api.test:443 HTTP/1.1\r\n\r\n", 400, "bad-request-line"},
        {" CONNECT api.test:443 HTTP/1.1\r\n\r\n", 400, "bad-request-line"},
        {"CONNECT api.test HTTP/1.1\r\n\r\n", 400, "bad-port"},
        {"CONNECT api.test: HTTP/1.1\r\n\r\n", 400, "bad-port"},
        {"CONNECT api.test:0 HTTP/1.1\r\n\r\n", 400, "bad-port"},
        {"CONNECT api.test:65536 HTTP/1.1\r\n\r\n", 400, "bad-port"},
        {"CONNECT api.test:+443 HTTP/1.1\r\n\r\n", 400, "bad-port"},
        {"CONNECT api.test:443:1 HTTP/1.1\r\n\r\n", 400, "bad-port"},
        {"CONNECT :443 HTTP/1.1\r\n\r\n", 400, "host-empty"},
        {"CONNECT user@api.test:443 HTTP/1.1\r\n\r\n", 400, "bad-target"},
        {"CONNECT api%2etest:443 HTTP/1.1\r\n\r\n", 400, "bad-target"},
        {"CONNECT a..test:443 HTTP/1.1\r\n\r\n", 400, "host-malformed"},
        {"CONNECT a_b$.test:443 HTTP/1.1\r\n\r\n", 400, "host-malformed"},
        {"CONNECT 127.1:443 HTTP/1.1\r\n\r\n", 400, "host-numeric"},
        {"CONNECT 2130706433:443 HTTP/1.1\r\n\r\n", 400, "host-numeric"},
        {"CONNECT [::1:443 HTTP/1.1\r\n\r\n", 400, "host-malformed"},
        {"CONNECT [10.0.0.1]:443 HTTP/1.1\r\n\r\n", 400, "host-malformed"},
        {"CONNECT [fe80::1%eth0]:443 HTTP/1.1\r\n\r\n", 400, "bad-target"},
        {"CONNECT \x80.test:443 HTTP/1.1\r\n\r\n", 400, "bad-target"},
        {"GET /index.html HTTP/1.1\r\nHost: api.test\r\n\r\n", 400, "not-a-proxy-request"},
        {"GET https://api.test/ HTTP/1.1\r\n\r\n", 400, "use-connect-for-https"},
        {"GET ftp://api.test/ HTTP/1.1\r\n\r\n", 400, "not-a-proxy-request"},
        {"GET http:///x HTTP/1.1\r\n\r\n", 400, "bad-target"},
        {"CONNECT api.test:443 HTTP/1.1\r\nHost: other.test:443\r\n\r\n", 403, "host-mismatch"},
        {"CONNECT api.test:443 HTTP/1.1\r\nHost: api.test:444\r\n\r\n", 403, "host-mismatch"},
        {"CONNECT 10.0.0.1:443 HTTP/1.1\r\nHost: api.test:443\r\n\r\n", 403, "host-mismatch"},
        {"GET http://api.test/ HTTP/1.1\r\nHost: evil.test\r\n\r\n", 403, "host-mismatch"},
        {"GET http://api.test/ HTTP/1.1\r\nHost: api.test\r\nHost: api.test\r\n\r\n", 400,
         "duplicate-host"},
        {"GET http://api.test/ HTTP/1.1\r\nHost: \r\n\r\n", 400, "bad-target"},
        {"GET http://api.test/ HTTP/1.1\r\nHost: a..b\r\n\r\n", 400, "host-malformed"},
        {"GET http://api.test/ HTTP/1.1\r\nX: a\r\n folded\r\n\r\n", 400, "bad-header"},
        {"GET http://api.test/ HTTP/1.1\r\nNo colon\r\n\r\n", 400, "bad-header"},
        {"GET http://api.test/ HTTP/1.1\r\n: empty\r\n\r\n", 400, "bad-header"},
        {"GET http://api.test/ HTTP/1.1\r\nBad Name: x\r\n\r\n", 400, "bad-header"},
        {"GET http://api.test/ HTTP/1.1\r\nHost : api.test\r\n\r\n", 400, "bad-header"},
    };
    struct sbx_egress_request r;
    const char *reason;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        int st = parse(bad[i].head, &r, &reason);

        if (st != bad[i].status || strcmp(reason, bad[i].reason) != 0) {
            fail_msg("'%s': got %d %s, wanted %d %s", bad[i].head, st, reason ? reason : "-",
                     bad[i].status, bad[i].reason);
        }
        assert_null(r.forward);
    }
}

static void test_request_long(void **state)
{
    struct sbx_egress_request r;
    const char *reason;
    char head[SBX_EGRESS_HEAD_MAX];
    int n;

    (void)state;
    /* A host name longer than 253 bytes. */
    n = snprintf(head, sizeof(head), "CONNECT ");
    for (int i = 0; i < 300; i++) {
        head[n++] = i % 20 == 19 ? '.' : 'a';
    }
    snprintf(head + n, sizeof(head) - (size_t)n, ".test:443 HTTP/1.1\r\n\r\n");
    assert_int_equal(parse(head, &r, &reason), 400);
    assert_string_equal(reason, "host-too-long");

    /* More headers than allowed. */
    n = snprintf(head, sizeof(head), "CONNECT api.test:443 HTTP/1.1\r\n");
    for (int i = 0; i <= SBX_EGRESS_HEADERS_MAX; i++) {
        n += snprintf(head + n, sizeof(head) - (size_t)n, "X-%d: y\r\n", i);
    }
    snprintf(head + n, sizeof(head) - (size_t)n, "\r\n");
    assert_int_equal(parse(head, &r, &reason), 431);
    assert_string_equal(reason, "too-many-headers");
}

static void test_head_end(void **state)
{
    static const char ok[] = "CONNECT a.test:443 HTTP/1.1\r\n\r\nTLS";

    (void)state;
    assert_int_equal(sbx_egress_head_end(ok, strlen(ok)), strlen(ok) - 3);
    assert_int_equal(sbx_egress_head_end("CONNECT a.test:443 HTTP/1.1\r\n", 29), 0);
    assert_int_equal(sbx_egress_head_end("CONNECT a.test:443 HTTP/1.1\r", 28), 0);
    assert_int_equal(sbx_egress_head_end("", 0), 0);
    assert_int_equal(sbx_egress_head_end("CONNECT a.test:443 HTTP/1.1\n\n", 29), -1);
    assert_int_equal(sbx_egress_head_end("CONNECT a.test:443 HTTP/1.1\r\nX: \n\r\n", 35), -1);
    assert_int_equal(sbx_egress_head_end("CONNECT a\0.test:443 HTTP/1.1\r\n\r\n", 32), -1);
    assert_int_equal(sbx_egress_head_end("CONNECT a.test:443\rX HTTP/1.1\r\n\r\n", 33), -1);
    assert_int_equal(sbx_egress_head_end("CONNECT a.test:443 HTTP/1.1\r\nX: \x1b\r\n\r\n", 37), -1);
    assert_int_equal(sbx_egress_head_end("\r\n\r\n", 4), -1);
}

/* A head scanned as it arrives, in pieces of every size: the same answer as scanning it
 * whole (a CR or LF on a piece's edge included), each byte looked at a bounded number
 * of times. */
static void test_head_scan_pieces(void **state)
{
    static const char *const heads[] = {
        "GET http://a.test/ HTTP/1.1\r\nX: 1\r\n\r\nBODY",
        "CONNECT a.test:443 HTTP/1.1\r\n\r\n",
        "CONNECT a.test:443 HTTP/1.1\n\n",
        "GET http://a.test/ HTTP/1.1\r\nX: \n\r\n",
        "GET http://a.test/ HTTP/1.1\rX\r\n\r\n",
        "GET http://a.test/ HTTP/1.1\r\nX: \x1b\r\n\r\n",
        "\r\n\r\n",
        "GET http://a.test/ HTTP/1.1\r\nX: 1\r\n",
        NULL,
    };

    (void)state;
    for (size_t h = 0; heads[h] != NULL; h++) {
        size_t len = strlen(heads[h]);
        long whole = sbx_egress_head_end(heads[h], len);

        for (size_t piece = 1; piece <= len; piece++) {
            size_t scanned = 0;
            long got = 0;
            size_t have = 0;

            while (got == 0 && have < len) {
                have = have + piece < len ? have + piece : len;
                got = sbx_egress_head_scan(heads[h], have, &scanned);
                if (got == 0) {
                    assert_int_equal(scanned, have);
                }
            }
            if (got != whole) {
                fail_msg("head %zu in pieces of %zu: %ld, whole: %ld", h, piece, got, whole);
            }
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rules_bad),        cmocka_unit_test(test_rules_match_names),
        cmocka_unit_test(test_rules_match_cidr), cmocka_unit_test(test_addr_public),
        cmocka_unit_test(test_host_normalize),   cmocka_unit_test(test_request_connect),
        cmocka_unit_test(test_request_absolute), cmocka_unit_test(test_request_bad),
        cmocka_unit_test(test_request_long),     cmocka_unit_test(test_head_end),
        cmocka_unit_test(test_head_scan_pieces),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
