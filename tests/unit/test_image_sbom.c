/* test_image_sbom.c - scripts/sbx-image-sbom on a made-up root filesystem:
 * the SBOM's Debian packages (installed ones only) and npm packages with
 * their versions, the mise tools with the versions installed, the
 * definition's hash; a Debian tool whose version is not the pinned one fails
 * naming mise.toml and the key. No engine, no network. */
#include "spawn.h"
#include "test_common.h"

#include <jansson.h>
#include <sys/stat.h>

static char *dir;

static int setup(void **state)
{
    char *p;

    (void)state;
    dir = test_mkdtemp();
    assert_true(asprintf(&p,
                         "mkdir -p '%s/root/var/lib/dpkg' "
                         "'%s/root/opt/sbx-node/node_modules/left-pad' "
                         "'%s/root/opt/sbx-node/node_modules/@scope/x'",
                         dir, dir, dir) > 0);
    assert_int_equal(system(p), 0);
    free(p);
    free(test_write_file(dir, "root/var/lib/dpkg/status",
                         "Package: bash\nStatus: install ok installed\nVersion: 5.2.15-2+b7\n\n"
                         "Package: nodejs\nStatus: install ok installed\n"
                         "Version: 18.20.4+dfsg-1~deb12u2\n\n"
                         "Package: gone\nStatus: deinstall ok config-files\nVersion: 1.0\n\n"
                         "Package: golang-go\nStatus: install ok installed\nVersion: 2:1.19~1\n"));
    free(test_write_file(dir, "root/opt/sbx-node/node_modules/left-pad/package.json",
                         "{\"name\": \"left-pad\", \"version\": \"1.3.0\"}"));
    free(test_write_file(dir, "root/opt/sbx-node/node_modules/@scope/x/package.json",
                         "{\"name\": \"@scope/x\", \"version\": \"0.1.0\", \"d\": \"it's\"}"));
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    return 0;
}

static struct spawn_result sbom(const char *spec, const char *out)
{
    char *script = NULL;
    char *root = NULL;
    char *outp = NULL;
    char *argv[] = {"/bin/bash", NULL, "--root", NULL, "--spec", (char *)spec, "--out", NULL, NULL};
    struct spawn_result r;

    assert_true(asprintf(&script, "%s/scripts/sbx-image-sbom", getenv("SBX_SOURCE_DIR")) > 0);
    assert_true(asprintf(&root, "%s/root", dir) > 0);
    assert_true(asprintf(&outp, "%s/%s", dir, out) > 0);
    argv[1] = script;
    argv[3] = root;
    argv[7] = outp;
    r = spawn_run(argv, NULL);
    free(script);
    free(root);
    free(outp);
    return r;
}

static void test_sbom_contents(void **state)
{
    const char *spec = "{\"format\":1,\"mise_tools\":["
                       "{\"tool\":\"node\",\"version\":\"18\",\"via\":\"debian\",\"package\":"
                       "\"nodejs\"},"
                       "{\"tool\":\"go\",\"version\":\"1.19\",\"via\":\"debian\",\"package\":"
                       "\"golang-go\"},"
                       "{\"tool\":\"npm:left-pad\",\"version\":\"1.3.0\",\"via\":\"npm\","
                       "\"package\":\"left-pad@1.3.0\"}]}";
    struct spawn_result r = sbom(spec, "sbom.json");
    char *path = NULL;
    json_t *o;
    json_t *deb;

    (void)state;
    if (r.rc != 0) {
        fail_msg("sbx-image-sbom: exit %d: %s", r.rc, r.err);
    }
    spawn_result_free(&r);
    assert_true(asprintf(&path, "%s/sbom.json", dir) > 0);
    o = json_load_file(path, 0, NULL);
    assert_non_null(o);
    assert_int_equal(json_string_length(json_object_get(o, "definition_hash")), 16);
    deb = json_object_get(o, "debian");
    assert_int_equal(json_array_size(deb), 3); /* "gone" is not installed */
    assert_string_equal(json_string_value(json_object_get(json_array_get(deb, 0), "name")), "bash");
    assert_string_equal(json_string_value(json_object_get(json_array_get(deb, 0), "version")),
                        "5.2.15-2+b7");
    assert_int_equal(json_array_size(json_object_get(o, "npm")), 2);
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(json_object_get(o, "npm"), 0), "name")),
        "@scope/x");
    assert_int_equal(json_array_size(json_object_get(o, "mise")), 3);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(o, "mise"), 0), "version")),
                        "18.20.4+dfsg-1~deb12u2");
    json_decref(o);
    free(path);
}

static void test_pin_mismatch_fails(void **state)
{
    struct spawn_result r = sbom("{\"format\":1,\"mise_tools\":[{\"tool\":\"node\",\"version\":"
                                 "\"20\",\"via\":\"debian\",\"package\":\"nodejs\"}]}",
                                 "bad.json");

    (void)state;
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "mise.toml: tools.node = \"20\": the Debian package nodejs is "
                                  "18.20.4+dfsg-1~deb12u2, not 20"));
    spawn_result_free(&r);
    /* "1" is not a prefix of "18.20.4" */
    r = sbom("{\"format\":1,\"mise_tools\":[{\"tool\":\"node\",\"version\":\"1\",\"via\":"
             "\"debian\",\"package\":\"nodejs\"}]}",
             "bad.json");
    assert_int_equal(r.rc, 1);
    spawn_result_free(&r);
    r = sbom("{\"format\":1,\"mise_tools\":[{\"tool\":\"npm:left-pad\",\"version\":\"1.3.1\","
             "\"via\":\"npm\",\"package\":\"left-pad@1.3.1\"}]}",
             "bad.json");
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, "tools.\"npm:left-pad\" = \"1.3.1\": npm installed 1.3.0"));
    spawn_result_free(&r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sbom_contents),
        cmocka_unit_test(test_pin_mismatch_fails),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
