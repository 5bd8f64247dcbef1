/* test_egress_runtime.c - the egress path end to end, without Docker: the proxy
 * started through its API, sbx-relay on a loopback port, local HTTP and HTTPS origin
 * servers (tests/support/egress_origin.py, a self-signed certificate made here with
 * openssl) whose names the proxy maps to 127.0.0.1 through egress.hosts, and curl.
 * The bypass test runs the relay and curl in a network namespace of its own (only
 * loopback), the topology of a Docker sandbox. Nothing leaves loopback. The
 * fixture is tests/support/egress_fixture.h; the relay's own cases are in
 * test_egress_relay.c. */
#include "egress_fixture.h"
#include "jsonl.h"

static void test_allowed_http(void **state)
{
    char *args = xasprintf_test("http://Allowed.Test.:%d/hi", t.http_port);
    int st;
    char *out = curl(args, &st);

    (void)state;
    assert_int_equal(st, 0);
    expect_in(out, "hello from http Allowed.Test.:"); /* Host passes unchanged */
    expect_in(out, "code=200");
    free(out);
    free(args);

    /* A request body goes through too. */
    args = xasprintf_test("--data-binary 'abcdefghij' http://allowed.test:%d/post", t.http_port);
    out = curl(args, &st);
    assert_int_equal(st, 0);
    expect_in(out, "got 10 bytes");
    free(out);
    free(args);
}

static void test_allowed_https(void **state)
{
    char *args = xasprintf_test("https://allowed.test:%d/", t.https_port);
    int st;
    char *out = curl(args, &st);

    (void)state;
    assert_int_equal(st, 0);
    expect_in(out, "hello from https allowed.test");
    expect_in(out, "code=200 connect=200");
    free(out);
    free(args);
}

static void test_wildcard(void **state)
{
    char *args = xasprintf_test("https://a.wild.test:%d/", t.https_port);
    int st;
    char *out = curl(args, &st);

    (void)state;
    assert_int_equal(st, 0);
    expect_in(out, "hello from https a.wild.test");
    free(out);
    free(args);
    /* The apex is not covered by "*.wild.test". */
    args = xasprintf_test("-i http://wild.test:%d/", t.http_port);
    out = curl(args, &st);
    expect_in(out, "code=403");
    expect_in(out, "X-Sbx-Deny: not-allowed");
    free(out);
    free(args);
}

static void test_denied(void **state)
{
    char *args = xasprintf_test("-i http://denied.test:%d/", t.http_port);
    int st;
    char *out = curl(args, &st);

    char *want;

    (void)state;
    /* the reason and what to ask for, in the status line and the body */
    want = xasprintf_test("HTTP/1.1 403 sbx egress not-allowed: denied.test:%d is not in this "
                          "task's egress allow-list (ask for egress.allow \"denied.test:%d\")\r\n",
                          t.http_port, t.http_port);
    expect_in(out, want);
    free(want);
    want = xasprintf_test("explain on the host: sbx egress why denied.test:%d --task task-1\n",
                          t.http_port);
    expect_in(out, want);
    free(want);
    expect_in(out, "X-Sbx-Deny: not-allowed");
    expect_in(out, "code=403");
    free(out);
    free(args);

    args = xasprintf_test("https://denied.test:%d/", t.https_port);
    out = curl(args, &st);
    assert_int_not_equal(st, 0);
    expect_in(out, "connect=403");
    free(out);
    free(args);

    /* An allowed name on a port its rule does not list. */
    args = xasprintf_test("-i http://allowed.test:%d/",
                          t.https_port + 1 == t.http_port ? t.https_port + 2 : t.https_port + 1);
    out = curl(args, &st);
    expect_in(out, "X-Sbx-Deny: not-allowed");
    free(out);
    free(args);
}

static json_t *log_lines(size_t *n);

/* What real clients print for a refused CONNECT: curl -v shows the status line, Node's
 * CONNECT request the reason phrase, npm its own error line with it. */
