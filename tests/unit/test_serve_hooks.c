/* test_serve_hooks.c - the runner's wait alert on a fake clock: at 600 s of
 * wait (not 599) it fires once: the webhook (a local server on 127.0.0.1
 * started here), the command hook (environment variables, no shell) and the
 * autoscaler's scale-up hook with the pool and the wanted box count. */
#include "test_common.h"

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "runner_harness.h"
#include "wait.h"

static const char webhook_py[] = "import http.server, sys\n"
                                 "out = sys.argv[1]\n"
                                 "class H(http.server.BaseHTTPRequestHandler):\n"
                                 "    def do_POST(self):\n"
                                 "        n = int(self.headers.get('Content-Length', '0'))\n"
                                 "        body = self.rfile.read(n)\n"
                                 "        with open(out, 'ab') as f:\n"
                                 "            f.write(body + b'\\n')\n"
                                 "        self.send_response(204)\n"
                                 "        self.end_headers()\n"
                                 "    def log_message(self, *a):\n"
                                 "        pass\n"
                                 "s = http.server.HTTPServer(('127.0.0.1', 0), H)\n"
                                 "print(s.server_address[1], flush=True)\n"
                                 "s.serve_forever()\n";

static int webhook_fd = -1; /* its stdout, kept open while it runs */

static pid_t start_webhook(const char *dir, const char *out, int *port)
{
    char *script = test_write_file(dir, "webhook.py", webhook_py);
    int p[2];
    pid_t pid;
    char buf[32] = "";
    ssize_t n;

    assert_int_equal(pipe(p), 0);
    pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execlp("python3", "python3", script, out, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    /* the whole line: the port and its newline */
    for (n = 0; n < (ssize_t)sizeof(buf) - 1 && strchr(buf, '\n') == NULL;) {
        ssize_t k = read(p[0], buf + n, sizeof(buf) - 1 - (size_t)n);

        if (k <= 0) {
            break;
        }
        n += k;
    }
    webhook_fd = p[0];
    assert_true(n > 0);
    *port = atoi(buf);
    assert_true(*port > 0);
    free(script);
    return pid;
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf;
    size_t n;

    if (f == NULL) {
        return NULL;
    }
    buf = calloc(1, 65536);
    n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* Waits up to 20 s for a file to hold `needle`. */
static char *wait_file(const char *path, const char *needle)
{
    for (int i = 0; i < 2000; i++) {
        char *s = slurp(path);

        if (s != NULL && strstr(s, needle) != NULL) {
            return s;
        }
        free(s);
        usleep(10 * 1000);
    }
    fail_msg("%s never held '%s'", path, needle);
    return NULL;
}

static void test_alert_at_600s(void **state)
{
    char *hookdir = test_mkdtemp();
    char *alert_out, *scale_out, *hook_out, *conf, *hook, *scale, *s;
    char *blocker, *waiter;
    pid_t web;
    int port = 0;
    struct stat st;
    unsigned long ticks;

    (void)state;
    assert_true(asprintf(&alert_out, "%s/alert.env", hookdir) > 0);
    assert_true(asprintf(&scale_out, "%s/scale.args", hookdir) > 0);
    assert_true(asprintf(&hook_out, "%s/webhook.json", hookdir) > 0);
    web = start_webhook(hookdir, hook_out, &port);
    hook = test_write_file(hookdir, "alert.sh", "");
    scale = test_write_file(hookdir, "scale.sh", "");
    free(hook);
    free(scale);
    {
        char *text = NULL;

        assert_true(asprintf(&text, "#!/bin/sh\nenv | grep -e '^SBX_' -e 's3cret' | sort > '%s'\n",
                             alert_out) > 0);
        hook = test_write_file(hookdir, "alert.sh", text);
        free(text);
        assert_true(asprintf(&text, "#!/bin/sh\necho \"$@\" >> '%s'\n", scale_out) > 0);
        scale = test_write_file(hookdir, "scale.sh", text);
        free(text);
    }
    chmod(hook, 0755);
    chmod(scale, 0755);
    /* ci gets one sandbox: the second ci job waits behind the first */
    assert_true(asprintf(&conf,
                         "box = { max_sandboxes = 2; heavy_min_memory = \"1G\"; };\n"
                         "runner = { alert_webhook = \"http://127.0.0.1:%d/alert\";\n"
                         "  alert_command = \"%s\"; scale_up_command = \"%s --from-sbx\";\n"
                         "  max_boxes = 3; box_hour_price = 1.0;\n"
                         "  token_env = \"SBX_TEST_HOOK_TOKEN\"; };\n",
                         port, hook, scale) > 0);
    setenv("SBX_TEST_HOOK_TOKEN", "s3cret-hook-token", 1);
    rh_start(conf);
    blocker = rh_submit("{\"argv\":[\"sleep\",\"600000\"]}");
    json_decref(rh_wait_state(blocker, "running"));
    waiter = rh_submit("{\"argv\":[\"exit\",\"0\"]}");

    rh_advance(599 * 1000);
    ticks = sbx_runner_alert_ticks(rh_runner); /* several alert ticks: none alerts yet */
    wait_until(sbx_runner_alert_ticks(rh_runner) >= ticks + 4, 30, NULL,
               "four alert ticks of the runner");
    assert_int_not_equal(stat(alert_out, &st), 0);
    assert_int_not_equal(stat(hook_out, &st), 0);

    rh_advance(1000);
    s = wait_file(alert_out, "SBX_ALERT_WAIT_SECONDS=600");
    {
        char *want = NULL;

        assert_true(asprintf(&want, "SBX_ALERT_JOB=%s\n", waiter) > 0);
        assert_non_null(strstr(s, want));
        free(want);
    }
    assert_non_null(strstr(s, "SBX_ALERT_POOL=ci\n"));
    assert_non_null(strstr(s, "SBX_ALERT_CLASS=light\n"));
    assert_null(strstr(s, "s3cret")); /* the token never reaches a hook */
    assert_non_null(strstr(s, "SBX_AUTOSCALE="));
    free(s);
    s = wait_file(hook_out, "\"event\":\"job_wait_alert\"");
    assert_non_null(strstr(s, waiter));
    assert_non_null(strstr(s, "\"wait_seconds\":600"));
    assert_non_null(strstr(s, "\"action\":\"scale_up\""));
    free(s);
    s = wait_file(scale_out, "--from-sbx ci 2\n");
    free(s);

    /* once per job: more time passes, no second alert */
    rh_advance(60 * 1000);
    ticks = sbx_runner_alert_ticks(rh_runner);
    wait_until(sbx_runner_alert_ticks(rh_runner) >= ticks + 4, 30, NULL,
               "four alert ticks of the runner");
    s = slurp(hook_out);
    assert_non_null(s);
    assert_null(strstr(strstr(s, "job_wait_alert") + 1, "job_wait_alert"));
    free(s);
    {
        long code = 0;
        char *q = rh_call("GET", "/v1/queue", NULL, &code);

        assert_int_equal(code, 200);
        assert_non_null(strstr(q, "\"alerted\":true"));
        free(q);
        q = rh_call("GET", "/metrics", NULL, &code);
        assert_non_null(strstr(q, "sbx_job_wait_alerts_total{pool=\"ci\"} 1"));
        free(q);
    }
    rh_stop();
    kill(web, SIGTERM);
    waitpid(web, NULL, 0);
    close(webhook_fd);
    test_rm_rf(hookdir);
    free(hookdir);
    free(alert_out);
    free(scale_out);
    free(hook_out);
    free(conf);
    free(hook);
    free(scale);
    free(blocker);
    free(waiter);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alert_at_600s),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
