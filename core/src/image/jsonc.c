/* jsonc.c - JSON with comments and trailing commas (jsonc.h). */
#include "image/jsonc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

/* Blanks [from, to) but keeps newlines. */
static void blank(char *t, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++) {
        if (t[i] != '\n') {
            t[i] = ' ';
        }
    }
}

void sbx_jsonc_strip(char *t, size_t len)
{
    size_t i = 0;
    size_t comma = (size_t)-1; /* a comma that may be trailing */

    while (i < len) {
        char ch = t[i];

        if (ch == '"') {
            comma = (size_t)-1;
            for (i++; i < len && t[i] != '"'; i++) {
                if (t[i] == '\\' && i + 1 < len) {
                    i++;
                }
            }
            i++;
        }
        else if (ch == '/' && i + 1 < len && t[i + 1] == '/') {
            size_t s = i;

            while (i < len && t[i] != '\n') {
                i++;
            }
            blank(t, s, i);
        }
        else if (ch == '/' && i + 1 < len && t[i + 1] == '*') {
            size_t s = i;

            for (i += 2; i + 1 < len && !(t[i] == '*' && t[i + 1] == '/'); i++) {
            }
            i = i + 1 < len ? i + 2 : len; /* an open comment runs to the end */
            blank(t, s, i);
        }
        else if (ch == ',') {
            comma = i++;
        }
        else if (ch == '}' || ch == ']') {
            if (comma != (size_t)-1) {
                t[comma] = ' ';
            }
            comma = (size_t)-1;
            i++;
        }
        else {
            if (ch != ' ' && ch != '\t' && ch != '\n' && ch != '\r') {
                comma = (size_t)-1;
            }
            i++;
        }
    }
}

json_t *sbx_jsonc_load_file(const char *path, size_t max, size_t flags, json_error_t *jerr)
{
    FILE *f = fopen(path, "r");
    char *text;
    size_t n;
    json_t *root;

    if (f == NULL) {
        memset(jerr, 0, sizeof(*jerr));
        snprintf(jerr->text, sizeof(jerr->text), "cannot read: %s", strerror(errno));
        return NULL;
    }
    text = xmalloc(max + 2);
    n = fread(text, 1, max + 1, f);
    fclose(f);
    if (n > max) {
        free(text);
        memset(jerr, 0, sizeof(*jerr));
        snprintf(jerr->text, sizeof(jerr->text), "larger than %zu bytes", max);
        return NULL;
    }
    text[n] = '\0';
    sbx_jsonc_strip(text, n);
    root = json_loadb(text, n, flags, jerr);
    free(text);
    return root;
}