static void test_denial_clients(void **state)
{
    char *cmd;
    char *out;
    char *want;
    int st;

    (void)state;
    want = xasprintf_test("sbx egress not-allowed: denied.test:%d is not in this task's egress "
                          "allow-list (ask for egress.allow \"denied.test:%d\")",
                          t.https_port, t.https_port);
    cmd = xasprintf_test("curl -sS -v -m 20 -x http://127.0.0.1:%d https://denied.test:%d/ 2>&1",
                         t.relay_port, t.https_port);
    out = test_run(cmd, &st);
    assert_int_not_equal(st, 0);
    expect_in(out, "< HTTP/1.1 403 sbx egress not-allowed: denied.test:");
    expect_in(out, want);
    expect_in(out, "CONNECT tunnel failed, response 403");
    free(out);
    free(cmd);

    cmd = xasprintf_test(
        "node -e \"require('http').request({host: '127.0.0.1', port: %d, method: 'CONNECT', "
        "path: 'denied.test:%d', headers: {host: 'denied.test:%d'}}).on('connect', (res) => { "
        "console.log(res.statusCode + ' ' + "
        "res.statusMessage); process.exit(0); }).on('error', (e) => { console.log('error ' + e); "
        "process.exit(1); }).end()\" 2>&1",
        t.relay_port, t.https_port, t.https_port);
    out = test_run(cmd, &st);
    assert_int_equal(st, 0);
    expect_in(out, "403 ");
    expect_in(out, want);
    free(out);
    free(cmd);
    free(want);

    /* npm through the relay to a registry on a name the policy does not allow */
    cmd = xasprintf_test("cd %s && HOME=%s npm_config_cache=%s/npm-cache npm view sbx-no-such-pkg "
                         "--registry https://denied.test:%d/ --https-proxy http://127.0.0.1:%d "
                         "--proxy http://127.0.0.1:%d --fetch-retries 0 --no-update-notifier "
                         "--loglevel error 2>&1",
                         t.dir, t.dir, t.dir, t.https_port, t.relay_port, t.relay_port);
    out = test_run(cmd, &st);
    assert_int_not_equal(st, 0);
    want = xasprintf_test("denied.test:%d is not in this task's egress allow-list", t.https_port);
    expect_in(out, want);
    free(want);
    free(out);
    free(cmd);
}

/* egress.private_allow: an allowed name reaches its listed private address; the log
 * line says what let the private address through (and egress.hosts' do too). */
static void test_private_allow(void **state)
{
    char *args = xasprintf_test("http://mirror.wild.test:%d/m", t.http_port);
    struct sbx_egress_summary sum;
    int found = 0;
    int st;
    char *out = curl(args, &st);
    size_t n;
    size_t i;
    json_t *arr;
    json_t *o;

    (void)state;
    assert_int_equal(st, 0);
    expect_in(out, "code=200");
    free(out);
    free(args);
    for (int k = 0; k < 1000; k++) {
        assert_int_equal(sbx_egress_summary(t.egress, t.sockdir, &sum), 0);
        if (sum.open == 0) {
            break;
        }
        usleep(10000);
    }
    arr = log_lines(&n);
    json_array_foreach(arr, i, o)
    {
        const char *host = json_string_value(json_object_get(o, "host"));
        const char *priv = json_string_value(json_object_get(o, "private"));

        if (host != NULL && strcmp(host, "mirror.wild.test") == 0) {
            assert_string_equal(json_string_value(json_object_get(o, "decision")), "allow");
            assert_non_null(priv);
            assert_string_equal(priv, "egress.private_allow");
            found++;
        }
        if (host != NULL && strcmp(host, "allowed.test") == 0 &&
            json_string_value(json_object_get(o, "address")) != NULL) {
            assert_non_null(priv);
            assert_string_equal(priv, "egress.hosts");
        }
        if (json_string_value(json_object_get(o, "address")) == NULL) {
            assert_null(priv); /* nothing was connected */
        }
    }
    assert_int_equal(found, 1);
    json_decref(arr);
}

