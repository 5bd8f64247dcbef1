/* test_image_registry.c - publishing and pulling the warm image (docs/image.md,
 * "Publishing and pulling"): tests/runtime/image_registry.sh against a local
 * docker-registry with TLS from a test CA and basic auth; push, delete
 * locally, pull by digest on a second engine ($SBX_TEST_DOCKER_HOST2, else
 * the test engine again), run. Loopback only. */
#include "rt_common.h"

static void test_push_pull_by_digest(void **state)
{
    const char *host2 = getenv("SBX_TEST_DOCKER_HOST2");
    char *work = test_mkdtemp();
    char *script = rt_source_path("tests/runtime/image_registry.sh");
    char *src = rt_source_path(".");
    char *env[10];
    char *argv[] = {"/bin/bash", script, NULL};
    struct spawn_result r;
    size_t n = 0;

    (void)state;
    rt_busybox_image("sbx-busybox:test");
    assert_true(asprintf(&env[n++], "SBX=%s", rt_sbx) > 0);
    assert_true(asprintf(&env[n++], "SRC=%s", src) > 0);
    assert_true(asprintf(&env[n++], "WORK=%s", work) > 0);
    assert_true(asprintf(&env[n++], "HOST1=%s", rt_host + strlen("DOCKER_HOST=")) > 0);
    assert_true(asprintf(&env[n++], "HOST2=%s",
                         host2 && *host2 ? host2 : rt_host + strlen("DOCKER_HOST=")) > 0);
    assert_true(asprintf(&env[n++], "SBX_TEST_LABEL=%s", rt_scope) > 0);
    env[n++] = strdup("PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    env[n++] = strdup("HOME=/nonexistent");
    env[n] = NULL;
    r = spawn_run(argv, env);
    if (r.rc != 0) {
        fail_msg("image_registry.sh: exit %d\n%s\n%s", r.rc, r.out, r.err);
    }
    fprintf(stderr, "%s", r.err);
    spawn_result_free(&r);
    for (size_t i = 0; i < n; i++) {
        free(env[i]);
    }
    test_rm_rf(work);
    free(work);
    free(script);
    free(src);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_push_pull_by_digest),
    };

    return cmocka_run_group_tests(tests, rt_setup, rt_teardown);
}
