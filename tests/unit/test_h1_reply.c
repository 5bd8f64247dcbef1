/* test_h1_reply.c - the reply heads sbx reads itself (http/h1_reply.c) by the one
 * HTTP/1 parser under the caps of their kind: a runner's answer to an upgrade
 * (sbx_upgrade_on, sandbox/proto.c, over a socketpair), the owner box's answer
 * to a relayed terminal or port (runner/fwd_tunnel.c) and the server's answer
 * to a port preview (runner/api_term.c, runner/preview.c; its relay is
 * test_preview.c). Hostile and malformed heads get one error naming what,
 * where and whose; none is read past its cap. */
#include "test_common.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "http/h1_reply.h"
#include "runner/preview.h"
#include "sandbox/proto.h"

static long feed(struct sbx_h1_head *h, enum sbx_h1_reply_kind kind, const char *text, size_t len,
                 char *err, size_t errlen)
{
    long end = 0;

    /* byte by byte, as sbx_upgrade_on reads: the same answer as at once */
    sbx_h1_reply_init(h, kind);
    for (size_t n = 1; n <= len && end == 0; n++) {
        end = sbx_h1_reply_feed(h, text, n, "box b2", err, errlen);
    }
    return end;
}

/* A head of n bytes: the status line, then "X:" lines of at most 1000 bytes, the
 * blank line, then "body" (*len: n + 4). */
static char *big_head(const char *status, size_t n, size_t *len)
{
    char *s = malloc(n + 16);
    size_t k = (size_t)sprintf(s, "%s\r\n", status);

    assert_non_null(s);
    while (n - k > 2) {
        size_t left = n - k - 2; /* bytes of header lines still to write */
        size_t line = left > 1000 ? 1000 : left;

        if (left - line > 0 && left - line < 4) {
            line -= 4; /* the last line needs at least "X:\r\n" */
        }
        assert_true(line >= 4);
        memcpy(s + k, "X:", 2);
        memset(s + k + 2, 'a', line - 4);
        memcpy(s + k + line - 2, "\r\n", 2);
        k += line;
    }
    assert_int_equal(k, n - 2);
    memcpy(s + k, "\r\nbody", 6);
    *len = n + 4;
    return s;
}