static void raw_expect(const char *req, size_t len, const char *status, const char *reason)
{
    char *reply = test_raw(t.relay_port, req, len);
    char *want = xasprintf_test("X-Sbx-Deny: %s\r\n", reason);

    if (strncmp(reply, status, strlen(status)) != 0 || strstr(reply, want) == NULL) {
        fail_msg("request '%.80s...': got '%.200s', wanted '%s' and '%s'", req, reply, status,
                 want);
    }
    free(want);
    free(reply);
}

static void test_bypass_requests(void **state)
{
    char *req;
    char *big;

    (void)state;
    req = xasprintf_test("CONNECT 127.0.0.1:%d HTTP/1.1\r\nHost: 127.0.0.1:%d\r\n\r\n",
                         t.https_port, t.https_port);
    raw_expect(req, strlen(req), "HTTP/1.1 403", "ip-literal");
    free(req);
    req = xasprintf_test("CONNECT [::1]:%d HTTP/1.1\r\n\r\n", t.https_port);
    raw_expect(req, strlen(req), "HTTP/1.1 403", "ip-literal");
    free(req);
    req = xasprintf_test("GET http://127.0.0.1:%d/ HTTP/1.1\r\n\r\n", t.http_port);
    raw_expect(req, strlen(req), "HTTP/1.1 403", "ip-literal");
    free(req);
    req = xasprintf_test("CONNECT 127.1:%d HTTP/1.1\r\n\r\n", t.https_port);
    raw_expect(req, strlen(req), "HTTP/1.1 400", "host-numeric");
    free(req);
    req = xasprintf_test("CONNECT allowed.test:%d HTTP/1.1\r\nHost: denied.test:%d\r\n\r\n",
                         t.https_port, t.https_port);
    raw_expect(req, strlen(req), "HTTP/1.1 403", "host-mismatch");
    free(req);
    req = xasprintf_test("GET http://allowed.test:%d/ HTTP/1.1\r\nHost: denied.test\r\n\r\n",
                         t.http_port);
    raw_expect(req, strlen(req), "HTTP/1.1 403", "host-mismatch");
    free(req);

    big = malloc(400);
    memset(big, 'a', 399);
    big[399] = '\0';
    req = xasprintf_test("CONNECT %s.test:443 HTTP/1.1\r\n\r\n", big);
    raw_expect(req, strlen(req), "HTTP/1.1 400", "host-too-long");
    free(req);
    free(big);
    raw_expect("CONNECT allowed..test:443 HTTP/1.1\r\n\r\n", 38, "HTTP/1.1 400", "host-malformed");
    raw_expect("CONNECT all%6fwed.test:443 HTTP/1.1\r\n\r\n", 39, "HTTP/1.1 400", "bad-target");
    raw_expect("CONNECT allowed.test:443\r\n\r\n", 28, "HTTP/1.1 400", "bad-request-line");
    raw_expect("HELLO\r\n\r\n", 9, "HTTP/1.1 400", "bad-request-line");
    raw_expect("CONNECT allowed.test:443 HTTP/1.1\n\n", 35, "HTTP/1.1 400", "malformed-head");
    raw_expect("SSH-2.0-OpenSSH_9.2\r\n\r\n", 23, "HTTP/1.1 400", "bad-request-line");
    raw_expect("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03", 11, "HTTP/1.1 400",
               "malformed-head");
    raw_expect("GET /etc/passwd HTTP/1.1\r\nHost: allowed.test\r\n\r\n", 48, "HTTP/1.1 400",
               "not-a-proxy-request");

    /* A head over the cap. */
    big = malloc(20000);
    memcpy(big, "CONNECT allowed.test:443 HTTP/1.1\r\nX-Pad: ", 42);
    memset(big + 42, 'p', 20000 - 42);
    raw_expect(big, 20000, "HTTP/1.1 431", "header-too-large");
    free(big);
}

