/* test_image_registry.c - image_registry (core/src/image/registry.c): the
 * URL's checks, each bad value one FILE:LINE error naming the key; the
 * engine's X-Registry-Auth from the Docker client's login, never from the
 * file; references by digest (image/push.c); base64 both ways. */
#include "test_common.h"

#include <jansson.h>
#include <sys/stat.h>

#include "config/config.h"
#include "image/push.h"
#include "image/registry.h"

static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    return 0;
}

static void test_parse_good(void **state)
{
    struct sbx_registry r;
    char why[256];

    (void)state;
    assert_int_equal(
        sbx_registry_parse("https://127.0.0.1:5443/team/sbx-sandbox", &r, why, sizeof(why)), 0);
    assert_string_equal(r.host, "127.0.0.1:5443");
    assert_string_equal(r.repo, "127.0.0.1:5443/team/sbx-sandbox");
    assert_int_equal(
        sbx_registry_parse("https://ghcr.example/org/sbx_sandbox.v2", &r, why, sizeof(why)), 0);
    assert_string_equal(r.host, "ghcr.example");
}

/* Each bad URL, and the phrase its error must hold. */
static void test_parse_bad(void **state)
{
    static const char *const cases[][2] = {
        {"127.0.0.1:5443/team/sbx", "must start with https://"},
        {"http://127.0.0.1:5443/team/sbx", "must start with https://"},
        {"https://127.0.0.1:5443", "no repository path"},
        {"https://127.0.0.1:5443/", "no repository path"},
        {"https://127.0.0.1:/team", "empty port"},
        {"https://127.0.0.1:99999/team", "bad port"},
        {"https://127.0.0.1:0/team", "bad port"},
        {"https://127.0.0.1:54a/team", "bad port"},
        {"https://:5443/team", "no host"},
        {"https://user:secret@127.0.0.1:5443/team", "holds credentials"},
        {"https://Reg.example/team", "bad host"},
        {"https://reg.example/Team", "bad repository path"},
        {"https://reg.example/team:tag", "bad repository path"},
        {"https://reg.example/team//x", "bad repository path"},
        {"https://reg.example/team/", "bad repository path"},
        {"", "is empty"},
    };
    struct sbx_registry r;
    char why[256];

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        why[0] = '\0';
        if (sbx_registry_parse(cases[i][0], &r, why, sizeof(why)) == 0) {
            fail_msg("'%s' was accepted", cases[i][0]);
        }
        if (strstr(why, cases[i][1]) == NULL) {
            fail_msg("'%s': '%s' does not say '%s'", cases[i][0], why, cases[i][1]);
        }
    }
}

/* A configuration with text: NULL with the one-line error in *msg. */
static struct sbx_config *load(const char *text, char **msg)
{
    char *path = test_write_file(dir, "sbx.conf", text);
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);

    *msg = err ? strdup(sbx_error_msg(err)) : NULL;
    sbx_error_free(&err);
    free(path);
    return c;
}

static void test_config_errors(void **state)
{
    static const char *const cases[][2] = {
        {"image_registry = {\n  url = \"127.0.0.1:5443/sbx\";\n};\n",
         "sbx.conf:2: 'image_registry.url' must start with https://"},
        {"image_registry = {\n  url = \"https://127.0.0.1:70000/sbx\";\n};\n",
         "sbx.conf:2: 'image_registry.url' has a bad port"},
        {"image_registry = {\n  url = \"https://u:p@127.0.0.1:5443/sbx\";\n};\n",
         "sbx.conf:2: 'image_registry.url' holds credentials"},
        {"image_registry = {\n  url = \"https://127.0.0.1:5443/sbx\";\n  keep = 0;\n};\n",
         "'image_registry.keep' must be greater than 0"},
        {"image_registry = {\n  url = \"https://127.0.0.1:5443/sbx\";\n  credential = "
         "\"nope\";\n};\n",
         "sbx.conf:3: 'image_registry.credential' 'nope' is not a credential instance"},
        {"image_registry = {\n  password = \"hunter2\";\n};\n",
         "unknown key 'password' in 'image_registry'"},
        /* (added) the registries features may come from: HOST[:PORT] only */
        {"image_registry = {\n  feature_registries = [ \"https://127.0.0.1:5443\" ];\n};\n",
         "sbx.conf:2: 'image_registry.feature_registries' 'https://127.0.0.1:5443' is not a "
         "registry HOST[:PORT]"},
        {"image_registry = {\n  feature_registries = [ \"127.0.0.1:5443/ns\" ];\n};\n",
         "'image_registry.feature_registries' '127.0.0.1:5443/ns' is not a registry"},
        {"image_registry = {\n  feature_registries = [ \"u:p@reg.example\" ];\n};\n",
         "is not a registry HOST[:PORT]"},
        /* (added) the CAs of sbx's own registry requests: a readable file */
        {"image_registry = {\n  ca_file = \"/nonexistent/ca.pem\";\n};\n",
         "sbx.conf:2: 'image_registry.ca_file' '/nonexistent/ca.pem' is not a readable file"},
        {"image_registry = {\n  ca_file = \"ca.pem\";\n};\n",
         "'image_registry.ca_file' 'ca.pem' is not a readable file"},
        {"image_registry = {\n  ca_file = \"/tmp\";\n};\n",
         "'image_registry.ca_file' '/tmp' is not a readable file"},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *msg = NULL;
        struct sbx_config *c = load(cases[i][0], &msg);

        if (c != NULL) {
            fail_msg("case %zu was accepted", i);
        }
        assert_non_null(msg);
        if (strstr(msg, cases[i][1]) == NULL || strchr(msg, '\n') != NULL) {
            fail_msg("case %zu: '%s' does not say '%s' on one line", i, msg, cases[i][1]);
        }
        assert_null(strstr(msg, "hunter2"));
        free(msg);
    }
}