static void test_good_heads(void **state)
{
    static const char up[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: sbx-terminal.v2\r\n"
                             "Connection: Upgrade\r\n\r\n\x01\0\0\0\0\0\0\x02hi";
    static const char page[] = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                               "Transfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n";
    struct sbx_h1_head h;
    char err[256] = "";
    char line[64];

    (void)state;
    for (int kind = SBX_H1_REPLY_UPGRADE; kind <= SBX_H1_REPLY_PREVIEW; kind++) {
        /* what follows the head (a terminal's frames, a body) is the caller's */
        assert_int_equal(feed(&h, kind, up, sizeof(up) - 1, err, sizeof(err)),
                         strstr(up, "\r\n\r\n") + 4 - up);
        assert_int_equal(h.status, 101);
        assert_int_equal(h.minor, 1);
        assert_int_equal(sbx_h1_reply_status_line(&h, up, line, sizeof(line)), 34);
        assert_string_equal(line, "HTTP/1.1 101 Switching Protocols");
        assert_int_equal(feed(&h, kind, page, sizeof(page) - 1, err, sizeof(err)),
                         strstr(page, "\r\n\r\n") + 4 - page);
        assert_int_equal(h.status, 200);
        assert_int_equal(h.framing, SBX_H1_CHUNKED);
    }
    /* the line for a log: printable, cut to fit (a reason may hold obs-text) */
    assert_int_equal(
        feed(&h, SBX_H1_REPLY_TUNNEL, "HTTP/1.0 404 N\xe9 pas\r\n\r\n", 23, err, sizeof(err)), 23);
    assert_int_equal(sbx_h1_reply_status_line(&h, "HTTP/1.0 404 N\xe9 pas\r\n\r\n", line, 16), 21);
    assert_string_equal(line, "HTTP/1.0 404 N?");
    assert_int_equal(sbx_h1_reply_status_line(&h, "HTTP/1.0 404 N\xe9 pas\r\n\r\n", NULL, 0), 21);
}

static void test_bad_heads(void **state)
{
    static const struct {
        const char *text;
        const char *err;
    } cases[] = {
        {"\x00\xff\xfe garbage\r\n\r\n", "box b2 did not answer HTTP (not an HTTP/1.0 or HTTP/1.1 "
                                         "status line)"},
        {"SSH-2.0-x\r\n\r\n", "box b2 did not answer HTTP"},
        {"HTTP/2 200\r\n\r\n", "box b2 did not answer HTTP"},
        {"HTTP/1.1 101\nUpgrade: x\r\n\r\n", "box b2 sent a bad reply head: a bare LF"},
        {"HTTP/1.1 200 OK\r\nA: b\rc\r\n\r\n", "box b2 sent a bad reply head: a bare CR"},
        {"HTTP/1.1 200 OK\r\nA: \x01\r\n\r\n", "box b2 sent a bad reply head: a control byte"},
        {"HTTP/1.1 99 Low\r\n\r\n", "box b2 did not answer HTTP (not an HTTP/1.0"},
        {"HTTP/1.1 1x1 Sw\r\n\r\n", "box b2 sent a bad reply head: bad status code '1x1'"},
        {"HTTP/1.1 200 OK\r\n folded\r\n\r\n", "box b2 sent a bad reply head: line 2: obs-fold"},
        {"HTTP/1.1 200 OK\r\nBad Name: x\r\n\r\n", "line 2: the header name is not a token"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
         "a duplicate Content-Length"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
         "both Transfer-Encoding and Content-Length"},
    };
    struct sbx_h1_head h;
    char err[256];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const char *t = cases[i].text;
        size_t len = t[0] == '\0' ? 15 : strlen(t);

        for (int kind = SBX_H1_REPLY_UPGRADE; kind <= SBX_H1_REPLY_PREVIEW; kind++) {
            err[0] = '\0';
            assert_int_equal(feed(&h, kind, t, len, err, sizeof(err)), -1);
            if (strstr(err, cases[i].err) == NULL) {
                fail_msg("case %zu: '%s' does not say '%s'", i, err, cases[i].err);
            }
        }
    }
    sbx_h1_reply_cut(0, "the owner", err, sizeof(err));
    assert_string_equal(err, "the owner closed the connection without a reply");
    sbx_h1_reply_cut(7, "the owner", err, sizeof(err));
    assert_string_equal(err, "the owner closed the connection inside its reply head");
}

/* The caps: a head one byte over fails as soon as the byte after the cap is in,
 * and never later; the tunnel's takes a preview's with the owner's CSP. */
