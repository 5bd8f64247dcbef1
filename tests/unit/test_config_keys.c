/* test_config_keys.c - the key table (core/src/config/keys.c): its rows are
 * consistent, every default parses and passes its own check, every bad value
 * of every checked key is a FILE:LINE error naming the key, the key tables of
 * docs/configuration.md are the table's, plugin option defaults mean what
 * they say, and `sbx config keys` prints the table. */
#include "spawn.h"
#include "test_common.h"

#include <jansson.h>

#include "config/config.h"
#include "config/keys.h"
#include "config/keys_doc.h"
#include "plugin/loader.h"
#include "plugin/options.h"

#define dir test_dir

static int ctype_fits(const struct sbx_key_def *k)
{
    switch (k->type) {
    case SBX_KEY_STRING:
        return k->ctype == SBX_C_STR;
    case SBX_KEY_STRINGS:
        return k->ctype == SBX_C_STRV;
    case SBX_KEY_INT:
    case SBX_KEY_BOOL:
        return k->ctype == SBX_C_INT || k->ctype == SBX_C_INT64;
    case SBX_KEY_SIZE:
        return k->ctype == SBX_C_INT64;
    case SBX_KEY_DURATION:
        return k->ctype == SBX_C_INT64 || k->ctype == SBX_C_DOUBLE;
    case SBX_KEY_FLOAT:
    case SBX_KEY_CPUS:
        return k->ctype == SBX_C_DOUBLE;
    default:
        return 0;
    }
}

/* Every row: a unique path whose parent is a group row, a field of the right C
 * type (or a reader), help, and a default that parses and passes its check. */
static void test_keys_table_consistent(void **state)
{
    struct sbx_config *c = sbx_config_defaults();

    (void)state;
    assert_true(sbx_config_n_keys > 50);
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];
        const char *dot = strrchr(k->path, '.');
        struct sbx_value v = {0};
        sbx_error_t *err = NULL;

        if (sbx_key_find(k->path) != k) {
            fail_msg("'%s' is in the table twice", k->path);
        }
        if (k->help == NULL || k->help[0] == '\0' || strchr(k->help, '\n') != NULL ||
            strchr(k->help, '|') != NULL) {
            fail_msg("'%s' needs one line of help (no '|')", k->path);
        }
        if (dot != NULL) {
            char *parent = strndup(k->path, (size_t)(dot - k->path));
            size_t n = strlen(parent);
            enum sbx_key_type want = SBX_KEY_GROUP;
            const struct sbx_key_def *p;

            if (n > 2 && strcmp(parent + n - 2, "[]") == 0) {
                parent[n - 2] = '\0';
                want = SBX_KEY_GROUP_LIST;
            }
            else if (n > 2 && strcmp(parent + n - 2, ".*") == 0) {
                parent[n - 2] = '\0';
                want = SBX_KEY_NAMED_GROUPS;
            }
            p = sbx_key_find(parent);
            if (p == NULL || p->type != want || p > k) {
                fail_msg("'%s': no group row '%s' before it", k->path, parent);
            }
            free(parent);
        }
        if (k->ctype != SBX_C_NONE && !ctype_fits(k)) {
            fail_msg("'%s': its field's C type does not hold a %s", k->path,
                     sbx_key_type_word(k->type));
        }
        if (k->ctype != SBX_C_NONE && strpbrk(k->path, "[*") != NULL) {
            fail_msg("'%s': a key of a list entry has no field of struct sbx_config", k->path);
        }
        if (k->def == NULL) {
            continue;
        }
        if (k->ctype == SBX_C_NONE) {
            fail_msg("'%s': a default needs a field", k->path);
        }
        if (sbx_value_from_text(k->type, k->def, &v, &err) < 0) {
            fail_msg("'%s': default '%s': %s", k->path, k->def, err->msg);
        }
        if (k->check.range) {
            double x = k->type == SBX_KEY_FLOAT || k->type == SBX_KEY_CPUS ? v.d : (double)v.i;

            if (x < k->check.min || (k->check.max >= k->check.min && x > k->check.max)) {
                fail_msg("'%s': default '%s' fails its own check", k->path, k->def);
            }
        }
        sbx_value_clear(&v);
    }
    /* the constants of config.h are the table's defaults */
    assert_true(c->limits.cpus == SBX_DEFAULT_CPUS);
    assert_int_equal(c->limits.memory, SBX_DEFAULT_MEMORY);
    assert_int_equal(c->limits.disk, SBX_DEFAULT_DISK);
    assert_int_equal(c->limits.pids, SBX_DEFAULT_PIDS);
    assert_int_equal(c->limits.idle, SBX_DEFAULT_IDLE);
    assert_int_equal(c->limits.max, SBX_DEFAULT_MAX);
    assert_string_equal(c->image, SBX_DEFAULT_IMAGE);
    assert_int_equal(c->egress.max_connections, SBX_DEFAULT_EGRESS_MAX_CONNECTIONS);
    assert_int_equal(c->egress.max_buffer, SBX_DEFAULT_EGRESS_MAX_BUFFER);
    assert_int_equal(c->egress.socket_buffer, SBX_DEFAULT_EGRESS_SOCKET_BUFFER);
    assert_int_equal(c->egress.connection_rate, SBX_DEFAULT_EGRESS_CONNECTION_RATE);
    assert_int_equal(c->egress.bandwidth, SBX_DEFAULT_EGRESS_BANDWIDTH);
    assert_int_equal(c->box.host_reserve, -1);
    assert_true(c->box.cpu_reserve < 0);
    assert_true(c->spike.warm_start == 10.0);
    assert_int_equal(c->egress.system_dns, 1);
    assert_string_equal(c->box.pools[0], "ci");
    assert_string_equal(c->box.pools[1], "agent");
    assert_null(c->box.pools[2]);
    sbx_config_destroy(c);
}

