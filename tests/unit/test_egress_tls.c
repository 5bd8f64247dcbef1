/* test_egress_tls.c - following a tunnel's TLS record layer after its first ClientHello
 * (core/src/egress/tls_record.c) with crafted records: the smuggling cases of issue 25
 * (a second ClientHello, an HTTP request, an SSH banner, data before the server's
 * reply, a record of no known type) are refused with their reason; TLS 1.3 (the
 * compatibility change_cipher_spec, a HelloRetryRequest and its second hello) and TLS
 * 1.2 (plaintext handshake messages, then an encrypted Finished) pass; records split
 * across reads, a byte at a time on both sides. The proxy around it is
 * test_egress_sni_proxy.c. */
#include "test_common.h"
#include "tls_hello.h"

#include "egress/tls_record.h"

/* A record of `type` around n payload bytes. */
static void record(struct buf *o, int type, const void *p, size_t n)
{
    put8(o, (unsigned)type);
    put16(o, 0x0303);
    put16(o, (unsigned)n);
    put(o, p, n);
}

/* A ServerHello record; hrr: a HelloRetryRequest (its special random). */
static void server_hello(struct buf *o, int hrr)
{
    static const unsigned char magic[32] = {0xcf, 0x21, 0xad, 0x74, 0xe5, 0x9a, 0x61, 0x11,
                                            0xbe, 0x1d, 0x8c, 0x02, 0x1e, 0x65, 0xb8, 0x91,
                                            0xc2, 0xa2, 0x11, 0x16, 0x7a, 0xbb, 0x8c, 0x5e,
                                            0x07, 0x9e, 0x09, 0xe2, 0xc8, 0xa8, 0x33, 0x9c};
    struct buf m = {{0}, 0};
    unsigned char random[32];

    memset(random, 0x11, sizeof(random));
    put8(&m, 2);
    put8(&m, 0);
    put16(&m, 40);
    put16(&m, 0x0303);
    put(&m, hrr ? magic : random, 32);
    put8(&m, 0);       /* session id */
    put16(&m, 0x1301); /* cipher */
    put8(&m, 0);       /* compression */
    put16(&m, 0);      /* extensions */
    record(o, 22, m.b, m.n);
}

static void ccs(struct buf *o)
{
    record(o, 20, "\x01", 1);
}

static void data(struct buf *o, size_t n)
{
    unsigned char b[64];

    memset(b, 0xab, sizeof(b));
    assert_true(n <= sizeof(b));
    record(o, 23, b, n);
}

/* Feeds the client's bytes as the proxy does: what was not forwarded stays buffered
 * and more is appended, `step` bytes per read (0: all at once). Returns the verdict
 * once it is not MORE or the bytes are all in; *fwd is what went on. */
static enum sbx_tls_verdict client(struct sbx_tls_follow *t, const struct buf *o, size_t step,
                                   size_t *fwd, const char **reason)
{
    size_t buffered = 0; /* o->b[*fwd .. *fwd + buffered) */
    enum sbx_tls_verdict v = SBX_TLS_MORE;

    *fwd = 0;
    *reason = NULL;
    while (*fwd + buffered < o->n) {
        size_t add = step == 0 ? o->n - *fwd - buffered : step;
        size_t used = 0;
        size_t need = 0;

        if (add > o->n - *fwd - buffered) {
            add = o->n - *fwd - buffered;
        }
        buffered += add;
        v = sbx_tls_follow_client(t, o->b + *fwd, buffered, &used, &need, reason);
        assert_true(used <= buffered);
        *fwd += used;
        buffered -= used;
        if (v != SBX_TLS_MORE) {
            return v;
        }
        assert_true(need > buffered);                        /* it waits for more */
        assert_true(need <= 5 + SBX_TLS_RECORD_MAX + 20480); /* bounded */
    }
    return v;
}

static void server(struct sbx_tls_follow *t, const struct buf *o, size_t step)
{
    for (size_t off = 0; off < o->n; off += step) {
        sbx_tls_follow_server(t, o->b + off, o->n - off < step ? o->n - off : step);
    }
}

