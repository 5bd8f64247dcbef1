/* schema.c - the configuration's value types and the checker that walks a file
 * against the key table (config/keys.c). Plugin options use the same types. */
#include "config/schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/keys.h"
#include "util/cleanup.h"
#include "util/units.h"
#include "util/xalloc.h"

/* The plugin ABI's option types are key types, number for number. */
_Static_assert((int)SBX_KEY_STRING == (int)SBX_OPT_STRING && (int)SBX_KEY_INT == (int)SBX_OPT_INT &&
                   (int)SBX_KEY_BOOL == (int)SBX_OPT_BOOL &&
                   (int)SBX_KEY_FLOAT == (int)SBX_OPT_FLOAT &&
                   (int)SBX_KEY_SIZE == (int)SBX_OPT_SIZE &&
                   (int)SBX_KEY_DURATION == (int)SBX_OPT_DURATION &&
                   (int)SBX_KEY_STRINGS == (int)SBX_OPT_STRINGS,
               "enum sbx_key_type must extend enum sbx_option_type");

const char *sbx_key_type_name(enum sbx_key_type type)
{
    switch (type) {
    case SBX_KEY_STRING:
        return "a string";
    case SBX_KEY_INT:
        return "an integer";
    case SBX_KEY_FLOAT:
        return "a number";
    case SBX_KEY_BOOL:
        return "true or false";
    case SBX_KEY_SIZE:
        return "a size such as \"8G\"";
    case SBX_KEY_DURATION:
        return "a duration such as \"60m\"";
    case SBX_KEY_CPUS:
        return "a CPU count such as 2.0";
    case SBX_KEY_STRINGS:
        return "an array of strings";
    case SBX_KEY_GROUP:
    case SBX_KEY_INSTANCES:
    case SBX_KEY_NAMED_GROUPS:
        return "a group { ... }";
    case SBX_KEY_GROUP_LIST:
        return "a list of groups ( { ... } )";
    }
    return "?";
}

const char *sbx_key_type_word(enum sbx_key_type type)
{
    switch (type) {
    case SBX_KEY_STRING:
        return "string";
    case SBX_KEY_INT:
        return "integer";
    case SBX_KEY_FLOAT:
        return "number";
    case SBX_KEY_BOOL:
        return "boolean";
    case SBX_KEY_SIZE:
        return "size";
    case SBX_KEY_DURATION:
        return "duration";
    case SBX_KEY_CPUS:
        return "CPUs";
    case SBX_KEY_STRINGS:
        return "array of strings";
    case SBX_KEY_GROUP:
        return "group";
    case SBX_KEY_INSTANCES:
        return "group of instances";
    case SBX_KEY_NAMED_GROUPS:
        return "group of groups";
    case SBX_KEY_GROUP_LIST:
        return "list of groups";
    }
    return "?";
}

/* "FILE:LINE: message", or only the message when file is NULL (a default). */
static int fail(const char *file, const config_setting_t *s, sbx_error_t **err, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));

static int fail(const char *file, const config_setting_t *s, sbx_error_t **err, const char *fmt,
                ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (file == NULL) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s", msg);
    }
    return sbx_error_set(err, SBX_E_CONFIG, "%s:%d: %s", file, (int)config_setting_source_line(s),
                         msg);
}

static const char *key_name(const config_setting_t *s)
{
    const char *n = config_setting_name(s);

    return n ? n : "(element)";
}

static int is_int(int t)
{
    return t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64;
}

/* A size or a duration: a string with a unit, or a whole number that is not negative. */
static int check_unit(const char *file, const config_setting_t *s, enum sbx_key_type type,
                      int (*parse)(const char *, int64_t *, sbx_error_t **), sbx_error_t **err)
{
    cleanup_error sbx_error_t *uerr = NULL;
    int t = config_setting_type(s);
    int64_t i64;

    if (is_int(t)) {
        if (config_setting_get_int64(s) < 0) {
            return fail(file, s, err, "'%s' must not be negative", key_name(s));
        }
        return 0;
    }
    if (t != CONFIG_TYPE_STRING) {
        return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
    }
    if (parse(config_setting_get_string(s), &i64, &uerr) < 0) {
        return fail(file, s, err, "'%s': %s", key_name(s), uerr->msg);
    }
    return 0;
}

static int check_cpus(const char *file, const config_setting_t *s, sbx_error_t **err)
{
    cleanup_error sbx_error_t *uerr = NULL;
    int t = config_setting_type(s);
    double d;

    if (is_int(t) || t == CONFIG_TYPE_FLOAT) {
        d = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                   : (double)config_setting_get_int64(s);
        if (!(d > 0.0) || d > 4096.0) {
            return fail(file, s, err, "'%s' must be a CPU count above 0", key_name(s));
        }
        return 0;
    }
    if (t != CONFIG_TYPE_STRING) {
        return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(SBX_KEY_CPUS));
    }
    if (sbx_cpus_parse(config_setting_get_string(s), &d, &uerr) < 0) {
        return fail(file, s, err, "'%s': %s", key_name(s), uerr->msg);
    }
    return 0;
}

