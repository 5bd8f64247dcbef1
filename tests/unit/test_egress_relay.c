/* test_egress_relay.c - sbx-relay and the proxy's hand-over end to end, without
 * Docker (the fixture of tests/support/egress_fixture.h): the relay's usage and
 * modes, its socket path, bad and buffered hand-overs, the per-sandbox connection
 * cap, sbx_egress_add's errors and a proxy attached to a caller's event base. */
#include "egress_fixture.h"

static void test_relay_usage(void **state)
{
    static const char *const bad[] = {"--listen 127.0.0.1", "--listen localhost:3128",
                                      "--listen 127.0.0.1:99999", "--frobnicate", NULL};
    int st;

    (void)state;
    for (size_t i = 0; bad[i] != NULL; i++) {
        char *cmd = xasprintf_test("%s/libexec/sbx-relay %s 2>&1", env("SBX_BUILD_DIR"), bad[i]);
        char *out = test_run(cmd, &st);

        if (st != 2 || strstr(out, "sbx-relay") == NULL) {
            fail_msg("'%s': exit %d, '%s'", bad[i], st, out);
        }
        free(out);
        free(cmd);
    }
}

/* No proxy behind the relay: the client's connection just closes (fail closed). */
static void test_relay_no_proxy(void **state)
{
    char *sock = xasprintf_test("%s/nothing-here.sock", t.dir);
    char *args = xasprintf_test("http://allowed.test:%d/", t.http_port);
    int saved = t.relay_port;
    pid_t relay = start_relay(sock, &t.relay_port);
    int st;
    char *out = curl(args, &st);

    (void)state;
    assert_int_not_equal(st, 0);
    expect_in(out, "code=000");
    free(out);
    free(args);
    test_kill(relay);
    t.relay_port = saved;
    free(sock);
}

static void test_relay_path(void **state)
{
    char *want = xasprintf_test("%s/libexec/sbx-relay", env("SBX_BUILD_DIR"));
    sbx_error_t *err = NULL;
    char *p;

    (void)state;
    setenv("SBX_RELAY", want, 1);
    p = sbx_egress_relay_path(&err);
    assert_non_null(p);
    assert_string_equal(p, want);
    free(p);
    setenv("SBX_RELAY", "/nonexistent/sbx-relay", 1);
    assert_null(sbx_egress_relay_path(&err));
    expect_in(err->msg, "SBX_RELAY '/nonexistent/sbx-relay' is not executable");
    sbx_error_free(&err);
    unsetenv("SBX_RELAY");
    assert_string_equal(sbx_egress_sandbox_env[0], "HTTP_PROXY=http://127.0.0.1:3128");
    free(want);
}

static void test_add_errors(void **state)
{
    const char *bad[] = {"allowed.test", "*", NULL};
    const char *ok[] = {NULL};
    char *dir2 = xasprintf_test("%s/sb3", t.dir);
    char *longdir = xasprintf_test("%s/%0120d", t.dir, 0);
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(sbx_egress_add(t.egress, dir2, "j", NULL, NULL, bad, &err), -1);
    expect_in(err->msg, "egress rule '*'");
    sbx_error_free(&err);
    assert_int_equal(sbx_egress_add(t.egress, t.sockdir, "j", NULL, NULL, ok, &err), -1);
    expect_in(err->msg, "already has a sandbox");
    sbx_error_free(&err);
    assert_int_equal(sbx_egress_add(t.egress, longdir, "j", NULL, NULL, ok, &err), -1);
    expect_in(err->msg, "is too long");
    sbx_error_free(&err);
    assert_int_equal(sbx_egress_add(t.egress, "/nonexistent/x/y", "j", NULL, NULL, ok, &err), -1);
    expect_in(err->msg, "cannot create '/nonexistent/x/y'");
    sbx_error_free(&err);
    free(dir2);
    free(longdir);
}