static void test_config_defaults_and_unset(void **state)
{
    char *msg = NULL;
    struct sbx_config *c =
        load("image_registry = {\n  url = \"https://127.0.0.1:5443/t/s\";\n};\n", &msg);
    struct sbx_registry r;
    sbx_error_t *err = NULL;

    (void)state;
    assert_non_null(c);
    assert_int_equal(c->image_registry.keep, 5);
    assert_string_equal(c->image_registry.username_key, "REGISTRY_USERNAME");
    assert_int_equal(sbx_registry_from_config(c, &r, &err), 0);
    assert_string_equal(r.repo, "127.0.0.1:5443/t/s");
    sbx_config_destroy(c);
    c = sbx_config_defaults();
    assert_int_equal(sbx_registry_from_config(c, &r, &err), -1);
    assert_non_null(strstr(sbx_error_msg(err), "'image_registry.url' is not set"));
    sbx_error_free(&err);
    sbx_config_destroy(c);
}

/* The engine's login: the Docker client's config.json under $DOCKER_CONFIG. */
static void test_auth_from_docker_login(void **state)
{
    struct sbx_config *c = sbx_config_defaults();
    struct sbx_registry r;
    const char *source = NULL;
    sbx_error_t *err = NULL;
    char *path;
    char *auth;
    char *json;
    json_t *o;

    (void)state;
    setenv("DOCKER_CONFIG", dir, 1);
    assert_int_equal(sbx_registry_parse("https://127.0.0.1:5443/t/s", &r, NULL, 0), 0);
    /* no config.json: anonymous, no error */
    auth = sbx_registry_auth(c, "/nonexistent", &r, &source, &err);
    assert_null(auth);
    assert_null(err);
    assert_string_equal(source, "none");
    /* "sbx:s3cret" */
    path = test_write_file(dir, "config.json",
                           "{\"auths\": {\"127.0.0.1:5443\": {\"auth\": \"c2J4OnMzY3JldA==\"}}}");
    auth = sbx_registry_auth(c, "/nonexistent", &r, &source, &err);
    assert_non_null(auth);
    assert_string_equal(source, "docker login");
    for (char *p = auth; *p; p++) { /* URL-safe alphabet */
        if (*p == '-') {
            *p = '+';
        }
        else if (*p == '_') {
            *p = '/';
        }
    }
    json = sbx_base64_decode(auth, NULL);
    assert_non_null(json);
    o = json_loads(json, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "username")), "sbx");
    assert_string_equal(json_string_value(json_object_get(o, "password")), "s3cret");
    assert_string_equal(json_string_value(json_object_get(o, "serveraddress")), "127.0.0.1:5443");
    json_decref(o);
    free(json);
    sbx_registry_auth_free(auth);
    /* a credential helper sbx does not run: said so, not anonymous */
    free(path);
    path = test_write_file(dir, "config.json", "{\"credsStore\": \"pass\"}");
    auth = sbx_registry_auth(c, "/nonexistent", &r, &source, &err);
    assert_null(auth);
    assert_non_null(err);
    assert_non_null(strstr(sbx_error_msg(err), "credential helper"));
    sbx_error_free(&err);
    free(path);
    unsetenv("DOCKER_CONFIG");
    sbx_config_destroy(c);
}

/* (added) A credential helper of the engine's login: credHelpers[host], else
 * credsStore, run from PATH as `docker-credential-NAME get` with the server
 * on stdin, as the Docker client runs it. */