static int check_value(const char *file, const config_setting_t *s, enum sbx_key_type type,
                       sbx_error_t **err)
{
    int t = config_setting_type(s);
    int ok = 0;

    switch (type) {
    case SBX_KEY_STRING:
        ok = t == CONFIG_TYPE_STRING;
        break;
    case SBX_KEY_INT:
        ok = is_int(t);
        break;
    case SBX_KEY_FLOAT:
        ok = is_int(t) || t == CONFIG_TYPE_FLOAT;
        break;
    case SBX_KEY_BOOL:
        ok = t == CONFIG_TYPE_BOOL;
        break;
    case SBX_KEY_SIZE:
        return check_unit(file, s, type, sbx_size_parse, err);
    case SBX_KEY_DURATION:
        return check_unit(file, s, type, sbx_duration_parse, err);
    case SBX_KEY_CPUS:
        return check_cpus(file, s, err);
    case SBX_KEY_STRINGS:
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST) {
            break;
        }
        for (int i = 0; i < config_setting_length(s); i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);

            if (config_setting_type(e) != CONFIG_TYPE_STRING) {
                return fail(file, e, err, "'%s' element %d must be a string", key_name(s), i);
            }
        }
        return 0;
    case SBX_KEY_GROUP:
    case SBX_KEY_INSTANCES:
    case SBX_KEY_NAMED_GROUPS:
        ok = t == CONFIG_TYPE_GROUP;
        break;
    case SBX_KEY_GROUP_LIST:
        ok = t == CONFIG_TYPE_LIST;
        break;
    }
    if (!ok) {
        return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
    }
    return 0;
}

int sbx_schema_check_value(const char *file, const config_setting_t *s, enum sbx_key_type type,
                           sbx_error_t **err)
{
    return check_value(file ? file : "(defaults)", s, type, err);
}

void sbx_value_read(const config_setting_t *s, enum sbx_key_type type, struct sbx_value *v)
{
    int t = config_setting_type(s);
    sbx_error_t *e = NULL;

    switch (type) {
    case SBX_KEY_STRING:
        v->str = xstrdup(config_setting_get_string(s));
        break;
    case SBX_KEY_INT:
        v->i = config_setting_get_int64(s);
        break;
    case SBX_KEY_BOOL:
        v->i = config_setting_get_bool(s);
        break;
    case SBX_KEY_FLOAT:
    case SBX_KEY_CPUS:
        if (t == CONFIG_TYPE_STRING) {
            sbx_cpus_parse(config_setting_get_string(s), &v->d, &e);
        }
        else {
            v->d = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                          : (double)config_setting_get_int64(s);
        }
        break;
    case SBX_KEY_SIZE:
    case SBX_KEY_DURATION:
        if (t == CONFIG_TYPE_STRING) {
            (type == SBX_KEY_SIZE ? sbx_size_parse
                                  : sbx_duration_parse)(config_setting_get_string(s), &v->i, &e);
        }
        else {
            v->i = config_setting_get_int64(s);
        }
        break;
    case SBX_KEY_STRINGS: {
        int n = config_setting_length(s);

        v->strv = xcalloc((size_t)n + 1, sizeof(char *));
        for (int i = 0; i < n; i++) {
            v->strv[i] = xstrdup(config_setting_get_string_elem(s, i));
        }
        break;
    }
    default:
        break;
    }
    /* checked before: a parse cannot fail here */
    sbx_error_free(&e);
}

/* TEXT in double quotes, with '"' and '\' escaped. */
static char *quote(const char *text)
{
    size_t n = strlen(text);
    char *out = xmalloc(2 * n + 3);
    char *p = out;

    *p++ = '"';
    for (const char *q = text; *q != '\0'; q++) {
        if (*q == '"' || *q == '\\') {
            *p++ = '\\';
        }
        *p++ = *q;
    }
    *p++ = '"';
    *p = '\0';
    return out;
}

int sbx_value_from_text(enum sbx_key_type type, const char *text, struct sbx_value *v,
                        sbx_error_t **err)
{
    int bare = text[0] != '"' && text[0] != '[';
    cleanup_free char *q = NULL;
    cleanup_free char *src = NULL;
    config_setting_t *s;
    config_t cfg;
    int rc = 0;

    /* a string's quotes may be left out: the text is then the string itself */
    if (bare && (type == SBX_KEY_STRING || type == SBX_KEY_SIZE || type == SBX_KEY_DURATION)) {
        q = quote(text);
        src = xasprintf("default = %s;", q);
    }
    else if (bare && type == SBX_KEY_STRINGS) {
        q = quote(text);
        src = xasprintf("default = [%s];", q);
    }
    else {
        src = xasprintf("default = %s;", text);
    }
    config_init(&cfg);
    if (config_read_string(&cfg, src) != CONFIG_TRUE ||
        (s = config_lookup(&cfg, "default")) == NULL) {
        rc = sbx_error_set(err, SBX_E_CONFIG, "default '%s' is not a value in config syntax", text);
    }
    else if (check_value(NULL, s, type, err) < 0) {
        rc = -1;
    }
    else {
        sbx_value_read(s, type, v);
    }
    config_destroy(&cfg);
    return rc;
}

