/* test_pool_image.c - docs/image.md "Which image": two pools with images of
 * their own run their jobs in their own image (runner jobs through `sbx
 * run`), a provider instance's `image` option is used without one, and a bad pools.NAME.image stops
 * the command with FILE:LINE. */
#include "rt_common.h"

#include "wait.h"

static pid_t serve_pid;

/* IMAGE: the imported sandbox image tagged again, with /pool-marker = WHAT
 * (docker build FROM it, one-line Dockerfile, no network). */
static void marker_image(const char *image, const char *what)
{
    char *dir = test_mkdtemp();
    char *script = NULL;
    char *argv[] = {"/bin/sh", "-c", NULL, NULL};
    char *env[] = {rt_host, "PATH=/usr/sbin:/usr/bin:/sbin:/bin:/usr/local/bin", NULL};
    struct spawn_result r;

    assert_true(asprintf(&script,
                         "set -e; docker tag sbx-sandbox:current %s-base; "
                         "printf '%%s\\n' 'FROM %s-base' > '%s/Dockerfile'; "
                         "printf '%%s\\n' 'RUN echo %s > /pool-marker' >> '%s/Dockerfile'; "
                         "DOCKER_BUILDKIT=0 docker build -q --network none -t %s '%s' >/dev/null",
                         image, image, dir, what, dir, image, dir) > 0);
    argv[2] = script;
    r = spawn_run_as(argv, env, 0);
    if (r.rc != 0) {
        fail_msg("building %s: rc %d: %s", image, r.rc, r.err);
    }
    spawn_result_free(&r);
    free(script);
    test_rm_rf(dir);
    free(dir);
}

static void start_serve(void)
{
    char *sock = NULL;

    serve_pid = fork();
    if (serve_pid == 0) {
        int devnull = open("/dev/null", O_WRONLY);

        dup2(devnull, 1);
        dup2(devnull, 2);
        putenv(rt_host);
        putenv(rt_statev);
        putenv(rt_config);
        execl(rt_sbx, rt_sbx, "serve", (char *)NULL);
        _exit(98);
    }
    assert_true(asprintf(&sock, "%s/runner.sock", rt_state) > 0);
    wait_until(access(sock, F_OK) == 0, 30, NULL, "the runner's socket %s", sock);
    free(sock);
}

/* `sbx run` on a box serving POOLS (its default pool: agent when served,
 * else ci) prints the marker of that pool's image. */
static void run_in(const char *pools, const char *want)
{
    char cfg[1024];
    struct spawn_result r;

    snprintf(cfg, sizeof(cfg),
             "runner = { listen = \"unix:%s/runner.sock\"; };\n"
             "box = { pools = [%s]; heavy_min_memory = \"1G\"; };\n"
             "pools = { ci = { image = \"sbx-poolimg-ci:test\"; };\n"
             "          agent = { image = \"sbx-poolimg-agent:test\"; }; };\n",
             rt_state, pools);
    rt_use_config(cfg);
    start_serve();
    r = RT_SBX("run", "--", "cat", "/pool-marker");
    if (r.rc != 0) {
        fail_msg("run rc %d: %s", r.rc, r.err);
    }
    assert_string_equal(r.out, want);
    spawn_result_free(&r);
    rt_stop_server(&serve_pid);
    wait_until(rt_sandboxes() == 0, 30, NULL, "the runner's sandboxes to go (%zu left)",
               rt_sandboxes());
}

static void test_pools_run_in_their_image(void **state)
{
    (void)state;
    marker_image("sbx-poolimg-ci:test", "ci");
    marker_image("sbx-poolimg-agent:test", "agent");
    run_in("\"ci\", \"agent\"", "agent\n");
    run_in("\"ci\"", "ci\n");
    /* no pool image: the provider instance's `image` option (sbx run here) */
    {
        struct spawn_result r;

        rt_use_config("providers = { docker = { plugin = \"provider_docker\";\n"
                      "  image = \"sbx-poolimg-ci:test\"; }; };\n");
        r = RT_SBX("run", "--", "cat", "/pool-marker");
        if (r.rc != 0) {
            fail_msg("run rc %d: %s", r.rc, r.err);
        }
        assert_string_equal(r.out, "ci\n");
        spawn_result_free(&r);
        rt_use_config(NULL);
    }
}

static void test_bad_pool_image(void **state)
{
    struct spawn_result r;

    (void)state;
    rt_use_config("pools = {\n  ci = { image = \"no good\"; };\n};\n");
    r = RT_SBX("serve");
    assert_int_equal(r.rc, 2);
    assert_contains(r.err, "sbx.conf:2: 'pools.ci.image' 'no good' is not an image reference");
    assert_ptr_equal(strchr(r.err, '\n'), r.err + strlen(r.err) - 1); /* one line */
    spawn_result_free(&r);
    r = RT_SBX("run", "--", "true"); /* sbx run: 125, sbx itself failed */
    assert_int_equal(r.rc, 125);
    assert_contains(r.err, "'pools.ci.image'");
    spawn_result_free(&r);
    rt_use_config("providers = { d2 = { plugin = \"provider_docker\";\n"
                  "  image = \"-x\"; }; };\n");
    r = RT_SBX("serve");
    assert_int_equal(r.rc, 2);
    assert_contains(r.err, "sbx.conf:2: 'providers.d2.image' '-x' is not an image reference");
    spawn_result_free(&r);
    rt_use_config(NULL);
}

/* The runner never outlives the test, also when an assertion failed. */
static int teardown(void **state)
{
    rt_stop_server(&serve_pid);
    return rt_teardown(state);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_bad_pool_image),
        cmocka_unit_test(test_pools_run_in_their_image),
    };

    return cmocka_run_group_tests_name("pool_image", tests, rt_setup, teardown);
}