/* The relay's --copy mode: bytes copied over a plain unix stream, no handover. */
static void test_relay_copy_mode(void **state)
{
    char *sock = xasprintf_test("%s/proxy.sock", t.sockdir);
    char *args = xasprintf_test("https://allowed.test:%d/", t.https_port);
    int saved = t.relay_port;
    pid_t relay = start_relay_mode(sock, &t.relay_port, "--copy");
    int st;
    char *out = curl(args, &st);

    (void)state;
    assert_int_equal(st, 0);
    expect_in(out, "hello from https allowed.test");
    free(out);
    free(args);
    args = xasprintf_test("-i http://denied.test:%d/", t.http_port);
    out = curl(args, &st);
    expect_in(out, "X-Sbx-Deny: not-allowed");
    free(out);
    free(args);
    test_kill(relay);
    t.relay_port = saved;
    free(sock);
}

/* Reads from FD until TEXT came, or EOF, or FD's SO_RCVTIMEO (the deadline);
 * returns what came (caller frees). */
static char *read_until(int fd, const char *text)
{
    size_t cap = 65536;
    size_t len = 0;
    char *out = malloc(cap);
    ssize_t n;

    assert_non_null(out);
    out[0] = '\0';
    while (strstr(out, text) == NULL && len + 1 < cap &&
           (n = read(fd, out + len, cap - len - 1)) > 0) {
        len += (size_t)n;
        out[len] = '\0';
    }
    return out;
}

/* A handed-over client socket gets the proxy's small fixed buffers (the sandbox's
 * loopback hop; see SBX_EGRESS_CLIENT_BUF), checked through this test's copy of it. */
static void test_handover_buffers(void **state)
{
    struct sockaddr_in sin;
    socklen_t sl = sizeof(sin);
    int l = socket(AF_INET, SOCK_STREAM, 0);
    int client = socket(AF_INET, SOCK_STREAM, 0);
    struct timeval tv = {15, 0};
    int served;
    int u;
    int v = 0;
    char *reply;

    (void)state;
    memset(&sin, 0, sizeof(sin));
    sin.sin_family = AF_INET;
    sin.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(l, (struct sockaddr *)&sin, sizeof(sin)), 0);
    assert_int_equal(listen(l, 1), 0);
    assert_int_equal(getsockname(l, (struct sockaddr *)&sin, &sl), 0);
    assert_int_equal(connect(client, (struct sockaddr *)&sin, sizeof(sin)), 0);
    served = accept(l, NULL, NULL);
    assert_true(served >= 0);
    sl = sizeof(v);
    assert_int_equal(getsockopt(served, SOL_SOCKET, SO_SNDBUF, &v, &sl), 0);
    assert_int_not_equal(v, 2 * SBX_EGRESS_CLIENT_BUF); /* the default differs */
    u = hand_over(served);
    /* The 403 shows the proxy has taken the socket over. */
    setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    assert_int_equal(send(client, "CONNECT denied.test:443 HTTP/1.1\r\n\r\n", 37, MSG_NOSIGNAL),
                     37);
    shutdown(client, SHUT_WR);
    /* until the header, not EOF: this test's own copy of the served socket
     * keeps the connection open after the proxy closed its copy (EOF came
     * only with the 15 s timeout) */
    reply = read_until(client, "X-Sbx-Deny: not-allowed");
    expect_in(reply, "X-Sbx-Deny: not-allowed");
    for (int opt = 0; opt < 2; opt++) {
        sl = sizeof(v);
        assert_int_equal(getsockopt(served, SOL_SOCKET, opt == 0 ? SO_SNDBUF : SO_RCVBUF, &v, &sl),
                         0);
        assert_int_equal(v, 2 * SBX_EGRESS_CLIENT_BUF); /* Linux doubles what is set */
    }
    free(reply);
    close(u);
    close(served);
    close(client);
    close(l);
}

