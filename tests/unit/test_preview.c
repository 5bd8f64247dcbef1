/* test_preview.c - a port preview's answer (runner/preview.c): the head of the
 * server in the sandbox checked by the one HTTP/1 parser (http/h1_reply.h), then
 * relayed as it came with the preview's CSP after the status line and the body
 * after it; a head the parser refuses, one cut short, one over the cap, none at
 * all, or none in time is a 502 naming why, and none of its bytes reach the
 * client. Over socketpairs: the server's whole answer is written first. */
#include "test_common.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "http/h1_reply.h"
#include "runner/preview.h"

/* What the client got for the server's answer (len bytes; eof: the server
 * closes after it); *read_up: what the relay said it read. */
static char *preview(const char *answer, size_t len, int eof, int64_t *read_up, size_t *got)
{
    int up[2];
    int cl[2];
    size_t cap = 1 << 20;
    char *out = malloc(cap);
    ssize_t k;

    assert_non_null(out);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, up), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cl), 0);
    assert_int_equal(write(up[1], answer, len), (ssize_t)len);
    if (eof) {
        shutdown(up[1], SHUT_WR);
    }
    else {
        struct timeval tv = {1, 0};

        setsockopt(up[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    }
    *read_up = runner_preview_relay(up[0], cl[0], 1);
    close(up[0]);
    close(up[1]);
    close(cl[0]);
    *got = 0;
    while ((k = read(cl[1], out + *got, cap - 1 - *got)) > 0) {
        *got += (size_t)k;
    }
    out[*got] = '\0';
    close(cl[1]);
    return out;
}

static void test_relayed_with_csp(void **state)
{
    static const char answer[] = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n"
                                 "Content-Length: 9\r\n\r\n<p>hi</p>";
    char *body = malloc(200000);
    char *big;
    char *got;
    int64_t up;
    size_t n;

    (void)state;
    got = preview(answer, sizeof(answer) - 1, 1, &up, &n);
    assert_int_equal(up, sizeof(answer) - 1);
    assert_string_equal(got, "HTTP/1.1 200 OK\r\n" RUNNER_PREVIEW_CSP RUNNER_PREVIEW_CLOSE
                             "Content-Type: text/html\r\nContent-Length: 9\r\n\r\n<p>hi</p>");
    free(got);
    /* a body much larger than the first read, after the head, byte for byte */
    assert_non_null(body);
    big = malloc(200000 + 64);
    n = (size_t)sprintf(big, "HTTP/1.0 200 OK\r\n\r\n");
    for (size_t i = 0; i < 150000; i++) {
        big[n + i] = (char)(i * 7);
    }
    got = preview(big, n + 150000, 1, &up, &n);
    assert_int_equal(up, 19 + 150000);
    assert_int_equal(n, 19 + strlen(RUNNER_PREVIEW_CSP RUNNER_PREVIEW_CLOSE) + 150000);
    assert_memory_equal(got + n - 150000, big + 19, 150000);
    free(got);
    free(big);
    free(body);
}

static void test_refused(void **state)
{
    static const struct {
        const char *answer;
        int eof;
        const char *err;
    } cases[] = {
        {"SSH-2.0-OpenSSH\r\n", 1,
         "the server in the sandbox did not answer HTTP (not an HTTP/1.0 or HTTP/1.1 status "
         "line)"},
        {"HTTP/1.1 200 OK\nContent-Type: text/html\n\n<script>", 1,
         "the server in the sandbox sent a bad reply head: a bare LF (lines end with CRLF) at "
         "byte 15"},
        {"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\nhello", 1,
         "the server in the sandbox sent a bad reply head: both Transfer-Encoding and "
         "Content-Length (smuggling)"},
        {"", 1, "the server in the sandbox closed the connection without a reply"},
        {"HTTP/1.1 200 OK\r\nContent-Ty", 1,
         "the server in the sandbox closed the connection inside its reply head"},
        {"HTTP/1.1 200 OK\r\n", 0, "the server in the sandbox did not answer within 1 s"},
    };
    int64_t up;
    size_t n;

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *got = preview(cases[i].answer, strlen(cases[i].answer), cases[i].eof, &up, &n);

        if (strncmp(got, "HTTP/1.1 502 Bad Gateway\r\n", 26) != 0 ||
            strstr(got, cases[i].err) == NULL) {
            fail_msg("case %zu: got '%s', not a 502 saying '%s'", i, got, cases[i].err);
        }
        assert_null(strstr(got, "Content-Security"));
        assert_null(strstr(got, "script"));
        assert_null(strstr(got, "SSH"));
        free(got);
    }
}

