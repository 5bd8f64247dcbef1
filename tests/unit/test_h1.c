/* test_h1.c - the one HTTP/1 head parser (http/h1.c): request and response heads
 * at once and byte by byte, the framing they give, the smuggling cases (RFC 9112:
 * CL+TE, duplicate Content-Length, obs-fold, bare CR and LF, bad tokens) each
 * refused with its error class and a message saying what, and the caps. */
#include "test_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/h1.h"

/* Parses text at once, then byte by byte; both must agree. Returns the result. */
static long parse(struct sbx_h1_head *h, int response, const char *text, size_t len,
                  const struct sbx_h1_limits *lim)
{
    struct sbx_h1_head step;
    long whole;
    long got = 0;

    sbx_h1_init(h, response, lim);
    whole = sbx_h1_feed(h, text, len);
    sbx_h1_init(&step, response, lim);
    for (size_t have = 1; have <= len && got == 0; have++) {
        got = sbx_h1_feed(&step, text, have);
    }
    assert_int_equal(got, whole);
    assert_int_equal(step.error, h->error);
    return whole;
}

static void test_request(void **state)
{
    static const char req[] = "POST /v1/jobs?x=1 HTTP/1.1\r\nHost: a.test\r\n"
                              "Content-Length:  12 \r\nX-Empty:\r\n\r\nbody follows";
    struct sbx_h1_head h;
    const struct sbx_h1_header *x;

    (void)state;
    assert_int_equal(parse(&h, 0, req, sizeof(req) - 1, NULL), sizeof(req) - 1 - 12);
    assert_int_equal(h.method.n, 4);
    assert_memory_equal(h.method.p, "POST", 4);
    assert_int_equal(h.target.n, 12);
    assert_int_equal(h.minor, 1);
    assert_int_equal(h.nheaders, 3);
    assert_int_equal(h.framing, SBX_H1_LENGTH);
    assert_int_equal(h.content_length, 12);
    x = sbx_h1_find(&h, "x-empty");
    assert_non_null(x);
    assert_int_equal(x->value.n, 0);
    assert_null(sbx_h1_find(&h, "cookie"));
    /* no body headers: no body */
    assert_true(parse(&h, 0, "GET / HTTP/1.0\r\n\r\n", 18, NULL) == 18);
    assert_int_equal(h.framing, SBX_H1_NO_BODY);
    assert_int_equal(h.minor, 0);
    /* a reply that does not start as one is refused at its first byte */
    sbx_h1_init(&h, 1, NULL);
    assert_int_equal(sbx_h1_feed(&h, "\0", 1), -1);
    assert_int_equal(h.error, SBX_H1_E_START);
    /* not yet complete */
    sbx_h1_init(&h, 0, NULL);
    assert_int_equal(sbx_h1_feed(&h, "GET / HTTP/1.1\r\nHost: a\r\n\r", 26), 0);
}

