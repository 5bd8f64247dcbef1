/* test_docker_sidecar_pull.c - the sidecar's inner daemon pulls through the
 * sandbox's egress proxy (docs/testcontainers.md, "Pulls"): from a local
 * registry (Debian's docker-registry on loopback, started here) that the
 * policy allows, and a pull from a name the policy does not allow is refused
 * with the proxy's reason and logged. Only the registry started here is ever
 * reached (system_dns = false, both names map to 127.0.0.1). */
#include "rt_common.h"

#define SEED_IMAGE "sbx-busybox:test"

static pid_t registry_pid;
static int registry_port;
static char *registry_dir;
static char *log_path;

/* Waits (deadline 20 s) until the registry answers /v2/. */
static int registry_ready(void)
{
    for (int i = 0; i < 200; i++) {
        char *argv[] = {"/usr/bin/curl", "-sf", "-o", "/dev/null", "-m", "1", NULL, NULL};
        char url[64];
        struct spawn_result r;
        int rc;

        snprintf(url, sizeof(url), "http://127.0.0.1:%d/v2/", registry_port);
        argv[6] = url;
        r = spawn_run(argv, NULL);
        rc = r.rc;
        spawn_result_free(&r);
        if (rc == 0) {
            return 0;
        }
        usleep(100 * 1000); /* polling with a deadline, not a fixed wait */
    }
    return -1;
}

/* Pushes SEED_IMAGE to the registry as tc/bb:1 from the test engine (it
 * reaches 127.0.0.1, an insecure registry by Docker's default). */
static void push_seed(void)
{
    char *script = NULL;
    char *argv[] = {"/bin/sh", "-c", NULL, NULL};
    char *env[] = {rt_host, "PATH=/usr/sbin:/usr/bin:/sbin:/bin", NULL};
    struct spawn_result r;

    assert_true(asprintf(&script,
                         "set -e; docker tag " SEED_IMAGE " 127.0.0.1:%d/tc/bb:1; "
                         "docker push -q 127.0.0.1:%d/tc/bb:1 >/dev/null; "
                         "docker rmi 127.0.0.1:%d/tc/bb:1 >/dev/null",
                         registry_port, registry_port, registry_port) > 0);
    argv[2] = script;
    r = spawn_run_as(argv, env, 0);
    if (r.rc != 0) {
        fail_msg("pushing to the test registry: rc %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    free(script);
}

static int setup(void **state)
{
    char *script;
    char *argv[] = {"/bin/sh", NULL, NULL, NULL};

    if (rt_setup(state) < 0) {
        return -1;
    }
    rt_busybox_image(SEED_IMAGE);
    registry_dir = test_mkdtemp();
    script = rt_source_path("tests/support/registry.sh");
    argv[1] = script;
    argv[2] = registry_dir;
    registry_pid = rt_spawn_server(argv, &registry_port);
    free(script);
    if (registry_pid < 0 || registry_ready() < 0) {
        fprintf(stderr, "the test registry did not start (docker-registry installed?)\n");
        return -1;
    }
    push_seed();
    assert_true(asprintf(&log_path, "%s/egress.jsonl", rt_state) > 0);
    return 0;
}

static int teardown(void **state)
{
    rt_stop_server(&registry_pid);
    if (registry_dir != NULL) {
        test_rm_rf(registry_dir);
        free(registry_dir);
    }
    free(log_path);
    return rt_teardown(state);
}

static void use_config(const char *insecure)
{
    char *text = NULL;

    assert_true(asprintf(&text,
                         "provider = \"dind\";\n"
                         "providers = {\n"
                         "  dind = { plugin = \"provider_docker\"; docker_sidecar = true;\n"
                         "           sidecar_insecure_registries = [%s]; };\n"
                         "};\n"
                         "egress = {\n  log = \"%s\";\n  system_dns = false;\n"
                         "  registries = [\"allowed.test:%d\"];\n"
                         "  hosts = ( { name = \"allowed.test\"; address = \"127.0.0.1\"; },\n"
                         "            { name = \"denied.test\"; address = \"127.0.0.1\"; } );\n"
                         "};\n",
                         insecure, log_path, registry_port) > 0);
    rt_use_config(text);
    free(text);
}

static void test_pull_allowed_and_denied(void **state)
{
    char *script = NULL;
    char *insecure = NULL;
    char *log = NULL;
    size_t len = 0;
    struct spawn_result r;
    FILE *f;

    (void)state;
    /* the registry speaks plain HTTP: both names are insecure registries,
     * so only the proxy's policy tells them apart */
    assert_true(asprintf(&insecure, "\"allowed.test:%d\", \"denied.test:%d\"", registry_port,
                         registry_port) > 0);
    use_config(insecure);
    free(insecure);
    assert_true(
        asprintf(&script,
                 "s=/run/sbx-docker/docker.sock; "
                 "curl -sS --unix-socket $s -X POST "
                 "'http://localhost/images/create?fromImage=allowed.test:%d/tc/bb&tag=1' | "
                 "grep -o 'Status: Downloaded newer image for [^\"]*'; "
                 "curl -sS --unix-socket $s -H 'Content-Type: application/json' "
                 "-d '{\"Image\":\"allowed.test:%d/tc/bb:1\",\"Cmd\":[\"echo\",\"pulled-runs\"],"
                 "\"HostConfig\":{\"NetworkMode\":\"none\"}}' "
                 "'http://localhost/containers/create?name=pulled' >/dev/null; "
                 "curl -sSf --unix-socket $s -X POST http://localhost/containers/pulled/start; "
                 "curl -sSf --unix-socket $s -X POST http://localhost/containers/pulled/wait "
                 ">/dev/null; "
                 "curl -sS --unix-socket $s 'http://localhost/containers/pulled/logs?stdout=1' | "
                 "tr -cd 'a-z-\\n'; "
                 "curl -sS --unix-socket $s -X POST "
                 "'http://localhost/images/create?fromImage=denied.test:%d/tc/bb&tag=1'; echo",
                 registry_port, registry_port, registry_port) > 0);
    r = RT_SBX("run", "--", "sh", "-c", script);
    free(script);
    if (r.rc != 0) {
        fail_msg("sbx run rc %d: %s%s", r.rc, r.out, r.err);
    }
    fprintf(stderr, "%s", r.out);
    assert_contains(r.out, "Status: Downloaded newer image for allowed.test:");
    assert_contains(r.out, "pulled-runs");
    /* refused by the proxy, its reason in the daemon's error */
    assert_contains(r.out, "403");
    assert_contains(r.out, "sbx egress not-allowed");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);

    f = fopen(log_path, "r");
    assert_non_null(f);
    assert_true(getdelim(&log, &len, '\0', f) > 0);
    fclose(f);
    assert_contains(log, "\"host\":\"allowed.test\"");
    assert_contains(log, "\"decision\":\"allow\"");
    assert_contains(log, "\"host\":\"denied.test\"");
    assert_contains(log, "\"decision\":\"deny\"");
    free(log);
}

static void test_bad_insecure_registry(void **state)
{
    struct spawn_result r;

    (void)state;
    use_config("\"ok.test:5000\", \"x;rm -rf /\"");
    r = RT_SBX("run", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "sidecar_insecure_registries[1] 'x;rm -rf /' is not host or host:port");
    spawn_result_free(&r);
    use_config("\"ok.test:99999\"");
    r = RT_SBX("run", "--", "true");
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "sidecar_insecure_registries[0] 'ok.test:99999'");
    spawn_result_free(&r);
    assert_int_equal(rt_sandboxes(), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pull_allowed_and_denied),
        cmocka_unit_test(test_bad_insecure_registry),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
