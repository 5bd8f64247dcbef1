/* test_fwd_parse.c - the owner's reply to a forward (runner/fwd_parse.c):
 * read byte by byte or at once, under its caps; hostile replies get one
 * error; frame boundaries of ?frames=1. */
#include "test_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/fwd_parse.h"

struct sink {
    int heads;
    char body[65536];
    size_t len;
    int stop_after; /* on_body returns 1 once len passes it (0: never) */
};

static int on_head(void *ud)
{
    ((struct sink *)ud)->heads++;
    return 0;
}

static int on_body(void *ud, const char *data, size_t n)
{
    struct sink *s = ud;

    assert_true(s->len + n <= sizeof(s->body));
    memcpy(s->body + s->len, data, n);
    s->len += n;
    return s->stop_after > 0 && s->len > (size_t)s->stop_after;
}

/* Feeds text at once (step 0) or in pieces of step bytes. */
static int feed(struct fwd_reply *p, struct sink *s, const char *text, size_t len, size_t step)
{
    fwd_reply_init(p);
    memset(s, 0, sizeof(*s));
    if (step == 0) {
        return fwd_reply_feed(p, text, len, on_head, on_body, s);
    }
    for (size_t i = 0; i < len; i += step) {
        size_t n = len - i < step ? len - i : step;

        if (fwd_reply_feed(p, text + i, n, on_head, on_body, s) < 0) {
            return -1;
        }
    }
    return 0;
}

static void test_chunked_any_split(void **state)
{
    static const char reply[] = "HTTP/1.1 200 OK\r\n"
                                "Content-Type: application/vnd.sbx.output-frames\r\n"
                                "Transfer-Encoding: chunked\r\n"
                                "Date: x\r\n\r\n"
                                "5\r\nhello\r\n"
                                "1;ext=1\r\n \r\n"
                                "A\r\n0123456789\r\n"
                                "0\r\nX-Trailer: 1\r\n\r\n"
                                "garbage after the end";
    size_t steps[] = {0, 1, 2, 3, 7, 64};

    (void)state;
    for (size_t k = 0; k < sizeof(steps) / sizeof(steps[0]); k++) {
        struct fwd_reply p;
        struct sink s;

        assert_int_equal(feed(&p, &s, reply, sizeof(reply) - 1, steps[k]), 0);
        assert_int_equal(p.phase, FWD_DONE);
        assert_int_equal(p.status, 200);
        assert_string_equal(p.ctype, "application/vnd.sbx.output-frames");
        assert_int_equal(s.heads, 1);
        assert_int_equal(s.len, 16);
        assert_memory_equal(s.body, "hello 0123456789", 16);
        assert_int_equal(fwd_reply_eof(&p), 0);
    }
}

static void test_content_length_and_close(void **state)
{
    static const char fixed[] = "HTTP/1.1 409 Error\r\nContent-Length: 12\r\n"
                                "content-type: application/json\r\n\r\n{\"error\":1}\nMORE";
    static const char untilclose[] = "HTTP/1.0 200 OK\r\n\r\nall of it";
    static const char nobody[] = "HTTP/1.1 204 No Content\r\n\r\n";
    struct fwd_reply p;
    struct sink s;

    (void)state;
    assert_int_equal(feed(&p, &s, fixed, sizeof(fixed) - 1, 1), 0);
    assert_int_equal(p.phase, FWD_DONE);
    assert_int_equal(p.status, 409);
    assert_string_equal(p.ctype, "application/json");
    assert_int_equal(s.len, 12);
    assert_int_equal(feed(&p, &s, untilclose, sizeof(untilclose) - 1, 0), 0);
    assert_int_equal(p.phase, FWD_UNTIL_CLOSE);
    assert_int_equal(fwd_reply_eof(&p), 0);
    assert_int_equal(s.len, 9);
    assert_int_equal(feed(&p, &s, nobody, sizeof(nobody) - 1, 0), 0);
    assert_int_equal(p.phase, FWD_DONE);
    assert_int_equal(s.heads, 1);
}

/* Each hostile reply: -1 (while fed or at the close), phase FWD_BAD and an
 * error that says what was wrong. */