static void test_slowloris(void **state)
{
    int fd = test_connect_loopback(t.relay_port);
    char *reply;

    (void)state;
    /* Half a request line, then silence: cut off at egress.header_timeout (1s). */
    assert_int_equal(write(fd, "CONNECT allowed.te", 18), 18);
    reply = test_read_all(fd);
    close(fd);
    if (strncmp(reply, "HTTP/1.1 408", 12) != 0 ||
        strstr(reply, "X-Sbx-Deny: header-timeout") == NULL) {
        fail_msg("slow client got '%s'", reply);
    }
    free(reply);
}

static json_t *log_lines(size_t *n)
{
    json_t *arr = test_jsonl_read(t.log);

    *n = json_array_size(arr);
    return arr;
}

static json_t *find_line(json_t *arr, const char *host, const char *decision, const char *reason)
{
    size_t i;
    json_t *o;

    json_array_foreach(arr, i, o)
    {
        const char *h = json_string_value(json_object_get(o, "host"));
        const char *d = json_string_value(json_object_get(o, "decision"));
        const char *r = json_string_value(json_object_get(o, "reason"));

        if ((host == NULL ? h == NULL : h != NULL && strcmp(h, host) == 0) &&
            strcmp(d, decision) == 0 &&
            (reason == NULL ? r == NULL : r != NULL && strcmp(r, reason) == 0)) {
            return o;
        }
    }
    fail_msg("no log line for host %s decision %s reason %s", host ? host : "-", decision,
             reason ? reason : "-");
    return NULL;
}

/* Runs last in the group: every connection above left one line. */
static void test_log_and_summary(void **state)
{
    size_t n;
    json_t *arr;
    json_t *o;
    size_t i;
    struct sbx_egress_summary sum;
    uint64_t allowed = 0;
    uint64_t denied = 0;
    char *rule = xasprintf_test("allowed.test:%d,%d", t.http_port, t.https_port);
    char *addr = xasprintf_test("127.0.0.1:%d", t.https_port);

    (void)state;
    /* Wait (up to 10 s) until the proxy has seen every connection above close. */
    for (int k = 0; k < 1000; k++) {
        assert_int_equal(sbx_egress_summary(t.egress, t.sockdir, &sum), 0);
        if (sum.open == 0) {
            break;
        }
        usleep(10000);
    }
    assert_int_equal(sum.open, 0);
    arr = log_lines(&n);
    json_array_foreach(arr, i, o)
    {
        const char *d = json_string_value(json_object_get(o, "decision"));

        assert_string_equal(json_string_value(json_object_get(o, "job")), JOB);
        assert_string_equal(json_string_value(json_object_get(o, "task")), "task-1");
        assert_string_equal(json_string_value(json_object_get(o, "sandbox")), "sbx-sandbox-1");
        assert_non_null(json_object_get(o, "time"));
        assert_true(json_is_real(json_object_get(o, "duration")));
        if (strcmp(d, "allow") == 0) {
            allowed++;
        }
        else {
            assert_string_equal(d, "deny");
            denied++;
        }
    }
    assert_int_equal(sum.allowed, allowed);
    assert_int_equal(sum.denied, denied);
    assert_int_equal(sum.log_errors, 0);
    assert_true(allowed >= 4);

    o = find_line(arr, "allowed.test", "allow", NULL);
    assert_string_equal(json_string_value(json_object_get(o, "rule")), rule);
    o = find_line(arr, "allowed.test", "allow", NULL);
    for (i = 0; i < n; i++) {
        json_t *x = json_array_get(arr, i);
        const char *a = json_string_value(json_object_get(x, "address"));

        if (a != NULL && strcmp(a, addr) == 0 &&
            strcmp(json_string_value(json_object_get(x, "method")), "CONNECT") == 0) {
            assert_true(json_integer_value(json_object_get(x, "bytes_up")) > 100);
            assert_true(json_integer_value(json_object_get(x, "bytes_down")) > 100);
            assert_int_equal(json_integer_value(json_object_get(x, "status")), 200);
            assert_string_equal(json_string_value(json_object_get(x, "sni")), "allowed.test");
            break;
        }
    }
    assert_true(i < n);
    o = find_line(arr, "denied.test", "deny", "not-allowed");
    assert_int_equal(json_integer_value(json_object_get(o, "status")), 403);
    assert_true(json_is_null(json_object_get(o, "rule")));
    find_line(arr, "127.0.0.1", "deny", "ip-literal");
    find_line(arr, "::1", "deny", "ip-literal");
    find_line(arr, "allowed.test", "deny", "host-mismatch");
    find_line(arr, NULL, "deny", "host-too-long");
    find_line(arr, NULL, "deny", "header-timeout");
    find_line(arr, NULL, "deny", "header-too-large");
    find_line(arr, NULL, "deny", "malformed-head");
    find_line(arr, NULL, "deny", "bad-handover");
    o = find_line(arr, "allowed.test", "deny", "sni-mismatch");
    assert_string_equal(json_string_value(json_object_get(o, "sni")), "a.wild.test");
    json_decref(arr);
    free(rule);
    free(addr);
}

