/* test_image_devc.c - the Dev Container spec's fields of devcontainer.json
 * (core/src/image/devc*.c, jsonc.c): JSONC, the refusals by name, local
 * features (options, order, cycles), lifecycle forms and the generated
 * layer. The engine side is tests/devc (image_devc_oracle). */
#include "test_common.h"

#include <sys/stat.h>

#include "image/devc.h"
#include "image/image.h"
#include "image/jsonc.h"

#define dir test_dir

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = calloc(1, 65536);
    size_t n;

    assert_non_null(f);
    n = fread(buf, 1, 65535, f);
    buf[n] = '\0';
    fclose(f);
    return buf;
}

/* A repository in dir: .devcontainer/devcontainer.json and features. */
static char *write_def(const char *text)
{
    char *dc = NULL;
    char *path;

    assert_true(asprintf(&dc, "%s/.devcontainer", dir) > 0);
    mkdir(dc, 0755);
    path = test_write_file(dc, "devcontainer.json", text);
    free(dc);
    return path;
}

static void write_feature(const char *name, const char *json)
{
    char *fd = NULL;

    assert_true(asprintf(&fd, "%s/.devcontainer/%s", dir, name) > 0);
    mkdir(fd, 0755);
    free(test_write_file(fd, "devcontainer-feature.json", json));
    free(test_write_file(fd, "install.sh", "#!/bin/sh\necho installed\n"));
    free(fd);
}

static struct sbx_image_def *load(const char *text, sbx_error_t **err)
{
    char *path = write_def(text);
    struct sbx_image_def *d = sbx_image_def_load(path, err);

    free(path);
    return d;
}

static void refused(const char *text, const char *want)
{
    sbx_error_t *err = NULL;
    struct sbx_image_def *d = load(text, &err);

    if (d != NULL) {
        fail_msg("accepted: %s", text);
    }
    assert_non_null(err);
    assert_int_equal(err->code, SBX_E_CONFIG);
    if (strstr(err->msg, want) == NULL || strstr(err->msg, "devcontainer.json") == NULL) {
        fail_msg("'%s' not in '%s'", want, err->msg);
    }
    sbx_error_free(&err);
}

static void test_jsonc(void **state)
{
    char text[] = "// a comment\n{\"a\": \"x // not a comment, }\", /* b */\n"
                  "\"b\": [1, 2,],\n}\n";
    json_t *v;
    json_error_t jerr;

    (void)state;
    sbx_jsonc_strip(text, strlen(text));
    v = json_loads(text, 0, &jerr);
    assert_non_null(v);
    assert_string_equal(json_string_value(json_object_get(v, "a")), "x // not a comment, }");
    assert_int_equal(json_array_size(json_object_get(v, "b")), 2);
    json_decref(v);
    /* line numbers stay true */
    {
        char bad[] = "/* one\ntwo */\n{\"a\": ,}";

        sbx_jsonc_strip(bad, strlen(bad));
        assert_null(json_loads(bad, 0, &jerr));
        assert_int_equal(jerr.line, 3);
    }
}

static void test_safe_id(void **state)
{
    char *s;

    (void)state;
    s = sbx_devc_safe_id("color-name");
    assert_string_equal(s, "COLOR_NAME");
    free(s);
    s = sbx_devc_safe_id("9abc.d");
    assert_string_equal(s, "_ABC_D");
    free(s);
    s = sbx_devc_safe_id("__x");
    assert_string_equal(s, "_X");
    free(s);
}

/* The shortcut alone (the repository's own definition) keeps its hash. */
static void test_shortcut_unchanged(void **state)
{
    sbx_error_t *err = NULL;
    struct sbx_image_def *d =
        load("{\"name\": \"x\", \"workspaceFolder\": \"/workspace\", \"containerEnv\": "
             "{\"LANG\": \"C.UTF-8\"}, \"customizations\": {\"sbx\": {\"packages\": [\"git\"]}}}",
             &err);

    (void)state;
    assert_non_null(d);
    assert_null(d->devc);
    assert_null(strstr(d->canonical, "devc"));
    sbx_image_def_free(d);
}

