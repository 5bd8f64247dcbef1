/* test_relay_dns.c - the relay's resolver (tools/relay/dns.c, names.c; docs/egress.md,
 * "Without proxy variables"): answers for allowed and denied names (each its own
 * address; a denied one with the Extended DNS Error), the bounded name tables, and malformed
 * queries (every byte comes from the sandbox). The proxy's answer is a fake here;
 * runtime_test_egress_transparent asks the real one. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "dns.h"
#include "names.h"

static int asked;
static int verdict; /* what the fake proxy answers: 1 allow, 0 deny, -1 none */

static int fake_ask(const struct sockaddr_un *sun, const char *name, char *text, size_t size)
{
    (void)sun;
    asked++;
    snprintf(text, size, "sbx egress: %s not allowed by policy of task t-1", name);
    return verdict;
}

/* A query for name (type qtype, class IN) into q; with an OPT record when edns. */
static size_t query(unsigned char *q, const char *name, unsigned qtype, int edns)
{
    size_t n = 12;
    const char *p = name;

    memset(q, 0, 12);
    q[0] = 0xab;
    q[1] = 0xcd;
    q[2] = 0x01; /* RD */
    q[5] = 1;
    q[11] = (unsigned char)(edns ? 1 : 0);
    while (*p) {
        const char *dot = strchr(p, '.');
        size_t l = dot ? (size_t)(dot - p) : strlen(p);

        q[n++] = (unsigned char)l;
        memcpy(q + n, p, l);
        n += l;
        p += l + (dot ? 1 : 0);
    }
    q[n++] = 0;
    q[n++] = (unsigned char)(qtype >> 8);
    q[n++] = (unsigned char)qtype;
    q[n++] = 0;
    q[n++] = 1;
    if (edns) {
        static const unsigned char opt[] = {0, 0, 41, 4, 208, 0, 0, 0, 0, 0, 0};

        memcpy(q + n, opt, sizeof(opt));
        n += sizeof(opt);
    }
    return n;
}

static size_t reply(const unsigned char *q, size_t n, unsigned char *out)
{
    return sbx_relay_dns_reply(q, n, out, SBX_DNS_MSG_MAX, fake_ask, NULL);
}

static int rcode(const unsigned char *a)
{
    return a[3] & 0x0f;
}

static int count(const unsigned char *a, int which)
{
    return (a[4 + 2 * which] << 8) | a[5 + 2 * which];
}

static int setup(void **state)
{
    (void)state;
    sbx_relay_names_reset();
    asked = 0;
    verdict = 1;
    return 0;
}

static void test_allowed_names_get_addresses(void **state)
{
    unsigned char q[512], a[SBX_DNS_MSG_MAX];
    size_t n = query(q, "Allowed.Test", SBX_DNS_TYPE_A, 0);
    size_t len = reply(q, n, a);

    (void)state;
    assert_true(len == n + 16);
    assert_int_equal(a[0], 0xab);
    assert_int_equal(a[1], 0xcd);
    assert_int_equal(a[2] & 0x80, 0x80); /* a response */
    assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    assert_int_equal(count(a, 1), 1);
    assert_memory_equal(a + len - 4, ((unsigned char[]){127, 100, 0, 1}), 4);
    assert_string_equal(sbx_relay_name_of(0x7f640001u), "allowed.test");
    /* the same name keeps its address, without asking the proxy again; another gets
     * the next */
    len = reply(q, n, a);
    assert_memory_equal(a + len - 4, ((unsigned char[]){127, 100, 0, 1}), 4);
    assert_int_equal(asked, 1);
    n = query(q, "b.test", SBX_DNS_TYPE_A, 1);
    len = reply(q, n, a);
    assert_int_equal(count(a, 3), 1); /* the OPT record */
    assert_memory_equal(a + 12 + (n - 11 - 12) + 12, ((unsigned char[]){127, 100, 0, 2}), 4);
    assert_null(sbx_relay_name_of(0x7f640003u));
    assert_null(sbx_relay_name_of(0x7f650001u));
    assert_null(sbx_relay_name_of(0x7f640000u));
    /* AAAA: the name exists, no data */
    n = query(q, "b.test", SBX_DNS_TYPE_AAAA, 0);
    len = reply(q, n, a);
    assert_int_equal(len, n);
    assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    assert_int_equal(count(a, 1), 0);
}

/* (changed) A denied name resolves to a deny address of its own (127.101/16, one per
 * name) with the Extended DNS Error: the program connects and reads the refusal. */