/* "limits = {\n  pids = VALUE;\n};\n" for "limits.pids"; the value is on line 2
 * (line 1 for a top-level key). */
static char *config_with(const char *path, const char *value, int *line)
{
    const char *dot = strchr(path, '.');
    char *text = NULL;

    if (dot == NULL) {
        *line = 1;
        assert_true(asprintf(&text, "%s = %s;\n", path, value) > 0);
    }
    else {
        *line = 2;
        assert_true(asprintf(&text, "%.*s = {\n  %s = %s;\n};\n", (int)(dot - path), path, dot + 1,
                             value) > 0);
    }
    return text;
}

static void expect_error(const char *text, int line, const char *fragment)
{
    char *path = test_write_file(dir, "bad.conf", text);
    char *prefix = NULL;
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);

    if (c != NULL) {
        fail_msg("accepted: %s", text);
    }
    assert_int_equal(err->code, SBX_E_CONFIG);
    assert_true(asprintf(&prefix, "%s:%d: ", path, line) > 0);
    if (strncmp(err->msg, prefix, strlen(prefix)) != 0 || strstr(err->msg, fragment) == NULL ||
        strchr(err->msg, '\n') != NULL) {
        fail_msg("%s: got '%s', wanted one line '%s...%s'", text, err->msg, prefix, fragment);
    }
    free(prefix);
    free(path);
    sbx_error_free(&err);
}

static void expect_ok(const char *text)
{
    char *path = test_write_file(dir, "ok.conf", text);
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);

    if (c == NULL) {
        fail_msg("%s: refused: %s", text, err->msg);
    }
    sbx_config_destroy(c);
    free(path);
}

/* A value out of range, for every key that has a range, is "FILE:LINE: 'PATH'
 * must be ..."; the bounds themselves are accepted. */
static void test_keys_out_of_range(void **state)
{
    (void)state;
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];
        char value[64], want[128];
        char *text;
        int line;

        if (!k->check.range || k->type == SBX_KEY_FLOAT || k->type == SBX_KEY_CPUS) {
            continue;
        }
        snprintf(want, sizeof(want), "'%s' must be", k->path);
        if (k->check.min > 0) {
            snprintf(value, sizeof(value), "%.0fL", k->check.min - 1);
            text = config_with(k->path, value, &line);
            expect_error(text, line, want);
            free(text);
            snprintf(value, sizeof(value), "%.0fL", k->check.min);
            text = config_with(k->path, value, &line);
            expect_ok(text);
            free(text);
        }
        if (k->check.max >= k->check.min) {
            snprintf(value, sizeof(value), "%.0fL", k->check.max + 1);
            text = config_with(k->path, value, &line);
            expect_error(text, line, want);
            free(text);
        }
    }
    /* a unit does not hide a zero */
    expect_error("limits = {\n  max = \"0h\";\n};\n", 2, "'limits.max' must be greater than 0");
    expect_error("egress = {\n  socket_buffer = \"65M\";\n};\n", 2,
                 "'egress.socket_buffer' must be 4K to 64M");
    expect_error("limits = {\n  memory = \"5M\";\n};\n", 2,
                 "'limits.memory' must be at least 6M (the engine's minimum)");
    expect_error("box = {\n  pools = [\"ci\", \"gpu\"];\n};\n", 2,
                 "'box.pools' may hold only \"ci\" and \"agent\"");
    expect_error("egress = {\n  max_buffer = \"1M\";\n};\n", 2,
                 "'egress.max_buffer' must hold one tunnel");
    expect_error("box = {\n  memory = \"1G\";\n  host_reserve = \"1G\";\n};\n", 3,
                 "'box.host_reserve' (1G) leaves nothing of 'box.memory' (1G)");
}

