/* test_image_oci.c - the pieces of features from a registry without one
 * (image/feature_oci.c, http/oci.c, util/sha256.c): SHA-256 against the
 * FIPS 180-4 vectors, fed in pieces; feature references; the Bearer
 * challenge's parameters; a feature of a registry the configuration does not
 * list is refused naming the file and the field, before any request. */
#include "test_common.h"

#include <jansson.h>
#include <sys/stat.h>

#include "config/config.h"
#include "http/oci.h"
#include "image/devc.h"
#include "image/image.h"
#include "util/sha256.h"

static void hex_of(const char *data, size_t len, size_t piece, char out[65])
{
    struct sbx_sha256 s;

    sbx_sha256_init(&s);
    for (size_t off = 0; off < len; off += piece) {
        sbx_sha256_update(&s, data + off, len - off < piece ? len - off : piece);
    }
    sbx_sha256_hex(&s, out);
}

static void test_sha256(void **state)
{
    static const char two[] = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    char *million = malloc(1000000);
    char hex[65];

    (void)state;
    hex_of("", 0, 1, hex);
    assert_string_equal(hex, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    hex_of("abc", 3, 1, hex);
    assert_string_equal(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    for (size_t piece = 1; piece < 70; piece += 7) {
        hex_of(two, strlen(two), piece, hex);
        assert_string_equal(hex,
                            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    }
    memset(million, 'a', 1000000);
    hex_of(million, 1000000, 4093, hex);
    assert_string_equal(hex, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
    free(million);
}

static void test_feature_refs(void **state)
{
    static const char *const bad[] = {
        "greet",                       /* no registry */
        "features/greet:1",            /* no host: the first part has no '.' or ':' */
        "127.0.0.1:5443/",             /* no path */
        "127.0.0.1:5443/Greet:1",      /* upper case */
        "127.0.0.1:5443/a//b:1",       /* empty part */
        "127.0.0.1:5443/a/b:",         /* empty tag */
        "127.0.0.1:5443/a/b:-x",       /* bad tag */
        "127.0.0.1:5443/a/b@sha256:1", /* short digest */
        "127.0.0.1:5443/a/b@md5:0123456789abcdef0123456789abcdef",
        "Reg.example/a/b:1", /* upper-case host */
    };
    struct sbx_feature_ref r;

    (void)state;
    assert_int_equal(sbx_feature_ref_parse("127.0.0.1:5443/features/greet:1", &r), 0);
    assert_string_equal(r.host, "127.0.0.1:5443");
    assert_string_equal(r.repo, "features/greet");
    assert_string_equal(r.tag, "1");
    assert_string_equal(r.digest, "");
    assert_int_equal(sbx_feature_ref_parse("ghcr.example/devcontainers/features/node", &r), 0);
    assert_string_equal(r.tag, "latest");
    assert_int_equal(
        sbx_feature_ref_parse("localhost/f/g@sha256:"
                              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
                              &r),
        0);
    assert_string_equal(r.host, "localhost");
    assert_string_equal(r.repo, "f/g");
    assert_string_equal(r.tag, "");
    assert_string_equal(r.digest,
                        "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        if (sbx_feature_ref_parse(bad[i], &r) == 0) {
            fail_msg("'%s' was accepted", bad[i]);
        }
    }
}

static void test_challenge(void **state)
{
    const char *c = "Bearer realm=\"https://auth.example/token\",service=\"reg.example\","
                    "scope=\"repository:f/g:pull\"";
    char v[128];

    (void)state;
    assert_int_equal(sbx_oci_challenge_param(c, "realm", v, sizeof(v)), 0);
    assert_string_equal(v, "https://auth.example/token");
    assert_int_equal(sbx_oci_challenge_param(c, "service", v, sizeof(v)), 0);
    assert_string_equal(v, "reg.example");
    assert_int_equal(sbx_oci_challenge_param(c, "scope", v, sizeof(v)), 0);
    assert_string_equal(v, "repository:f/g:pull");
    assert_int_equal(sbx_oci_challenge_param(c, "error", v, sizeof(v)), -1);
    assert_int_equal(sbx_oci_challenge_param("Bearer realm=\"unterminated", "realm", v, sizeof(v)),
                     -1);
    assert_int_equal(sbx_oci_challenge_param(c, "realm", v, 8), -1); /* too long: refused */
}

/* A registry the configuration does not list: exit 2 naming the file and the
 * field, with or without a configuration; nothing is fetched. */
static void test_unlisted_registry(void **state)
{
    char *dir = test_mkdtemp();
    char *def;
    struct sbx_config *c = sbx_config_defaults();
    struct sbx_devc_fetch fetch = {.cfg = c, .plugin_dir = "/nonexistent", .cache = dir};
    sbx_error_t *err = NULL;
    char *sub = NULL;

    (void)state;
    assert_true(asprintf(&sub, "%s/.devcontainer", dir) > 0);
    assert_int_equal(mkdir(sub, 0755), 0);
    def = test_write_file(sub, "devcontainer.json",
                          "{\"image\": \"x\", \"features\": {\"127.0.0.1:9/f/g:1\": {}}}");
    assert_null(sbx_image_def_load_with(def, &fetch, &err));
    assert_int_equal(err->code, SBX_E_CONFIG);
    assert_non_null(strstr(sbx_error_msg(err),
                           "devcontainer.json: features[\"127.0.0.1:9/f/g:1\"]: "
                           "registry 127.0.0.1:9 is not one of "
                           "image_registry.feature_registries"));
    sbx_error_free(&err);
    assert_null(sbx_image_def_load(def, &err));
    assert_non_null(strstr(sbx_error_msg(err), "is not one of image_registry.feature_registries"));
    sbx_error_free(&err);
    free(def);
    /* not a reference at all */
    def = test_write_file(sub, "devcontainer.json",
                          "{\"image\": \"x\", \"features\": {\"greet\": {}}}");
    assert_null(sbx_image_def_load_with(def, &fetch, &err));
    assert_non_null(strstr(sbx_error_msg(err), "features[\"greet\"]: not a local feature"));
    sbx_error_free(&err);
    free(def);
    sbx_config_destroy(c);
    test_rm_rf(dir);
    free(dir);
    free(sub);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha256),
        cmocka_unit_test(test_feature_refs),
        cmocka_unit_test(test_challenge),
        cmocka_unit_test(test_unlisted_registry),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