static void test_denied_names_say_why(void **state)
{
    unsigned char q[512], a[SBX_DNS_MSG_MAX];
    const char *text = "sbx egress: denied.test not allowed by policy of task t-1";
    size_t n = query(q, "denied.test", SBX_DNS_TYPE_A, 1);
    size_t qlen = n - 11 - 12;
    size_t len;

    (void)state;
    verdict = 0;
    len = reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    assert_int_equal(count(a, 1), 1);
    assert_int_equal(count(a, 3), 1);
    assert_int_equal(len, n + 16 + 6 + strlen(text));
    assert_memory_equal(a + 12 + qlen + 12, ((unsigned char[]){127, 101, 0, 1}), 4);
    /* OPT: ... option 15, length, info code 15 (Blocked), text */
    assert_int_equal(a[len - strlen(text) - 6 + 1], 15);
    assert_int_equal(a[len - strlen(text) - 2 + 1], SBX_DNS_EDE_BLOCKED);
    assert_memory_equal(a + len - strlen(text), text, strlen(text));
    /* the deny address maps back to the name only as a denied one: never a name to
     * connect to */
    assert_string_equal(sbx_relay_denied_name_of(0x7f650001u), "denied.test");
    assert_null(sbx_relay_name_of(0x7f650001u));
    assert_null(sbx_relay_denied_name_of(0x7f640001u));
    assert_null(sbx_relay_denied_name_of(0x7f650002u));
    assert_null(sbx_relay_denied_name_of(0x7f650000u));
    /* asked again each time (the policy may allow it now); the same address */
    len = reply(q, n, a);
    assert_int_equal(asked, 2);
    assert_memory_equal(a + 12 + qlen + 12, ((unsigned char[]){127, 101, 0, 1}), 4);
    /* AAAA: no data, with the EDE */
    n = query(q, "denied.test", SBX_DNS_TYPE_AAAA, 1);
    len = reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    assert_int_equal(count(a, 1), 0);
    assert_int_equal(len, n + 6 + strlen(text));
    assert_memory_equal(a + len - strlen(text), text, strlen(text));
    /* no EDNS in the query: no OPT in the answer (RFC 6891), the address all the same */
    n = query(q, "other-denied.test", SBX_DNS_TYPE_A, 0);
    len = reply(q, n, a);
    assert_int_equal(len, n + 16);
    assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    assert_memory_equal(a + len - 4, ((unsigned char[]){127, 101, 0, 2}), 4);
    /* allowed later (a warm sandbox claimed): an allowed address; the deny address
     * stays a denied one */
    verdict = 1;
    n = query(q, "denied.test", SBX_DNS_TYPE_A, 0);
    len = reply(q, n, a);
    assert_memory_equal(a + len - 4, ((unsigned char[]){127, 100, 0, 1}), 4);
    assert_string_equal(sbx_relay_denied_name_of(0x7f650001u), "denied.test");
    /* no answer from the proxy: SERVFAIL */
    verdict = -1;
    n = query(q, "x.test", SBX_DNS_TYPE_A, 0);
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_SERVFAIL);
}

static void test_not_asked(void **state)
{
    unsigned char q[512], a[SBX_DNS_MSG_MAX];
    size_t n;

    (void)state;
    n = query(q, "7.0.100.127.in-addr.arpa", 12, 1);
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_NXDOMAIN);
    n = query(q, "a b.test", SBX_DNS_TYPE_A, 1); /* a space in a label */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_NXDOMAIN);
    n = query(q, "a\nb.test", SBX_DNS_TYPE_A, 1); /* would end the proxy's line */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_NXDOMAIN);
    n = query(q, "", SBX_DNS_TYPE_A, 0); /* the root */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_REFUSED);
    n = query(q, "ok.test", SBX_DNS_TYPE_A, 0);
    q[n - 1] = 3; /* class CH */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_REFUSED);
    assert_int_equal(asked, 0);
}

static void test_malformed(void **state)
{
    unsigned char q[2048], a[SBX_DNS_MSG_MAX];
    size_t n = query(q, "ok.test", SBX_DNS_TYPE_A, 0);

    (void)state;
    for (size_t k = 0; k < 12; k++) {
        assert_int_equal(reply(q, k, a), 0); /* no header: no answer */
    }
    for (size_t k = 12; k < n - 4; k++) {
        assert_true(reply(q, k, a) > 0); /* cut in the question: FORMERR */
        assert_int_equal(rcode(a), SBX_DNS_FORMERR);
        assert_int_equal(count(a, 0), 0);
    }
    q[2] |= 0x80; /* a response: never answered */
    assert_int_equal(reply(q, n, a), 0);
    q[2] = 0x01 | (1 << 3); /* opcode IQUERY */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_NOTIMP);
    q[2] = 0x01;
    q[5] = 2; /* two questions */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_FORMERR);
    q[5] = 1;
    q[7] = 1; /* an answer in a query */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_FORMERR);
    q[7] = 0;
    q[12] = 0xc0; /* a compression pointer */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_FORMERR);
    q[12] = 64; /* a label over 63 */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_FORMERR);
    q[12] = 60; /* a label past the end */
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_FORMERR);
    /* a name over 253 bytes: 5 labels of 63 */
    n = 12;
    for (int i = 0; i < 5; i++) {
        q[n++] = 63;
        memset(q + n, 'a', 63);
        n += 63;
    }
    q[n++] = 0;
    memcpy(q + n, "\0\1\0\1", 4);
    n += 4;
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_FORMERR);
    /* longer than a datagram we read */
    memset(q + 12, 0, sizeof(q) - 12);
    reply(q, SBX_DNS_MSG_MAX + 1, a);
    assert_int_equal(rcode(a), SBX_DNS_FORMERR);
    assert_int_equal(asked, 0);
    /* an answer that does not fit is not written */
    n = query(q, "ok.test", SBX_DNS_TYPE_A, 0);
    assert_int_equal(sbx_relay_dns_reply(q, n, a, n + 15, fake_ask, NULL), 0);
}