/* A value of the wrong type, for every key with a field, is "FILE:LINE: 'KEY'
 * must be <its type>"; an unknown key in every group is named with its group. */
static void test_keys_wrong_type_and_unknown(void **state)
{
    (void)state;
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];
        const char *leaf = strrchr(k->path, '.') ? strrchr(k->path, '.') + 1 : k->path;
        char want[160];
        char *text;
        int line;

        if (strpbrk(k->path, "[*") != NULL) {
            continue;
        }
        snprintf(want, sizeof(want), "'%s' must be %s", leaf, sbx_key_type_name(k->type));
        text = config_with(k->path, k->type == SBX_KEY_BOOL ? "1" : "true", &line);
        expect_error(text, line, want);
        free(text);
        if (k->type == SBX_KEY_GROUP) {
            char *unknown = NULL;

            assert_true(asprintf(&unknown, "%s = {\n  no_such_key = 1;\n};\n", k->path) > 0);
            snprintf(want, sizeof(want), "unknown key 'no_such_key' in '%s'", leaf);
            expect_error(unknown, 2, want);
            free(unknown);
        }
    }
    expect_error("\n\nlog_level = \"debug\";\n", 3, "unknown key 'log_level'");
    /* a typo is named with the key it is near */
    expect_error("limits = {\n  memroy = \"8G\";\n};\n", 2,
                 "unknown key 'memroy' in 'limits' (did you mean 'memory'?)");
    expect_error("imgae = \"x\";\n", 1, "unknown key 'imgae' (did you mean 'image'?)");
    expect_error("runner = {\n  clients = ( { name = \"a\"; scope = [\"submit\"]; } );\n};\n", 2,
                 "unknown key 'scope' (did you mean 'scopes'?)");
    expect_error("caches = (\n  { host = \"/a\"; path = \"/b\"; mode = 1; }\n);\n", 2,
                 "unknown key 'mode'");
    expect_error("pools = {\n  ci = { cpus = 1.0; slots = 2; };\n};\n", 2,
                 "unknown key 'slots' in 'ci'");
    expect_error("pools = {\n  ci = 3;\n};\n", 2, "'pools' entries must be groups");
}

