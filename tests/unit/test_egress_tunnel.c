/* test_egress_tunnel.c - what a tunnel and a plain HTTP connection may carry
 * (docs/egress.md, "What a tunnel may carry"), and the caps on a request head. The
 * proxy runs in this process (started through its API, spoken to on its unix socket);
 * the destination is a thread of this test on 127.0.0.1 that records every byte it
 * receives, so "never reaches the destination" is checked, not assumed:
 * - client-first bytes that are neither TLS nor HTTP/1 (a leading empty line, an
 *   unknown method, a banner) are refused and logged tunnel-protocol, unless an
 *   opaque rule allows the destination: then they pass and the line says opaque;
 * - HTTP is one request per connection: a second request pipelined in the same write
 *   (another Host) never reaches the destination; a body goes on to its
 *   Content-Length and not a byte further; a chunked body is refused;
 * - an endless header line and too many headers get 431, a stalled head 408, and an
 *   abandoned head frees its connection. Nothing leaves loopback. */
#include "test_common.h"
#include "test_proc.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "config/config.h"
#include "egress/egress.h"
#include "egress/egress_int.h"
#include "egress/request.h"
#include "util/xalloc.h"
#include "jsonl.h"

static struct {
    char *dir;
    char *sockdir;
    char *log;
    char *sock;
    struct sbx_config *cfg;
    struct sbx_egress *egress;
    int sink_port;
    pthread_mutex_t mu;
    char got[65536]; /* what the sink's last connection received */
    size_t got_n;
    int conns; /* connections the sink accepted */
} t = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Reads until the peer pauses for 300 ms or ends, records it, answers "got N". */
static void *sink_main(void *arg)
{
    int l = (int)(intptr_t)arg;

    for (;;) {
        int c = accept(l, NULL, NULL);
        char buf[65536];
        size_t n = 0;
        char reply[32];
        int m;

        if (c < 0) {
            continue;
        }
        for (;;) {
            struct pollfd p = {c, POLLIN, 0};
            ssize_t k;

            if (poll(&p, 1, 300) <= 0 || n == sizeof(buf)) {
                break;
            }
            k = read(c, buf + n, sizeof(buf) - n);
            if (k <= 0) {
                break;
            }
            n += (size_t)k;
        }
        pthread_mutex_lock(&t.mu);
        memcpy(t.got, buf, n);
        t.got_n = n;
        t.conns++;
        pthread_mutex_unlock(&t.mu);
        m = snprintf(reply, sizeof(reply), "got %zu\n", n);
        if (write(c, reply, (size_t)m) != m) {
            /* the client went away */
        }
        close(c);
    }
    return NULL;
}

static int setup(void **state)
{
    static const char *rules[] = {"front.test:*", "opaque.test:* opaque", NULL};
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    sbx_error_t *err = NULL;
    pthread_t th;
    int l;

    (void)state;
    signal(SIGPIPE, SIG_IGN);
    t.dir = test_mkdtemp();
    t.log = xasprintf_test("%s/egress.log", t.dir);
    t.sockdir = xasprintf_test("%s/sb", t.dir);
    t.sock = xasprintf_test("%s/%s", t.sockdir, SBX_EGRESS_SOCKET);
    t.cfg = sbx_config_defaults();
    t.cfg->egress.log = xstrdup(t.log);
    t.cfg->egress.system_dns = 0;
    t.cfg->egress.header_timeout = 1;
    t.cfg->egress.hosts = xcalloc(3, sizeof(*t.cfg->egress.hosts));
    t.cfg->egress.hosts[0].name = xstrdup("front.test");
    t.cfg->egress.hosts[0].address = xstrdup("127.0.0.1");
    t.cfg->egress.hosts[1].name = xstrdup("other.test");
    t.cfg->egress.hosts[1].address = xstrdup("127.0.0.1");
    t.cfg->egress.hosts[2].name = xstrdup("opaque.test");
    t.cfg->egress.hosts[2].address = xstrdup("127.0.0.1");
    t.cfg->egress.n_hosts = 3;

    l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(l, 16), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &sl), 0);
    t.sink_port = ntohs(sin.sin_port);
    pthread_create(&th, NULL, sink_main, (void *)(intptr_t)l);
    pthread_detach(th);

    t.egress = sbx_egress_start(t.cfg, &err);
    if (t.egress == NULL ||
        sbx_egress_add(t.egress, t.sockdir, "job-t", "task-t", "sandbox-t", rules, &err) < 0) {
        fail_msg("egress: %s", err->msg);
    }
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sbx_egress_stop(t.egress);
    sbx_config_destroy(t.cfg);
    test_rm_rf(t.dir);
    free(t.dir);
    free(t.sockdir);
    free(t.log);
    free(t.sock);
    return 0;
}