static void test_response(void **state)
{
    static const char chunked[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: Chunked\r\n\r\n5\r\n";
    static const char noreason[] = "HTTP/1.1 404\r\n\r\n";
    static const char nobody[] = "HTTP/1.1 304 Not Modified\r\nContent-Length: 10\r\n\r\n";
    struct sbx_h1_head h;

    (void)state;
    assert_int_equal(parse(&h, 1, chunked, sizeof(chunked) - 1, NULL), sizeof(chunked) - 1 - 3);
    assert_int_equal(h.status, 200);
    assert_int_equal(h.framing, SBX_H1_CHUNKED);
    assert_int_equal(parse(&h, 1, noreason, sizeof(noreason) - 1, NULL), sizeof(noreason) - 1);
    assert_int_equal(h.status, 404);
    assert_int_equal(h.reason.n, 0);
    assert_int_equal(h.framing, SBX_H1_UNTIL_CLOSE);
    assert_int_equal(parse(&h, 1, nobody, sizeof(nobody) - 1, NULL), sizeof(nobody) - 1);
    assert_int_equal(h.framing, SBX_H1_NO_BODY);
}

/* Each one refused with its class, and an error that says what. */
static void test_smuggling(void **state)
{
    static const struct {
        int response;
        const char *head;
        enum sbx_h1_error error;
        const char *says;
    } cases[] = {
        {0, "POST / HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
         SBX_H1_E_TE, "both Transfer-Encoding and Content-Length"},
        {0, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n",
         SBX_H1_E_TE, "both"},
        {1, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n",
         SBX_H1_E_TE, "both"},
        {0, "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n", SBX_H1_E_LENGTH,
         "duplicate Content-Length"},
        {0, "POST / HTTP/1.1\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", SBX_H1_E_LENGTH,
         "duplicate Content-Length"},
        {0, "POST / HTTP/1.1\r\nContent-Length: 5, 5\r\n\r\n", SBX_H1_E_LENGTH, "digits"},
        {0, "POST / HTTP/1.1\r\nContent-Length: +5\r\n\r\n", SBX_H1_E_LENGTH, "digits"},
        {0, "POST / HTTP/1.1\r\nContent-Length: 0x10\r\n\r\n", SBX_H1_E_LENGTH, "digits"},
        {0, "POST / HTTP/1.1\r\nContent-Length: 1234567890123456\r\n\r\n", SBX_H1_E_LENGTH,
         "1-15 digits"},
        {0, "POST / HTTP/1.1\r\nContent-Length:\r\n\r\n", SBX_H1_E_LENGTH, "digits"},
        {0, "POST / HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", SBX_H1_E_TE,
         "not chunked"},
        {0, "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n",
         SBX_H1_E_TE, "duplicate Transfer-Encoding"},
        {0, "POST / HTTP/1.1\r\nTransfer-Encoding: xchunked\r\n\r\n", SBX_H1_E_TE, "not chunked"},
        {0, "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", SBX_H1_E_TE, "HTTP/1.0"},
        {0, "GET / HTTP/1.1\r\nX: a\r\n b\r\n\r\n", SBX_H1_E_HEADER, "obs-fold"},
        {0, "GET / HTTP/1.1\r\nX: a\r\n\tb\r\n\r\n", SBX_H1_E_HEADER, "obs-fold"},
        {0, "GET / HTTP/1.1\r\n Host: a\r\n\r\n", SBX_H1_E_HEADER, "obs-fold"},
        {0, "GET / HTTP/1.1\r\nTransfer-Encoding : chunked\r\n\r\n", SBX_H1_E_HEADER,
         "not a token"},
        {0, "GET / HTTP/1.1\r\nX(y): 1\r\n\r\n", SBX_H1_E_HEADER, "not a token"},
        {0, "GET / HTTP/1.1\r\nno colon\r\n\r\n", SBX_H1_E_HEADER, "without a name"},
        {0, "GET / HTTP/1.1\r\n: v\r\n\r\n", SBX_H1_E_HEADER, "without a name"},
        {0, "GET / HTTP/1.1\r\nX: a\rb\r\n\r\n", SBX_H1_E_BYTES, "bare CR"},
        {0, "GET / HTTP/1.1\nX: a\r\n\r\n", SBX_H1_E_BYTES, "bare LF"},
        {0, "GET / HTTP/1.1\r\nX: a\n\r\n", SBX_H1_E_BYTES, "bare LF"},
        {0, "GET / HTTP/1.1\r\nX: a\x1b\r\n\r\n", SBX_H1_E_BYTES, "control byte"},
        {0, "\r\nGET / HTTP/1.1\r\n\r\n", SBX_H1_E_BYTES, "empty first line"},
        {0, "G(T / HTTP/1.1\r\n\r\n", SBX_H1_E_START, "method"},
        {0, "GET  / HTTP/1.1\r\n\r\n", SBX_H1_E_START, "target"},
        {0, "GET / HTTP/1.1 \r\n\r\n", SBX_H1_E_START, "version"},
        {0, "GET / HTTP/2.0\r\n\r\n", SBX_H1_E_START, "version"},
        {0, "GET / http/1.1\r\n\r\n", SBX_H1_E_START, "version"},
        {0, "GET /\x80 HTTP/1.1\r\n\r\n", SBX_H1_E_TARGET, "0x80"},
        {0, "GET /\t HTTP/1.1\r\n\r\n", SBX_H1_E_TARGET, "0x09"},
        {1, "HTTP/1.1 2000 OK\r\n\r\n", SBX_H1_E_START, "status line"},
        {1, "HTTP/1.1 099 Low\r\n\r\n", SBX_H1_E_STATUS, "bad status code"},
        {1, "HTTP/1.1 6xx Hm\r\n\r\n", SBX_H1_E_STATUS, "bad status code"},
        {1, "HTTP/1.2 200 OK\r\n\r\n", SBX_H1_E_START, "status line"},
        {1, "ICY 200 OK\r\n\r\n", SBX_H1_E_START, "status line"},
        {1, "\x16\x03\x01 TLS, not HTTP\r\n\r\n", SBX_H1_E_START, "status line"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sbx_h1_head h;
        size_t len = strlen(cases[i].head);

        if (parse(&h, cases[i].response, cases[i].head, len, NULL) != -1 ||
            h.error != cases[i].error || strstr(h.err, cases[i].says) == NULL) {
            fail_msg("case %zu '%s': error %d '%s', wanted %d saying '%s'", i, cases[i].head,
                     (int)h.error, h.err, (int)cases[i].error, cases[i].says);
        }
    }
    {
        static const char nul[] = "GET / HTTP/1.1\r\nX: a\0b\r\n\r\n";
        struct sbx_h1_head h;

        assert_int_equal(parse(&h, 0, nul, sizeof(nul) - 1, NULL), -1);
        assert_int_equal(h.error, SBX_H1_E_BYTES);
        assert_non_null(strstr(h.err, "NUL byte at byte 20"));
    }
}

static void test_caps(void **state)
{
    static const struct sbx_h1_limits lim = {256, 4, 40};
    char big[400];
    char head[400];
    struct sbx_h1_head h;
    int o;

    (void)state;
    /* the head's cap: refused as soon as the buffer passes it, no end needed */
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    memset(big + 19, 'a', sizeof(big) - 19);
    assert_int_equal(parse(&h, 0, big, sizeof(big), &lim), -1);
    assert_int_equal(h.error, SBX_H1_E_TOO_LARGE);
    assert_non_null(strstr(h.err, "larger than 256"));
    /* a whole head of exactly the cap is taken, one byte more is not */
    memcpy(big, "GET / HTTP/1.1\r\nX: ", 19);
    memset(big + 19, 'a', 256 - 19 - 4);
    memcpy(big + 256 - 4, "\r\n\r\n", 4);
    assert_int_equal(parse(&h, 0, big, 256, &(struct sbx_h1_limits){256, 4, 300}), 256);
    memset(big + 19, 'a', 257 - 19 - 4);
    memcpy(big + 257 - 4, "\r\n\r\n", 4);
    assert_int_equal(parse(&h, 0, big, 257, &(struct sbx_h1_limits){256, 4, 300}), -1);
    assert_int_equal(h.error, SBX_H1_E_TOO_LARGE);
    /* header count */
    o = sprintf(head, "GET / HTTP/1.1\r\n");
    for (int i = 0; i < 5; i++) {
        o += sprintf(head + o, "X%d: y\r\n", i);
    }
    o += sprintf(head + o, "\r\n");
    assert_int_equal(parse(&h, 0, head, (size_t)o, &lim), -1);
    assert_int_equal(h.error, SBX_H1_E_TOO_MANY);
    assert_non_null(strstr(h.err, "more than 4 header lines"));
    /* line length */
    o = sprintf(head, "GET / HTTP/1.1\r\nX: %050d\r\n\r\n", 1);
    assert_int_equal(parse(&h, 0, head, (size_t)o, &lim), -1);
    assert_int_equal(h.error, SBX_H1_E_LINE);
    assert_non_null(strstr(h.err, "line 2 is longer than 40"));
    /* the header table's own size bounds a caller's wish */
    sbx_h1_init(&h, 0, &(struct sbx_h1_limits){256, 100000, 40});
    assert_int_equal(h.lim.headers_max, SBX_H1_HEADERS_CAP);
}

static void test_chunk_size(void **state)
{
    uint64_t n = 0;
    char err[64];

    (void)state;
    assert_int_equal(sbx_h1_chunk_size("1aF", 3, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 0x1af);
    assert_int_equal(sbx_h1_chunk_size("10;ext=1", 8, &n, err, sizeof(err)), 0);
    assert_int_equal(n, 16);
    assert_int_equal(sbx_h1_chunk_size("ffffffff", 8, &n, err, sizeof(err)), 0);
    assert_int_equal(sbx_h1_chunk_size("123456789", 9, &n, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "chunk size"));
    assert_int_equal(sbx_h1_chunk_size("", 0, &n, err, sizeof(err)), -1);
    assert_int_equal(sbx_h1_chunk_size("-1", 2, &n, err, sizeof(err)), -1);
    assert_int_equal(sbx_h1_chunk_size("0x1", 3, &n, err, sizeof(err)), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_request),    cmocka_unit_test(test_response),
        cmocka_unit_test(test_smuggling),  cmocka_unit_test(test_caps),
        cmocka_unit_test(test_chunk_size),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
