/* test_image_mise.c - mise.toml's tools as sbx installs them (image/mise.c):
 * the [tools] subset, npm: tools and Debian ones, and every refusal a
 * one-line FILE:LINE error naming the key; the definition's package and npm
 * lists and its canonical spec take them (image/image.c's hook). */
#include "test_common.h"

#include <jansson.h>
#include <sys/stat.h>

#include "image/image.h"
#include "image/mise.h"

static void test_tools_parsed(void **state)
{
    struct sbx_mise m;
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(sbx_mise_parse("# pins\n[tools]\nnode = \"18\"  # Debian's\n"
                                    "\"npm:@scope/x\" = \"1.2.3\"\npython = '3.11'\n\n",
                                    "mise.toml", &m, &err),
                     0);
    assert_int_equal(m.n, 3);
    assert_string_equal(m.tools[0].key, "node");
    assert_string_equal(m.tools[0].via, "debian");
    assert_string_equal(m.tools[0].package, "nodejs");
    assert_string_equal(m.tools[1].via, "npm");
    assert_string_equal(m.tools[1].package, "@scope/x@1.2.3");
    assert_string_equal(m.tools[2].package, "python3");
    sbx_mise_free(&m);
    assert_int_equal(sbx_mise_parse("", "mise.toml", &m, &err), 0);
    assert_int_equal(m.n, 0);
}

static void test_refusals(void **state)
{
    static const char *const cases[][2] = {
        {"[tools]\nterraform = \"1.5.0\"\n", "mise.toml:2: tools.terraform: no source"},
        {"[tools]\nnode = \"latest\"\n", "mise.toml:2: tools.node = \"latest\": pin a version"},
        {"[tools]\nnode = [\"18\", \"20\"]\n", "mise.toml:2: tools.node: only a version string"},
        {"[tools]\nnode = { version = \"18\" }\n", "mise.toml:2: tools.node: only a version"},
        {"[tools]\n\"npm:x\" = \"^1.0\"\n", "mise.toml:2: tools.\"npm:x\" = \"^1.0\": not an npm"},
        {"[env]\nA = \"1\"\n", "mise.toml:1: [env]: sbx reads only [tools]"},
        {"min_version = \"2024.1\"\n", "mise.toml:1: min_version: sbx reads only [tools]"},
        {"[tools]\nnode = \"18\"\nnode = \"20\"\n", "mise.toml:3: tools.node is set twice"},
        {"[tools]\nnode\n", "mise.toml:2: not KEY = \"VERSION\""},
    };

    (void)state;
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        struct sbx_mise m;
        sbx_error_t *err = NULL;

        if (sbx_mise_parse(cases[i][0], "mise.toml", &m, &err) == 0) {
            fail_msg("case %zu was accepted", i);
        }
        if (strstr(sbx_error_msg(err), cases[i][1]) == NULL ||
            strchr(sbx_error_msg(err), '\n') != NULL) {
            fail_msg("case %zu: '%s' does not say '%s'", i, sbx_error_msg(err), cases[i][1]);
        }
        assert_int_equal(err->code, SBX_E_CONFIG);
        sbx_error_free(&err);
    }
}

/* The definition's hook: packages and npm lists, and mise_tools in the
 * canonical spec (only with tools: other definitions keep their hash). */
static void test_definition_takes_tools(void **state)
{
    char *dir = test_mkdtemp();
    char *sub;
    char *def;
    char *mise;
    struct sbx_image_def *d;
    sbx_error_t *err = NULL;
    json_t *canon;
    int has_node = 0;

    (void)state;
    assert_true(asprintf(&sub, "%s/.devcontainer", dir) > 0);
    assert_int_equal(mkdir(sub, 0755), 0);
    def = test_write_file(sub, "devcontainer.json", "{\"name\": \"x\"}");
    d = sbx_image_def_load(def, &err);
    assert_non_null(d);
    assert_null(strstr(d->canonical, "mise_tools"));
    sbx_image_def_free(d);
    mise =
        test_write_file(dir, "mise.toml", "[tools]\nnode = \"18\"\n\"npm:left-pad\" = \"1.3.0\"\n");
    d = sbx_image_def_load(def, &err);
    assert_non_null(d);
    for (size_t i = 0; d->packages[i] != NULL; i++) {
        has_node |= strcmp(d->packages[i], "nodejs") == 0;
        if (i > 0) {
            assert_true(strcmp(d->packages[i - 1], d->packages[i]) < 0); /* still sorted */
        }
    }
    assert_true(has_node);
    assert_non_null(d->npm);
    assert_string_equal(d->npm[0], "left-pad@1.3.0");
    canon = json_loads(d->canonical, 0, NULL);
    assert_int_equal(json_array_size(json_object_get(canon, "mise_tools")), 2);
    json_decref(canon);
    sbx_image_def_free(d);
    free(mise);
    mise = test_write_file(dir, "mise.toml", "[tools]\nterraform = \"1.5.0\"\n");
    assert_null(sbx_image_def_load(def, &err));
    assert_non_null(strstr(sbx_error_msg(err), "mise.toml:2: tools.terraform"));
    sbx_error_free(&err);
    free(mise);
    free(def);
    free(sub);
    test_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tools_parsed),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_definition_takes_tools),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
