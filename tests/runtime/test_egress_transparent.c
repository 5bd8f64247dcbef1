/* test_egress_transparent.c - egress without proxy variables from a real sandbox
 * (docs/egress.md, "Without proxy variables"; issue 27): with HTTP(S)_PROXY unset,
 * curl, Node 18's fetch and http.get reach an allowed local test host through the
 * relay's resolver and the netns redirect; (changed) a denied name resolves to a deny
 * address, the resolver's answer names the policy (RFC 8914 Extended DNS Error), and
 * a connection to it gets the proxy's refusal in words the client prints (curl and
 * Node's fetch: the 403's reason phrase and body; TLS: an access_denied alert), never
 * a connect; the deny's log line names the exec; a TLS name other than the resolved
 * one is refused as on the proxy path; an IP literal reaches the proxy's checks and
 * is refused (answered); UDP to anything but the resolver fails in the sandbox;
 * (added) `git ls-remote` over HTTPS lists a local bare repository's main (git's dumb
 * HTTP protocol, the test CA trusted through egress.ca_bundle's GIT_SSL_CAINFO) and
 * fails for a denied name. Only
 * the loopback servers started here are ever reached (system_dns = false);
 * 192.0.2.1 (TEST-NET-1) is refused inside the sandbox's netns or by the proxy
 * before any connect. */
#include "rt_common.h"

static pid_t origin_pid;
static int origin_port;
static pid_t tls_pid;
static int tls_port;
static pid_t git_pid; /* (added) a bare repository over HTTPS (git's dumb protocol) */
static int git_port;
static char git_head[64];
static char *log_path;

/* (added) STATE/repo.git: a bare repository with one commit on main, ready for dumb
 * HTTP; its commit id into git_head. Only the host's git, no network. */
static void make_repo(void)
{
    char *cmd = NULL;
    FILE *f;

    assert_true(asprintf(&cmd,
                         "set -e; cd '%s'; git init -q -b main src; "
                         "git -C src -c user.name=t -c user.email=t@t.test commit -q "
                         "--allow-empty -m one; git clone -q --bare src repo.git; "
                         "git -C repo.git update-server-info",
                         rt_state) > 0);
    assert_int_equal(system(cmd), 0);
    free(cmd);
    assert_true(asprintf(&cmd, "git -C '%s/repo.git' rev-parse refs/heads/main", rt_state) > 0);
    f = popen(cmd, "r");
    assert_non_null(f);
    assert_non_null(fgets(git_head, sizeof(git_head), f));
    git_head[strcspn(git_head, "\n")] = '\0';
    assert_int_equal(strlen(git_head), 40);
    assert_int_equal(pclose(f), 0);
    free(cmd);
}

static int setup(void **state)
{
    char cfg[2048];
    char *cert = NULL;
    char *key = NULL;
    char *gen = NULL;
    char *argv[] = {"python3", NULL, "http", NULL};
    char *targv[] = {"python3", NULL, "https", NULL, NULL, NULL};
    char *gargv[] = {"python3", NULL, "https-dir", NULL, NULL, NULL, NULL};

    if (rt_setup(state) < 0) {
        return -1;
    }
    argv[1] = rt_source_path("tests/support/egress_origin.py");
    origin_pid = rt_spawn_server(argv, &origin_port);
    assert_true(asprintf(&cert, "%s/tls-cert.pem", rt_state) > 0);
    assert_true(asprintf(&key, "%s/tls-key.pem", rt_state) > 0);
    assert_true(asprintf(&gen,
                         "openssl req -x509 -newkey rsa:2048 -nodes -keyout '%s' -out '%s' "
                         "-days 1 -subj /CN=allowed.test "
                         "-addext subjectAltName=DNS:allowed.test >/dev/null 2>&1",
                         key, cert) > 0);
    assert_int_equal(system(gen), 0);
    targv[1] = argv[1];
    targv[3] = cert;
    targv[4] = key;
    tls_pid = rt_spawn_server(targv, &tls_port);
    make_repo();
    gargv[1] = argv[1];
    gargv[3] = cert;
    gargv[4] = key;
    gargv[5] = rt_state;
    git_pid = rt_spawn_server(gargv, &git_port);
    free(argv[1]);
    free(key);
    free(gen);
    if (origin_pid <= 0 || tls_pid <= 0 || git_pid <= 0) {
        free(cert);
        return -1;
    }
    assert_true(asprintf(&log_path, "%s/egress.jsonl", rt_state) > 0);
    /* (added) the test certificate is also the sandbox's extra CA (egress.ca_bundle):
     * git trusts it through GIT_SSL_CAINFO, which sbx sets */
    snprintf(cfg, sizeof(cfg),
             "egress = {\n  log = \"%s\";\n  system_dns = false;\n"
             "  ca_bundle = \"%s\";\n"
             "  registries = [\"allowed.test:%d,%d,%d\"];\n"
             "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; },\n"
             "            { name = \"other.test\"; address = \"127.0.0.1\"; },\n"
             "            { name = \"denied.test\"; address = \"127.0.0.1\"; } );\n};\n",
             log_path, cert, origin_port, tls_port, git_port);
    free(cert);
    rt_use_config(cfg);
    return 0;
}

