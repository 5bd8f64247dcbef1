/* egress_fixture.h - the egress path end to end without Docker, shared by
 * test_egress_runtime.c and test_egress_relay.c: the proxy started through its
 * API, sbx-relay on a loopback port, local HTTP and HTTPS origin servers
 * (tests/support/egress_origin.py, a self-signed certificate made here with
 * openssl) whose names the proxy maps to 127.0.0.1 through egress.hosts, and
 * curl. Nothing leaves loopback. Include once, from the test's .c file. */
#ifndef SBX_TEST_EGRESS_FIXTURE_H
#define SBX_TEST_EGRESS_FIXTURE_H

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

__attribute__((unused)) static const char *env(const char *name)
{
    const char *v = getenv(name);

    if (v == NULL) {
        fail_msg("%s is not set (run under ctest)", name);
    }
    return v;
}

__attribute__((unused)) static pid_t start_relay_mode(const char *sock, int *port, const char *mode)
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

__attribute__((unused)) static pid_t start_relay(const char *sock, int *port)
{
    return start_relay_mode(sock, port, NULL);
}

__attribute__((unused)) static int setup(void **state)
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
    conf =
        xasprintf_test("egress = {\n  log = \"%s\";\n  header_timeout = \"1s\";\n"
                       "  system_dns = false;\n"
                       "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; },\n"
                       "            { name = \"denied.test\"; address = \"127.0.0.1\"; },\n"
                       "            { name = \"a.wild.test\"; address = \"127.0.0.1\"; },\n"
                       "            { name = \"wild.test\"; address = \"127.0.0.1\"; } );\n"
                       "  private_allow = ( { name = \"mirror.wild.test\";\n"
                       "                      addresses = [\"127.0.0.1\", \"10.9.0.0/16\"]; } );\n"
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

__attribute__((unused)) static int teardown(void **state)
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
__attribute__((unused)) static char *curl(const char *args, int *status)
{
    char *cmd = xasprintf_test("curl -sS -m 20 -x http://127.0.0.1:%d --cacert %s "
                               "-w ' code=%%{http_code} connect=%%{http_connect}' %s 2>&1",
                               t.relay_port, t.cert, args);
    char *out = test_run(cmd, status);

    free(cmd);
    return out;
}

__attribute__((unused)) static void expect_in(const char *haystack, const char *needle)
{
    if (strstr(haystack, needle) == NULL) {
        fail_msg("'%s' not in '%s'", needle, haystack);
    }
}

/* Connects to the sandbox's proxy socket and hands it fd the way sbx-relay does (one
 * NUL byte with SCM_RIGHTS); returns the unix socket. The caller keeps its own fd. */
__attribute__((unused)) static int hand_over(int fd)
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

#endif
