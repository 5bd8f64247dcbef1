/* test_egress_sni.c - the TLS server-name check's parser (core/src/egress/sni.c) on
 * built and broken ClientHellos, and the name match. The proxy's use of it on CONNECT
 * tunnels is test_egress_sni_proxy.c. */
#include "test_common.h"
#include "tls_hello.h"

#include "egress/sni.h"

static enum sbx_egress_sni parse(const struct buf *o, char *host)
{
    return sbx_egress_sni_parse(o->b, o->n, host, 256);
}

static void test_parse_found(void **state)
{
    struct buf o = {{0}, 0};
    char host[256];

    (void)state;
    client_hello(&o, "front.test");
    assert_int_equal(parse(&o, host), SBX_SNI_FOUND);
    assert_string_equal(host, "front.test");
    /* Every shorter prefix asks for more. */
    for (size_t n = 1; n < o.n; n++) {
        assert_int_equal(sbx_egress_sni_parse(o.b, n, host, sizeof(host)), SBX_SNI_MORE);
    }
    assert_int_equal(sbx_egress_sni_parse(o.b, 0, host, sizeof(host)), SBX_SNI_MORE);
    /* Bytes after the hello (early data, a change_cipher_spec) do not matter. */
    put(&o, "\x14\x03\x03\x00\x01\x01", 6);
    assert_int_equal(parse(&o, host), SBX_SNI_FOUND);
}

static void test_parse_fragmented(void **state)
{
    const char *names[] = {"split.example.test", NULL};
    struct buf msg = {{0}, 0};
    struct buf o = {{0}, 0};
    char host[256];

    (void)state;
    hello_msg(&msg, names, 1);
    records(&o, &msg, msg.n / SBX_EGRESS_SNI_RECORDS + 1); /* as many records as allowed */
    assert_int_equal(parse(&o, host), SBX_SNI_FOUND);
    assert_string_equal(host, "split.example.test");
    assert_int_equal(sbx_egress_sni_parse(o.b, o.n - 1, host, sizeof(host)), SBX_SNI_MORE);
    /* sbx_egress_sni_want: never less than one more byte, never past the record under
     * way; at a record's end, the next record's header */
    for (size_t n = 0; n < o.n; n++) {
        size_t want = sbx_egress_sni_want(o.b, n);

        assert_true(want > n);
        assert_true(want <= o.n);
        if (n < o.n - 1) {
            assert_int_equal(sbx_egress_sni_parse(o.b, n, host, sizeof(host)), SBX_SNI_MORE);
        }
    }
    assert_int_equal(sbx_egress_sni_want(o.b, 0), 5);
    assert_int_equal(sbx_egress_sni_want(o.b, 5), 5 + msg.n / SBX_EGRESS_SNI_RECORDS + 1);
    /* one record more than allowed: refused (a hello in tiny records costs the proxy) */
    memset(&o, 0, sizeof(o));
    records(&o, &msg, msg.n / (SBX_EGRESS_SNI_RECORDS + 1));
    assert_int_equal(parse(&o, host), SBX_SNI_MALFORMED);
}

static void test_parse_ech_and_http(void **state)
{
    const char *names[] = {"front.test", NULL};
    struct buf msg = {{0}, 0};
    struct buf o = {{0}, 0};
    char host[256];

    (void)state;
    hello_msg(&msg, names, 0xfe0d); /* encrypted_client_hello */
    records(&o, &msg, 16384);
    assert_int_equal(parse(&o, host), SBX_SNI_ECH);
    memset(&msg, 0, sizeof(msg));
    memset(&o, 0, sizeof(o));
    hello_msg(&msg, names, 0xffce); /* the older encrypted_server_name */
    records(&o, &msg, 16384);
    assert_int_equal(parse(&o, host), SBX_SNI_ECH);
    memset(&msg, 0, sizeof(msg));
    memset(&o, 0, sizeof(o));
    hello_msg(&msg, names, 0x0010); /* ALPN: harmless */
    records(&o, &msg, 16384);
    assert_int_equal(parse(&o, host), SBX_SNI_FOUND);

    assert_int_equal(sbx_egress_http_start((const unsigned char *)"GET / HTTP/1.1\r\n", 16), 1);
    assert_int_equal(sbx_egress_http_start((const unsigned char *)"PRI * HTTP/2.0", 14), 2);
    assert_int_equal(sbx_egress_http_start((const unsigned char *)"OPTIONS *", 9), 1);
    assert_int_equal(sbx_egress_http_start((const unsigned char *)"GE", 2), -1);
    assert_int_equal(sbx_egress_http_start((const unsigned char *)"OPTION", 6), -1);
    assert_int_equal(sbx_egress_http_start((const unsigned char *)"SSH-2.0-x", 9), 0);
    assert_int_equal(sbx_egress_http_start((const unsigned char *)"get / ", 6), 0);
    assert_int_equal(sbx_egress_http_start((const unsigned char *)"GETX", 4), 0);
}

