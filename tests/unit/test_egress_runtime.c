/* test_egress_runtime.c - the egress path end to end, without Docker: the proxy
 * started through its API, sbx-relay on a loopback port, local HTTP and HTTPS origin
 * servers (tests/support/egress_origin.py, a self-signed certificate made here with
 * openssl) whose names the proxy maps to 127.0.0.1 through egress.hosts, and curl.
 * The bypass test runs the relay and curl in a network namespace of its own (only
 * loopback), the topology of a Docker sandbox. Nothing leaves loopback. */
#include "test_common.h"
#include "test_proc.h"

#include <errno.h>
#include <event2/event.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/stat.h>
#include <sys/un.h>

#include "config/config.h"
#include "egress/egress.h"
#include "egress/egress_int.h"
#include "util/xalloc.h"
#include "jsonl.h"

#define JOB "job-42"

static struct {
    char *dir;
    char *sockdir;
    char *log;
    char *cert;
    struct sbx_config *cfg;
    struct sbx_egress *egress;
    pid_t http_pid;
    pid_t https_pid;
    pid_t relay_pid;
    int http_port;
    int https_port;
    int relay_port;
} t;

static const char *env(const char *name)
{
    const char *v = getenv(name);

    if (v == NULL) {
        fail_msg("%s is not set (run under ctest)", name);
    }
    return v;
}

static pid_t start_relay_mode(const char *sock, int *port, const char *mode)
{
    char *relay = NULL;
    char *sockopt = NULL;
    pid_t pid;

    assert_true(asprintf(&relay, "%s/libexec/sbx-relay", env("SBX_BUILD_DIR")) > 0);
    assert_true(asprintf(&sockopt, "--socket=%s", sock) > 0);
    {
        char *argv[] = {relay,          "--listen",   "127.0.0.1:0", sockopt,
                        "--print-port", (char *)mode, NULL};

        pid = test_spawn_port(argv, port);
    }
    free(relay);
    free(sockopt);
    assert_true(pid > 0);
    return pid;
}

static pid_t start_relay(const char *sock, int *port)
{
    return start_relay_mode(sock, port, NULL);
}

static int setup(void **state)
{
    char *conf = NULL;
    char *cmd = NULL;
    char *key = NULL;
    char *origin = NULL;
    char *sock = NULL;
    char *out;
    int st;
    sbx_error_t *err = NULL;
    static const char *rules[] = {"allowed.test", "*.wild.test:*", NULL};
    const char *r[4];
    char *ports = NULL;

    (void)state;
    unsetenv("http_proxy");
    unsetenv("https_proxy");
    unsetenv("HTTP_PROXY");
    unsetenv("HTTPS_PROXY");
    unsetenv("ALL_PROXY");
    unsetenv("all_proxy");
    unsetenv("NO_PROXY");
    unsetenv("no_proxy");
    t.dir = test_mkdtemp();
    t.sockdir = xasprintf_test("%s/sb1", t.dir);
    t.log = xasprintf_test("%s/egress.log", t.dir);
    t.cert = xasprintf_test("%s/cert.pem", t.dir);
    key = xasprintf_test("%s/key.pem", t.dir);
    cmd = xasprintf_test("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "
                         "/CN=allowed.test -addext subjectAltName=DNS:allowed.test,"
                         "DNS:a.wild.test -keyout %s -out %s 2>&1",
                         key, t.cert);
    out = test_run(cmd, &st);
    if (st != 0) {
        fail_msg("openssl failed: %s", out);
    }
    free(out);
    free(cmd);

    origin = xasprintf_test("%s/tests/support/egress_origin.py", env("SBX_SOURCE_DIR"));
    {
        char *a1[] = {"/usr/bin/python3", origin, "http", NULL};
        char *a2[] = {"/usr/bin/python3", origin, "https", t.cert, key, NULL};

        t.http_pid = test_spawn_port(a1, &t.http_port);
        t.https_pid = test_spawn_port(a2, &t.https_port);
    }
    assert_true(t.http_pid > 0 && t.https_pid > 0);
    free(origin);
    free(key);

    /* system_dns = false: only the names below resolve; no query leaves */
    conf = xasprintf_test("egress = {\n  log = \"%s\";\n  header_timeout = \"1s\";\n"
                          "  system_dns = false;\n"
                          "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; },\n"
                          "            { name = \"denied.test\"; address = \"127.0.0.1\"; },\n"
                          "            { name = \"a.wild.test\"; address = \"127.0.0.1\"; },\n"
                          "            { name = \"wild.test\"; address = \"127.0.0.1\"; } );\n"
                          "};\n",
                          t.log);
    free(test_write_file(t.dir, "sbx.conf", conf));
    free(conf);
    conf = xasprintf_test("%s/sbx.conf", t.dir);
    t.cfg = sbx_config_load_file(conf, &err);
    free(conf);
    if (t.cfg == NULL) {
        fail_msg("config: %s", err->msg);
    }
    t.egress = sbx_egress_start(t.cfg, &err);
    if (t.egress == NULL) {
        fail_msg("egress: %s", err->msg);
    }
    ports = xasprintf_test("allowed.test:%d,%d", t.http_port, t.https_port);
    r[0] = ports;
    r[1] = rules[1];
    r[2] = NULL;
    if (sbx_egress_add(t.egress, t.sockdir, JOB, "task-1", "sbx-sandbox-1", r, &err) < 0) {
        fail_msg("add: %s", err->msg);
    }
    free(ports);
    sock = xasprintf_test("%s/proxy.sock", t.sockdir);
    t.relay_pid = start_relay(sock, &t.relay_port);
    free(sock);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_kill(t.relay_pid);
    test_kill(t.http_pid);
    test_kill(t.https_pid);
    sbx_egress_stop(t.egress);
    sbx_config_destroy(t.cfg);
    test_rm_rf(t.dir);
    free(t.dir);
    free(t.sockdir);
    free(t.log);
    free(t.cert);
    return 0;
}

