/* xalloc.c - allocation that aborts on OOM (SDK helper library: the core
 * and every plugin use this one family). */
#include "sbx/sbx_util.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(void)
{
    fputs("sbx: out of memory\n", stderr);
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL) {
        oom();
    }
    return p;
}

void *xcalloc(size_t nmemb, size_t size)
{
    void *p = calloc(nmemb ? nmemb : 1, size ? size : 1);

    if (p == NULL) {
        oom();
    }
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);

    if (q == NULL) {
        oom();
    }
    return q;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s ? s : "");

    if (p == NULL) {
        oom();
    }
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    char *p = strndup(s, n);

    if (p == NULL) {
        oom();
    }
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;

    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0) {
        oom();
    }
    va_end(ap);
    return s;
}