static void test_parse_not_tls_or_absent(void **state)
{
    struct buf o = {{0}, 0};
    struct buf msg = {{0}, 0};
    char host[256];

    (void)state;
    assert_int_equal(
        sbx_egress_sni_parse((const unsigned char *)"GET / HTTP/1.1\r\n", 16, host, sizeof(host)),
        SBX_SNI_NOT_TLS);
    assert_int_equal(
        sbx_egress_sni_parse((const unsigned char *)"SSH-2.0-x\r\n", 11, host, sizeof(host)),
        SBX_SNI_NOT_TLS);
    assert_int_equal(
        sbx_egress_sni_parse((const unsigned char *)"\x80\x2e\x01", 3, host, sizeof(host)),
        SBX_SNI_NOT_TLS);   /* SSLv2 */
    client_hello(&o, NULL); /* extensions, none of them server_name */
    assert_int_equal(parse(&o, host), SBX_SNI_ABSENT);
    o.n = 0;
    hello_msg(&msg, NULL, 0); /* no extensions at all */
    records(&o, &msg, 16384);
    assert_int_equal(parse(&o, host), SBX_SNI_ABSENT);
}

static void expect_malformed(struct buf *o)
{
    char host[256];

    assert_int_equal(parse(o, host), SBX_SNI_MALFORMED);
}

static void test_parse_malformed(void **state)
{
    const char *two[] = {"a.test", "b.test", NULL};
    char long_name[300];
    struct buf msg;
    struct buf o;

    (void)state;
    /* a handshake that is not a ClientHello (ServerHello = 2) */
    memset(&o, 0, sizeof(o));
    client_hello(&o, "front.test");
    o.b[5] = 2;
    expect_malformed(&o);
    /* two host names */
    memset(&msg, 0, sizeof(msg));
    memset(&o, 0, sizeof(o));
    hello_msg(&msg, two, 1);
    records(&o, &msg, 16384);
    expect_malformed(&o);
    /* a name of 254 bytes */
    memset(long_name, 'a', 254);
    long_name[254] = '\0';
    memset(&o, 0, sizeof(o));
    client_hello(&o, long_name);
    expect_malformed(&o);
    /* a NUL inside the name: "evil.test\0front.test" */
    memset(&o, 0, sizeof(o));
    client_hello(&o, "evil.testXfront.test");
    *(unsigned char *)memchr(o.b, 'X', o.n) = '\0';
    expect_malformed(&o);
    /* an empty record, an oversized record, a record of another type mid-hello */
    memset(&o, 0, sizeof(o));
    put(&o, "\x16\x03\x01\x00\x00", 5);
    expect_malformed(&o);
    memset(&o, 0, sizeof(o));
    put(&o, "\x16\x03\x01\x40\x01", 5);
    expect_malformed(&o);
    memset(&msg, 0, sizeof(msg));
    memset(&o, 0, sizeof(o));
    hello_msg(&msg, two, 1);
    put8(&o, 0x16);
    put16(&o, 0x0301);
    put16(&o, 10);
    put(&o, msg.b, 10);
    put(&o, "\x17\x03\x03\x00\x01\x00", 6);
    expect_malformed(&o);
    /* the extensions' total length disagrees with the message */
    memset(&o, 0, sizeof(o));
    client_hello(&o, "front.test");
    o.b[5 + 4 + 2 + 32 + 1 + 2 + 2 + 1 + 1 + 1]++; /* low byte of the extensions length */
    expect_malformed(&o);
    /* a session id longer than 32 */
    memset(&o, 0, sizeof(o));
    client_hello(&o, "front.test");
    o.b[5 + 4 + 2 + 32] = 33;
    expect_malformed(&o);
    /* a handshake message longer than the proxy holds */
    memset(&o, 0, sizeof(o));
    put(&o, "\x16\x03\x01\x00\x04\x01\x01\x00\x00", 9);
    expect_malformed(&o);
}

static void test_matches(void **state)
{
    (void)state;
    assert_true(sbx_egress_sni_matches("front.test", "front.test"));
    assert_true(sbx_egress_sni_matches("FRONT.Test.", "front.test"));
    assert_true(sbx_egress_sni_matches("front.test", "Front.TEST."));
    assert_false(sbx_egress_sni_matches("front.test", "front.test.evil"));
    assert_false(sbx_egress_sni_matches("a.front.test", "front.test"));
    assert_false(sbx_egress_sni_matches("", ""));
    assert_false(sbx_egress_sni_matches(".", "."));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_found),        cmocka_unit_test(test_parse_fragmented),
        cmocka_unit_test(test_parse_ech_and_http), cmocka_unit_test(test_parse_not_tls_or_absent),
        cmocka_unit_test(test_parse_malformed),    cmocka_unit_test(test_matches),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
