/* schema.h - the value types of the configuration, shared by the core's keys
 * (config/keys.c) and by plugin options (plugin/options.c), and the checker
 * that walks a file against the key table.
 *
 * One type system: the first seven types are the plugin ABI's
 * enum sbx_option_type (same numbers, asserted in schema.c), so a plugin
 * option's type is a key type as it is. The others are the core's own. */
#ifndef SBX_CONFIG_SCHEMA_H
#define SBX_CONFIG_SCHEMA_H

#include <libconfig.h>
#include <stdint.h>

#include "sbx/sbx_plugin.h"
#include "util/error.h"

enum sbx_key_type {
    SBX_KEY_STRING = SBX_OPT_STRING,
    SBX_KEY_INT = SBX_OPT_INT,
    SBX_KEY_BOOL = SBX_OPT_BOOL,
    SBX_KEY_FLOAT = SBX_OPT_FLOAT,       /* int or float */
    SBX_KEY_SIZE = SBX_OPT_SIZE,         /* "8G" or an integer of bytes */
    SBX_KEY_DURATION = SBX_OPT_DURATION, /* "60m" or an integer of seconds */
    SBX_KEY_STRINGS = SBX_OPT_STRINGS,   /* array or list of strings */
    /* the core's own */
    SBX_KEY_CPUS = 32,    /* 2.0, 2 or "2.0" */
    SBX_KEY_GROUP,        /* a group; its keys are the table's "PATH.key" rows */
    SBX_KEY_INSTANCES,    /* group of named groups, each with `plugin`; options checked later */
    SBX_KEY_NAMED_GROUPS, /* group of named groups: rows "PATH.*.key" */
    SBX_KEY_GROUP_LIST,   /* list of groups: rows "PATH[].key" */
};

/* One value of any type, as read from a setting or from a default's text. */
struct sbx_value {
    char *str;   /* STRING */
    int64_t i;   /* INT, SIZE, DURATION, BOOL */
    double d;    /* FLOAT, CPUS */
    char **strv; /* STRINGS, NULL-terminated */
};

/* "a string", "a size such as \"8G\"": for error messages. */
const char *sbx_key_type_name(enum sbx_key_type type);
/* "string", "size": for tables (docs, `sbx config keys`). */
const char *sbx_key_type_word(enum sbx_key_type type);

/* Checks one value against one type; the problem becomes "FILE:LINE: ...". */
int sbx_schema_check_value(const char *file, const config_setting_t *s, enum sbx_key_type type,
                           sbx_error_t **err);
/* Reads a setting that sbx_schema_check_value accepted. */
void sbx_value_read(const config_setting_t *s, enum sbx_key_type type, struct sbx_value *v);
/* Reads a default. TEXT is written as in the configuration file, and the
 * double quotes of a string, size or duration may be left out: "auto" and
 * "\"auto\"" are both the string auto; "8G", "30s", "true", "500", "2.0",
 * "[\"a\", \"b\"]" (a bare word for STRINGS is a list of that one string).
 * A default that its type refuses is an error. */
int sbx_value_from_text(enum sbx_key_type type, const char *text, struct sbx_value *v,
                        sbx_error_t **err);
void sbx_value_clear(struct sbx_value *v);

/* Checks the whole file against the key table (config/keys.h): unknown keys
 * and types, in file order; the first problem becomes "FILE:LINE: ...". */
int sbx_schema_check(const char *file, const config_setting_t *root, sbx_error_t **err);

#endif
