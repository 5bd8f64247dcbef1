/* test_egress_names.c - the proxy's side of the transparent path (core/src/egress/
 * names.c; docs/egress.md, "Without proxy variables"), without Docker: name queries
 * ("\x02NAME\n") answered from the sandbox's rules, and transparent connections
 * ("\x01HOST:PORT\n" with a TCP socket) proxied as a CONNECT whose 200 is not sent,
 * their refusals answered by the client's first bytes (refusal.c); connections to a
 * denied name's address ("\x03") refused and answered, never connected; malformed
 * messages are closed unanswered. The relay's own half is
 * test_relay_dns.c; both together, with the netns redirect, are
 * runtime_test_egress_transparent. */
#include "egress_fixture.h"
#include "wait.h"

/* Sends msg (len bytes; with fd as SCM_RIGHTS when fd >= 0) to the sandbox's proxy
 * socket in one call; returns the unix socket. */
static int send_msg(const char *msg, size_t len, int fd)
{
    char *path = xasprintf_test("%s/proxy.sock", t.sockdir);
    struct sockaddr_un sun;
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    struct iovec iov = {(void *)msg, len};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr m;

    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    assert_int_equal(connect(u, (struct sockaddr *)&sun, sizeof(sun)), 0);
    memset(&m, 0, sizeof(m));
    memset(&ctl, 0, sizeof(ctl));
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    if (fd >= 0) {
        struct cmsghdr *cm;

        m.msg_control = ctl.buf;
        m.msg_controllen = sizeof(ctl.buf);
        cm = CMSG_FIRSTHDR(&m);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    }
    assert_int_equal(sendmsg(u, &m, 0), (ssize_t)len);
    free(path);
    return u;
}

static char *ask(const char *msg, size_t len)
{
    int u = send_msg(msg, len, -1);
    char *reply = test_read_all(u);

    close(u);
    return reply;
}

static void test_name_queries(void **state)
{
    char *r;

    (void)state;
    r = ask("\x02"
            "allowed.test\n",
            14);
    assert_string_equal(r, "allow\n");
    free(r);
    r = ask("\x02"
            "deep.b.WILD.test.\n",
            19); /* "*.wild.test:*" */
    assert_string_equal(r, "allow\n");
    free(r);
    r = ask("\x02"
            "Denied.Test\n",
            13);
    assert_string_equal(r, "deny not-allowed sbx egress: denied.test not allowed by policy of "
                           "task task-1 (not-allowed)\n");
    free(r);
    r = ask("\x02"
            "wild.test\n",
            11); /* the apex is not covered */
    expect_in(r, "deny not-allowed ");
    free(r);
    r = ask("\x02"
            "127.1\n",
            7);
    expect_in(r, "deny host-numeric sbx egress: 127.1 not allowed");
    free(r);
    /* malformed: closed without a word */
    r = ask("\x02"
            "a b.test\n",
            10);
    assert_string_equal(r, "");
    free(r);
    r = ask("\x02"
            "no-newline.test",
            16);
    assert_string_equal(r, "");
    free(r);
    r = ask("\x02"
            "\n",
            2);
    expect_in(r, "deny host-empty");
    free(r);
}

/* A connected loopback TCP pair: *client and the accepted *server. */
static void tcp_pair(int *client, int *server)
{
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    int l = socket(AF_INET, SOCK_STREAM, 0);

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &sl), 0);
    *client = socket(AF_INET, SOCK_STREAM, 0);
    assert_int_equal(connect(*client, (struct sockaddr *)&sin, sizeof(sin)), 0);
    *server = accept(l, NULL, NULL);
    assert_true(*server >= 0);
    close(l);
}

/* Hands a fresh connection over with the line msg; sends req on it (NULL: nothing,
 * only the end; with half_close, then the end); returns what came back before the
 * close. */
static char *transparent_as(const char *msg, const char *req, int half_close)
{
    int c, s, u;
    char *reply;

    tcp_pair(&c, &s);
    u = send_msg(msg, strlen(msg), s);
    close(s);
    if (req != NULL) {
        assert_int_equal(write(c, req, strlen(req)), (ssize_t)strlen(req));
    }
    if (req == NULL || half_close) {
        shutdown(c, SHUT_WR);
    }
    reply = test_read_all(c);
    close(c);
    close(u);
    return reply;
}

static char *transparent(const char *msg, const char *req)
{
    return transparent_as(msg, req, 0);
}

/* A line of the egress log holding every one of the strings given (NULL-ended). */
static int log_has(const char *a, const char *b, const char *c)
{
    FILE *f = fopen(t.log, "r");
    char *line = NULL;
    size_t len = 0;
    int found = 0;

    if (f == NULL) {
        return 0;
    }
    while (!found && getline(&line, &len, f) > 0) {
        found = strstr(line, a) != NULL && (b == NULL || strstr(line, b) != NULL) &&
                (c == NULL || strstr(line, c) != NULL);
    }
    free(line);
    fclose(f);
    return found;
}

