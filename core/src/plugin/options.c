/* options.c - checking an instance's config group against a plugin's options,
 * with the configuration's own types (config/schema.h). */
#include "plugin/options.h"

#include <stdlib.h>
#include <string.h>

#include "config/schema.h"
#include "util/xalloc.h"

const char *sbx_option_type_name(enum sbx_option_type t)
{
    return sbx_key_type_word((enum sbx_key_type)t);
}

/* An option's type is a key type (config/schema.h): the same numbers. */
static int type_ok(enum sbx_option_type t)
{
    return t >= SBX_OPT_STRING && t <= SBX_OPT_STRINGS;
}

static void take(struct sbx_opt_value *o, struct sbx_value *v)
{
    o->str = v->str;
    o->i = v->i;
    o->d = v->d;
    o->strv = v->strv;
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
        if (!type_ok(decls[i].type)) {
            sbx_error_set(err, SBX_E_CONFIG, "%s: option '%s' has an unknown type %d", in->plugin,
                          decls[i].key, (int)decls[i].type);
            sbx_options_destroy(o);
            return NULL;
        }
    }
    /* unknown keys and wrong types */
    if (in->group != NULL) {
        for (int i = 0; i < config_setting_length(in->group); i++) {
            const config_setting_t *s = config_setting_get_elem(in->group, (unsigned)i);
            const char *name = config_setting_name(s);
            struct sbx_opt_value *v = NULL;
            struct sbx_value val = {0};

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
            if (sbx_schema_check_value(file, s, (enum sbx_key_type)v->decl->type, err) < 0) {
                sbx_error_wrap(err, "%s instance '%s'", in->plugin, in->name);
                sbx_options_destroy(o);
                return NULL;
            }
            sbx_value_read(s, (enum sbx_key_type)v->decl->type, &val);
            take(v, &val);
            v->present = 1;
            v->where = sbx_config_where(c, s);
        }
    }
    /* required keys and defaults */
    for (size_t k = 0; k < n; k++) {
        struct sbx_opt_value *v = &o->v[k];
        struct sbx_value val = {0};

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
            /* a string default is the string itself, quoted or not */
            if (sbx_value_from_text((enum sbx_key_type)v->decl->type, v->decl->def, &val, err) <
                0) {
                sbx_error_wrap(err, "%s: default '%s' of option '%s'", in->plugin, v->decl->def,
                               v->decl->key);
                sbx_options_destroy(o);
                return NULL;
            }
            take(v, &val);
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