/* A head larger than the cap: a 502 once the byte after it is in. */
static void test_cap(void **state)
{
    size_t len = SBX_H1_PREVIEW_HEAD_MAX + 5000;
    char *answer = malloc(len);
    char want[128];
    char *got;
    int64_t up;
    size_t n;

    (void)state;
    memcpy(answer, "HTTP/1.1 200 OK\r\nX: ", 20);
    memset(answer + 20, 'a', len - 20);
    got = preview(answer, len, 1, &up, &n);
    snprintf(want, sizeof(want),
             "the server in the sandbox sent a bad reply head: the head is larger than %d bytes",
             SBX_H1_PREVIEW_HEAD_MAX);
    assert_non_null(strstr(got, "502 Bad Gateway"));
    assert_non_null(strstr(got, want));
    assert_null(strstr(got, "aaaa"));
    free(got);
    free(answer);
}

/* (added, issue 31) What a hostile server does to get a page without the CSP
 * or onto a later request: interim 1xx heads ahead of the page are dropped
 * (the CSP goes on the page's head), a 101 is refused, too many interim
 * bytes are refused, and the server's own Connection and Keep-Alive lines
 * give way to Connection: close, so a second answer sent ahead is never a
 * later request's. */
static void test_hostile_heads(void **state)
{
    static const char early[] = "HTTP/1.1 103 Early Hints\r\nLink: </a.css>\r\n\r\n"
                                "HTTP/1.1 100 Continue\r\n\r\n"
                                "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n<script>";
    static const char keep[] = "HTTP/1.1 200 OK\r\nConnection: keep-alive\r\nKeep-Alive: "
                               "timeout=60\r\nContent-Length: 2\r\n\r\nhi"
                               "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n<script>";
    static const char up101[] = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: x\r\n\r\n"
                                "HTTP/1.1 200 OK\r\n\r\n<script>";
    size_t many = 2 * SBX_H1_PREVIEW_HEAD_MAX;
    char *flood = malloc(many + 64);
    char *got;
    int64_t up;
    size_t n;
    size_t k = 0;

    (void)state;
    got = preview(early, sizeof(early) - 1, 1, &up, &n);
    assert_int_equal(up, sizeof(early) - 1);
    assert_string_equal(got, "HTTP/1.1 200 OK\r\n" RUNNER_PREVIEW_CSP RUNNER_PREVIEW_CLOSE
                             "Content-Length: 8\r\n\r\n<script>");
    free(got);

    got = preview(keep, sizeof(keep) - 1, 1, &up, &n);
    assert_true(strncmp(got,
                        "HTTP/1.1 200 OK\r\n" RUNNER_PREVIEW_CSP RUNNER_PREVIEW_CLOSE
                        "Content-Length: 2\r\n\r\nhi",
                        strlen("HTTP/1.1 200 OK\r\n" RUNNER_PREVIEW_CSP RUNNER_PREVIEW_CLOSE
                               "Content-Length: 2\r\n\r\nhi")) == 0);
    assert_null(strstr(got, "keep-alive"));
    assert_null(strstr(got, "Keep-Alive"));
    free(got);

    got = preview(up101, sizeof(up101) - 1, 1, &up, &n);
    assert_non_null(strstr(got, "502 Bad Gateway"));
    assert_non_null(strstr(got, "the server in the sandbox answered 101 to a request without "
                                "Upgrade"));
    assert_null(strstr(got, "script"));
    free(got);

    assert_non_null(flood);
    while (k < many) {
        k += (size_t)sprintf(flood + k, "HTTP/1.1 100 Continue\r\n\r\n");
    }
    k += (size_t)sprintf(flood + k, "HTTP/1.1 200 OK\r\n\r\n<script>");
    got = preview(flood, k, 1, &up, &n);
    assert_non_null(strstr(got, "502 Bad Gateway"));
    assert_non_null(strstr(got, "sent more than 32768 bytes of interim (1xx) heads"));
    assert_null(strstr(got, "script"));
    free(got);
    free(flood);
}