/* After the hello, before the server's reply: what is refused, and why. */
static void test_smuggling_refused(void **state)
{
    static const size_t steps[] = {0, 1, 7};
    struct {
        const char *what;
        const char *reason;
    } cases[] = {
        {"second hello, another name", "tls-second-hello"},
        {"second hello, the same name", "tls-second-hello"},
        {"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", "tls-record-type"},
        {"SSH-2.0-OpenSSH_9.6\r\n", "tls-record-type"},
        {"data before the server", "tls-data-before-server"},
        {"ccs, then data", "tls-data-before-server"},
        {"another handshake message", "tls-handshake"},
        {"record type 24 (heartbeat)", "tls-record-type"},
        {"record version 2", "tls-record-version"},
        {"empty record", "tls-record-length"},
        {"oversized record", "tls-record-length"},
    };

    (void)state;
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
            struct sbx_tls_follow t;
            struct buf o = {{0}, 0};
            size_t fwd = 0;
            const char *reason = NULL;
            enum sbx_tls_verdict v;

            sbx_tls_follow_init(&t, "front.test");
            switch (i) {
            case 0:
                client_hello(&o, "other.test");
                break;
            case 1:
                client_hello(&o, "front.test");
                break;
            case 2:
            case 3:
                put(&o, cases[i].what, strlen(cases[i].what));
                break;
            case 4:
                data(&o, 20);
                break;
            case 5:
                ccs(&o);
                data(&o, 20);
                break;
            case 6:
                record(&o, 22, "\x10\x00\x00\x01\x00", 5);
                break;
            case 7:
                record(&o, 24, "\x01\x00\x10", 3);
                break;
            case 8:
                put(&o, "\x17\x02\x00\x00\x05hello", 10);
                break;
            case 9:
                record(&o, 21, "", 0);
                break;
            default:
                put(&o, "\x15\x03\x03\x48\x01", 5); /* 18433 bytes announced */
                break;
            }
            v = client(&t, &o, steps[s], &fwd, &reason);
            if (v != SBX_TLS_DENY || reason == NULL || strcmp(reason, cases[i].reason) != 0) {
                fail_msg("%s (reads of %zu): verdict %d, reason %s", cases[i].what, steps[s], v,
                         reason ? reason : "(none)");
            }
            /* nothing of the refused record went on (a CCS before it may have) */
            assert_true(fwd <= (i == 5 ? 6u : 0u));
        }
    }
}

/* An HTTP request after the hello is refused at its first byte: nothing waits for a
 * record's worth of plaintext. */
static void test_plaintext_first_byte(void **state)
{
    struct sbx_tls_follow t;
    size_t used = 1;
    size_t need = 0;
    const char *reason = NULL;

    (void)state;
    sbx_tls_follow_init(&t, "front.test");
    assert_int_equal(
        sbx_tls_follow_client(&t, (const unsigned char *)"G", 1, &used, &need, &reason),
        SBX_TLS_DENY);
    assert_string_equal(reason, "tls-record-type");
    assert_int_equal(used, 0);
}

/* TLS 1.3: the client's compatibility CCS and an alert before the server's reply pass;
 * after the ServerHello (split a byte at a time), its CCS and first data record end
 * the watch: the data record is where the pipe starts. */
static void test_tls13_handshake(void **state)
{
    static const size_t steps[] = {0, 1, 3};

    (void)state;
    for (size_t s = 0; s < sizeof(steps) / sizeof(steps[0]); s++) {
        struct sbx_tls_follow t;
        struct buf before = {{0}, 0};
        struct buf sh = {{0}, 0};
        struct buf after = {{0}, 0};
        size_t fwd = 0;
        const char *reason = NULL;

        sbx_tls_follow_init(&t, "front.test");
        ccs(&before);
        record(&before, 21, "\x01\x00", 2); /* a warning alert */
        assert_int_equal(client(&t, &before, steps[s], &fwd, &reason), SBX_TLS_MORE);
        assert_int_equal(fwd, before.n);
        server_hello(&sh, 0);
        ccs(&sh);
        data(&sh, 40); /* encrypted extensions and the rest */
        server(&t, &sh, steps[s] ? steps[s] : sh.n);
        assert_true(t.server_hello);
        ccs(&after);
        data(&after, 30); /* the encrypted Finished */
        put(&after, "anything", 8);
        assert_int_equal(client(&t, &after, steps[s], &fwd, &reason), SBX_TLS_DONE);
        assert_int_equal(fwd, 6); /* the CCS; the pipe starts at the data record */
    }
}