static void test_caps(void **state)
{
    static const struct {
        enum sbx_h1_reply_kind kind;
        size_t max;
    } caps[] = {{SBX_H1_REPLY_UPGRADE, SBX_H1_UPGRADE_HEAD_MAX},
                {SBX_H1_REPLY_PREVIEW, SBX_H1_PREVIEW_HEAD_MAX},
                {SBX_H1_REPLY_TUNNEL, SBX_H1_TUNNEL_HEAD_MAX}};
    struct sbx_h1_head h;
    char err[256];
    char want[64];

    (void)state;
    for (size_t i = 0; i < sizeof(caps) / sizeof(caps[0]); i++) {
        size_t len;
        char *ok = big_head("HTTP/1.1 200 OK", caps[i].max, &len);
        char *over = big_head("HTTP/1.1 200 OK", caps[i].max + 1, &len);

        sbx_h1_reply_init(&h, caps[i].kind);
        assert_int_equal(h.lim.head_max, caps[i].max);
        assert_int_equal(sbx_h1_reply_feed(&h, ok, caps[i].max + 4, "x", err, sizeof(err)),
                         caps[i].max);
        sbx_h1_reply_init(&h, caps[i].kind);
        assert_int_equal(sbx_h1_reply_feed(&h, over, caps[i].max, "x", err, sizeof(err)), 0);
        assert_int_equal(sbx_h1_reply_feed(&h, over, caps[i].max + 1, "x", err, sizeof(err)), -1);
        snprintf(want, sizeof(want), "x sent a bad reply head: the head is larger than %zu bytes",
                 caps[i].max);
        assert_string_equal(err, want);
        free(ok);
        free(over);
    }
    {
        /* a preview's 126 header lines pass; the owner adds its CSP and
         * Connection: close (changed, issue 31): 128 */
        char head[8192];
        const char *add = RUNNER_PREVIEW_CSP RUNNER_PREVIEW_CLOSE;
        size_t csp = strlen(add);
        size_t k = (size_t)sprintf(head, "HTTP/1.1 200 OK\r\n");

        for (int i = 0; i < SBX_H1_HEADERS_CAP - 2; i++) {
            k += (size_t)sprintf(head + k, "X-%d: v\r\n", i);
        }
        memcpy(head + k, "\r\n", 3);
        sbx_h1_reply_init(&h, SBX_H1_REPLY_PREVIEW);
        assert_true(sbx_h1_reply_feed(&h, head, k + 2, "x", err, sizeof(err)) > 0);
        memmove(head + 17 + csp, head + 17, k + 3 - 17);
        memcpy(head + 17, add, csp);
        k += csp;
        sbx_h1_reply_init(&h, SBX_H1_REPLY_PREVIEW);
        assert_int_equal(sbx_h1_reply_feed(&h, head, k + 2, "x", err, sizeof(err)), -1);
        if (strstr(err, "more than 126 header lines") == NULL) {
            fail_msg("%s", err);
        }
        sbx_h1_reply_init(&h, SBX_H1_REPLY_TUNNEL);
        assert_int_equal(sbx_h1_reply_feed(&h, head, k + 2, "x", err, sizeof(err)), (long)(k + 2));
    }
}

/* sbx_upgrade_on against a peer whose whole reply is written before it reads. */
static int upgrade(const char *reply, size_t len, sbx_error_t **err, int *peer)
{
    static const char req[] = "GET /v1/tasks/t/terminal HTTP/1.1\r\nHost: sbx\r\n\r\n";
    int sv[2];

    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(write(sv[1], reply, len), (ssize_t)len);
    shutdown(sv[1], SHUT_WR);
    *peer = sv[1];
    return sbx_upgrade_on(sv[0], req, sizeof(req) - 1, "the runner", err);
}

