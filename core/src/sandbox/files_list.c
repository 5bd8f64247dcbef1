/* files_list.c - `sbx task files T PATH` (files.h): the listing is made by
 * `find` run in the sandbox (its own root and mounts, so nothing is resolved on
 * the host) and its output is parsed here as hostile data: bounded, every field
 * checked, names kept as bytes given. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sandbox/files.h"
#include "sandbox/task_int.h"
#include "util/xalloc.h"

#define LIST_OUT_MAX (4u << 20)

struct collect {
    char *out;
    size_t len;
    int over;
    char errtext[256];
    size_t errlen;
};

static int on_output(void *ud, int stream, const char *data, size_t len)
{
    struct collect *c = ud;

    if (stream == 2) {
        size_t n = sizeof(c->errtext) - 1 - c->errlen;

        n = len < n ? len : n;
        memcpy(c->errtext + c->errlen, data, n);
        c->errlen += n;
        c->errtext[c->errlen] = '\0';
        return 0;
    }
    if (c->len + len > LIST_OUT_MAX) {
        c->over = 1;
        return 0; /* drop the rest; the listing says it was cut */
    }
    c->out = xrealloc(c->out, c->len + len + 1);
    memcpy(c->out + c->len, data, len);
    c->len += len;
    return 0;
}

static const char *type_name(char y)
{
    switch (y) {
    case 'f':
        return "file";
    case 'd':
        return "dir";
    case 'l':
        return "symlink";
    default:
        return "other";
    }
}

static int by_name(const void *a, const void *b)
{
    const char *x = json_string_value(json_object_get(*(json_t *const *)a, "name"));
    const char *y = json_string_value(json_object_get(*(json_t *const *)b, "name"));

    return strcmp(x, y);
}

/* One record: "DEPTH\tY\tMODE\tSIZE\tMTIME\tNAME" */
static json_t *parse_one(char *rec, int *depth)
{
    char y;
    unsigned mode;
    long long size;
    double mtime;
    int used = 0;
    char m[8];

    if (sscanf(rec, "%d\t%c\t%o\t%lld\t%lf\t%n", depth, &y, &mode, &size, &mtime, &used) != 5 ||
        used == 0 || *depth < 0 || *depth > 1 || size < 0 || mode > 07777 || mtime < 0 ||
        mtime > 1e12) {
        return NULL;
    }
    json_t *name = json_string(rec + used);

    if (name == NULL) { /* not UTF-8: each byte above ASCII shown as '?' */
        for (char *p = rec + used; *p; p++) {
            *p = (unsigned char)*p >= 0x80 ? '?' : *p;
        }
        name = json_string(rec + used);
    }
    snprintf(m, sizeof(m), "%04o", mode);
    return json_pack("{s:o, s:s, s:s, s:I, s:I}", "name", name, "type", type_name(y), "mode", m,
                     "size", (json_int_t)size, "mtime", (json_int_t)mtime);
}

json_t *sbx_task_files_list(struct sbx_task *t, const char *path, sbx_error_t **err)
{
    /* -H: the path itself may be a symlink to a directory (resolved inside) */
    const char *argv[] = {
        "find", "-H", path, "-maxdepth", "1", "-printf", "%d\\t%y\\t%m\\t%s\\t%T@\\t%f\\0", NULL};
    struct collect c = {0};
    json_t *entries = json_array();
    json_t *self = NULL;
    int status = 0;
    size_t off = 0;
    int truncated = 0;

    if (sbx_files_path_ok(path, "files", err) < 0) {
        json_decref(entries);
        return NULL;
    }
    if (sbx_task_exec(t, argv, NULL, 0, on_output, &c, NULL, &status, err) < 0) {
        json_decref(entries);
        free(c.out);
        sbx_error_wrap(err, "listing %.300s", path);
        return NULL;
    }
    if (status != 0 && c.len == 0) {
        c.errtext[strcspn(c.errtext, "\n")] = '\0';
        sbx_error_set(err, strstr(c.errtext, "No such file") ? SBX_E_NOTFOUND : SBX_E_ENGINE,
                      "task %s: listing %.300s: %s", t->id, path,
                      c.errtext[0] ? c.errtext : "find failed in the sandbox");
        json_decref(entries);
        free(c.out);
        return NULL;
    }
    while (off < c.len) {
        char *rec = c.out + off;
        char *end = memchr(rec, '\0', c.len - off);
        int depth = 0;
        json_t *e;

        if (end == NULL) {
            truncated = 1; /* a record cut by the bound */
            break;
        }
        off = (size_t)(end - c.out) + 1;
        if ((e = parse_one(rec, &depth)) == NULL) {
            sbx_error_set(err, SBX_E_PROTOCOL, "task %s: listing %.300s: malformed line from find",
                          t->id, path);
            json_decref(entries);
            json_decref(self);
            free(c.out);
            return NULL;
        }
        if (depth == 0) {
            json_decref(self);
            self = e;
        }
        else if (json_array_size(entries) >= SBX_FILES_LIST_MAX) {
            json_decref(e);
            truncated = 1;
        }
        else {
            json_array_append_new(entries, e);
        }
    }
    free(c.out);
    if (self != NULL && strcmp(json_string_value(json_object_get(self, "type")), "dir") != 0) {
        json_array_append(entries, self); /* a file lists itself */
    }
    json_decref(self);
    if (json_array_size(entries) > 1) {
        size_t n = json_array_size(entries);
        json_t **v = xcalloc(n, sizeof(*v));

        for (size_t i = 0; i < n; i++) {
            v[i] = json_incref(json_array_get(entries, i));
        }
        qsort(v, n, sizeof(*v), by_name);
        json_array_clear(entries);
        for (size_t i = 0; i < n; i++) {
            json_array_append_new(entries, v[i]);
        }
        free(v);
    }
    return json_pack("{s:s, s:o, s:b}", "path", path, "entries", entries, "truncated",
                     truncated || c.over);
}
