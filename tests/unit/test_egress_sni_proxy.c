/* test_egress_sni_proxy.c - the TLS server-name check on CONNECT tunnels in the proxy
 * (started through its API, spoken to on its unix socket) against destinations that are
 * threads of this test on 127.0.0.1: a matching name goes through, a different one
 * (domain fronting) is cut and logged, other client-first bytes are cut
 * (test_egress_tunnel.c), server-first protocols pass, a stalled hello times out, and
 * egress.check_sni = false turns the check off. The parser itself is test_egress_sni.c.
 * Nothing leaves loopback. */
#include "test_common.h"
#include "test_proc.h"
#include "tls_hello.h"

#include <arpa/inet.h>
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>

#include "config/config.h"
#include "egress/egress.h"
#include "egress/egress_int.h"
#include "egress/sni.h"
#include "util/xalloc.h"
#include "jsonl.h"

static struct {
    char *dir;
    char *log;
    struct sbx_config *cfg;
    struct sbx_egress *egress;
    char *sock;
    int sink_port;   /* reads what comes, answers "got N" at its first pause */
    int banner_port; /* speaks first */
    int tls_port;    /* answers a hello with a ServerHello, then "tls got N" */
} t;

static int tcp_listen(int *port)
{
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(fd, 16), 0);
    assert_int_equal(getsockname(fd, (struct sockaddr *)&sin, &sl), 0);
    *port = ntohs(sin.sin_port);
    return fd;
}

static void *sink_main(void *arg)
{
    int l = (int)(intptr_t)arg;

    for (;;) {
        int c = accept(l, NULL, NULL);
        char buf[16384];
        char reply[32];
        ssize_t n;

        if (c < 0) {
            continue;
        }
        n = read(c, buf, sizeof(buf));
        if (n > 0) {
            int m = snprintf(reply, sizeof(reply), "got %zd\n", n);

            if (write(c, reply, (size_t)m) != m) {
                /* the client went away */
            }
        }
        close(c);
    }
    return NULL;
}

static void *banner_main(void *arg)
{
    int l = (int)(intptr_t)arg;

    for (;;) {
        int c = accept(l, NULL, NULL);
        char buf[256];

        if (c < 0) {
            continue;
        }
        if (write(c, "SSH-2.0-test\r\n", 14) == 14 && read(c, buf, sizeof(buf)) > 0 &&
            write(c, "ok\n", 3) != 3) {
            /* the client went away */
        }
        close(c);
    }
    return NULL;
}