static void test_random_bytes(void **state)
{
    unsigned char q[SBX_DNS_MSG_MAX + 1], a[SBX_DNS_MSG_MAX];
    unsigned seed = 27;

    (void)state;
    for (int i = 0; i < 20000; i++) {
        size_t n = (size_t)(rand_r(&seed) % (int)sizeof(q));
        size_t len;

        for (size_t k = 0; k < n; k++) {
            q[k] = (unsigned char)rand_r(&seed);
        }
        if (n > 12 && (i & 1)) {
            q[2] &= 0x07; /* mostly well-formed headers: reach the question */
            q[4] = 0;
            q[5] = 1;
            q[6] = q[7] = q[8] = q[9] = 0;
            q[12] = (unsigned char)(q[12] % 64);
        }
        len = reply(q, n, a);
        assert_true(len <= sizeof(a));
    }
}

static void test_table_is_bounded(void **state)
{
    unsigned char q[512], a[SBX_DNS_MSG_MAX];
    char name[32];

    (void)state;
    for (int i = 0; i < SBX_RELAY_NAMES_MAX; i++) {
        size_t n;

        snprintf(name, sizeof(name), "n%d.test", i);
        n = query(q, name, SBX_DNS_TYPE_A, 0);
        reply(q, n, a);
        assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    }
    assert_string_equal(sbx_relay_name_of(0x7f640000u + SBX_RELAY_NAMES_MAX), "n4095.test");
    {
        size_t n = query(q, "one-more.test", SBX_DNS_TYPE_A, 1);

        reply(q, n, a);
        assert_int_equal(rcode(a), SBX_DNS_SERVFAIL);
        /* known names still answer */
        n = query(q, "n7.test", SBX_DNS_TYPE_A, 0);
        reply(q, n, a);
        assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    }
    sbx_relay_names_reset();
}

/* (added) The deny table is bounded too: past it, a denied name gets NXDOMAIN with
 * the EDE (the answer before deny addresses), and the known ones keep theirs. */
static void test_denied_table_is_bounded(void **state)
{
    unsigned char q[512], a[SBX_DNS_MSG_MAX];
    char name[32];
    size_t n;

    (void)state;
    verdict = 0;
    for (int i = 0; i < SBX_RELAY_DENIED_MAX; i++) {
        snprintf(name, sizeof(name), "d%d.test", i);
        n = query(q, name, SBX_DNS_TYPE_A, 0);
        reply(q, n, a);
        assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    }
    assert_string_equal(sbx_relay_denied_name_of(0x7f650000u + SBX_RELAY_DENIED_MAX), "d4095.test");
    n = query(q, "one-more.test", SBX_DNS_TYPE_A, 1);
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_NXDOMAIN);
    assert_int_equal(count(a, 3), 1);
    n = query(q, "d7.test", SBX_DNS_TYPE_A, 0);
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    assert_memory_equal(a + n + 12, ((unsigned char[]){127, 101, 0, 8}), 4);
    /* allowed names have their own table */
    verdict = 1;
    n = query(q, "ok.test", SBX_DNS_TYPE_A, 0);
    reply(q, n, a);
    assert_int_equal(rcode(a), SBX_DNS_NOERROR);
    sbx_relay_names_reset();
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_allowed_names_get_addresses, setup),
        cmocka_unit_test_setup(test_denied_names_say_why, setup),
        cmocka_unit_test_setup(test_not_asked, setup),
        cmocka_unit_test_setup(test_malformed, setup),
        cmocka_unit_test_setup(test_random_bytes, setup),
        cmocka_unit_test_setup(test_table_is_bounded, setup),
        cmocka_unit_test_setup(test_denied_table_is_bounded, setup),
    };

    return cmocka_run_group_tests_name("relay_dns", tests, NULL, NULL);
}