/* curl through the relay; returns "CODE BODY" output (caller frees). */
static char *curl(const char *args, int *status)
{
    char *cmd = xasprintf_test("curl -sS -m 20 -x http://127.0.0.1:%d --cacert %s "
                               "-w ' code=%%{http_code} connect=%%{http_connect}' %s 2>&1",
                               t.relay_port, t.cert, args);
    char *out = test_run(cmd, status);

    free(cmd);
    return out;
}

static void expect_in(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) == NULL) {
        fail_msg("'%s' not in '%s'", needle, haystack);
    }
}

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

    (void)state;
    expect_in(out, "HTTP/1.1 403 Forbidden");
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

/* Connects to the sandbox's proxy socket and hands it fd the way sbx-relay does (one
 * NUL byte with SCM_RIGHTS); returns the unix socket. The caller keeps its own fd. */
static int hand_over(int fd)
{
    char *path = xasprintf_test("%s/proxy.sock", t.sockdir);
    struct sockaddr_un sun;
    int u = socket(AF_UNIX, SOCK_STREAM, 0);
    char byte = '\0';
    struct iovec iov = {&byte, 1};
    union {
        char buf[CMSG_SPACE(sizeof(int))];
        struct cmsghdr align;
    } ctl;
    struct msghdr msg;
    struct cmsghdr *cm;

    memset(&sun, 0, sizeof(sun));
    sun.sun_family = AF_UNIX;
    snprintf(sun.sun_path, sizeof(sun.sun_path), "%s", path);
    assert_int_equal(connect(u, (struct sockaddr *)&sun, sizeof(sun)), 0);
    memset(&msg, 0, sizeof(msg));
    memset(&ctl, 0, sizeof(ctl));
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = ctl.buf;
    msg.msg_controllen = sizeof(ctl.buf);
    cm = CMSG_FIRSTHDR(&msg);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(cm), &fd, sizeof(int));
    assert_int_equal(sendmsg(u, &msg, 0), 1);
    free(path);
    return u;
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
    reply = test_read_all(client);
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
        cmocka_unit_test(test_allowed_http),     cmocka_unit_test(test_allowed_https),
        cmocka_unit_test(test_wildcard),         cmocka_unit_test(test_denied),
        cmocka_unit_test(test_bypass_requests),  cmocka_unit_test(test_slowloris),
        cmocka_unit_test(test_netns_bypass),     cmocka_unit_test(test_relay_copy_mode),
        cmocka_unit_test(test_sni_real_client),  cmocka_unit_test(test_bad_handover),
        cmocka_unit_test(test_handover_buffers), cmocka_unit_test(test_log_and_summary),
        cmocka_unit_test(test_log_fail_closed),  cmocka_unit_test(test_add_errors),
        cmocka_unit_test(test_attach),           cmocka_unit_test(test_relay_usage),
        cmocka_unit_test(test_relay_path),       cmocka_unit_test(test_relay_no_proxy),
        cmocka_unit_test(test_connection_cap),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