static void test_refusals(void **state)
{
    (void)state;
    refused("{\"forwardPorts\": [3000]}", "forwardPorts is not honoured");
    refused("{\"image\": \"--privileged\"}", "image must be an image reference");
    refused("{\"build\": {\"dockerfile\": \"devcontainer.json\", \"cacheFrom\": \"-x\"}}",
            "build.cacheFrom: '-x' is not an image reference");
    refused("{\"initializeCommand\": \"rm -rf /\"}", "initializeCommand is not honoured");
    refused("{\"mounts\": []}", "mounts is not honoured");
    refused("{\"dockerComposeFile\": \"x.yml\"}", "dockerComposeFile is not honoured");
    refused("{\"colour\": 1}", "colour is not a field of the Dev Container spec");
    refused("{\"build\": {\"dockerfile\": \"nope\"}}", "build.dockerfile:");
    refused("{\"build\": {\"options\": [\"--network=host\"]}}", "build.options is not honoured");
    refused("{\"build\": {\"args\": {\"A\": \"1\"}}}", "build.dockerfile is missing");
    refused("{\"image\": \"a\", \"customizations\": {\"sbx\": {\"packages\": [\"git\"]}}}",
            "customizations.sbx.packages builds sbx's own Debian base");
    refused("{\"image\": \"a\", \"overrideCommand\": false}", "overrideCommand: only true");
    refused("{\"userEnvProbe\": \"loginShell\"}", "userEnvProbe: only \"none\"");
    refused("{\"remoteEnv\": {\"P\": \"${containerEnv:PATH}:/x\"}}", "remoteEnv.P: variables");
    refused("{\"remoteEnv\": {\"P\": null}}", "remoteEnv.P must be a string");
    refused("{\"containerUser\": \"root\", \"remoteUser\": \"dev\"}",
            "containerUser 'root' differs from remoteUser 'dev'");
    refused("{\"remoteUser\": \"a b\"}", "remoteUser must be a user name");
    refused("{\"postCreateCommand\": 5}", "postCreateCommand must be a command string");
    refused("{\"postCreateCommand\": {\"a\": [1]}}", "postCreateCommand.a[0] must be a string");
    refused("{\"features\": {\"registry.example/features/node:1\": {}}}",
            "registry registry.example is not one of image_registry.feature_registries");
    refused("{\"features\": {\"https://x/f.tgz\": {}}}", "features from a URL are not fetched");
    refused("{\"features\": {\"./missing\": {}}}", "features[\"./missing\"]: no folder");
    refused("{\"workspaceFolder\": \"/a b\"}", "workspaceFolder must be an absolute path");
}

static void test_features(void **state)
{
    sbx_error_t *err = NULL;
    struct sbx_image_def *d;
    struct sbx_devc *dc;

    (void)state;
    write_feature("a", "{\"id\": \"a\", \"installsAfter\": [\"b\"], // soft\n"
                       "\"options\": {\"ver-sion\": {\"type\": \"string\", \"default\": \"1\"},"
                       "\"on\": {\"type\": \"boolean\", \"default\": false}},}");
    write_feature("b", "{\"id\": \"b\", \"dependsOn\": {\"./c\": {}}}");
    write_feature("c", "{\"id\": \"c\", \"containerEnv\": {\"C_HOME\": \"/opt/c\"}}");
    d = load("{\"image\": \"base:1\", \"features\": {\"./a\": {\"on\": \"true\"}, \"./b\": {},"
             " \"./c\": true}}",
             &err);
    assert_non_null(d);
    dc = d->devc;
    assert_non_null(dc);
    assert_int_equal(dc->nfeatures, 3);
    assert_string_equal(dc->features[0].ref, "./c");
    assert_string_equal(dc->features[1].ref, "./b");
    assert_string_equal(dc->features[2].ref, "./a");
    assert_string_equal(dc->features[2].env[0], "VER_SION=1");
    assert_string_equal(dc->features[2].env[1], "ON=true");
    sbx_image_def_free(d);
    /* overrideFeatureInstallOrder first where dependsOn allows */
    d = load("{\"image\": \"base:1\", \"features\": {\"./a\": {}, \"./b\": {}, \"./c\": {}},"
             " \"overrideFeatureInstallOrder\": [\"./a\"]}",
             &err);
    assert_non_null(d);
    assert_string_equal(d->devc->features[0].ref, "./a");
    sbx_image_def_free(d);
    refused("{\"features\": {\"./a\": {\"colour\": \"x\"}}}",
            "features[\"./a\"].colour: unknown option");
    refused("{\"features\": {\"./a\": {\"on\": \"maybe\"}}}",
            "features[\"./a\"].on must be true or false");
    refused("{\"features\": {\"./b\": {}}}", "dependsOn \"./c\" is not in features");
    /* (added) a dependsOn that is not listed is fetched only from a listed
     * registry; the message names the field */
    write_feature("d", "{\"id\": \"d\", \"dependsOn\": {\"ghcr.example/f/x:1\": {}}}");
    refused("{\"features\": {\"./d\": {}}}",
            "features[\"./d\"].dependsOn[\"ghcr.example/f/x:1\"]: registry ghcr.example is not "
            "one of image_registry.feature_registries");
    write_feature("c", "{\"id\": \"c\", \"installsAfter\": [\"a\"]}");
    refused("{\"features\": {\"./a\": {}, \"./b\": {}, \"./c\": {}}}",
            "a cycle in dependsOn/installsAfter among ./a, ./b, ./c");
    write_feature("c", "{\"id\": \"c\", \"mounts\": []}");
    refused("{\"features\": {\"./c\": {}}}", "mounts is not honoured");
}

