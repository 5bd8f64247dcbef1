/* schema.h - the shape of the configuration file, checked before use. */
#ifndef SBX_CONFIG_SCHEMA_H
#define SBX_CONFIG_SCHEMA_H

#include <libconfig.h>

#include "util/error.h"

enum sbx_key_type {
    SBX_KEY_STRING = 1,
    SBX_KEY_INT,
    SBX_KEY_FLOAT,    /* int or float */
    SBX_KEY_BOOL,
    SBX_KEY_SIZE,     /* "8G" or an integer of bytes */
    SBX_KEY_DURATION, /* "60m" or an integer of seconds */
    SBX_KEY_CPUS,     /* 2.0, 2 or "2.0" */
    SBX_KEY_STRINGS,  /* array or list of strings */
    SBX_KEY_GROUP,    /* children checked against `children` */
    SBX_KEY_INSTANCES, /* group of named groups, each with `plugin`; options checked later */
    SBX_KEY_NAMED_GROUPS, /* group of named groups checked against `children` */
    SBX_KEY_GROUP_LIST,   /* list of groups checked against `children` */
};

struct sbx_key {
    const char *name;
    enum sbx_key_type type;
    const struct sbx_key *children; /* terminated by {NULL} */
};

extern const struct sbx_key sbx_config_schema[];

/* Checks `group` against `keys`; the first problem becomes "FILE:LINE: ...". */
int sbx_schema_check(const char *file, const config_setting_t *group, const struct sbx_key *keys,
                     sbx_error_t **err);
/* Checks one value against one type (shared with plugin options). */
int sbx_schema_check_value(const char *file, const config_setting_t *s, enum sbx_key_type type,
                           sbx_error_t **err);
const char *sbx_key_type_name(enum sbx_key_type type);

#endif