static void test_upgrade_on(void **state)
{
    static const char up[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: sbx-terminal.v2\r\n"
                             "Connection: Upgrade\r\n\r\nFRAMES";
    static const char missing[] = "HTTP/1.1 404 Not Found\r\nContent-Type: application/json\r\n"
                                  "Content-Length: 27\r\n\r\n{\"error\":\"no task 'nope'\"}\n";
    static const struct {
        const char *reply;
        int code;
        const char *err;
    } refused[] = {
        {"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", SBX_E_USAGE,
         "HTTP/1.1 400 Bad Request"},
        {"HTTP/1.0 101 Switching\r\n\r\n", SBX_E_GENERIC, "HTTP/1.0 101 Switching"},
        {"", SBX_E_GENERIC, "the runner closed the connection without a reply"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n", SBX_E_GENERIC,
         "the runner closed the connection inside its reply head"},
        {"HTTP/1.1 101 Switching Protocols\nUpgrade: x\n\n", SBX_E_GENERIC,
         "the runner sent a bad reply head: a bare LF (lines end with CRLF) at byte 32"},
        {"<html>hello</html>\r\n\r\n", SBX_E_GENERIC, "the runner did not answer HTTP"},
    };
    sbx_error_t *err = NULL;
    char rest[64];
    int peer;
    int fd;

    (void)state;
    fd = upgrade(up, sizeof(up) - 1, &err, &peer);
    assert_true(fd >= 0);
    /* the bytes after the head are the caller's, none read */
    assert_int_equal(read(fd, rest, sizeof(rest)), 6);
    assert_memory_equal(rest, "FRAMES", 6);
    close(fd);
    close(peer);

    assert_int_equal(upgrade(missing, sizeof(missing) - 1, &err, &peer), -1);
    assert_int_equal(err->code, SBX_E_NOTFOUND);
    assert_string_equal(sbx_error_msg(err), "no task 'nope'");
    sbx_error_free(&err);
    close(peer);
    for (size_t i = 0; i < sizeof(refused) / sizeof(refused[0]); i++) {
        assert_int_equal(upgrade(refused[i].reply, strlen(refused[i].reply), &err, &peer), -1);
        assert_int_equal(err->code, refused[i].code);
        if (strstr(sbx_error_msg(err), refused[i].err) == NULL) {
            fail_msg("case %zu: '%s' does not say '%s'", i, sbx_error_msg(err), refused[i].err);
        }
        sbx_error_free(&err);
        close(peer);
    }
}

/* A head larger than the cap: refused once the byte after the cap is read, the
 * rest left unread in the socket. */
static void test_upgrade_on_cap(void **state)
{
    size_t len;
    char *head = big_head("HTTP/1.1 101 Switching Protocols", SBX_H1_UPGRADE_HEAD_MAX + 100, &len);
    sbx_error_t *err = NULL;
    char buf[256];
    int sv[2];

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
    assert_int_equal(write(sv[1], head, len), (ssize_t)len);
    /* a duplicate keeps the socket open past sbx_upgrade_on's close */
    {
        int keep = dup(sv[0]);
        ssize_t left;

        assert_int_equal(sbx_upgrade_on(sv[0], "GET / HTTP/1.1\r\n\r\n", 18, "the runner", &err),
                         -1);
        snprintf(buf, sizeof(buf),
                 "the runner sent a bad reply head: the head is larger than %d bytes",
                 SBX_H1_UPGRADE_HEAD_MAX);
        assert_string_equal(sbx_error_msg(err), buf);
        sbx_error_free(&err);
        shutdown(sv[1], SHUT_WR);
        left = 0;
        for (ssize_t k; (k = read(keep, buf, sizeof(buf))) > 0;) {
            left += k;
        }
        assert_int_equal(left, (ssize_t)len - (SBX_H1_UPGRADE_HEAD_MAX + 1));
        close(keep);
    }
    close(sv[1]);
    free(head);
}

/* (added, issue 31) A refusal without a body, from a peer that stays: the
 * error comes at once, not when the peer closes (a 5 s receive timeout stands
 * in for a peer that never does). */
static void test_upgrade_on_no_body(void **state)
{
    static const char req[] = "GET /v1/tasks/t/terminal HTTP/1.1\r\nHost: sbx\r\n\r\n";
    static const char *const replies[] = {
        "HTTP/1.0 101 Switching\r\n\r\n",
        "HTTP/1.1 100 Continue\r\n\r\n",
        "HTTP/1.1 409 Conflict\r\nContent-Length: 0\r\n\r\n",
        "HTTP/1.1 409 Conflict\r\nContent-Length: 11\r\n\r\n{\"error\":1}",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(replies) / sizeof(replies[0]); i++) {
        struct timeval tv = {5, 0};
        struct timespec t0, t1;
        sbx_error_t *err = NULL;
        int sv[2];

        assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0);
        setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        assert_int_equal(write(sv[1], replies[i], strlen(replies[i])), (ssize_t)strlen(replies[i]));
        clock_gettime(CLOCK_MONOTONIC, &t0);
        assert_int_equal(sbx_upgrade_on(sv[0], req, sizeof(req) - 1, "the runner", &err), -1);
        clock_gettime(CLOCK_MONOTONIC, &t1);
        assert_non_null(err);
        if (t1.tv_sec - t0.tv_sec >= 4) {
            fail_msg("reply %zu: the error waited for the peer (%s)", i, sbx_error_msg(err));
        }
        sbx_error_free(&err);
        close(sv[1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_good_heads),     cmocka_unit_test(test_bad_heads),
        cmocka_unit_test(test_caps),           cmocka_unit_test(test_upgrade_on),
        cmocka_unit_test(test_upgrade_on_cap), cmocka_unit_test(test_upgrade_on_no_body),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