void sbx_value_clear(struct sbx_value *v)
{
    free(v->str);
    if (v->strv != NULL) {
        for (size_t i = 0; v->strv[i] != NULL; i++) {
            free(v->strv[i]);
        }
        free(v->strv);
    }
    memset(v, 0, sizeof(*v));
}

static int check_group(const char *file, const config_setting_t *group, const char *prefix,
                       sbx_error_t **err);

static int check_instances(const char *file, const config_setting_t *s, sbx_error_t **err)
{
    const char *section = config_setting_name(s);

    for (int i = 0; i < config_setting_length(s); i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
        const config_setting_t *p;

        if (config_setting_type(e) != CONFIG_TYPE_GROUP) {
            return fail(file, e, err, "%s instance '%s' must be a group { plugin = ...; }", section,
                        key_name(e));
        }
        p = config_setting_get_member(e, "plugin");
        if (p == NULL) {
            return fail(file, e, err, "%s instance '%s' has no 'plugin' key", section, key_name(e));
        }
        if (config_setting_type(p) != CONFIG_TYPE_STRING) {
            return fail(file, p, err, "'plugin' must be a string");
        }
        p = config_setting_get_member(e, "unisolated");
        if (p != NULL && config_setting_type(p) != CONFIG_TYPE_BOOL) {
            return fail(file, p, err, "%s instance '%s': 'unisolated' must be true or false",
                        section, key_name(e));
        }
    }
    return 0;
}

/* The entries of a list of groups or a group of named groups: each a group
 * whose keys are the table's rows "PATH[].key" or "PATH.*.key". */
static int check_entries(const char *file, const config_setting_t *s, const char *path,
                         const char *sep, sbx_error_t **err)
{
    cleanup_free char *prefix = xasprintf("%s%s", path, sep);

    for (int i = 0; i < config_setting_length(s); i++) {
        const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);

        if (config_setting_type(e) != CONFIG_TYPE_GROUP) {
            return fail(file, e, err, "'%s' entries must be groups { ... }", key_name(s));
        }
        if (check_group(file, e, prefix, err) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Edit distance of two short names (capped at 3: "far"). */
static size_t distance(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    size_t row[64];

    if (la >= 63 || lb >= 63) {
        return 3;
    }
    for (size_t j = 0; j <= lb; j++) {
        row[j] = j;
    }
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0];

        row[0] = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);

            best = up + 1 < best ? up + 1 : best;
            best = row[j - 1] + 1 < best ? row[j - 1] + 1 : best;
            row[j] = best;
            diag = up;
        }
    }
    return row[lb] < 3 ? row[lb] : 3;
}

/* The key of the table beside PREFIX nearest to NAME (a typo), or NULL. */
static const char *nearest_key(const char *prefix, const char *name)
{
    size_t plen = strlen(prefix), best = 3;
    const char *found = NULL;

    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const char *path = sbx_config_keys[i].path;
        const char *leaf = plen ? path + plen + 1 : path;
        size_t d;

        if ((plen && (strncmp(path, prefix, plen) != 0 || path[plen] != '.')) ||
            strchr(leaf, '.') != NULL) {
            continue;
        }
        d = distance(name, leaf);
        if (d < best && d * 2 <= strlen(leaf)) {
            best = d;
            found = leaf;
        }
    }
    return found;
}

static int check_group(const char *file, const config_setting_t *group, const char *prefix,
                       sbx_error_t **err)
{
    for (int i = 0; i < config_setting_length(group); i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        const char *name = config_setting_name(s);
        cleanup_free char *path =
            prefix[0] ? xasprintf("%s.%s", prefix, name ? name : "?") : xstrdup(name ? name : "?");
        const struct sbx_key_def *k = sbx_key_find(path);

        if (k == NULL) {
            const char *parent = config_setting_name(group);
            const char *near = name ? nearest_key(prefix, name) : NULL;
            char hint[128] = "";

            if (near != NULL) {
                snprintf(hint, sizeof(hint), " (did you mean '%s'?)", near);
            }
            if (parent != NULL) {
                return fail(file, s, err, "unknown key '%s' in '%s'%s", name ? name : "?", parent,
                            hint);
            }
            return fail(file, s, err, "unknown key '%s'%s", name ? name : "?", hint);
        }
        if (check_value(file, s, k->type, err) < 0) {
            return -1;
        }
        switch (k->type) {
        case SBX_KEY_GROUP:
            if (check_group(file, s, path, err) < 0) {
                return -1;
            }
            break;
        case SBX_KEY_GROUP_LIST:
            if (check_entries(file, s, path, "[]", err) < 0) {
                return -1;
            }
            break;
        case SBX_KEY_NAMED_GROUPS:
            if (check_entries(file, s, path, ".*", err) < 0) {
                return -1;
            }
            break;
        case SBX_KEY_INSTANCES:
            if (check_instances(file, s, err) < 0) {
                return -1;
            }
            break;
        default:
            break;
        }
    }
    return 0;
}

int sbx_schema_check(const char *file, const config_setting_t *root, sbx_error_t **err)
{
    return check_group(file, root, "", err);
}