/* The relay and curl in a network namespace with only loopback, like a sandbox:
 * the proxy path works, every direct path fails. */
static void test_netns_bypass(void **state)
{
    char *script;
    char *cmd;
    char *out;
    char *relay = xasprintf_test("%s/libexec/sbx-relay", env("SBX_BUILD_DIR"));
    int st;

    (void)state;
    script = xasprintf_test(
        "set -u\n"
        "ip link set lo up || exit 3\n"
        "mount -t tmpfs sbx-test /run || exit 7\n" /* private: nothing lands on the host */
        "mkdir -p /run/sbx-egress && mount --bind '%s' /run/sbx-egress && "
        "mount -o remount,bind,ro /run/sbx-egress || exit 4\n"
        "touch /run/sbx-egress/x 2>/dev/null && exit 5\n"
        "touch /run/sbx-relay && mount --bind -o ro '%s' /run/sbx-relay || exit 6\n"
        "/run/sbx-relay -- sleep 60 & rp=$!\n"
        "for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:3128/ && break; "
        "sleep 0.1; done\n"
        "echo proxy=$(curl -sS -m 10 -o /dev/null -w '%%{http_code}' -x http://127.0.0.1:3128 "
        "http://allowed.test:%d/)\n"
        "echo denied=$(curl -sS -m 10 -o /dev/null -w '%%{http_code}' -x http://127.0.0.1:3128 "
        "http://denied.test:%d/)\n"
        "curl --noproxy '*' -sS -m 3 -o /dev/null http://127.0.0.1:%d/ 2>/dev/null; "
        "echo direct=$?\n"
        "curl --noproxy '*' -sS -m 3 -g -o /dev/null 'http://[::1]:%d/' 2>/dev/null; "
        "echo ipv6=$?\n"
        "for ip in $HOST_IPS; do curl --noproxy '*' -sS -m 3 -g -o /dev/null "
        "\"http://$ip:%d/\" 2>/dev/null; echo host_ip=$?; done\n"
        "/usr/bin/python3 -c \"import socket; socket.getaddrinfo('allowed.test', 80)\" "
        "2>/dev/null; echo dns=$?\n"
        "bash -c 'exec 3<>/dev/tcp/127.0.0.1/%d' 2>/dev/null; echo rawtcp=$?\n"
        "kill $rp; wait $rp 2>/dev/null\n"
        "for i in $(seq 50); do curl -s -o /dev/null http://127.0.0.1:3128/ || break; "
        "sleep 0.1; done\n"
        "curl -s -o /dev/null http://127.0.0.1:3128/; echo relay_after_kill=$?\n",
        t.sockdir, relay, t.http_port, t.http_port, t.http_port, t.http_port, t.http_port,
        t.http_port);
    free(test_write_file(t.dir, "netns.sh", script));
    free(script);
    cmd = xasprintf_test("HOST_IPS=\"$(hostname -I 2>/dev/null | sed 's/[^ ]*:[^ ]*/[&]/g')\" "
                         "unshare --net --mount sh %s/netns.sh 2>&1",
                         t.dir);
    out = test_run(cmd, &st);
    free(cmd);
    free(relay);
    if (st != 0) {
        fail_msg("netns script failed (%d): %s", st, out);
    }
    expect_in(out, "proxy=200");
    expect_in(out, "denied=403");
    expect_in(out, "direct=7");
    expect_in(out, "ipv6=7");
    expect_in(out, "rawtcp=1");
    expect_in(out, "relay_after_kill=7"); /* the relay died with its command */
    if (strstr(out, "dns=0") != NULL || strstr(out, "host_ip=0") != NULL) {
        fail_msg("a direct path worked: %s", out);
    }
    free(out);
}