static void test_transparent_connections(void **state)
{
    char *msg = xasprintf_test("\x01"
                               "allowed.test:%d\n",
                               t.http_port);
    char *req = xasprintf_test("GET /hi HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", t.http_port);
    char *r;

    (void)state;
    /* the origin's answer, and no "200 Connection established" before it */
    r = transparent(msg, req);
    if (strncmp(r, "HTTP/1.", 7) != 0 || strstr(r, "hello from http allowed.test") == NULL ||
        strstr(r, "Connection established") != NULL) {
        fail_msg("allowed: '%s'", r);
    }
    free(r);
    /* the HTTP Host check applies unchanged */
    free(req);
    req = xasprintf_test("GET /hi HTTP/1.1\r\nHost: denied.test:%d\r\n\r\n", t.http_port);
    r = transparent(msg, req);
    assert_null(strstr(r, "hello from"));
    free(r);
    free(msg);
    /* (changed) a denied name, an IP literal: closed when the client sends nothing */
    msg = xasprintf_test("\x01"
                         "denied.test:%d\n",
                         t.http_port);
    r = transparent(msg, NULL);
    assert_string_equal(r, "");
    free(r);
    /* ... and answered with the refusal when it sends a request */
    r = transparent(msg, req);
    expect_in(r, "HTTP/1.1 403 sbx egress not-allowed: denied.test:");
    expect_in(r, "X-Sbx-Deny: not-allowed\r\n");
    expect_in(r, "\r\n\r\nsbx egress not-allowed: denied.test:");
    expect_in(r, "explain on the host: sbx egress why denied.test:");
    assert_null(strstr(r, "hello from"));
    free(r);
    free(msg);
    msg = xasprintf_test("\x01"
                         "127.0.0.1:%d\n",
                         t.http_port);
    r = transparent(msg, NULL);
    assert_string_equal(r, "");
    free(r);
    r = transparent(msg, "GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    expect_in(r, "HTTP/1.1 403 sbx egress ip-literal: 127.0.0.1:");
    free(r);
    free(msg);
    /* an allowed name that does not resolve (no resolver here): its 502 answered too,
     * a ClientHello with a fatal internal_error alert (80) */
    r = transparent("\x01"
                    "x.wild.test:80\n",
                    "GET / HTTP/1.1\r\nHost: x.wild.test\r\n\r\n");
    expect_in(r, "HTTP/1.1 502 sbx egress resolve-failed: x.wild.test:80 is allowed but does "
                 "not resolve");
    free(r);
    r = transparent("\x01"
                    "x.wild.test:443\n",
                    "\x16\x03\x01\x02\x00\x01");
    assert_memory_equal(r, "\x15\x03\x03\x00\x02\x02\x50", 7);
    free(r);
    /* a line without its end, or with a control byte: a bad handover */
    msg = xasprintf_test("\x01"
                         "allowed.test:%d",
                         t.http_port);
    r = transparent(msg, NULL);
    assert_string_equal(r, "");
    free(r);
    free(msg);
    r = transparent("\x01"
                    "allowed.test:80\x7f\n",
                    NULL);
    assert_string_equal(r, "");
    free(r);
    free(req);
}

/* (added) "\x03HOST:PORT\n": a connection to a denied name's address. Refused whatever
 * the rules say (never connected: even an allowed name gets no origin answer), and
 * answered by the client's first bytes: an HTTP request gets the 403 with the text, a
 * TLS ClientHello a fatal access_denied alert, other bytes or nothing a close; each
 * with its log line, attributed. */
static void test_denied_address(void **state)
{
    char *msg = xasprintf_test("\x03"
                               "denied.test:%d\nSbx-Relay: pid=77 exec=exec-9\r\n",
                               t.http_port);
    char *req = xasprintf_test("POST /x HTTP/1.1\r\nHost: denied.test:%d\r\n"
                               "Content-Length: 5\r\n\r\nhello",
                               t.http_port);
    static const char hello[] = "\x16\x03\x01\x02\x00\x01\x01\xfc\x03\x03hello";
    char *r;

    (void)state;
    r = transparent(msg, req);
    expect_in(r, "HTTP/1.1 403 sbx egress not-allowed: denied.test:");
    expect_in(r, "is not in this task's egress allow-list (ask for egress.allow");
    expect_in(r, "X-Sbx-Deny: not-allowed\r\n");
    free(r);
    /* the request, then the client's end at once: still answered (a head cut short too) */
    r = transparent_as(msg, req, 1);
    expect_in(r, "HTTP/1.1 403 sbx egress not-allowed: denied.test:");
    free(r);
    r = transparent_as(msg, "GET / HTTP/1.1\r\nHost: den", 1);
    expect_in(r, "HTTP/1.1 403 sbx egress not-allowed: denied.test:");
    free(r);
    r = transparent_as(msg, "GE", 1); /* not even a method: closed */
    assert_string_equal(r, "");
    free(r);
    wait_until(
        log_has("\"exec\":\"exec-9\"", "\"host\":\"denied.test\"", "\"reason\":\"not-allowed\""),
        10, t.log, "the denied address's attributed log line");
    assert_true(log_has("\"pid\":77", "\"decision\":\"deny\"", "\"status\":403"));
    /* a TLS ClientHello: alert(21) TLS 1.2, length 2, fatal(2), access_denied(49) */
    r = transparent(msg, hello);
    assert_memory_equal(r, "\x15\x03\x03\x00\x02\x02\x31", 7);
    free(r);
    /* another protocol's bytes, or none: closed */
    r = transparent(msg, "SSH-2.0-OpenSSH_9.2\r\n");
    assert_string_equal(r, "");
    free(r);
    r = transparent(msg, NULL);
    assert_string_equal(r, "");
    free(r);
    free(msg);
    free(req);
    /* an allowed name's request on a denied address: refused, never connected (the
     * policy changed since the lookup) */
    msg = xasprintf_test("\x03"
                         "allowed.test:%d\n",
                         t.http_port);
    req = xasprintf_test("GET /hi HTTP/1.1\r\nHost: allowed.test:%d\r\n\r\n", t.http_port);
    r = transparent(msg, req);
    expect_in(r, "HTTP/1.1 403 sbx egress denied-at-lookup: ");
    assert_null(strstr(r, "hello from"));
    free(r);
    free(msg);
    free(req);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_name_queries),
        cmocka_unit_test(test_transparent_connections),
        cmocka_unit_test(test_denied_address),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