/* A default means what it says: a string's quotes may be left out. */
static void test_keys_value_from_text(void **state)
{
    struct sbx_value v = {0};
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(sbx_value_from_text(SBX_KEY_STRING, "auto", &v, &err), 0);
    assert_string_equal(v.str, "auto");
    sbx_value_clear(&v);
    assert_int_equal(sbx_value_from_text(SBX_KEY_STRING, "\"auto\"", &v, &err), 0);
    assert_string_equal(v.str, "auto");
    sbx_value_clear(&v);
    assert_int_equal(sbx_value_from_text(SBX_KEY_STRING, "/tasks/{task} \"x\"", &v, &err), 0);
    assert_string_equal(v.str, "/tasks/{task} \"x\"");
    sbx_value_clear(&v);
    assert_int_equal(sbx_value_from_text(SBX_KEY_SIZE, "\"8G\"", &v, &err), 0);
    assert_int_equal(v.i, 8LL << 30);
    assert_int_equal(sbx_value_from_text(SBX_KEY_DURATION, "1h30m", &v, &err), 0);
    assert_int_equal(v.i, 5400);
    assert_int_equal(sbx_value_from_text(SBX_KEY_BOOL, "false", &v, &err), 0);
    assert_int_equal(v.i, 0);
    assert_int_equal(sbx_value_from_text(SBX_KEY_CPUS, "0.5", &v, &err), 0);
    assert_true(v.d == 0.5);
    assert_int_equal(sbx_value_from_text(SBX_KEY_STRINGS, "[\"a\", \"b\"]", &v, &err), 0);
    assert_string_equal(v.strv[1], "b");
    assert_null(v.strv[2]);
    sbx_value_clear(&v);
    assert_int_equal(sbx_value_from_text(SBX_KEY_STRINGS, "one", &v, &err), 0);
    assert_string_equal(v.strv[0], "one");
    assert_null(v.strv[1]);
    sbx_value_clear(&v);
    /* a default its type refuses is an error, not a silent 0 */
    assert_int_equal(sbx_value_from_text(SBX_KEY_INT, "many", &v, &err), -1);
    assert_non_null(err);
    sbx_error_free(&err);
    assert_int_equal(sbx_value_from_text(SBX_KEY_BOOL, "yes", &v, &err), -1);
    sbx_error_free(&err);
    assert_int_equal(sbx_value_from_text(SBX_KEY_SIZE, "8GB", &v, &err), -1);
    assert_non_null(strstr(err->msg, "ambiguous"));
    sbx_error_free(&err);
    assert_int_equal(sbx_value_from_text(SBX_KEY_STRING, "\"unclosed", &v, &err), -1);
    sbx_error_free(&err);
}

/* Plugin options take the same types; a string default written in config
 * syntax ("\"eu-1\"") is the string eu-1, not "eu-1" with its quotes. */
static void test_keys_plugin_defaults(void **state)
{
    static const struct sbx_option good[] = {
        {"region", SBX_OPT_STRING, "\"eu-1\"", 0, "quoted"},
        {"zone", SBX_OPT_STRING, "eu-1", 0, "bare"},
        {"tags", SBX_OPT_STRINGS, "[\"a\", \"b\"]", 0, "a list"},
        {"quota", SBX_OPT_SIZE, "\"2G\"", 0, "a size"},
        {"on", SBX_OPT_BOOL, "true", 0, "a bool"},
        SBX_OPTIONS_END,
    };
    static const struct sbx_option bad[] = {
        {"retries", SBX_OPT_INT, "many", 0, "an int"},
        SBX_OPTIONS_END,
    };
    struct sbx_config *c = sbx_config_defaults();
    struct sbx_instance in = {
        .name = "x", .plugin = "provider_x", .kind = SBX_PLUGIN_PROVIDER, .where = "built-in"};
    sbx_error_t *err = NULL;
    struct sbx_options *o = sbx_options_build(c, &in, good, &err);

    (void)state;
    assert_non_null(o);
    assert_string_equal(sbx_options_get(o, "region")->str, "eu-1");
    assert_string_equal(sbx_options_get(o, "zone")->str, "eu-1");
    assert_string_equal(sbx_options_get(o, "tags")->strv[1], "b");
    assert_int_equal(sbx_options_get(o, "quota")->i, 2LL << 30);
    assert_int_equal(sbx_options_get(o, "on")->i, 1);
    sbx_options_destroy(o);
    assert_null(sbx_options_build(c, &in, bad, &err));
    assert_non_null(strstr(err->msg, "provider_x: default 'many' of option 'retries'"));
    sbx_error_free(&err);
    sbx_config_destroy(c);
}

/* Every shipped plugin's option defaults parse with their types. */
static void test_keys_shipped_plugin_defaults(void **state)
{
    struct sbx_config *c = sbx_config_defaults();
    size_t checked = 0;

    (void)state;
    for (size_t i = 0; i < c->n_instances; i++) {
        sbx_error_t *err = NULL;
        struct sbx_plugin *p = sbx_plugin_load_name(
            getenv("SBX_PLUGIN_DIR"), c->instances[i].plugin, c->instances[i].kind, &err);

        if (p == NULL) {
            fail_msg("%s", err->msg);
        }
        for (const struct sbx_option *o = p->desc.options; o != NULL && o->key != NULL; o++) {
            struct sbx_value v = {0};

            if (o->def == NULL) {
                continue;
            }
            if (sbx_value_from_text((enum sbx_key_type)o->type, o->def, &v, &err) < 0) {
                fail_msg("%s: option '%s': default '%s': %s", p->desc.name, o->key, o->def,
                         err->msg);
            }
            if (o->type == SBX_OPT_STRING && strcmp(v.str, o->def) != 0) {
                fail_msg("%s: option '%s': default '%s' reads as '%s'", p->desc.name, o->key,
                         o->def, v.str);
            }
            sbx_value_clear(&v);
            checked++;
        }
        sbx_plugin_unload(p);
    }
    assert_true(checked >= 20);
    sbx_config_destroy(c);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    char chunk[4096];
    size_t n;

    assert_non_null(f);
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0) {
        fwrite(chunk, 1, n, m);
    }
    fclose(f);
    fclose(m);
    return buf;
}