static int sandbox_connect(void)
{
    struct sockaddr_un sun;
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    struct timeval tv = {15, 0};

    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", t.sock);
    assert_int_equal(connect(u, (struct sockaddr *)&sun, sizeof(sun)), 0);
    setsockopt(u, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    return u;
}

/* CONNECT HOST to the sink; returns the socket after the 200. */
static int tunnel_to(const char *host)
{
    int u = sandbox_connect();
    char req[256];
    char head[256];
    size_t got = 0;
    int n = snprintf(req, sizeof(req), "CONNECT %s:%d HTTP/1.1\r\n\r\n", host, t.sink_port);

    assert_int_equal(write(u, req, (size_t)n), n);
    while (got < sizeof(head) - 1 && read(u, head + got, 1) == 1) {
        got++;
        if (got >= 4 && memcmp(head + got - 4, "\r\n\r\n", 4) == 0) {
            break;
        }
    }
    head[got] = '\0';
    if (strncmp(head, "HTTP/1.1 200 ", 13) != 0) {
        fail_msg("CONNECT %s answered: %s", host, head);
    }
    return u;
}

/* Sends the bytes (errors ignored: the proxy may close first) and returns all it
 * gets back until the end. */
static char *exchange(int u, const char *p, size_t n)
{
    char *reply;

    while (n > 0) {
        ssize_t k = write(u, p, n);

        if (k <= 0) {
            break;
        }
        p += k;
        n -= (size_t)k;
    }
    reply = test_read_all(u);
    close(u);
    return reply;
}

static void sink_reset(void)
{
    pthread_mutex_lock(&t.mu);
    t.got_n = 0;
    t.got[0] = '\0';
    t.conns = 0;
    pthread_mutex_unlock(&t.mu);
}

/* What the sink received on its last connection, NUL-ended. */
static char *sink_got(void)
{
    char *s;

    pthread_mutex_lock(&t.mu);
    s = xstrndup(t.got, t.got_n);
    pthread_mutex_unlock(&t.mu);
    return s;
}

static json_t *log_lines(void)
{
    return test_jsonl_read(t.log);
}

static size_t mark(void)
{
    return test_jsonl_count(t.log);
}

/* The one line of the connection after mark() == at: decision, reason, opaque, and
 * the reply status. */
static void expect_line(size_t at, const char *decision, const char *reason, int opaque, int status)
{
    json_t *arr = NULL;
    json_t *o;
    const char *r;

    for (int i = 0; i < 500; i++) {
        arr = log_lines();
        if (json_array_size(arr) > at) {
            break;
        }
        json_decref(arr);
        arr = NULL;
        usleep(10000);
    }
    assert_non_null(arr);
    assert_int_equal(json_array_size(arr), at + 1);
    o = json_array_get(arr, at);
    assert_string_equal(json_string_value(json_object_get(o, "job")), "job-t");
    assert_string_equal(json_string_value(json_object_get(o, "decision")), decision);
    r = json_string_value(json_object_get(o, "reason"));
    if (reason != NULL) {
        if (r == NULL || strcmp(r, reason) != 0) {
            fail_msg("reason %s, want %s", r ? r : "null", reason);
        }
    }
    else if (r != NULL) {
        fail_msg("reason %s, want null", r);
    }
    assert_true(json_is_boolean(json_object_get(o, "opaque")));
    assert_int_equal(json_is_true(json_object_get(o, "opaque")), opaque);
    assert_int_equal(json_integer_value(json_object_get(o, "status")), status);
    json_decref(arr);
}

/* Tunnels to front.test and sends `bytes`: refused, logged with `reason`, and the sink
 * got nothing. */
static void refused_in_tunnel(const char *bytes, const char *reason)
{
    size_t m = mark();
    char *reply;
    char *got;

    sink_reset();
    reply = exchange(tunnel_to("front.test"), bytes, strlen(bytes));
    assert_string_equal(reply, "");
    expect_line(m, "deny", reason, 0, 200);
    got = sink_got();
    assert_string_equal(got, "");
    free(got);
    free(reply);
}

static void test_empty_line_and_unknown_method(void **state)
{
    (void)state;
    refused_in_tunnel("\r\nGET / HTTP/1.1\r\nHost: other.test\r\n\r\n", "tunnel-protocol");
    refused_in_tunnel("\r\n\r\n", "tunnel-protocol");
    refused_in_tunnel("FOO / HTTP/1.1\r\nHost: other.test\r\n\r\n", "tunnel-protocol");
    refused_in_tunnel("get / HTTP/1.1\r\nHost: other.test\r\n\r\n", "tunnel-protocol");
    refused_in_tunnel("SSH-2.0-OpenSSH_9.2\r\n", "tunnel-protocol");
    refused_in_tunnel("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
                      "chunked-body");
}

static void test_pipelined_request_never_arrives(void **state)
{
    char req[512];
    char want[32];
    size_t m;
    char *reply;
    char *got;

    (void)state;
    /* two requests in one write, the second for another host */
    snprintf(req, sizeof(req),
             "GET /one HTTP/1.1\r\nHost: front.test:%d\r\n\r\n"
             "GET /two HTTP/1.1\r\nHost: other.test\r\n\r\n",
             t.sink_port);
    m = mark();
    sink_reset();
    reply = exchange(tunnel_to("front.test"), req, strlen(req));
    got = sink_got();
    assert_non_null(strstr(got, "GET /one HTTP/1.1\r\n"));
    assert_null(strstr(got, "/two"));
    assert_null(strstr(got, "other.test"));
    snprintf(want, sizeof(want), "got %zu\n", strlen(got));
    assert_string_equal(reply, want);
    expect_line(m, "allow", "one-request", 0, 200);
    free(got);
    free(reply);

    /* the second request in a later write: dropped, and the connection ends */
    snprintf(req, sizeof(req), "GET /one HTTP/1.1\r\nHost: front.test:%d\r\n\r\n", t.sink_port);
    m = mark();
    sink_reset();
    {
        int u = tunnel_to("front.test");

        assert_int_equal(write(u, req, strlen(req)), (ssize_t)strlen(req));
        usleep(100 * 1000);
        reply = exchange(u, "GET /two HTTP/1.1\r\nHost: other.test\r\n\r\n", 39);
    }
    got = sink_got();
    for (int i = 0; i < 300 && got[0] == '\0'; i++) { /* the sink records at its end */
        free(got);
        usleep(10000);
        got = sink_got();
    }
    assert_non_null(strstr(got, "GET /one HTTP/1.1\r\n"));
    assert_null(strstr(got, "/two"));
    expect_line(m, "allow", "one-request", 0, 200);
    free(got);
    free(reply);

    /* a body goes on to its Content-Length, not a byte further */
    snprintf(req, sizeof(req),
             "POST /b HTTP/1.1\r\nHost: front.test:%d\r\nContent-Length: 5\r\n\r\n"
             "helloGET /two HTTP/1.1\r\nHost: other.test\r\n\r\n",
             t.sink_port);
    m = mark();
    sink_reset();
    reply = exchange(tunnel_to("front.test"), req, strlen(req));
    got = sink_got();
    assert_non_null(strstr(got, "POST /b HTTP/1.1\r\n"));
    assert_int_equal(strlen(got) - (size_t)(strstr(got, "\r\n\r\n") + 4 - got), 5);
    assert_string_equal(strstr(got, "\r\n\r\n") + 4, "hello");
    expect_line(m, "allow", "one-request", 0, 200);
    free(got);
    free(reply);
}

/* The same on the plain proxy path (no CONNECT): the second request is dropped, a
 * chunked body gets 411. */
static void test_plain_http_one_request(void **state)
{
    char req[512];
    size_t m;
    char *reply;
    char *got;

    (void)state;
    snprintf(req, sizeof(req),
             "GET http://front.test:%d/one HTTP/1.1\r\n\r\n"
             "GET http://other.test:%d/two HTTP/1.1\r\n\r\n",
             t.sink_port, t.sink_port);
    m = mark();
    sink_reset();
    reply = exchange(sandbox_connect(), req, strlen(req));
    got = sink_got();
    assert_non_null(strstr(got, "GET /one HTTP/1.1\r\n"));
    assert_null(strstr(got, "two"));
    assert_null(strstr(reply, "two"));
    expect_line(m, "allow", "one-request", 0, 0);
    free(got);
    free(reply);

    snprintf(req, sizeof(req),
             "POST http://front.test:%d/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
             "5\r\nhello\r\n0\r\n\r\n",
             t.sink_port);
    m = mark();
    reply = exchange(sandbox_connect(), req, strlen(req));
    assert_non_null(strstr(reply, "HTTP/1.1 411 sbx egress chunked-body: a chunked request body "
                                  "cannot be forwarded (send a Content-Length)\r\n"));
    assert_non_null(strstr(reply, "X-Sbx-Deny: chunked-body\r\n"));
    expect_line(m, "deny", "chunked-body", 0, 411);
    free(reply);
}

/* An opaque rule passes client-first bytes it cannot read, and says so; TLS and HTTP
 * to it are still checked. */
static void test_opaque_rule(void **state)
{
    const char raw[] = "\r\nSSH-2.0-client\r\nanything at all";
    char want[32];
    size_t m;
    char *reply;
    char *got;

    (void)state;
    m = mark();
    sink_reset();
    reply = exchange(tunnel_to("opaque.test"), raw, sizeof(raw) - 1);
    snprintf(want, sizeof(want), "got %zu\n", sizeof(raw) - 1);
    assert_string_equal(reply, want);
    got = sink_got();
    assert_string_equal(got, raw);
    expect_line(m, "allow", NULL, 1, 200);
    free(got);
    free(reply);

    m = mark();
    reply = exchange(tunnel_to("opaque.test"), "GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", 37);
    assert_string_equal(reply, "");
    expect_line(m, "deny", "host-mismatch", 0, 200);
    free(reply);
}

/* Caps on the request head: one endless header line and 101 short ones get 431, a
 * head that stalls gets 408 after egress.header_timeout (1 s here), and connections
 * abandoned mid-head are gone from the sandbox's count (their memory with them: the
 * ASan build checks for leaks). */
static void test_head_caps(void **state)
{
    char *big = xmalloc(64 * 1024 + 1);
    char req[4096];
    size_t n;
    size_t m;
    char *reply;
    struct sbx_egress_summary sum;

    (void)state;
    n = (size_t)snprintf(big, 64, "GET http://front.test/ HTTP/1.1\r\nX-Endless: ");
    memset(big + n, 'a', 64 * 1024 - n);
    big[64 * 1024] = '\0';
    m = mark();
    reply = exchange(sandbox_connect(), big, 64 * 1024);
    assert_non_null(strstr(reply, "HTTP/1.1 431 "));
    assert_non_null(strstr(reply, "X-Sbx-Deny: header-too-large\r\n"));
    expect_line(m, "deny", "header-too-large", 0, 431);
    free(reply);
    free(big);

    n = (size_t)snprintf(req, sizeof(req), "GET http://front.test:%d/ HTTP/1.1\r\n", t.sink_port);
    for (int i = 0; i <= SBX_EGRESS_HEADERS_MAX; i++) {
        n += (size_t)snprintf(req + n, sizeof(req) - n, "X-%d: 1\r\n", i);
    }
    n += (size_t)snprintf(req + n, sizeof(req) - n, "\r\n");
    m = mark();
    reply = exchange(sandbox_connect(), req, n);
    assert_non_null(strstr(reply, "HTTP/1.1 431 "));
    assert_non_null(strstr(reply, "X-Sbx-Deny: too-many-headers\r\n"));
    expect_line(m, "deny", "too-many-headers", 0, 431);
    free(reply);

    m = mark();
    reply = exchange(sandbox_connect(), "GET http://front.test/ HTTP/1.1\r\nX-A: 1\r\n", 41);
    assert_non_null(strstr(reply, "HTTP/1.1 408 "));
    expect_line(m, "deny", "header-timeout", 0, 408);
    free(reply);

    /* ten heads abandoned half-way: each is closed, logged once, and not counted */
    m = mark();
    for (int i = 0; i < 10; i++) {
        int u = sandbox_connect();

        assert_int_equal(write(u, "GET http://front.test/ HTTP/1.1\r\nX-A: ", 38), 38);
        close(u);
    }
    for (int i = 0; i < 500 && mark() < m + 10; i++) {
        usleep(10000);
    }
    assert_int_equal(mark(), m + 10);
    assert_int_equal(sbx_egress_summary(t.egress, t.sockdir, &sum), 0);
    assert_int_equal(sum.open, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_empty_line_and_unknown_method),
        cmocka_unit_test(test_pipelined_request_never_arrives),
        cmocka_unit_test(test_plain_http_one_request),
        cmocka_unit_test(test_opaque_rule),
        cmocka_unit_test(test_head_caps),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