/* The log cannot be written: connections are refused, and the error counted. */
static void test_log_fail_closed(void **state)
{
    char *dir2 = xasprintf_test("%s/sb2", t.dir);
    char *sock = xasprintf_test("%s/proxy.sock", dir2);
    char *logpath = xasprintf_test("%s/egress2.log", t.dir);
    char *args = xasprintf_test("-i http://allowed.test:%d/", t.http_port);
    struct sbx_config *cfg = sbx_config_defaults();
    const char *rules[] = {"allowed.test:*", NULL};

    cfg->egress.system_dns = 0;
    struct sbx_egress *e;
    struct sbx_egress_summary sum;
    sbx_error_t *err = NULL;
    int saved = t.relay_port;
    pid_t relay;
    char *out;
    int st;

    (void)state;
    /* No log configured: the proxy does not start. */
    assert_null(sbx_egress_start(cfg, &err));
    expect_in(err->msg, "'egress.log' is not set");
    sbx_error_free(&err);

    cfg->egress.log = xstrdup(logpath);
    cfg->egress.hosts = t.cfg->egress.hosts;
    cfg->egress.n_hosts = t.cfg->egress.n_hosts;
    e = sbx_egress_start(cfg, &err);
    assert_non_null(e);
    assert_int_equal(sbx_egress_add(e, dir2, "job-fc", NULL, NULL, rules, &err), 0);
    relay = start_relay(sock, &t.relay_port);

    out = curl(args, &st);
    expect_in(out, "code=200");
    free(out);
    /* The log file is replaced by a directory: it cannot be reopened. */
    assert_int_equal(unlink(logpath), 0);
    assert_int_equal(mkdir(logpath, 0755), 0);
    out = curl(args, &st);
    expect_in(out, "X-Sbx-Deny: log-unavailable");
    expect_in(out, "code=403");
    free(out);

    assert_int_equal(sbx_egress_remove(e, dir2, &sum), 0);
    assert_int_equal(sum.allowed, 1);
    assert_int_equal(sum.denied, 1);
    assert_true(sum.log_errors >= 1);
    assert_int_equal(access(sock, F_OK), -1);
    assert_int_equal(sbx_egress_remove(e, dir2, &sum), -1);

    test_kill(relay);
    sbx_egress_stop(e);

    /* Writes fail (ENOSPC): the connection whose line was lost is the last one let
     * through; the next is refused and its line is lost too. */
    free(cfg->egress.log);
    cfg->egress.log = xstrdup("/dev/full");
    e = sbx_egress_start(cfg, &err);
    assert_non_null(e);
    assert_int_equal(sbx_egress_add(e, dir2, "job-full", NULL, NULL, rules, &err), 0);
    relay = start_relay(sock, &t.relay_port);
    out = curl(args, &st);
    expect_in(out, "code=200");
    free(out);
    /* Wait (up to 10 s) for the proxy to finish that connection and fail its line. */
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(sbx_egress_summary(e, dir2, &sum), 0);
        if (sum.log_errors > 0) {
            break;
        }
        usleep(10000);
    }
    assert_int_equal(sum.log_errors, 1);
    out = curl(args, &st);
    expect_in(out, "X-Sbx-Deny: log-unavailable");
    free(out);
    assert_int_equal(sbx_egress_remove(e, dir2, &sum), 0);
    assert_int_equal(sum.allowed, 1);
    assert_int_equal(sum.denied, 1);
    assert_int_equal(sum.log_errors, 2);
    test_kill(relay);
    t.relay_port = saved;
    sbx_egress_stop(e);
    cfg->egress.hosts = NULL;
    cfg->egress.n_hosts = 0;
    sbx_config_destroy(cfg);
    free(dir2);
    free(sock);
    free(logpath);
    free(args);
}

