/* jsonedit.c - setting one member of a JSON file's object in place, keeping
 * the rest of the text (its formatting, order and comments-free layout) as
 * the user wrote it, so `sbx agents setup` shows and makes a minimal change.
 * The input is already known to be valid JSON; the result is checked by
 * the caller, which falls back to a full rewrite when in doubt. */
#include "agents/jsonedit.h"

#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static size_t skip_ws(const char *s, size_t i)
{
    while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
        i++;
    }
    return i;
}

static size_t skip_string(const char *s, size_t i)
{
    for (i++; s[i] != '\0' && s[i] != '"'; i++) {
        if (s[i] == '\\' && s[i + 1] != '\0') {
            i++;
        }
    }
    return s[i] == '"' ? i + 1 : i;
}

static size_t skip_value(const char *s, size_t i)
{
    int depth = 0;

    if (s[i] == '"') {
        return skip_string(s, i);
    }
    if (s[i] != '{' && s[i] != '[') {
        while (s[i] != '\0' && strchr(",}] \t\r\n", s[i]) == NULL) {
            i++;
        }
        return i;
    }
    while (s[i] != '\0') {
        if (s[i] == '"') {
            i = skip_string(s, i);
            continue;
        }
        if (s[i] == '{' || s[i] == '[') {
            depth++;
        }
        else if (s[i] == '}' || s[i] == ']') {
            if (--depth == 0) {
                return i + 1;
            }
        }
        i++;
    }
    return i;
}

struct member {
    int found;
    size_t key;      /* the key's opening quote */
    size_t val;      /* the value's first byte */
    size_t val_end;  /* after the value */
    size_t last_key; /* the last member's key (when any) */
    size_t last_end; /* after the last member's value */
    int empty;
    size_t close; /* the object's closing brace */
};

/* Scans the object whose '{' is at s[i] for key. 0, or -1 when the text is
 * not what valid JSON would be. */
static int scan_object(const char *s, size_t i, const char *key, struct member *m)
{
    size_t klen = strlen(key);

    memset(m, 0, sizeof(*m));
    if (s[i] != '{') {
        return -1;
    }
    i = skip_ws(s, i + 1);
    if (s[i] == '}') {
        m->empty = 1;
        m->close = i;
        return 0;
    }
    for (;;) {
        size_t k = i;
        size_t kend;

        if (s[i] != '"') {
            return -1;
        }
        kend = skip_string(s, i);
        i = skip_ws(s, kend);
        if (s[i] != ':') {
            return -1;
        }
        i = skip_ws(s, i + 1);
        if (kend - k - 2 == klen && strncmp(s + k + 1, key, klen) == 0) {
            m->found = 1;
            m->key = k;
            m->val = i;
            m->val_end = skip_value(s, i);
        }
        m->last_key = k;
        i = skip_value(s, i);
        m->last_end = i;
        i = skip_ws(s, i);
        if (s[i] == '}') {
            m->close = i;
            return 0;
        }
        if (s[i] != ',') {
            return -1;
        }
        i = skip_ws(s, i + 1);
    }
}

/* The indentation of the line holding s[i] when s[i] starts that line's
 * text, else NULL (an inline layout). */
static char *line_indent(const char *s, size_t i)
{
    size_t b = i;

    while (b > 0 && (s[b - 1] == ' ' || s[b - 1] == '\t')) {
        b--;
    }
    if (b > 0 && s[b - 1] != '\n') {
        return NULL;
    }
    return xstrndup(s + b, i - b);
}

/* value dumped at this indentation (multi-line) or inline. */
static char *dump_at(json_t *v, const char *indent)
{
    /* any value, not only objects and arrays (jansson's default) */
    char *d = json_dumps(v, JSON_ENCODE_ANY | (indent ? JSON_INDENT(2) : 0));
    size_t extra = 0;
    char *out;
    size_t o = 0;

    if (d == NULL) {
        abort(); /* out of memory: the only way jansson fails on a valid value */
    }
    if (indent == NULL) {
        return d;
    }
    for (const char *p = d; *p; p++) {
        extra += *p == '\n';
    }
    out = xmalloc(strlen(d) + extra * strlen(indent) + 1);
    for (const char *p = d; *p; p++) {
        out[o++] = *p;
        if (*p == '\n') {
            memcpy(out + o, indent, strlen(indent));
            o += strlen(indent);
        }
    }
    out[o] = '\0';
    free(d);
    return out;
}

static char *splice(const char *s, size_t from, size_t to, const char *ins)
{
    return xasprintf("%.*s%s%s", (int)from, s, ins, s + to);
}

/* Inserts "key": value into the object at s[obj] (scanned as m). */
static char *insert_member(const char *s, const struct member *m, const char *key, json_t *value)
{
    char *ind;
    char *v;
    char *ins;
    char *r;

    if (m->empty) {
        size_t open = m->close;
        char *outer;

        while (s[open] != '{') {
            open--;
        }
        outer = line_indent(s, open);
        if (outer == NULL) {
            size_t b = open;

            while (b > 0 && s[b - 1] != '\n') {
                b--;
            }
            outer = xstrndup(s + b, strspn(s + b, " \t"));
        }
        ind = xasprintf("%s  ", outer);
        v = dump_at(value, ind);
        ins = xasprintf("\n%s\"%s\": %s\n%s", ind, key, v, outer);
        r = splice(s, open + 1, m->close, ins);
        free(outer);
    }
    else {
        ind = line_indent(s, m->last_key);
        v = dump_at(value, ind);
        ins = ind ? xasprintf(",\n%s\"%s\": %s", ind, key, v) : xasprintf(", \"%s\": %s", key, v);
        r = splice(s, m->last_end, m->last_end, ins);
    }
    free(ind);
    free(v);
    free(ins);
    return r;
}

char *sbx_jsonedit_set(const char *text, const char *group, const char *key, json_t *value)
{
    size_t top = skip_ws(text, 0);
    struct member g;
    struct member k;
    char *r;

    if (scan_object(text, top, group, &g) < 0) {
        return NULL;
    }
    if (!g.found) {
        json_t *wrap = json_pack("{s:O}", key, value);

        r = insert_member(text, &g, group, wrap);
        json_decref(wrap);
        return r;
    }
    if (scan_object(text, g.val, key, &k) < 0) {
        return NULL;
    }
    if (!k.found) {
        return insert_member(text, &k, key, value);
    }
    {
        char *ind = line_indent(text, k.key);
        int multiline = memchr(text + k.val, '\n', k.val_end - k.val) != NULL ||
                        (ind != NULL && text[g.val] == '{' &&
                         memchr(text + g.val, '\n', k.key - g.val) != NULL);
        char *v = dump_at(value, multiline ? (ind ? ind : "") : NULL);

        r = splice(text, k.val, k.val_end, v);
        free(v);
        free(ind);
    }
    return r;
}