static int teardown(void **state)
{
    rt_stop_server(&origin_pid);
    rt_stop_server(&tls_pid);
    rt_stop_server(&git_pid);
    free(log_path);
    return rt_teardown(state);
}

/* The script run in the sandbox (P: plain port, T: TLS port, G: the repository's TLS
 * port). Each line it prints is checked below. */
static const char script[] =
    "unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy NODE_USE_ENV_PROXY\n"
    "P=$1; T=$2; G=$3; export GIT_TERMINAL_PROMPT=0\n"
    "getent hosts allowed.test | awk '{print \"getent-allowed \" $1}'\n"
    "getent hosts denied.test | awk '{print \"getent-denied \" $1}'\n"
    "echo \"curl-allowed $(curl -sS -m 5 http://allowed.test:$P/)\"\n"
    "curl -sS -m 5 http://denied.test:$P/ 2>&1 | sed 's/^/curl-denied /'\n"
    "curl -sS -m 5 https://denied.test/ 2>&1 | sed 's/^/curl-denied-tls /'\n"
    "echo \"curl-tls $(curl -sS -k -m 5 https://allowed.test:$T/)\"\n"
    "curl -sS -k -m 5 --connect-to other.test:$T:allowed.test:$T https://other.test:$T/ "
    ">/dev/null 2>&1; echo \"curl-sni-mismatch rc=$?\"\n"
    "curl -sS -m 5 http://192.0.2.1:$P/ 2>&1 | head -1 | sed 's/^/curl-ip-literal /'\n"
    /* (added) git over HTTPS, trusting the test CA through GIT_SSL_CAINFO */
    "echo \"git-cainfo $GIT_SSL_CAINFO\"\n"
    "timeout 60 git ls-remote https://allowed.test:$G/repo.git 2>&1 | sed 's/^/git-allowed /'\n"
    "timeout 60 git ls-remote https://denied.test/repo.git >/tmp/g.out 2>&1; "
    "echo \"git-denied rc=$?\"; sed 's/^/git-denied /' /tmp/g.out\n"
    "cat > /tmp/t.js <<'EOF'\n"
    "const P = process.argv[2];\n"
    "const dgram = require('dgram');\n"
    "function ede(name) {\n"
    "  return new Promise((done) => {\n"
    "    const s = dgram.createSocket('udp4');\n"
    "    const q = [0x12, 0x34, 1, 0, 0, 1, 0, 0, 0, 0, 0, 1];\n"
    "    for (const l of name.split('.')) { q.push(l.length); for (const c of l) "
    "q.push(c.charCodeAt(0)); }\n"
    "    q.push(0, 0, 1, 0, 1, 0, 0, 41, 4, 208, 0, 0, 0, 0, 0, 0);\n"
    "    s.on('message', (m) => { const t = m.toString('latin1'); "
    "console.log('dns-denied rcode=' + (m[3] & 15) + ' ' + t.slice(t.indexOf('sbx egress'))); "
    "s.close(); done(); });\n"
    "    s.send(Buffer.from(q), 53, '127.0.0.53');\n"
    "    setTimeout(() => { console.log('dns-denied no answer'); s.close(); done(); }, "
    "10000).unref();\n"
    "  });\n"
    "}\n"
    "function udp() {\n"
    "  return new Promise((done) => {\n"
    "    const s = dgram.createSocket('udp4');\n"
    "    s.on('error', () => {});\n"
    "    s.send(Buffer.from('x'), 53, '192.0.2.1', (e) => { console.log('udp-other ' + "
    "(e ? 'failed ' + e.code : 'sent')); s.close(); done(); });\n"
    "  });\n"
    "}\n"
    "function get(h) {\n"
    "  return new Promise((done) => {\n"
    "    require('http').get(`http://${h}:${P}/`, (r) => { let b = ''; "
    "r.on('data', (c) => (b += c)); r.on('end', () => { console.log(`http.get ${h} "
    "${r.statusCode} ${b.trim()}`); done(); }); })\n"
    "      .on('error', (e) => { console.log(`http.get ${h} error ${e.code}`); done(); });\n"
    "  });\n"
    "}\n"
    "(async () => {\n"
    "  for (const h of ['allowed.test', 'denied.test']) {\n"
    "    try { const r = await fetch(`http://${h}:${P}/`); console.log(`fetch ${h} "
    "${r.status} ${(await r.text()).trim()}`); }\n"
    "    catch (e) { console.log(`fetch ${h} error ${e.cause && e.cause.code}`); }\n"
    "    await get(h);\n"
    "  }\n"
    /* (added) the issue's case: default ports, nothing listens there (never connected) */
    "  try { const r = await fetch('http://denied.test/'); console.log(`fetch-denied "
    "${r.status} [${r.statusText}] ${(await r.text()).split('\\n')[0]}`); }\n"
    "  catch (e) { console.log(`fetch-denied error ${e.cause && e.cause.code}`); }\n"
    "  try { const r = await fetch('https://denied.test/'); console.log(`fetch-denied-tls "
    "${r.status}`); }\n"
    "  catch (e) { console.log(`fetch-denied-tls error ${e.message}: ${e.cause && "
    "e.cause.message}`.replace(/\\n/g, ' ')); }\n"
    "  await ede('denied.test');\n"
    "  await udp();\n"
    "})();\n"
    "EOF\n"
    "timeout 120 node /tmp/t.js $P\n"; /* Node starts in seconds on a loaded box */