/* Reads exactly n bytes (0 at an end). */
static int read_full(int fd, void *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        ssize_t r = read(fd, (char *)p + got, n - got);

        if (r <= 0) {
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

/* The ServerHello record the TLS-ish destination sends (45 bytes). */
static const unsigned char server_hello_rec[] = {
    0x16, 0x03, 0x03, 0x00, 0x28, 0x02, 0x00, 0x00, 0x24, 0x03, 0x03, 0x11, 0x11, 0x11, 0x11,
    0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11,
    0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x00, 0x13};

/* A TLS-ish destination: reads one record (the hello), answers a ServerHello, then
 * reads until a read ends in a newline and answers "tls got N" (N: bytes after the
 * hello). */
static void *tls_main(void *arg)
{
    int l = (int)(intptr_t)arg;

    for (;;) {
        int c = accept(l, NULL, NULL);
        unsigned char hdr[5];
        char buf[16384];
        size_t total = 0;
        char reply[32];
        int m;

        if (c < 0) {
            continue;
        }
        if (read_full(c, hdr, 5) == 0 && read_full(c, buf, (size_t)hdr[3] << 8 | hdr[4]) == 0 &&
            write(c, server_hello_rec, sizeof(server_hello_rec)) ==
                (ssize_t)sizeof(server_hello_rec)) {
            for (;;) {
                ssize_t n = read(c, buf, sizeof(buf));

                if (n <= 0) {
                    break;
                }
                total += (size_t)n;
                if (buf[n - 1] == '\n') {
                    m = snprintf(reply, sizeof(reply), "tls got %zu\n", total);
                    if (write(c, reply, (size_t)m) != m) {
                        /* the client went away */
                    }
                    break;
                }
            }
        }
        close(c);
    }
    return NULL;
}

static struct sbx_egress *start_egress(int check_sni, const char *sockdir)
{
    static const char *rules[] = {"front.test:*", "127.0.0.1/32:*", NULL};
    sbx_error_t *err = NULL;
    struct sbx_egress *e;

    t.cfg->egress.check_sni = check_sni;
    e = sbx_egress_start(t.cfg, &err);
    if (e == NULL) {
        fail_msg("egress: %s", err->msg);
    }
    if (sbx_egress_add(e, sockdir, "job-sni", "task-sni", "sandbox-sni", rules, &err) < 0) {
        fail_msg("add: %s", err->msg);
    }
    return e;
}

static int setup(void **state)
{
    pthread_t th;
    int l;
    char *sockdir;

    (void)state;
    signal(SIGPIPE, SIG_IGN);
    t.dir = test_mkdtemp();
    t.log = xasprintf_test("%s/egress.log", t.dir);
    t.cfg = sbx_config_defaults();
    t.cfg->egress.log = xstrdup(t.log);
    t.cfg->egress.system_dns = 0;
    t.cfg->egress.header_timeout = 1;
    t.cfg->egress.hosts = xcalloc(2, sizeof(*t.cfg->egress.hosts));
    t.cfg->egress.hosts[0].name = xstrdup("front.test");
    t.cfg->egress.hosts[0].address = xstrdup("127.0.0.1");
    t.cfg->egress.hosts[1].name = xstrdup("other.test");
    t.cfg->egress.hosts[1].address = xstrdup("127.0.0.1");
    t.cfg->egress.n_hosts = 2;
    l = tcp_listen(&t.sink_port);
    pthread_create(&th, NULL, sink_main, (void *)(intptr_t)l);
    pthread_detach(th);
    l = tcp_listen(&t.banner_port);
    pthread_create(&th, NULL, banner_main, (void *)(intptr_t)l);
    pthread_detach(th);
    l = tcp_listen(&t.tls_port);
    pthread_create(&th, NULL, tls_main, (void *)(intptr_t)l);
    pthread_detach(th);
    sockdir = xasprintf_test("%s/sb", t.dir);
    t.egress = start_egress(1, sockdir);
    t.sock = xasprintf_test("%s/%s", sockdir, SBX_EGRESS_SOCKET);
    free(sockdir);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sbx_egress_stop(t.egress);
    sbx_config_destroy(t.cfg);
    test_rm_rf(t.dir);
    free(t.dir);
    free(t.log);
    free(t.sock);
    return 0;
}

/* CONNECT HOST:PORT on the sandbox socket `sock`; returns the socket after the 200. */
static int tunnel_to(const char *sock, const char *host, int port)
{
    struct sockaddr_un sun;
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    char req[256];
    char head[256];
    size_t got = 0;
    struct timeval tv = {15, 0};
    int n = snprintf(req, sizeof(req), "CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n", host, port,
                     host, port);

    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", sock);
    assert_int_equal(connect(u, (struct sockaddr *)&sun, sizeof(sun)), 0);
    setsockopt(u, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(write(u, req, (size_t)n), n);
    while (got < sizeof(head) - 1) {
        if (read(u, head + got, 1) != 1) {
            head[got] = '\0';
            fail_msg("CONNECT %s:%d: reading the answer: %s (after '%s')", host, port,
                     strerror(errno), head);
        }
        got++;
        if (got >= 4 && memcmp(head + got - 4, "\r\n\r\n", 4) == 0) {
            break;
        }
    }
    head[got] = '\0';
    if (strncmp(head, "HTTP/1.1 200 ", 13) != 0) {
        fail_msg("CONNECT %s:%d answered: %s", host, port, head);
    }
    return u;
}

/* Sends n bytes and returns what comes back until the proxy or destination closes. */
static char *exchange(int u, const void *p, size_t n)
{
    char *reply;

    assert_int_equal(write(u, p, n), (ssize_t)n);
    reply = test_read_all(u);
    close(u);
    return reply;
}

static json_t *log_lines(void)
{
    return test_jsonl_read(t.log);
}

static size_t mark(void)
{
    return test_jsonl_count(t.log);
}

/* Line number `at` (the connection after mark() == at): the proxy writes it when the
 * connection ends, which may be just after the client saw its end. */
static void expect_line(size_t at, int port, const char *decision, const char *reason,
                        const char *sni)
{
    json_t *arr = NULL;
    json_t *o;
    const char *r;
    const char *s;

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
    assert_int_equal(json_array_size(arr), at + 1); /* one line per connection */
    o = json_array_get(arr, at);
    assert_string_equal(json_string_value(json_object_get(o, "job")), "job-sni");
    assert_int_equal(json_integer_value(json_object_get(o, "port")), port);
    assert_string_equal(json_string_value(json_object_get(o, "decision")), decision);
    r = json_string_value(json_object_get(o, "reason"));
    s = json_string_value(json_object_get(o, "sni"));
    if (reason != NULL) {
        assert_non_null(r);
        assert_string_equal(r, reason);
    }
    else {
        assert_null(r);
    }
    if (sni != NULL) {
        assert_non_null(s);
        assert_string_equal(s, sni);
    }
    else {
        assert_null(s);
    }
    json_decref(arr);
}

/* CONNECT front.test to the sink, send n bytes, and expect `reply` back and one log
 * line (decision, reason, sni). */
static void through_front(const void *bytes, size_t n, const char *reply, const char *decision,
                          const char *reason, const char *sni)
{
    size_t m = mark();
    char *got = exchange(tunnel_to(t.sock, "front.test", t.sink_port), bytes, n);

    assert_string_equal(got, reply);
    free(got);
    expect_line(m, t.sink_port, decision, reason, sni);
}

static void test_proxy_sni_matches(void **state)
{
    struct buf o = {{0}, 0};
    char want[32];

    (void)state;
    client_hello(&o, "FRONT.test.");
    snprintf(want, sizeof(want), "got %zu\n", o.n);
    through_front(o.b, o.n, want, "allow", NULL, "FRONT.test.");
}

static void test_proxy_sni_mismatch(void **state)
{
    size_t m;
    struct buf o = {{0}, 0};
    char want[32];
    char *reply;

    (void)state;
    client_hello(&o, "other.test"); /* mapped to the same address: domain fronting */
    through_front(o.b, o.n, "", "deny", "sni-mismatch", "other.test");
    /* An IP-literal tunnel (allowed by a CIDR rule) carries no name but the literal. */
    m = mark();
    reply = exchange(tunnel_to(t.sock, "127.0.0.1", t.sink_port), o.b, o.n);
    assert_string_equal(reply, "");
    free(reply);
    expect_line(m, t.sink_port, "deny", "sni-mismatch", "other.test");
    memset(&o, 0, sizeof(o));
    client_hello(&o, "127.0.0.1");
    snprintf(want, sizeof(want), "got %zu\n", o.n);
    m = mark();
    reply = exchange(tunnel_to(t.sock, "127.0.0.1", t.sink_port), o.b, o.n);
    assert_string_equal(reply, want);
    free(reply);
    expect_line(m, t.sink_port, "allow", NULL, "127.0.0.1");
}

static void test_proxy_not_tls(void **state)
{
    size_t m;
    struct buf o = {{0}, 0};
    char want[32];
    char *reply;
    int u;

    (void)state;
    /* neither TLS nor HTTP, and no opaque rule: refused (test_egress_tunnel.c) */
    through_front("plain\n", 6, "", "deny", "tunnel-protocol", NULL);
    /* TLS without a name to a named host needs an opaque rule (it names no host the
     * proxy can hold it to); to an IP literal a CIDR rule allowed, it passes (and logs
     * no name). */
    client_hello(&o, NULL);
    through_front(o.b, o.n, "", "deny", "sni-absent", NULL);
    snprintf(want, sizeof(want), "got %zu\n", o.n);
    m = mark();
    reply = exchange(tunnel_to(t.sock, "127.0.0.1", t.sink_port), o.b, o.n);
    assert_string_equal(reply, want);
    free(reply);
    expect_line(m, t.sink_port, "allow", NULL, NULL);
    /* The destination speaks first (SSH): the client waits for it, and gets it. */
    m = mark();
    u = tunnel_to(t.sock, "front.test", t.banner_port);
    {
        char banner[15] = {0};
        size_t got = 0;

        while (got < 14) {
            ssize_t n = read(u, banner + got, 14 - got);

            assert_true(n > 0);
            got += (size_t)n;
        }
        assert_string_equal(banner, "SSH-2.0-test\r\n");
    }
    reply = exchange(u, "hi\n", 3);
    assert_string_equal(reply, "ok\n");
    free(reply);
    expect_line(m, t.banner_port, "allow", NULL, NULL);
}

static void test_proxy_sni_unreadable_and_timeout(void **state)
{
    size_t m;
    struct buf o = {{0}, 0};
    char *reply;
    int u;

    (void)state;
    through_front("\x16\x03\x01\x00\x05\x02\x00\x00\x01\x00", 10, "", "deny", "sni-unreadable",
                  NULL);
    /* Half a hello, then nothing: cut after egress.header_timeout (1 s here). */
    client_hello(&o, "front.test");
    m = mark();
    u = tunnel_to(t.sock, "front.test", t.sink_port);
    reply = exchange(u, o.b, o.n / 2);
    assert_string_equal(reply, "");
    free(reply);
    expect_line(m, t.sink_port, "deny", "sni-timeout", NULL);
}

/* A destination on this host is near: the proxy's socket to it gets the fixed send
 * buffer (SBX_EGRESS_NEAR_RTT_US); the proxy runs in this process, so its socket is
 * one of ours: the only TCP socket whose peer is the sink. */
static void test_proxy_near_destination_buffer(void **state)
{
    size_t m;
    int u;
    int found = 0;
    char *reply;
    struct buf o = {{0}, 0};
    char want[32];

    (void)state;
    m = mark();
    u = tunnel_to(t.sock, "front.test", t.sink_port);
    for (int fd = 0; fd < 4096; fd++) {
        struct sockaddr_in peer;
        socklen_t pl = sizeof(peer);
        int v = 0;
        socklen_t vl = sizeof(v);

        if (getpeername(fd, (struct sockaddr *)&peer, &pl) < 0 || peer.sin_family != AF_INET ||
            ntohs(peer.sin_port) != t.sink_port) {
            continue;
        }
        assert_int_equal(getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &v, &vl), 0);
        assert_int_equal(v, 2 * SBX_EGRESS_CLIENT_BUF); /* Linux doubles what is set */
        found++;
    }
    assert_int_equal(found, 1);
    client_hello(&o, "front.test");
    snprintf(want, sizeof(want), "got %zu\n", o.n);
    reply = exchange(u, o.b, o.n);
    assert_string_equal(reply, want);
    free(reply);
    expect_line(m, t.sink_port, "allow", NULL, "front.test");
}

/* An HTTP request inside a tunnel (Node's fetch tunnels http:// too) is checked like a
 * proxy request: its host must be the tunnel's, and it goes on with "Connection:
 * close" (hop-by-hop headers dropped), so the destination serves only it. HTTP/2 with
 * prior knowledge and ECH hide the name: refused. */
static void test_proxy_http_in_tunnel_and_ech(void **state)
{
    const char *names[] = {"front.test", NULL};
    struct buf msg = {{0}, 0};
    struct buf o = {{0}, 0};
    char req[256];
    char want[64];
    size_t fwd;
    size_t m;
    char *reply;
    int u;

    (void)state;
    snprintf(req, sizeof(req),
             "GET /x HTTP/1.1\r\nHost: front.test:%d\r\n"
             "Connection: keep-alive\r\n\r\n",
             t.sink_port);
    /* what goes on: the request line, Host, Connection: close */
    fwd = (size_t)snprintf(NULL, 0,
                           "GET /x HTTP/1.1\r\nHost: front.test:%d\r\n"
                           "Connection: close\r\n\r\n",
                           t.sink_port);
    snprintf(want, sizeof(want), "got %zu\n", fwd);
    through_front(req, strlen(req), want, "allow", NULL, NULL);

    /* another host, in the Host header or the target: cut */
    through_front("GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", 37, "", "deny", "host-mismatch",
                  NULL);
    through_front("GET http://other.test/ HTTP/1.1\r\n\r\n", 36, "", "deny", "host-mismatch", NULL);

    /* the method and head arriving in pieces; no Host: the tunnel's is added */
    m = mark();
    u = tunnel_to(t.sock, "front.test", t.sink_port);
    assert_int_equal(write(u, "P", 1), 1);
    usleep(50000);
    assert_int_equal(write(u, "OS", 2), 2);
    usleep(50000);
    snprintf(want, sizeof(want), "got %d\n",
             snprintf(NULL, 0,
                      "POST /y HTTP/1.1\r\nHost: front.test:%d\r\n"
                      "Connection: close\r\n\r\n",
                      t.sink_port));
    reply = exchange(u, "T /y HTTP/1.1\r\n\r\n", 17);
    assert_string_equal(reply, want);
    free(reply);
    expect_line(m, t.sink_port, "allow", NULL, NULL);

    through_front("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 24, "", "deny", "http-in-tunnel", NULL);

    hello_msg(&msg, names, 0xfe0d);
    records(&o, &msg, 16384);
    through_front(o.b, o.n, "", "deny", "sni-ech", NULL);
}

/* A client that says nothing for longer than egress.header_timeout (1 s here) is not
 * cut: it may speak later (pooled connections). A hello sent a byte at a time is
 * still read whole and checked. */
static void test_proxy_silent_then_dribble(void **state)
{
    struct buf o = {{0}, 0};
    char want[32];
    size_t m;
    char *reply;
    int u;

    (void)state;
    client_hello(&o, "front.test");
    snprintf(want, sizeof(want), "got %zu\n", o.n);
    m = mark();
    u = tunnel_to(t.sock, "front.test", t.sink_port);
    usleep(1500 * 1000);
    reply = exchange(u, o.b, o.n);
    assert_string_equal(reply, want);
    free(reply);
    expect_line(m, t.sink_port, "allow", NULL, "front.test");

    m = mark();
    u = tunnel_to(t.sock, "front.test", t.sink_port);
    for (size_t i = 0; i + 1 < o.n; i++) {
        assert_int_equal(write(u, o.b + i, 1), 1);
    }
    reply = exchange(u, o.b + o.n - 1, 1);
    assert_string_equal(reply, want);
    free(reply);
    expect_line(m, t.sink_port, "allow", NULL, "front.test");
}

static void test_proxy_check_off(void **state)
{
    size_t m;
    char *sockdir = xasprintf_test("%s/sb-off", t.dir);
    char *sock = xasprintf_test("%s/%s", sockdir, SBX_EGRESS_SOCKET);
    struct sbx_egress *e = start_egress(0, sockdir);
    struct buf o = {{0}, 0};
    char want[32];
    char *reply;

    (void)state;
    client_hello(&o, "other.test");
    snprintf(want, sizeof(want), "got %zu\n", o.n);
    m = mark();
    reply = exchange(tunnel_to(sock, "front.test", t.sink_port), o.b, o.n);
    assert_string_equal(reply, want); /* egress.check_sni = false: not looked at */
    free(reply);
    expect_line(m, t.sink_port, "allow", NULL, NULL);
    sbx_egress_stop(e);
    t.cfg->egress.check_sni = 1;
    free(sock);
    free(sockdir);
}

/* The handshake is followed to its end (issue 25, item 5): after a hello for the
 * allowed name, a second ClientHello naming another host, an HTTP request with another
 * Host, an SSH banner, or data before the server's reply end the tunnel, logged with
 * the reason and the first hello's name; a handshake that goes as TLS does (the
 * ServerHello, then the client's CCS and encrypted records) becomes a pipe, and what
 * follows goes through. */
static void test_proxy_follows_handshake(void **state)
{
    struct {
        const char *what;
        size_t len;
        const char *reason;
    } smuggled[] = {
        {NULL, 0, "tls-second-hello"},
        {"GET / HTTP/1.1\r\nHost: other.test\r\n\r\n", 37, "tls-record-type"},
        {"SSH-2.0-OpenSSH_9.6\r\n", 21, "tls-record-type"},
        {"\x17\x03\x03\x00\x02hi", 7, "tls-data-before-server"},
    };
    const unsigned char after[] = {0x14, 0x03, 0x03, 0x00, 0x01, 0x01, /* CCS */
                                   0x17, 0x03, 0x03, 0x00, 0x03, 'a',  'b', 'c', '\n'};
    unsigned char got_sh[sizeof(server_hello_rec)];
    char want[32];
    char *reply;
    size_t m;
    int u;

    (void)state;
    for (size_t i = 0; i < sizeof(smuggled) / sizeof(smuggled[0]); i++) {
        struct buf o = {{0}, 0};

        client_hello(&o, "front.test");
        if (smuggled[i].what == NULL) {
            client_hello(&o, "other.test");
        }
        else {
            put(&o, smuggled[i].what, smuggled[i].len);
        }
        m = mark();
        u = tunnel_to(t.sock, "front.test", t.tls_port);
        reply = exchange(u, o.b, o.n);
        /* the destination may have answered the hello before the cut: never more */
        assert_true(strlen(reply) == 0 || strncmp(reply, "\x16\x03\x03", 3) == 0);
        free(reply);
        expect_line(m, t.tls_port, "deny", smuggled[i].reason, "front.test");
    }
    /* a handshake: hello, the ServerHello back, then CCS and data: piped */
    {
        struct buf o = {{0}, 0};

        client_hello(&o, "front.test");
        m = mark();
        u = tunnel_to(t.sock, "front.test", t.tls_port);
        assert_int_equal(write(u, o.b, o.n), (ssize_t)o.n);
        assert_int_equal(read_full(u, got_sh, sizeof(got_sh)), 0);
        assert_memory_equal(got_sh, server_hello_rec, sizeof(got_sh));
        snprintf(want, sizeof(want), "tls got %zu\n", sizeof(after));
        reply = exchange(u, after, sizeof(after));
        assert_string_equal(reply, want);
        free(reply);
        expect_line(m, t.tls_port, "allow", NULL, "front.test");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_proxy_sni_matches),
        cmocka_unit_test(test_proxy_sni_mismatch),
        cmocka_unit_test(test_proxy_not_tls),
        cmocka_unit_test(test_proxy_sni_unreadable_and_timeout),
        cmocka_unit_test(test_proxy_near_destination_buffer),
        cmocka_unit_test(test_proxy_http_in_tunnel_and_ech),
        cmocka_unit_test(test_proxy_silent_then_dribble),
        cmocka_unit_test(test_proxy_check_off),
        cmocka_unit_test(test_proxy_follows_handshake),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