static void test_auth_from_credential_helper(void **state)
{
    struct sbx_config *c = sbx_config_defaults();
    struct sbx_registry r;
    struct sbx_registry_login l;
    const char *source = NULL;
    sbx_error_t *err = NULL;
    const char *old_path = getenv("PATH");
    char *path_env = NULL;
    char *calls = NULL;
    char *script;
    char *cfg;
    char *auth;
    char *json;
    json_t *o;

    (void)state;
    assert_true(asprintf(&path_env, "%s:%s", dir, old_path ? old_path : "/usr/bin:/bin") > 0);
    assert_true(asprintf(&calls, "%s/calls", dir) > 0);
    {
        char *text = NULL;

        /* the fake helper: says who asked; a login for 127.0.0.1:5443 (by
         * user), a token for 127.0.0.1:5444, none for other servers, a
         * failure for "fail.example" */
        assert_true(
            asprintf(&text,
                     "#!/bin/sh\n"
                     "[ \"$1\" = get ] || exit 9\n"
                     "read -r s\n"
                     "echo \"$s\" >>%s\n"
                     "case $s in\n"
                     "127.0.0.1:5443) echo '{\"ServerURL\": \"127.0.0.1:5443\", \"Username\": "
                     "\"helper-user\", \"Secret\": \"helper-s3cret\"}' ;;\n"
                     "127.0.0.1:5444) echo '{\"Username\": \"<token>\", \"Secret\": "
                     "\"tok-s3cret\"}' ;;\n"
                     "fail.example) echo boom; exit 3 ;;\n"
                     "*) echo 'credentials not found in native keychain'; exit 1 ;;\n"
                     "esac\n",
                     calls) > 0);
        script = test_write_file(dir, "docker-credential-sbxunit", text);
        free(text);
    }
    assert_int_equal(chmod(script, 0755), 0);
    setenv("PATH", path_env, 1);
    setenv("DOCKER_CONFIG", dir, 1);
    cfg = test_write_file(dir, "config.json",
                          "{\"credHelpers\": {\"127.0.0.1:5444\": \"sbxunit\"}, "
                          "\"credsStore\": \"sbxunit\"}");
    /* credsStore: a user and a password */
    assert_int_equal(sbx_registry_parse("https://127.0.0.1:5443/t/s", &r, NULL, 0), 0);
    auth = sbx_registry_auth(c, "/nonexistent", &r, &source, &err);
    if (auth == NULL) {
        fail_msg("%s", err ? sbx_error_msg(err) : "no auth");
    }
    assert_string_equal(source, "docker login (credential helper)");
    for (char *p = auth; *p; p++) {
        *p = *p == '-' ? '+' : *p == '_' ? '/' : *p;
    }
    json = sbx_base64_decode(auth, NULL);
    o = json_loads(json, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "username")), "helper-user");
    assert_string_equal(json_string_value(json_object_get(o, "password")), "helper-s3cret");
    json_decref(o);
    free(json);
    sbx_registry_auth_free(auth);
    /* credHelpers for 127.0.0.1:5444: an identity token */
    assert_int_equal(sbx_registry_login(c, "/nonexistent", "127.0.0.1:5444", &l, &source, &err), 0);
    assert_int_equal(l.token, 1);
    assert_string_equal(l.secret, "tok-s3cret");
    sbx_registry_login_free(&l);
    /* no login for another server: anonymous, no error */
    assert_int_equal(sbx_registry_login(c, "/nonexistent", "other.example", &l, &source, &err), 0);
    assert_null(l.secret);
    assert_string_equal(source, "none");
    assert_null(err);
    /* a helper that fails: an error naming it, without its output */
    assert_int_equal(sbx_registry_login(c, "/nonexistent", "fail.example", &l, &source, &err), -1);
    assert_non_null(strstr(sbx_error_msg(err), "docker-credential-sbxunit (for fail.example) "
                                               "failed (exit 3)"));
    assert_null(strstr(sbx_error_msg(err), "boom"));
    sbx_error_free(&err);
    /* the server was given on stdin each time */
    {
        FILE *f = fopen(calls, "r");
        char buf[256] = "";
        size_t n = f ? fread(buf, 1, sizeof(buf) - 1, f) : 0;

        if (f) {
            fclose(f);
        }
        buf[n] = '\0';
        assert_string_equal(buf, "127.0.0.1:5443\n127.0.0.1:5444\nother.example\nfail.example\n");
    }
    /* a helper name that is not one; a helper not on PATH */
    free(cfg);
    cfg = test_write_file(dir, "config.json", "{\"credsStore\": \"../evil\"}");
    assert_int_equal(sbx_registry_login(c, "/nonexistent", "127.0.0.1:5443", &l, &source, &err),
                     -1);
    assert_non_null(strstr(sbx_error_msg(err), "is not a helper name"));
    sbx_error_free(&err);
    free(cfg);
    cfg = test_write_file(dir, "config.json", "{\"credsStore\": \"sbxmissing\"}");
    assert_int_equal(sbx_registry_login(c, "/nonexistent", "127.0.0.1:5443", &l, &source, &err),
                     -1);
    assert_non_null(strstr(sbx_error_msg(err), "docker-credential-sbxmissing"));
    sbx_error_free(&err);
    setenv("PATH", old_path ? old_path : "/usr/bin:/bin", 1);
    unsetenv("DOCKER_CONFIG");
    free(cfg);
    free(script);
    free(calls);
    free(path_env);
    sbx_config_destroy(c);
}