/* docs/configuration.md holds every generated table as it is, and no other. */
static void test_keys_docs_in_sync(void **state)
{
    const char *src = getenv("SBX_SOURCE_DIR");
    char *doc_path = NULL;
    char *doc, *gen = NULL;
    size_t len = 0, blocks = 0, doc_blocks = 0;
    FILE *m = open_memstream(&gen, &len);

    (void)state;
    assert_non_null(src);
    assert_true(asprintf(&doc_path, "%s/docs/configuration.md", src) > 0);
    doc = slurp(doc_path);
    sbx_config_keys_markdown(m);
    fclose(m);
    for (char *b = strstr(gen, "<!-- keys "); b != NULL; b = strstr(b + 1, "<!-- keys ")) {
        char *end = strstr(b, "<!-- /keys -->\n");
        char *block = strndup(b, (size_t)(end - b) + strlen("<!-- /keys -->\n"));

        if (strstr(doc, block) == NULL) {
            fail_msg("docs/configuration.md differs from the key table (core/src/config/keys.c) "
                     "in this block; run scripts/config_docs.py build/sbx:\n%s",
                     block);
        }
        free(block);
        blocks++;
    }
    for (char *b = strstr(doc, "<!-- keys "); b != NULL; b = strstr(b + 1, "<!-- keys ")) {
        doc_blocks++;
    }
    assert_true(blocks >= 10);
    assert_int_equal(doc_blocks, blocks);
    free(gen);
    free(doc);
    free(doc_path);
}

/* `sbx config keys --json` is the table; a bad argument is a usage error. */
static void test_keys_cli(void **state)
{
    const char *build = getenv("SBX_BUILD_DIR");
    char *sbx = NULL;
    struct spawn_result r;
    json_t *arr, *e;
    size_t i;
    int found = 0;

    (void)state;
    assert_true(build != NULL && asprintf(&sbx, "%s/sbx", build) > 0);
    r = spawn_run((char *const[]){sbx, "config", "keys", "--json", NULL}, NULL);
    assert_int_equal(r.rc, 0);
    arr = json_loads(r.out, 0, NULL);
    assert_non_null(arr);
    assert_int_equal(json_array_size(arr), sbx_config_n_keys);
    json_array_foreach(arr, i, e)
    {
        if (strcmp(json_string_value(json_object_get(e, "key")), "egress.max_connections") == 0) {
            assert_string_equal(json_string_value(json_object_get(e, "type")), "integer");
            assert_string_equal(json_string_value(json_object_get(e, "default")), "256");
            assert_string_equal(json_string_value(json_object_get(e, "check")),
                                "must be 1 to 65536");
            found = 1;
        }
    }
    assert_true(found);
    json_decref(arr);
    spawn_result_free(&r);
    r = spawn_run((char *const[]){sbx, "config", "keys", NULL}, NULL);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "limits.memory (size; default \"8G\"; must be at least 6M"));
    spawn_result_free(&r);
    r = spawn_run((char *const[]){sbx, "config", "keys", "--yaml", NULL}, NULL);
    assert_int_equal(r.rc, 2);
    assert_non_null(strstr(r.err, "config keys: unknown option '--yaml'"));
    spawn_result_free(&r);
    free(sbx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_keys_table_consistent),
        cmocka_unit_test(test_keys_out_of_range),
        cmocka_unit_test(test_keys_wrong_type_and_unknown),
        cmocka_unit_test(test_keys_value_from_text),
        cmocka_unit_test(test_keys_plugin_defaults),
        cmocka_unit_test(test_keys_shipped_plugin_defaults),
        cmocka_unit_test(test_keys_docs_in_sync),
        cmocka_unit_test(test_keys_cli),
    };

    return cmocka_run_group_tests(tests, test_dir_setup, test_dir_teardown);
}
