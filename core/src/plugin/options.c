/* options.c - checking an instance's config group against a plugin's options. */
#include "plugin/options.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "config/schema.h"
#include "util/units.h"
#include "util/xalloc.h"

const char *sbx_option_type_name(enum sbx_option_type t)
{
    switch (t) {
    case SBX_OPT_STRING:
        return "string";
    case SBX_OPT_INT:
        return "integer";
    case SBX_OPT_BOOL:
        return "bool";
    case SBX_OPT_FLOAT:
        return "number";
    case SBX_OPT_SIZE:
        return "size";
    case SBX_OPT_DURATION:
        return "duration";
    case SBX_OPT_STRINGS:
        return "strings";
    }
    return "?";
}

static enum sbx_key_type key_type(enum sbx_option_type t)
{
    switch (t) {
    case SBX_OPT_STRING:
        return SBX_KEY_STRING;
    case SBX_OPT_INT:
        return SBX_KEY_INT;
    case SBX_OPT_BOOL:
        return SBX_KEY_BOOL;
    case SBX_OPT_FLOAT:
        return SBX_KEY_FLOAT;
    case SBX_OPT_SIZE:
        return SBX_KEY_SIZE;
    case SBX_OPT_DURATION:
        return SBX_KEY_DURATION;
    case SBX_OPT_STRINGS:
        return SBX_KEY_STRINGS;
    }
    return SBX_KEY_STRING;
}

/* Parses a default written in config syntax. */
static int set_from_text(struct sbx_opt_value *v, const char *text, sbx_error_t **err)
{
    switch (v->decl->type) {
    case SBX_OPT_STRING:
        v->str = xstrdup(text);
        return 0;
    case SBX_OPT_INT:
        v->i = strtoll(text, NULL, 10);
        return 0;
    case SBX_OPT_BOOL:
        v->i = strcasecmp(text, "true") == 0 || strcmp(text, "1") == 0;
        return 0;
    case SBX_OPT_FLOAT:
        v->d = strtod(text, NULL);
        return 0;
    case SBX_OPT_SIZE:
        return sbx_size_parse(text, &v->i, err);
    case SBX_OPT_DURATION:
        return sbx_duration_parse(text, &v->i, err);
    case SBX_OPT_STRINGS:
        v->strv = xcalloc(2, sizeof(char *));
        v->strv[0] = xstrdup(text);
        return 0;
    }
    return 0;
}

static void set_from_setting(struct sbx_opt_value *v, const config_setting_t *s)
{
    sbx_error_t *e = NULL;
    int t = config_setting_type(s);

    switch (v->decl->type) {
    case SBX_OPT_STRING:
        v->str = xstrdup(config_setting_get_string(s));
        break;
    case SBX_OPT_INT:
        v->i = config_setting_get_int64(s);
        break;
    case SBX_OPT_BOOL:
        v->i = config_setting_get_bool(s);
        break;
    case SBX_OPT_FLOAT:
        v->d = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                      : (double)config_setting_get_int64(s);
        break;
    case SBX_OPT_SIZE:
    case SBX_OPT_DURATION:
        if (t == CONFIG_TYPE_STRING) {
            if (v->decl->type == SBX_OPT_SIZE) {
                sbx_size_parse(config_setting_get_string(s), &v->i, &e);
            }
            else {
                sbx_duration_parse(config_setting_get_string(s), &v->i, &e);
            }
            sbx_error_free(&e);
        }
        else {
            v->i = config_setting_get_int64(s);
        }
        break;
    case SBX_OPT_STRINGS: {
        int n = config_setting_length(s);

        v->strv = xcalloc((size_t)n + 1, sizeof(char *));
        for (int i = 0; i < n; i++) {
            v->strv[i] = xstrdup(config_setting_get_string_elem(s, i));
        }
        break;
    }
    }
}

struct sbx_options *sbx_options_build(const struct sbx_config *c, const struct sbx_instance *in,
                                      const struct sbx_option *decls, sbx_error_t **err)
{
    struct sbx_options *o = xcalloc(1, sizeof(*o));
    const char *file = c->path ? c->path : "(defaults)";
    size_t n = 0;

    o->instance = xstrdup(in->name);
    o->plugin = xstrdup(in->plugin);
    while (decls != NULL && decls[n].key != NULL) {
        n++;
    }
    o->n = n;
    o->v = xcalloc(n ? n : 1, sizeof(*o->v));
    for (size_t i = 0; i < n; i++) {
        o->v[i].decl = &decls[i];
    }
    /* unknown keys and wrong types */
    if (in->group != NULL) {
        for (int i = 0; i < config_setting_length(in->group); i++) {
            const config_setting_t *s = config_setting_get_elem(in->group, (unsigned)i);
            const char *name = config_setting_name(s);
            struct sbx_opt_value *v = NULL;

            if (strcmp(name, "plugin") == 0 ||
                (strcmp(name, "unisolated") == 0 && in->kind == SBX_PLUGIN_PROVIDER)) {
                continue; /* the core's own keys (config.c) */
            }
            for (size_t k = 0; k < n; k++) {
                if (strcmp(decls[k].key, name) == 0) {
                    v = &o->v[k];
                }
            }
            if (v == NULL) {
                sbx_error_set(err, SBX_E_CONFIG,
                              "%s:%u: unknown option '%s' for %s instance "
                              "'%s'",
                              file, config_setting_source_line(s), name, in->plugin, in->name);
                sbx_options_destroy(o);
                return NULL;
            }
            if (sbx_schema_check_value(file, s, key_type(v->decl->type), err) < 0) {
                sbx_error_wrap(err, "%s instance '%s'", in->plugin, in->name);
                sbx_options_destroy(o);
                return NULL;
            }
            set_from_setting(v, s);
            v->present = 1;
            v->where = sbx_config_where(c, s);
        }
    }
    /* required keys and defaults */
    for (size_t k = 0; k < n; k++) {
        struct sbx_opt_value *v = &o->v[k];

        if (v->present) {
            continue;
        }
        if (v->decl->required) {
            sbx_error_set(err, SBX_E_CONFIG, "%s: %s instance '%s' needs option '%s' (%s)",
                          in->where, in->plugin, in->name, v->decl->key,
                          v->decl->help ? v->decl->help : sbx_option_type_name(v->decl->type));
            sbx_options_destroy(o);
            return NULL;
        }
        if (v->decl->def != NULL) {
            if (set_from_text(v, v->decl->def, err) < 0) {
                sbx_error_wrap(err, "%s: default of option '%s'", in->plugin, v->decl->key);
                sbx_options_destroy(o);
                return NULL;
            }
            v->present = 1;
        }
        v->where = xasprintf("%s (%s instance '%s')", in->where, in->plugin, in->name);
    }
    return o;
}

const struct sbx_opt_value *sbx_options_get(const struct sbx_options *o, const char *key)
{
    if (o == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < o->n; i++) {
        if (strcmp(o->v[i].decl->key, key) == 0) {
            return &o->v[i];
        }
    }
    return NULL;
}

void sbx_options_destroy(struct sbx_options *o)
{
    if (o == NULL) {
        return;
    }
    for (size_t i = 0; i < o->n; i++) {
        free(o->v[i].str);
        free(o->v[i].where);
        if (o->v[i].strv != NULL) {
            for (size_t k = 0; o->v[i].strv[k] != NULL; k++) {
                free(o->v[i].strv[k]);
            }
            free(o->v[i].strv);
        }
    }
    free(o->v);
    free(o->instance);
    free(o->plugin);
    free(o);
}
