/* test_image_def.c - devcontainer.json fields for the warm image: npm
 * packages (customizations.sbx.npm) and the Docker sidecar's definition. */
#include "test_common.h"

#include <sys/stat.h>

#include "image/image.h"

#define dir test_dir

static struct sbx_image_def *load(const char *text, sbx_error_t **err)
{
    char *path = test_write_file(dir, "devcontainer.json", text);
    struct sbx_image_def *d = sbx_image_def_load(path, err);

    free(path);
    return d;
}

static void test_npm_in_hash(void **state)
{
    sbx_error_t *err = NULL;
    struct sbx_image_def *plain;
    struct sbx_image_def *d;

    (void)state;
    plain = load("{\"customizations\":{\"sbx\":{\"packages\":[\"nodejs\"]}}}", &err);
    assert_non_null(plain);
    assert_null(plain->npm);
    assert_null(strstr(plain->canonical, "npm")); /* older definitions keep their hash */
    d = load("{\"customizations\":{\"sbx\":{\"packages\":[\"nodejs\"],"
             "\"npm\":[\"testcontainers@10.28.0\",\"@scope/x@1.2.3\"]}}}",
             &err);
    assert_non_null(d);
    assert_string_equal(d->npm[0], "@scope/x@1.2.3");
    assert_string_equal(d->npm[1], "testcontainers@10.28.0");
    assert_null(d->npm[2]);
    assert_non_null(
        strstr(d->canonical, "\"npm\":[\"@scope/x@1.2.3\",\"testcontainers@10.28.0\"]"));
    assert_string_not_equal(d->canonical, plain->canonical);
    sbx_image_def_free(d);
    sbx_image_def_free(plain);
}

static void npm_error(const char *npm, const char *want)
{
    sbx_error_t *err = NULL;
    char *text = NULL;
    struct sbx_image_def *d;

    assert_true(asprintf(&text, "{\"customizations\":{\"sbx\":{\"npm\":%s}}}", npm) > 0);
    d = load(text, &err);
    free(text);
    assert_null(d);
    assert_non_null(err);
    if (strstr(err->msg, want) == NULL) {
        fail_msg("'%s' not in '%s'", want, err->msg);
    }
    sbx_error_free(&err);
}

static void test_npm_bad(void **state)
{
    (void)state;
    npm_error("\"testcontainers\"", "customizations.sbx.npm must be an array");
    npm_error("[\"testcontainers\"]", "customizations.sbx.npm[0] is not an npm");
    npm_error("[\"a@1\", \"x@1; rm -rf /\"]", "customizations.sbx.npm[1] is not an npm");
    npm_error("[\"--registry=x@1\"]", "customizations.sbx.npm[0]");
    npm_error("[\"a@\"]", "customizations.sbx.npm[0]");
    npm_error("[5]", "customizations.sbx.npm[0]");
    assert_true(sbx_image_npm_spec_valid("testcontainers@^10.28.0"));
    assert_false(sbx_image_npm_spec_valid("Testcontainers@1"));
}

static void test_sidecar_canonical(void **state)
{
    sbx_error_t *err = NULL;
    struct sbx_image_def *d = load("{}", &err);
    char *c;

    (void)state;
    assert_non_null(d);
    c = sbx_image_sidecar_canonical(d);
    /* fixed: the cached root filesystem of sbx-dind is found by its hash */
    assert_string_equal(c, "{\"format\":1,\"kind\":\"sidecar\",\"packages\":[\"ca-certificates\","
                           "\"docker.io\",\"iptables\",\"procps\",\"rootlesskit\",\"uidmap\"],"
                           "\"suite\":\"bookworm\"}");
    free(c);
    sbx_image_def_free(d);
}

/* mise.toml of the definition's repository is part of the content hash,
 * for a definition in .devcontainer/ and for one outside it. */
static void test_mise_found(void **state)
{
    sbx_error_t *err = NULL;
    char *sub = NULL;
    char *def;
    char *mise;
    struct sbx_image_def *d;

    (void)state;
    mise = test_write_file(dir, "mise.toml", "[tools]\nnode = \"20\"\n");
    d = load("{}", &err);
    assert_non_null(d);
    assert_non_null(d->mise);
    assert_non_null(strstr(d->canonical, "node"));
    sbx_image_def_free(d);
    assert_true(asprintf(&sub, "%s/.devcontainer", dir) > 0);
    assert_int_equal(mkdir(sub, 0755), 0);
    def = test_write_file(sub, "devcontainer.json", "{}");
    d = sbx_image_def_load(def, &err);
    assert_non_null(d);
    assert_non_null(d->mise);
    sbx_image_def_free(d);
    unlink(def);
    rmdir(sub);
    unlink(mise);
    free(def);
    free(sub);
    free(mise);
}

/* A mise.toml that is not UTF-8 text (found by fuzz/fuzz_image.c) is refused
 * with the definition named, not a definition without a canonical spec. */
static void test_mise_not_utf8(void **state)
{
    sbx_error_t *err = NULL;
    char *mise;
    struct sbx_image_def *d;

    (void)state;
    mise = test_write_file(dir, "mise.toml", "[tools]\nnode = \"\xde\x8c\x9d\x87\"\n");
    d = load("{}", &err);
    assert_null(d);
    assert_non_null(err);
    assert_non_null(strstr(err->msg, "mise.toml of this repository is not UTF-8 text"));
    sbx_error_free(&err);
    unlink(mise);
    free(mise);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_npm_in_hash),       cmocka_unit_test(test_npm_bad),
        cmocka_unit_test(test_sidecar_canonical), cmocka_unit_test(test_mise_found),
        cmocka_unit_test(test_mise_not_utf8),
    };

    return cmocka_run_group_tests(tests, test_dir_setup, test_dir_teardown);
}
