/* keys_apply.c - defaults, reading and checking driven by the key table
 * (config/keys.h); also the text of a row's default, type and check for the
 * tables of `sbx config keys` and docs/configuration.md. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "config/keys.h"
#include "util/units.h"
#include "util/xalloc.h"

static void free_strv(char **v)
{
    if (v == NULL) {
        return;
    }
    for (size_t i = 0; v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

static void *field(struct sbx_config *c, const struct sbx_key_def *k)
{
    return (char *)c + k->offset;
}

static int is_real(enum sbx_key_type t)
{
    return t == SBX_KEY_FLOAT || t == SBX_KEY_CPUS;
}

/* Moves v into the row's field (strings change owner). */
static void store(struct sbx_config *c, const struct sbx_key_def *k, struct sbx_value *v)
{
    void *f = field(c, k);

    switch (k->ctype) {
    case SBX_C_INT:
        *(int *)f = (int)v->i;
        break;
    case SBX_C_INT64:
        *(int64_t *)f = v->i;
        break;
    case SBX_C_DOUBLE:
        *(double *)f = is_real(k->type) ? v->d : (double)v->i;
        break;
    case SBX_C_STR:
        free(*(char **)f);
        *(char **)f = v->str;
        v->str = NULL;
        break;
    case SBX_C_STRV:
        free_strv(*(char ***)f);
        *(char ***)f = v->strv;
        v->strv = NULL;
        break;
    case SBX_C_NONE:
        break;
    }
}

void sbx_config_keys_defaults(struct sbx_config *c)
{
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];
        struct sbx_value v = {0};
        sbx_error_t *err = NULL;

        if (k->ctype == SBX_C_NONE) {
            continue;
        }
        if (k->flags & SBX_KEY_AUTO) {
            v.i = -1;
            v.d = -1.0;
            store(c, k, &v);
            continue;
        }
        if (k->def == NULL) {
            continue;
        }
        if (sbx_value_from_text(k->type, k->def, &v, &err) < 0) {
            /* the table is constant and test_config_keys checks every default */
            fprintf(stderr, "sbx: internal error: default of '%s': %s\n", k->path, err->msg);
            abort();
        }
        store(c, k, &v);
        sbx_value_clear(&v);
    }
}

static void format_bound(enum sbx_key_type t, double x, char *buf, size_t len)
{
    if (t == SBX_KEY_SIZE) {
        sbx_size_format((int64_t)x, buf, len);
    }
    else if (t == SBX_KEY_DURATION) {
        sbx_duration_format((int64_t)x, buf, len);
    }
    else if (t == SBX_KEY_INT) {
        snprintf(buf, len, "%.0f", x);
    }
    else {
        snprintf(buf, len, "%g", x);
    }
}

/* "must be 1 to 65536", "may hold only \"ci\" and \"agent\"", or "" when the
 * row has no range and no names. */
static void check_text(const struct sbx_key_def *k, char *buf, size_t len)
{
    const struct sbx_key_check *ck = &k->check;
    char lo[32], hi[32];
    size_t n = 0;

    buf[0] = '\0';
    if (ck->range) {
        format_bound(k->type, ck->min, lo, sizeof(lo));
        format_bound(k->type, ck->max, hi, sizeof(hi));
        if (ck->max >= ck->min) {
            snprintf(buf, len, "must be %s to %s", lo, hi);
        }
        else if (ck->min == 1 && !is_real(k->type)) {
            snprintf(buf, len, "must be greater than 0");
        }
        else {
            snprintf(buf, len, "must be at least %s", lo);
        }
        if (ck->note != NULL) {
            n = strlen(buf);
            snprintf(buf + n, len - n, " %s", ck->note);
        }
        return;
    }
    if (ck->names != NULL) {
        n = (size_t)snprintf(buf, len, "%s",
                             k->type == SBX_KEY_STRINGS ? "may hold only " : "must be ");
        for (size_t i = 0; ck->names[i] != NULL && n < len; i++) {
            const char *sep = i == 0 ? ""
                              : ck->names[i + 1] == NULL
                                  ? (k->type == SBX_KEY_STRINGS ? " and " : " or ")
                                  : ", ";

            n += (size_t)snprintf(buf + n, len - n, "%s\"%s\"", sep, ck->names[i]);
        }
    }
}