/* A sandbox may hold SBX_DEFAULT_EGRESS_MAX_CONNECTIONS connections; the next is closed at once. */
static void test_connection_cap(void **state)
{
    char *path = xasprintf_test("%s/proxy.sock", t.sockdir);
    struct sockaddr_un sun;
    int fds[SBX_DEFAULT_EGRESS_MAX_CONNECTIONS + 1];
    char *reply;
    struct timeval tv = {15, 0};

    (void)state;
    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    for (size_t i = 0; i <= SBX_DEFAULT_EGRESS_MAX_CONNECTIONS; i++) {
        fds[i] = socket(AF_UNIX, SOCK_STREAM, 0);
        assert_true(fds[i] >= 0);
        assert_int_equal(connect(fds[i], (struct sockaddr *)&sun, sizeof(sun)), 0);
    }
    setsockopt(fds[SBX_DEFAULT_EGRESS_MAX_CONNECTIONS], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    /* A complete request would get a 403 if the connection were served. */
    send(fds[SBX_DEFAULT_EGRESS_MAX_CONNECTIONS], "CONNECT denied.test:443 HTTP/1.1\r\n\r\n", 37,
         MSG_NOSIGNAL);
    reply = test_read_all(fds[SBX_DEFAULT_EGRESS_MAX_CONNECTIONS]);
    assert_string_equal(reply, "");
    /* One under the cap is served. */
    send(fds[0], "CONNECT denied.test:443 HTTP/1.1\r\n\r\n", 37, MSG_NOSIGNAL);
    setsockopt(fds[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    free(reply);
    reply = test_read_all(fds[0]);
    expect_in(reply, "X-Sbx-Deny: not-allowed");
    free(reply);
    for (size_t i = 0; i <= SBX_DEFAULT_EGRESS_MAX_CONNECTIONS; i++) {
        close(fds[i]);
    }
    free(path);
}

struct attach_client {
    struct event *tick;
    char *path;
    char *request;
    char *reply;
    _Atomic int done;
};

static void *attach_client_main(void *arg)
{
    struct attach_client *ac = arg;
    struct sockaddr_un sun;
    int u = socket(AF_UNIX, SOCK_STREAM, 0);

    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", ac->path);
    if (connect(u, (struct sockaddr *)&sun, sizeof(sun)) == 0 &&
        write(u, ac->request, strlen(ac->request)) == (ssize_t)strlen(ac->request)) {
        ac->reply = test_read_all(u);
    }
    close(u);
    ac->done = 1;
    return NULL;
}

static void attach_tick(evutil_socket_t fd, short what, void *arg)
{
    struct attach_client *ac = arg;

    (void)fd;
    (void)what;
    if (ac->done) {
        event_base_loopbreak(event_get_base(ac->tick));
    }
}

/* sbx serve's mode: the proxy on the caller's event_base; a client speaks HTTP over the
 * unix socket directly (no relay). */
static void test_attach(void **state)
{
    struct event_base *base = event_base_new();
    char *dir4 = xasprintf_test("%s/sb4", t.dir);
    char *rule = xasprintf_test("allowed.test:%d", t.http_port);
    const char *rules[] = {rule, NULL};
    struct attach_client ac = {0};
    struct sbx_egress_summary sum;
    struct timeval tv = {0, 20000};
    sbx_error_t *err = NULL;
    struct sbx_egress *e = sbx_egress_attach(base, t.cfg, &err);
    pthread_t th;

    (void)state;
    assert_non_null(e);
    assert_int_equal(sbx_egress_add(e, dir4, "job-attach", NULL, NULL, rules, &err), 0);
    ac.path = xasprintf_test("%s/proxy.sock", dir4);
    ac.request = xasprintf_test("GET http://allowed.test:%d/x HTTP/1.1\r\nHost: "
                                "allowed.test:%d\r\n\r\n",
                                t.http_port, t.http_port);
    ac.tick = event_new(base, -1, EV_PERSIST, attach_tick, &ac);
    event_add(ac.tick, &tv);
    assert_int_equal(pthread_create(&th, NULL, attach_client_main, &ac), 0);
    event_base_dispatch(base);
    pthread_join(th, NULL);
    assert_non_null(ac.reply);
    expect_in(ac.reply, "hello from http allowed.test");
    assert_int_equal(sbx_egress_remove(e, dir4, &sum), 0);
    assert_int_equal(sum.allowed, 1);
    assert_int_equal(sum.denied, 0);
    sbx_egress_stop(e);
    event_free(ac.tick);
    event_base_free(base);
    free(ac.path);
    free(ac.request);
    free(ac.reply);
    free(rule);
    free(dir4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_relay_copy_mode), cmocka_unit_test(test_handover_buffers),
        cmocka_unit_test(test_add_errors),      cmocka_unit_test(test_attach),
        cmocka_unit_test(test_relay_usage),     cmocka_unit_test(test_relay_path),
        cmocka_unit_test(test_relay_no_proxy),  cmocka_unit_test(test_connection_cap),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
