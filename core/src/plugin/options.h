/* options.h - a plugin instance's options, validated against the plugin's
 * declared option table (unknown keys and wrong types are FILE:LINE errors). */
#ifndef SBX_PLUGIN_OPTIONS_H
#define SBX_PLUGIN_OPTIONS_H

#include <stdint.h>

#include "config/config.h"
#include "sbx/sbx_plugin.h"
#include "util/error.h"

struct sbx_opt_value {
    const struct sbx_option *decl;
    int present; /* set in config or by default */
    char *str;   /* STRING */
    int64_t i;   /* INT, SIZE, DURATION, BOOL */
    double d;    /* FLOAT */
    char **strv; /* STRINGS, NULL-terminated */
    char *where; /* "FILE:LINE" */
};

struct sbx_options {
    char *instance;
    char *plugin;
    size_t n;
    struct sbx_opt_value *v;
};

struct sbx_options *sbx_options_build(const struct sbx_config *c, const struct sbx_instance *in,
                                      const struct sbx_option *decls, sbx_error_t **err);
void sbx_options_destroy(struct sbx_options *o);
const struct sbx_opt_value *sbx_options_get(const struct sbx_options *o, const char *key);
const char *sbx_option_type_name(enum sbx_option_type t);

#endif
