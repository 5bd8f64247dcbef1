/* test_egress_transparent.c - egress without proxy variables from a real sandbox
 * (docs/egress.md, "Without proxy variables"; issue 27): with HTTP(S)_PROXY unset,
 * curl, Node 18's fetch and http.get reach an allowed local test host through the
 * relay's resolver and the netns redirect; a denied name does not resolve and the
 * resolver's answer names the policy (RFC 8914 Extended DNS Error); a TLS name other
 * than the resolved one is refused as on the proxy path; an IP literal reaches the
 * proxy's checks and is refused; UDP to anything but the resolver fails in the
 * sandbox. Only the loopback servers started here are ever reached (system_dns =
 * false); 192.0.2.1 (TEST-NET-1) is refused inside the sandbox's netns or by the
 * proxy before any connect. */
#include "rt_common.h"

static pid_t origin_pid;
static int origin_port;
static pid_t tls_pid;
static int tls_port;
static char *log_path;

static int setup(void **state)
{
    char cfg[1024];
    char *cert = NULL;
    char *key = NULL;
    char *gen = NULL;
    char *argv[] = {"python3", NULL, "http", NULL};
    char *targv[] = {"python3", NULL, "https", NULL, NULL, NULL};

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
    free(argv[1]);
    free(cert);
    free(key);
    free(gen);
    if (origin_pid <= 0 || tls_pid <= 0) {
        return -1;
    }
    assert_true(asprintf(&log_path, "%s/egress.jsonl", rt_state) > 0);
    snprintf(cfg, sizeof(cfg),
             "egress = {\n  log = \"%s\";\n  system_dns = false;\n"
             "  registries = [\"allowed.test:%d,%d\"];\n"
             "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; },\n"
             "            { name = \"other.test\"; address = \"127.0.0.1\"; },\n"
             "            { name = \"denied.test\"; address = \"127.0.0.1\"; } );\n};\n",
             log_path, origin_port, tls_port);
    rt_use_config(cfg);
    return 0;
}

static int teardown(void **state)
{
    rt_stop_server(&origin_pid);
    rt_stop_server(&tls_pid);
    free(log_path);
    return rt_teardown(state);
}

/* The script run in the sandbox (P: plain port, T: TLS port). Each line it prints is
 * checked below. */
static const char script[] =
    "unset HTTP_PROXY HTTPS_PROXY http_proxy https_proxy NODE_USE_ENV_PROXY\n"
    "P=$1; T=$2\n"
    "getent hosts allowed.test | awk '{print \"getent-allowed \" $1}'\n"
    "getent hosts denied.test >/dev/null; echo \"getent-denied rc=$?\"\n"
    "echo \"curl-allowed $(curl -sS -m 5 http://allowed.test:$P/)\"\n"
    "curl -sS -m 5 http://denied.test:$P/ 2>&1 | sed 's/^/curl-denied /'\n"
    "echo \"curl-tls $(curl -sS -k -m 5 https://allowed.test:$T/)\"\n"
    "curl -sS -k -m 5 --connect-to other.test:$T:allowed.test:$T https://other.test:$T/ "
    ">/dev/null 2>&1; echo \"curl-sni-mismatch rc=$?\"\n"
    "curl -sS -m 5 http://192.0.2.1:$P/ >/dev/null 2>&1; echo \"curl-ip-literal rc=$?\"\n"
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

static void test_no_proxy_variables(void **state)
{
    char p[16], t[16], want[160];
    struct spawn_result r;
    json_t *rec;
    const char *out;

    (void)state;
    snprintf(p, sizeof(p), "%d", origin_port);
    snprintf(t, sizeof(t), "%d", tls_port);
    r = RT_SBX("run", "--task", "tp-1", "--json", "--", "sh", "-c", script, "sh", p, t);
    rec = json_loads(r.out, 0, NULL);
    assert_non_null(rec);
    out = json_string_value(json_object_get(rec, "stdout"));
    assert_non_null(out);
    if (r.rc != 0) {
        fail_msg("rc %d: stdout '%s' stderr '%s'", r.rc, out,
                 json_string_value(json_object_get(rec, "stderr")));
    }
    assert_contains(out, "getent-allowed 127.100.0.");
    assert_contains(out, "getent-denied rc=2\n");
    snprintf(want, sizeof(want), "curl-allowed hello from http allowed.test:%d\n", origin_port);
    assert_contains(out, want);
    assert_contains(out, "curl-denied curl: (6) Could not resolve host: denied.test\n");
    assert_contains(out, "curl-tls hello from https allowed.test");
    assert_contains(out, "curl-sni-mismatch rc=35\n");
    assert_contains(out, "curl-ip-literal rc=5"); /* 52 or 56: closed unanswered */
    snprintf(want, sizeof(want), "fetch allowed.test 200 hello from http allowed.test:%d\n",
             origin_port);
    assert_contains(out, want);
    snprintf(want, sizeof(want), "http.get allowed.test 200 hello from http allowed.test:%d\n",
             origin_port);
    assert_contains(out, want);
    assert_contains(out, "fetch denied.test error ENOTFOUND\n");
    assert_contains(out, "http.get denied.test error ENOTFOUND\n");
    assert_contains(out, "dns-denied rcode=3 sbx egress: denied.test not allowed by policy of "
                         "task tp-1 (not-allowed)\n");
    assert_contains(out, "udp-other failed ");
    json_decref(rec);
    spawn_result_free(&r);
    /* the proxy decided each: allowed ones logged as CONNECTs, refusals with reasons */
    assert_true(count_reason("allowed.test", NULL) >= 4);
    assert_true(count_reason("denied.test", "not-allowed") >= 1);
    assert_true(count_reason("allowed.test", "sni-mismatch") == 1);
    assert_true(count_reason("192.0.2.1", "ip-literal") == 1);
    assert_int_equal(rt_sandboxes(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_no_proxy_variables),
    };

    return cmocka_run_group_tests_name("egress_transparent", tests, setup, teardown);
}