/* image_registry.credential: a credential instance's lease (the fixture
 * cred_scope14 holds the scope: SCOPE_CLIENT "local", SCOPE_TASK
 * "image-registry"), never the file. */
static void test_auth_from_credential(void **state)
{
    const char *plugins = getenv("SBX_TEST_PLUGINS");
    char *text = NULL;
    char *msg = NULL;
    struct sbx_config *c;
    struct sbx_registry r;
    const char *source = NULL;
    sbx_error_t *err = NULL;
    char *auth;
    char *json;
    json_t *o;

    (void)state;
    assert_non_null(plugins);
    assert_true(asprintf(&text,
                         "plugin_dir = \"%s\";\n"
                         "credentials = { reg = { plugin = \"cred_scope14\"; }; };\n"
                         "image_registry = {\n  url = \"https://127.0.0.1:5443/t/s\";\n"
                         "  credential = \"reg\";\n  username_key = \"SCOPE_CLIENT\";\n"
                         "  password_key = \"SCOPE_TASK\";\n};\n",
                         plugins) > 0);
    c = load(text, &msg);
    if (c == NULL) {
        fail_msg("%s", msg);
    }
    assert_int_equal(sbx_registry_from_config(c, &r, &err), 0);
    auth = sbx_registry_auth(c, plugins, &r, &source, &err);
    if (auth == NULL) {
        fail_msg("%s", err ? sbx_error_msg(err) : "no auth");
    }
    assert_string_equal(source, "credential");
    for (char *p = auth; *p; p++) {
        *p = *p == '-' ? '+' : *p == '_' ? '/' : *p;
    }
    json = sbx_base64_decode(auth, NULL);
    o = json_loads(json, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(o, "username")), "local");
    assert_string_equal(json_string_value(json_object_get(o, "password")), "image-registry");
    json_decref(o);
    free(json);
    sbx_registry_auth_free(auth);
    sbx_config_destroy(c);
    free(text);
    /* a lease without the named values: said so, no anonymous fallback */
    assert_true(asprintf(&text,
                         "plugin_dir = \"%s\";\n"
                         "credentials = { reg = { plugin = \"cred_scope14\"; }; };\n"
                         "image_registry = {\n  url = \"https://127.0.0.1:5443/t/s\";\n"
                         "  credential = \"reg\";\n};\n",
                         plugins) > 0);
    c = load(text, &msg);
    assert_non_null(c);
    assert_null(sbx_registry_auth(c, plugins, &r, &source, &err));
    assert_non_null(err);
    assert_non_null(strstr(sbx_error_msg(err), "has no 'REGISTRY_USERNAME'"));
    sbx_error_free(&err);
    sbx_config_destroy(c);
    free(text);
}

static void test_base64_and_digest(void **state)
{
    char *e = sbx_base64((const unsigned char *)"ab?", 3, 0);
    char *u = sbx_base64((const unsigned char *)"ab?", 3, 1);
    char *d;

    (void)state;
    assert_string_equal(e, "YWI/");
    assert_string_equal(u, "YWI_");
    d = sbx_base64_decode("YWI/", NULL);
    assert_string_equal(d, "ab?");
    free(d);
    assert_null(sbx_base64_decode("Y!", NULL));
    free(e);
    free(u);
    assert_true(sbx_image_ref_by_digest(
        "127.0.0.1:5443/t/"
        "s@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
    assert_false(sbx_image_ref_by_digest("sbx-sandbox:current"));
    assert_false(sbx_image_ref_by_digest("127.0.0.1:5443/t/s@sha256:0123"));
    assert_false(sbx_image_ref_by_digest(
        "@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_parse_good),
        cmocka_unit_test(test_parse_bad),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_defaults_and_unset),
        cmocka_unit_test(test_auth_from_docker_login),
        cmocka_unit_test(test_auth_from_credential),
        cmocka_unit_test(test_auth_from_credential_helper),
        cmocka_unit_test(test_base64_and_digest),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