static void test_hostile_replies(void **state)
{
    static const struct {
        const char *reply;
        const char *err;
    } cases[] = {
        {"SSH-2.0-OpenSSH\r\n\r\n", "status line"},
        {"HTTP/1.1 099 Low\r\n\r\n", "bad status code"},
        {"HTTP/1.1 101 Switching Protocols\r\n\r\n", "bad status code"},
        {"HTTP/1.1 99 Low\r\n\r\n", "status line"},
        {"HTTP/1.1 2x0 OK\r\n\r\n", "bad status code"},
        {"HTTP/2.0 200 OK\r\n\r\n", "status line"},
        {"HTTP/1.1 200 OK\r\nno colon here\r\n\r\n", "without a name"},
        {"HTTP/1.1 200 OK\r\n: empty name\r\n\r\n", "without a name"},
        {"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", "Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n", "Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", "Content-Length"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", "not chunked"},
        {"HTTP/1.1 200 OK\r\nContent-Type: a\x01b\r\n\r\n", "printable"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", "chunk size"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n123456789\r\n", "chunk size"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nabXY", "CRLF"},
        {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", "before the end"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", "before the end"},
        {"HTTP/1.1 200 OK\r\nContent-Le", "inside its reply head"},
        {"", "without a reply"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct fwd_reply p;
        struct sink s;
        int rc = feed(&p, &s, cases[i].reply, strlen(cases[i].reply), 0);

        if (rc == 0) {
            rc = fwd_reply_eof(&p);
        }
        assert_int_equal(rc, -1);
        assert_int_equal(p.phase, FWD_BAD);
        if (strstr(p.err, cases[i].err) == NULL) {
            fail_msg("case %zu: error '%s' does not say '%s'", i, p.err, cases[i].err);
        }
    }
}

static void test_caps(void **state)
{
    size_t big = FWD_HEAD_MAX + 100;
    char *head = malloc(big + 1);
    char *lines = malloc(80 * 8 + 64);
    char chunk[200];
    struct fwd_reply p;
    struct sink s;
    size_t o;

    (void)state;
    /* a head larger than 16 KiB: refused at the cap, whatever follows */
    memcpy(head, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(head + 20, 'a', big - 20);
    head[big] = '\0';
    assert_int_equal(feed(&p, &s, head, big, 0), -1);
    assert_non_null(strstr(p.err, "larger than 16384"));
    assert_int_equal(s.heads, 0);
    /* more than 64 header lines */
    o = (size_t)sprintf(lines, "HTTP/1.1 200 OK\r\n");
    for (int i = 0; i < 80; i++) {
        o += (size_t)sprintf(lines + o, "X: %02d\r\n", i);
    }
    o += (size_t)sprintf(lines + o, "\r\n");
    assert_int_equal(feed(&p, &s, lines, o, 0), -1);
    assert_non_null(strstr(p.err, "64 header lines"));
    /* a chunk-size line without end */
    o = (size_t)sprintf(chunk, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1");
    memset(chunk + o, ' ', 100);
    assert_int_equal(feed(&p, &s, chunk, o + 100, 0), -1);
    assert_non_null(strstr(p.err, "longer than 63"));
    /* a Content-Type longer than 127 bytes */
    o = (size_t)sprintf(chunk, "HTTP/1.1 200 OK\r\nContent-Type: ");
    memset(chunk + o, 't', 130);
    memcpy(chunk + o + 130, "\r\n\r\n", 4);
    assert_int_equal(feed(&p, &s, chunk, o + 134, 0), -1);
    assert_non_null(strstr(p.err, "127"));
    free(head);
    free(lines);
}

static void test_body_stop(void **state)
{
    static const char reply[] = "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n0123456789";
    struct fwd_reply p;
    struct sink s;

    (void)state;
    fwd_reply_init(&p);
    memset(&s, 0, sizeof(s));
    s.stop_after = 3;
    assert_int_equal(fwd_reply_feed(&p, reply, 40, on_head, on_body, &s), 0); /* head only */
    assert_int_equal(fwd_reply_feed(&p, reply + 40, 2, on_head, on_body, &s), 0);
    assert_int_equal(fwd_reply_feed(&p, reply + 42, 8, on_head, on_body, &s), -1);
    assert_int_not_equal(p.phase, FWD_BAD); /* the caller's own stop */
}

static void test_frames(void **state)
{
    static const char two[] = "\x01\0\0\0\0\0\0\x03"
                              "abc"
                              "\x02\0\0\0\0\0\0\x01"
                              "e";
    struct fwd_frames f = {0};

    (void)state;
    assert_true(fwd_frames_boundary(&f));
    for (size_t i = 0; i < sizeof(two) - 1; i++) {
        fwd_frames_feed(&f, two + i, 1);
        assert_int_equal(fwd_frames_boundary(&f), i == 10 || i == sizeof(two) - 2);
    }
    memset(&f, 0, sizeof(f));
    fwd_frames_feed(&f, two, sizeof(two) - 1);
    assert_true(fwd_frames_boundary(&f));
    fwd_frames_feed(&f, "\x01\0\0\0\0\0\x01\0", 8); /* 256 bytes announced */
    assert_false(fwd_frames_boundary(&f));
    memset(&f, 0, sizeof(f));
    fwd_frames_feed(&f, "{\"error\":\"x\"}", 13); /* not frames */
    assert_true(f.dec.bad);
    assert_false(fwd_frames_boundary(&f));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_chunked_any_split), cmocka_unit_test(test_content_length_and_close),
        cmocka_unit_test(test_hostile_replies),   cmocka_unit_test(test_caps),
        cmocka_unit_test(test_body_stop),         cmocka_unit_test(test_frames),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