/* (added, issue 31) A server that sends its head a byte at a time, each
 * within the read timeout: the whole head has that time too (1 s here), so
 * the session ends at it with a 502, not after the 60 bytes' 18 s. */
struct drip {
    int fd;
    int stop; /* atomic */
};

static void *drip_main(void *arg)
{
    static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nX-Slow: aaaa\r\n\r\n";
    struct drip *d = arg;
    struct timespec ts = {0, 300 * 1000 * 1000};

    for (size_t i = 0; i < sizeof(head) - 1 && !__atomic_load_n(&d->stop, __ATOMIC_ACQUIRE); i++) {
        if (write(d->fd, head + i, 1) != 1) {
            break;
        }
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static void test_slow_head(void **state)
{
    struct timeval tv = {1, 0};
    struct timespec t0, t1;
    struct drip d;
    pthread_t th;
    char out[1024];
    int up[2];
    int cl[2];
    ssize_t k;

    (void)state;
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, up), 0);
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, cl), 0);
    setsockopt(up[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    d.fd = up[1];
    d.stop = 0;
    assert_int_equal(pthread_create(&th, NULL, drip_main, &d), 0);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    runner_preview_relay(up[0], cl[0], 1);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    __atomic_store_n(&d.stop, 1, __ATOMIC_RELEASE);
    pthread_join(th, NULL);
    close(cl[0]);
    k = read(cl[1], out, sizeof(out) - 1);
    assert_true(k > 0);
    out[k] = '\0';
    assert_non_null(strstr(out, "502 Bad Gateway"));
    assert_non_null(strstr(out, "the server in the sandbox did not answer within 1 s"));
    if (t1.tv_sec - t0.tv_sec > 4) {
        fail_msg("the relay waited %ld s for a head dripped in", (long)(t1.tv_sec - t0.tv_sec));
    }
    close(up[0]);
    close(up[1]);
    close(cl[1]);
}

/* (added, issue 31) The head a relay sends for a preview's answer (the owner
 * box's and the receiving box's alike): the status line, the CSP and
 * Connection: close, then the lines as they came but the connection ones and
 * a CSP line that is the runner's own (an owner added it already); 0 when the
 * room given is too small. */
static void test_head_rewrite(void **state)
{
    static const char owner[] =
        "HTTP/1.1 200 OK\r\n" RUNNER_PREVIEW_CSP "Connection: keep-alive\r\nContent-Length: 2\r\n"
        "Content-Security-Policy: default-src 'none'\r\n"
        "keep-alive: timeout=5\r\n\r\nhi";
    struct sbx_h1_head h;
    char out[512];
    char why[200];
    long end;
    size_t n;

    (void)state;
    sbx_h1_reply_init(&h, SBX_H1_REPLY_TUNNEL);
    end = sbx_h1_reply_feed(&h, owner, sizeof(owner) - 1, "the owner", why, sizeof(why));
    assert_true(end > 0);
    n = runner_preview_head(&h, owner, out, sizeof(out));
    assert_true(n > 0);
    out[n] = '\0';
    assert_string_equal(out, "HTTP/1.1 200 OK\r\n" RUNNER_PREVIEW_CSP RUNNER_PREVIEW_CLOSE
                             "Content-Length: 2\r\n"
                             "Content-Security-Policy: default-src 'none'\r\n\r\n");
    assert_int_equal(runner_preview_head(&h, owner, out, (size_t)end), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relayed_with_csp),
        cmocka_unit_test(test_refused),
        cmocka_unit_test(test_cap),
        cmocka_unit_test(test_hostile_heads),
        cmocka_unit_test(test_slow_head),
        cmocka_unit_test(test_head_rewrite),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