static int name_ok(const char *const *names, const char *s)
{
    for (size_t i = 0; names[i] != NULL; i++) {
        if (strcmp(names[i], s) == 0) {
            return 1;
        }
    }
    return 0;
}

/* The row's range and names, for a present value. */
static int check_value(struct sbx_config *c, const struct sbx_key_def *k, const config_setting_t *s,
                       const struct sbx_value *v, sbx_error_t **err)
{
    const struct sbx_key_check *ck = &k->check;
    int ok = 1;
    char what[256];

    if (ck->range) {
        double x = is_real(k->type) ? v->d : (double)v->i;

        ok = x >= ck->min && (ck->max < ck->min || x <= ck->max);
    }
    if (ck->names != NULL && k->type == SBX_KEY_STRING) {
        ok = name_ok(ck->names, v->str);
    }
    if (ck->names != NULL && k->type == SBX_KEY_STRINGS) {
        for (size_t i = 0; v->strv[i] != NULL && ok; i++) {
            ok = name_ok(ck->names, v->strv[i]);
        }
    }
    if (ok) {
        return 0;
    }
    check_text(k, what, sizeof(what));
    return sbx_error_set(err, SBX_E_CONFIG, "%s:%u: '%s' %s", c->path,
                         config_setting_source_line(s), k->path, what);
}

int sbx_config_keys_read(struct sbx_config *c, sbx_error_t **err)
{
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];
        const config_setting_t *s;
        struct sbx_value v = {0};

        if (strpbrk(k->path, "[*") != NULL || (k->ctype == SBX_C_NONE && k->read == NULL)) {
            continue; /* read by its parent's reader, or only checked */
        }
        s = config_lookup(&c->cfg, k->path);
        if (s == NULL) {
            continue;
        }
        if (k->ctype != SBX_C_NONE) {
            sbx_value_read(s, k->type, &v);
            if (check_value(c, k, s, &v, err) < 0) {
                sbx_value_clear(&v);
                return -1;
            }
            store(c, k, &v);
            sbx_value_clear(&v);
        }
        if (k->read != NULL && k->read(c, s, err) < 0) {
            return -1;
        }
    }
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];

        if (k->check.fn != NULL && k->check.fn(c, config_lookup(&c->cfg, k->path), err) < 0) {
            return -1;
        }
    }
    return 0;
}

void sbx_config_keys_free(struct sbx_config *c)
{
    for (size_t i = 0; i < sbx_config_n_keys; i++) {
        const struct sbx_key_def *k = &sbx_config_keys[i];

        if (k->ctype == SBX_C_STR) {
            free(*(char **)field(c, k));
            *(char **)field(c, k) = NULL;
        }
        else if (k->ctype == SBX_C_STRV) {
            free_strv(*(char ***)field(c, k));
            *(char ***)field(c, k) = NULL;
        }
    }
}

char *sbx_key_default_text(const struct sbx_key_def *k)
{
    int quoted =
        k->type == SBX_KEY_STRING || k->type == SBX_KEY_SIZE || k->type == SBX_KEY_DURATION;

    if (k->def == NULL) {
        return NULL;
    }
    if (quoted && k->def[0] != '"') {
        return xasprintf("\"%s\"", k->def);
    }
    return xstrdup(k->def);
}

const char *sbx_key_type_text(const struct sbx_key_def *k)
{
    return k->doc_type ? k->doc_type : sbx_key_type_word(k->type);
}

char *sbx_key_check_text(const struct sbx_key_def *k)
{
    char buf[256];

    check_text(k, buf, sizeof(buf));
    return buf[0] ? xstrdup(buf) : NULL;
}