static void test_layer(void **state)
{
    sbx_error_t *err = NULL;
    struct sbx_image_def *d;
    char *layer = NULL;
    char *p = NULL;
    char *text;

    (void)state;
    write_feature("c", "{\"id\": \"c\", \"options\": {\"who\": {\"type\": \"string\"}},"
                       " \"postStartCommand\": \"echo feature-start\"}");
    d = load("{\"image\": \"base:1\", \"features\": {\"./c\": {\"who\": \"it's\"}},"
             " \"remoteUser\": \"dev\", \"containerEnv\": {\"P\": \"a$b\\\"c\"},"
             " \"onCreateCommand\": [\"touch\", \"/tmp/x y\"],"
             " \"postCreateCommand\": {\"one\": \"echo 1\", \"two\": \"echo 2\"},"
             " \"postStartCommand\": \"echo started\"}",
             &err);
    assert_non_null(d);
    assert_true(asprintf(&layer, "%s/layer", dir) > 0);
    mkdir(layer, 0700);
    assert_int_equal(sbx_devc_write_layer(d->devc, layer, &err), 0);
    assert_true(asprintf(&p, "%s/Dockerfile", layer) > 0);
    text = slurp(p);
    assert_non_null(strstr(text, "FROM ${SBX_BASE}\n"));
    assert_non_null(strstr(text, "ENV P=\"a\\$b\\\"c\"\n"));
    assert_non_null(strstr(text, "USER dev\n"));
    assert_non_null(strstr(text, ": onCreateCommand\",\"exec\",\"touch\",\"/tmp/x y\"]"));
    assert_non_null(strstr(text, "postCreateCommand.one\",\"sh\",\"echo 1\"]"));
    assert_non_null(strstr(strstr(text, "postCreateCommand.one"), "postCreateCommand.two"));
    assert_non_null(strstr(text, "LABEL " SBX_DEVC_POST_START_LABEL));
    free(text);
    free(p);
    assert_true(asprintf(&p, "%s/sbx/features/0/devcontainer-features.env", layer) > 0);
    text = slurp(p);
    assert_string_equal(text, "WHO='it'\\''s'\n");
    free(text);
    free(p);
    assert_true(asprintf(&p, "%s/sbx/post-start.sh", layer) > 0);
    text = slurp(p);
    /* the feature's first, then the definition's */
    assert_non_null(strstr(text, "feature-start"));
    assert_non_null(strstr(strstr(text, "feature-start"), " sh 'echo started'"));
    free(text);
    free(p);
    sbx_devc_remove_layer(layer);
    assert_int_equal(access(layer, F_OK), -1);
    free(layer);
    sbx_image_def_free(d);
}

/* (added) updateRemoteUserUID: false enters the hash and the helper's
 * options (no dev.sbx.remote-ids label); true, the default, changes neither */
static void test_update_uid(void **state)
{
    sbx_error_t *err = NULL;
    struct sbx_image_def *d;
    char **opts;
    int flag = 0;

    (void)state;
    d = load("{\"image\": \"base:1\", \"remoteUser\": \"dev\"}", &err);
    assert_non_null(d);
    assert_null(strstr(d->canonical, "updateRemoteUserUID"));
    opts = sbx_devc_options(d, "/layer", NULL);
    for (size_t i = 0; opts[i] != NULL; i++) {
        flag |= strcmp(opts[i], "--no-update-uid") == 0;
    }
    assert_false(flag);
    sbx_devc_options_free(opts);
    sbx_image_def_free(d);
    d = load("{\"image\": \"base:1\", \"remoteUser\": \"dev\", \"updateRemoteUserUID\": true}",
             &err);
    assert_non_null(d);
    assert_null(strstr(d->canonical, "updateRemoteUserUID"));
    sbx_image_def_free(d);
    d = load("{\"image\": \"base:1\", \"remoteUser\": \"dev\", \"updateRemoteUserUID\": false}",
             &err);
    assert_non_null(d);
    assert_non_null(strstr(d->canonical, "\"updateRemoteUserUID\":false"));
    opts = sbx_devc_options(d, "/layer", NULL);
    for (size_t i = 0; opts[i] != NULL; i++) {
        flag |= strcmp(opts[i], "--no-update-uid") == 0;
    }
    assert_true(flag);
    sbx_devc_options_free(opts);
    sbx_image_def_free(d);
    refused("{\"image\": \"base:1\", \"updateRemoteUserUID\": \"yes\"}",
            "updateRemoteUserUID must be true or false");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_jsonc),
        cmocka_unit_test(test_safe_id),
        cmocka_unit_test(test_shortcut_unchanged),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_features),
        cmocka_unit_test(test_layer),
        cmocka_unit_test(test_update_uid),
    };

    return cmocka_run_group_tests(tests, test_dir_setup, test_dir_teardown);
}