/* A real TLS client (openssl s_client) through the relay: the name in its ClientHello
 * must be the CONNECT host. a.wild.test is allowed too, but not on this tunnel. */
static void test_sni_real_client(void **state)
{
    char *cmd;
    char *out;
    int st;

    (void)state;
    cmd = xasprintf_test("echo | timeout 20 openssl s_client -proxy 127.0.0.1:%d -connect "
                         "allowed.test:%d -servername allowed.test -CAfile %s 2>&1",
                         t.relay_port, t.https_port, t.cert);
    /* openssl under ASan on a loaded machine sometimes ends with "unexpected
     * eof" before the handshake (seen before and after this check existed):
     * up to three tries, each printed when it fails */
    out = test_run(cmd, &st);
    for (int i = 0; i < 2 && (st != 0 || strstr(out, "CN = allowed.test") == NULL); i++) {
        fprintf(stderr, "test_sni_real_client: try %d failed (%d): %s\n", i + 1, st, out);
        free(out);
        out = test_run(cmd, &st);
    }
    assert_int_equal(st, 0);
    expect_in(out, "CN = allowed.test"); /* the server's certificate arrived */
    free(out);
    free(cmd);
    cmd = xasprintf_test("echo | timeout 20 openssl s_client -proxy 127.0.0.1:%d -connect "
                         "allowed.test:%d -servername a.wild.test -CAfile %s 2>&1",
                         t.relay_port, t.https_port, t.cert);
    out = test_run(cmd, &st);
    assert_int_not_equal(st, 0); /* cut during the handshake */
    expect_in(out, "no peer certificate available");
    if (strstr(out, "CN = allowed.test") != NULL) {
        fail_msg("a fronted handshake reached the server: %s", out);
    }
    free(out);
    free(cmd);
}

/* Only a TCP socket may be handed over: a pipe is refused and logged. */
static void test_bad_handover(void **state)
{
    int p[2];
    int u;
    char *reply;

    (void)state;
    assert_int_equal(pipe(p), 0);
    u = hand_over(p[0]);
    reply = test_read_all(u);
    assert_string_equal(reply, ""); /* closed without a word */
    free(reply);
    close(u);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allowed_http),    cmocka_unit_test(test_allowed_https),
        cmocka_unit_test(test_wildcard),        cmocka_unit_test(test_denied),
        cmocka_unit_test(test_bypass_requests), cmocka_unit_test(test_slowloris),
        cmocka_unit_test(test_netns_bypass),    cmocka_unit_test(test_sni_real_client),
        cmocka_unit_test(test_bad_handover),    cmocka_unit_test(test_log_and_summary),
        cmocka_unit_test(test_log_fail_closed), cmocka_unit_test(test_denial_clients),
        cmocka_unit_test(test_private_allow),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