/* A HelloRetryRequest allows one more ClientHello, for the same name only. */
static void test_hello_retry(void **state)
{
    static const char *const second[] = {"FRONT.test.", "other.test", NULL};

    (void)state;
    for (int i = 0; i < 3; i++) {
        struct sbx_tls_follow t;
        struct buf hrr = {{0}, 0};
        struct buf o = {{0}, 0};
        struct buf sh = {{0}, 0};
        struct buf d = {{0}, 0};
        size_t fwd = 0;
        const char *reason = NULL;
        enum sbx_tls_verdict v;

        sbx_tls_follow_init(&t, "front.test");
        server_hello(&hrr, 1);
        ccs(&hrr);
        server(&t, &hrr, 1);
        assert_true(t.hrr);
        assert_false(t.server_hello);
        ccs(&o);
        client_hello(&o, second[i]);
        v = client(&t, &o, i == 0 ? 1 : 0, &fwd, &reason);
        if (i != 0) {
            assert_int_equal(v, SBX_TLS_DENY);
            assert_string_equal(reason, "tls-retry-hello");
            continue;
        }
        assert_int_equal(v, SBX_TLS_MORE);
        assert_int_equal(fwd, o.n);
        /* a third hello is refused */
        memset(&o, 0, sizeof(o));
        client_hello(&o, "front.test");
        {
            struct sbx_tls_follow t2 = t;

            assert_int_equal(client(&t2, &o, 0, &fwd, &reason), SBX_TLS_DENY);
            assert_string_equal(reason, "tls-second-hello");
        }
        server_hello(&sh, 0);
        server(&t, &sh, 5);
        assert_true(t.server_hello);
        data(&d, 10);
        assert_int_equal(client(&t, &d, 0, &fwd, &reason), SBX_TLS_DONE);
    }
}

/* TLS 1.2: plaintext handshake messages after the ServerHello (never a ClientHello),
 * CCS, the encrypted Finished (any first byte), then data. */
static void test_tls12_handshake(void **state)
{
    struct sbx_tls_follow t;
    struct buf sh = {{0}, 0};
    struct buf o = {{0}, 0};
    struct buf bad = {{0}, 0};
    size_t fwd = 0;
    const char *reason = NULL;

    (void)state;
    sbx_tls_follow_init(&t, NULL);
    server_hello(&sh, 0);
    record(&sh, 22, "\x0b\x00\x00\x03\x00\x00\x00", 7); /* Certificate, empty */
    server(&t, &sh, 2);
    assert_true(t.server_hello);
    {
        struct sbx_tls_follow t2 = t;

        client_hello(&bad, NULL);
        assert_int_equal(client(&t2, &bad, 0, &fwd, &reason), SBX_TLS_DENY);
        assert_string_equal(reason, "tls-second-hello");
    }
    record(&o, 22, "\x10\x00\x00\x01\x00", 5); /* ClientKeyExchange */
    ccs(&o);
    record(&o, 22, "\x01\x99\x42\x17\x00\x11", 6); /* encrypted Finished */
    assert_int_equal(client(&t, &o, 1, &fwd, &reason), SBX_TLS_MORE);
    assert_int_equal(fwd, o.n);
    memset(&o, 0, sizeof(o));
    data(&o, 16);
    assert_int_equal(client(&t, &o, 0, &fwd, &reason), SBX_TLS_DONE);
    assert_int_equal(fwd, 0);
}

/* A server that is no TLS server (it answered the hello in plaintext) never lets
 * data through; a client that never ends its handshake is cut at the bound. */
static void test_not_tls_server_and_bound(void **state)
{
    struct sbx_tls_follow t;
    struct buf o = {{0}, 0};
    size_t fwd = 0;
    const char *reason = NULL;
    static struct buf big;

    (void)state;
    sbx_tls_follow_init(&t, "front.test");
    sbx_tls_follow_server(&t, (const unsigned char *)"HTTP/1.1 400 Bad\r\n", 18);
    assert_false(t.server_hello);
    data(&o, 8);
    assert_int_equal(client(&t, &o, 0, &fwd, &reason), SBX_TLS_DENY);
    assert_string_equal(reason, "tls-data-before-server");

    /* application data from the server before its ServerHello: stop following, no
     * handshake seen */
    sbx_tls_follow_init(&t, "front.test");
    memset(&o, 0, sizeof(o));
    data(&o, 8);
    server_hello(&o, 0);
    server(&t, &o, 1);
    assert_false(t.server_hello);

    /* alerts for ever: cut at SBX_TLS_HANDSHAKE_MAX */
    sbx_tls_follow_init(&t, "front.test");
    for (;;) {
        size_t used = 0;
        size_t need = 0;
        enum sbx_tls_verdict v;

        big.n = 0;
        while (big.n + 7 <= sizeof(big.b)) {
            record(&big, 21, "\x01\x00", 2);
        }
        v = sbx_tls_follow_client(&t, big.b, big.n, &used, &need, &reason);
        if (v == SBX_TLS_DENY) {
            assert_string_equal(reason, "tls-handshake-too-long");
            break;
        }
        assert_int_equal(v, SBX_TLS_MORE);
        assert_int_equal(used, big.n);
        assert_true(t.client_bytes <= SBX_TLS_HANDSHAKE_MAX);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_smuggling_refused), cmocka_unit_test(test_plaintext_first_byte),
        cmocka_unit_test(test_tls13_handshake),   cmocka_unit_test(test_hello_retry),
        cmocka_unit_test(test_tls12_handshake),   cmocka_unit_test(test_not_tls_server_and_bound),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
