/* keys.h - the core's configuration as one declarative table (config/keys.c).
 *
 * Each row is a key: its path, its type (config/schema.h, shared with plugin
 * options), the field of struct sbx_config it fills, its default, its check
 * and one line of help. Defaults (sbx_config_keys_defaults), reading
 * (sbx_config_keys_read), the schema check (sbx_schema_check), `sbx config
 * keys` and the key tables of docs/configuration.md all come from it.
 *
 * Adding a key: add the field to struct sbx_config (config.h) and one row to
 * the table in keys.c; a string or string list field is freed by
 * sbx_config_keys_free. Then run scripts/config_docs.py to update the docs. */
#ifndef SBX_CONFIG_KEYS_H
#define SBX_CONFIG_KEYS_H

#include <libconfig.h>
#include <stddef.h>

#include "config/schema.h"
#include "util/error.h"

struct sbx_config;

/* The C type of a row's field, found by _Generic (SBX_KEY_CTYPE). */
enum sbx_key_ctype {
    SBX_C_NONE = 0, /* no field: read by the row's `read` (or its parent's) */
    SBX_C_INT,
    SBX_C_INT64,
    SBX_C_DOUBLE,
    SBX_C_STR,  /* char *, owned */
    SBX_C_STRV, /* char **, NULL-terminated, owned */
};

#define SBX_KEY_CTYPE(x)                                                                           \
    _Generic((x),                                                                                  \
        int: SBX_C_INT,                                                                            \
        int64_t: SBX_C_INT64,                                                                      \
        double: SBX_C_DOUBLE,                                                                      \
        char *: SBX_C_STR,                                                                         \
        char **: SBX_C_STRV)

enum sbx_key_flags {
    SBX_KEY_AUTO = 1 << 0, /* no default value: absent reads as -1, and the code that uses
                              the key computes it (doc_def says how) */
};

/* What a present value must satisfy. A range applies to the value in its unit
 * (bytes, seconds, a count, CPUs); the message is made from the range ("must
 * be greater than 0", "must be 4K to 64M", "must be at least 64M") and `note`.
 * `names`: the allowed strings of a string, or of each string of a list. */
struct sbx_key_check {
    int range; /* 1: [min, max] applies; max < min: no upper bound */
    double min, max;
    const char *note;
    const char *const *names; /* NULL-terminated */
    /* a check that needs other keys: runs after every key is read, whether
     * this one is present or not (s is NULL when absent) */
    int (*fn)(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
};

struct sbx_key_def {
    const char *path; /* "limits.cpus"; "caches[].host": a key of each group of a
                         list; "pools.*.cpus": a key of each named group */
    enum sbx_key_type type;
    size_t offset;            /* of the field in struct sbx_config */
    enum sbx_key_ctype ctype; /* SBX_C_NONE: no field */
    const char *def;          /* the default as written in the file (sbx_value_from_text),
                                 or NULL: none (0, NULL, false; -1 with SBX_KEY_AUTO) */
    const char *doc_def;      /* the default for the tables when another part of sbx
                                 computes it (markdown), or NULL */
    const char *doc_type;     /* a more precise type for the tables, or NULL */
    unsigned flags;           /* enum sbx_key_flags */
    struct sbx_key_check check;
    /* a structured key (groups, lists of groups, instances) read by code of its
     * own; called when the key is present, after the rows before it are read */
    int (*read)(struct sbx_config *c, const config_setting_t *s, sbx_error_t **err);
    const char *help; /* one line, markdown */
};

extern const struct sbx_key_def sbx_config_keys[];
extern const size_t sbx_config_n_keys;

/* The row of a path ("limits.cpus", "caches[].host"), or NULL. */
const struct sbx_key_def *sbx_key_find(const char *path);

/* Sets every field that has a default. */
void sbx_config_keys_defaults(struct sbx_config *c);
/* Reads every present key of c->cfg (already checked by sbx_schema_check) in
 * table order, checks each value against its row, then runs the rows' check
 * functions. Errors are "FILE:LINE: 'PATH' ...". */
int sbx_config_keys_read(struct sbx_config *c, sbx_error_t **err);
/* Frees the string and string-list fields of the table. */
void sbx_config_keys_free(struct sbx_config *c);

/* The default of a row in config syntax ("\"8G\"", "2.0", "[\"ci\", \"agent\"]"),
 * or NULL when it has none. Owned by the caller. */
char *sbx_key_default_text(const struct sbx_key_def *k);
/* What the row's check asks ("must be 1 to 65536"), or NULL. Owned by the caller. */
char *sbx_key_check_text(const struct sbx_key_def *k);
/* The type of a row for a table. */
const char *sbx_key_type_text(const struct sbx_key_def *k);

#endif
