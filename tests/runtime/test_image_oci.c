/* test_image_oci.c - features from an OCI registry, the Docker credential
 * helpers of the engine's login, and `sbx image gc --registry`
 * (docs/image.md): tests/runtime/image_oci.sh against local docker-registry
 * instances with TLS from a test CA and basic auth. Loopback only. */
#include "rt_common.h"

static void test_features_helpers_gc(void **state)
{
    char *work = test_mkdtemp();
    char *script = rt_source_path("tests/runtime/image_oci.sh");
    char *src = rt_source_path(".");
    char *env[8];
    char *argv[] = {"/bin/bash", script, NULL};
    struct spawn_result r;
    size_t n = 0;

    (void)state;
    rt_busybox_image("sbx-busybox:test");
    assert_true(asprintf(&env[n++], "SBX=%s", rt_sbx) > 0);
    assert_true(asprintf(&env[n++], "SRC=%s", src) > 0);
    assert_true(asprintf(&env[n++], "WORK=%s", work) > 0);
    assert_true(asprintf(&env[n++], "HOST1=%s", rt_host + strlen("DOCKER_HOST=")) > 0);
    assert_true(asprintf(&env[n++], "SBX_TEST_LABEL=%s", rt_scope) > 0);
    env[n++] = strdup("PATH=/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    env[n++] = strdup("HOME=/nonexistent");
    env[n] = NULL;
    r = spawn_run(argv, env);
    if (r.rc != 0) {
        fail_msg("image_oci.sh: exit %d\n%s\n%s", r.rc, r.out, r.err);
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
        cmocka_unit_test(test_features_helpers_gc),
    };

    return cmocka_run_group_tests(tests, rt_setup, rt_teardown);
}