static int count_reason(const char *host, const char *reason)
{
    FILE *f = fopen(log_path, "r");
    char *line = NULL;
    size_t len = 0;
    int n = 0;

    assert_non_null(f);
    while (getline(&line, &len, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        const char *h = json_string_value(json_object_get(o, "host"));
        const char *r = json_string_value(json_object_get(o, "reason"));

        assert_non_null(o);
        if (h != NULL && strcmp(h, host) == 0 &&
            (reason == NULL ? r == NULL : r != NULL && strcmp(r, reason) == 0)) {
            n++;
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    return n;
}

/* (added) The log lines of task's connections to the denied name (CONNECT lines, not
 * the resolver's DNS ones): each refused as not-allowed, naming exec and a pid inside. */
static int count_denied_attributed(const char *task, const char *exec)
{
    FILE *f = fopen(log_path, "r");
    char *line = NULL;
    size_t len = 0;
    int n = 0;

    assert_non_null(f);
    while (getline(&line, &len, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        const char *tk = json_string_value(json_object_get(o, "task"));
        const char *h = json_string_value(json_object_get(o, "host"));
        const char *m = json_string_value(json_object_get(o, "method"));
        const char *r = json_string_value(json_object_get(o, "reason"));
        const char *x = json_string_value(json_object_get(o, "exec"));

        if (tk != NULL && strcmp(tk, task) == 0 && h != NULL && strcmp(h, "denied.test") == 0 &&
            m != NULL && strcmp(m, "CONNECT") == 0) {
            if (r == NULL || strcmp(r, "not-allowed") != 0 || x == NULL || strcmp(x, exec) != 0 ||
                json_integer_value(json_object_get(o, "pid")) < 1) {
                fail_msg("a denied connection's log line: %s", line);
            }
            n++;
        }
        json_decref(o);
    }
    free(line);
    fclose(f);
    return n;
}

static void test_no_proxy_variables(void **state)
{
    char p[16], t[16], g[16], want[160];
    struct spawn_result r;
    json_t *rec;
    const char *out;

    (void)state;
    snprintf(p, sizeof(p), "%d", origin_port);
    snprintf(t, sizeof(t), "%d", tls_port);
    snprintf(g, sizeof(g), "%d", git_port);
    r = RT_SBX("run", "--task", "tp-1", "--json", "--", "sh", "-c", script, "sh", p, t, g);
    rec = json_loads(r.out, 0, NULL);
    assert_non_null(rec);
    out = json_string_value(json_object_get(rec, "stdout"));
    assert_non_null(out);
    if (r.rc != 0) {
        fail_msg("rc %d: stdout '%s' stderr '%s'", r.rc, out,
                 json_string_value(json_object_get(rec, "stderr")));
    }
    assert_contains(out, "getent-allowed 127.100.0.");
    assert_contains(out, "getent-denied 127.101.0."); /* (changed) a deny address */
    snprintf(want, sizeof(want), "curl-allowed hello from http allowed.test:%d\n", origin_port);
    assert_contains(out, want);
    /* (changed) a denied name: the proxy's refusal, as curl prints it (the body) */
    snprintf(want, sizeof(want),
             "curl-denied sbx egress not-allowed: denied.test:%d is not in this task's egress "
             "allow-list (ask for egress.allow \"denied.test:%d\")\n",
             origin_port, origin_port);
    assert_contains(out, want);
    snprintf(want, sizeof(want),
             "curl-denied explain on the host: sbx egress why denied.test:%d --task tp-1\n",
             origin_port);
    assert_contains(out, want);
    assert_contains(out, "curl-denied-tls curl: (35) ");
    assert_contains(out, "alert access denied");
    assert_contains(out, "curl-tls hello from https allowed.test");
    assert_contains(out, "curl-sni-mismatch rc=35\n");
    /* (changed) refused by the proxy and answered, as a denied name is */
    snprintf(want, sizeof(want),
             "curl-ip-literal sbx egress ip-literal: 192.0.2.1:%d is an IP address no rule "
             "allows",
             origin_port);
    assert_contains(out, want);
    /* (added) git ls-remote lists the host's commit on main; a denied name fails */
    assert_contains(out, "git-cainfo /run/sbx-egress/ca-bundle.pem\n");
    snprintf(want, sizeof(want), "git-allowed %s\trefs/heads/main\n", git_head);
    assert_contains(out, want);
    assert_null(strstr(out, "git-denied rc=0\n"));
    assert_non_null(strstr(out, "git-denied rc="));
    assert_contains(out, "git-denied fatal: unable to access 'https://denied.test/repo.git/': ");
    assert_contains(out, "Access was denied"); /* the image's git: GnuTLS, the alert */
    snprintf(want, sizeof(want), "fetch allowed.test 200 hello from http allowed.test:%d\n",
             origin_port);
    assert_contains(out, want);
    snprintf(want, sizeof(want), "http.get allowed.test 200 hello from http allowed.test:%d\n",
             origin_port);
    assert_contains(out, want);
    assert_contains(out, "fetch denied.test 403 sbx egress not-allowed: denied.test:");
    assert_contains(out, "http.get denied.test 403 sbx egress not-allowed: denied.test:");
    /* the issue's "Done when": Node 18 fetch to a denied name names sbx's policy */
    assert_contains(out, "fetch-denied 403 [sbx egress not-allowed: denied.test:80 is not in "
                         "this task's egress allow-list (ask for egress.allow \"denied.test\")] "
                         "sbx egress not-allowed: denied.test:80 ");
    assert_contains(out, "fetch-denied-tls error fetch failed: ");
    assert_contains(out, "SSL alert number 49"); /* Node's cause: access_denied */
    assert_contains(out, "dns-denied rcode=0 sbx egress: denied.test not allowed by policy of "
                         "task tp-1 (not-allowed)\n");
    assert_contains(out, "udp-other failed ");
    fputs(out, stdout); /* what each client printed, for the record */
    fflush(stdout);
    json_decref(rec);
    spawn_result_free(&r);
    /* the proxy decided each: allowed ones logged as CONNECTs, refusals with reasons */
    assert_true(count_reason("allowed.test", NULL) >= 4);
    assert_true(count_reason("denied.test", "not-allowed") >= 1);
    assert_true(count_reason("allowed.test", "sni-mismatch") == 1);
    assert_true(count_reason("192.0.2.1", "ip-literal") == 1);
    assert_int_equal(rt_sandboxes(), 0);
}

/* (added) Lines of task's allowed connections to host naming exec. */
static int count_exec(const char *task, const char *host, const char *exec)
{
    FILE *f = fopen(log_path, "r");
    char *line = NULL;
    size_t len = 0;
    int n = 0;

    assert_non_null(f);
    while (getline(&line, &len, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        const char *tk = json_string_value(json_object_get(o, "task"));
        const char *h = json_string_value(json_object_get(o, "host"));
        const char *d = json_string_value(json_object_get(o, "decision"));
        const char *x = json_string_value(json_object_get(o, "exec"));

        n += tk != NULL && strcmp(tk, task) == 0 && h != NULL && strcmp(h, host) == 0 &&
             d != NULL && strcmp(d, "allow") == 0 && x != NULL && strcmp(x, exec) == 0 &&
             json_integer_value(json_object_get(o, "pid")) > 1;
        json_decref(o);
    }
    free(line);
    fclose(f);
    return n;
}

/* (added) In a kept task, an exec's Node 18 fetch to a denied name gets the 403 with
 * the policy's text, and the deny's log line names that exec (the agent's id, which
 * the command sees as SBX_EXEC_ID) and the pid inside; so does its allowed fetch's
 * line (the relay finds a redirected client's socket by its original destination). */
static void test_denied_names_the_exec(void **state)
{
    char js[512];
    struct spawn_result r = RT_SBX("task", "start", "--task", "tp-2");
    char id[64] = "";
    const char *p;

    (void)state;
    snprintf(js, sizeof(js),
             "unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy NODE_USE_ENV_PROXY\n"
             "echo \"id $SBX_EXEC_ID\"\n"
             "timeout 120 node -e \"(async () => { for (const u of ['http://denied.test/', "
             "'http://allowed.test:%d/']) { try { const r = await fetch(u); "
             "console.log('fetch', r.status, r.statusText); } catch (e) { console.log('error', "
             "e.cause); } } })()\"\n",
             origin_port);
    if (r.rc != 0) {
        fail_msg("task start rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    r = RT_SBX("exec", "tp-2", "--", "sh", "-c", js);
    if (r.rc != 0) {
        fail_msg("exec rc %d: %s %s", r.rc, r.out, r.err);
    }
    fputs(r.out, stdout);
    assert_contains(r.out, "fetch 403 sbx egress not-allowed: denied.test:80 is not in this "
                           "task's egress allow-list (ask for egress.allow \"denied.test\")\n");
    assert_contains(r.out, "fetch 200 OK\n"); /* the allowed one, attributed too */
    p = strstr(r.out, "id exec-");
    assert_non_null(p);
    sscanf(p + 3, "%63s", id);
    spawn_result_free(&r);
    r = RT_SBX("task", "end", "tp-2");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_int_equal(count_denied_attributed("tp-2", id), 1);
    assert_int_equal(count_exec("tp-2", "allowed.test", id), 1);
    assert_int_equal(rt_sandboxes(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_proxy_variables),
        cmocka_unit_test(test_denied_names_the_exec),
    };

    return cmocka_run_group_tests_name("egress_transparent", tests, setup, teardown);
}
