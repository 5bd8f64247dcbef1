/* error.c - heap errors with printf-style messages. */
#include "util/error.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

int sbx_error_setv(sbx_error_t **err, int code, const char *fmt, va_list ap)
{
    struct sbx_error *e;

    if (err == NULL || *err != NULL) {
        return -1;
    }
    e = xcalloc(1, sizeof(*e));
    e->code = code;
    if (vasprintf(&e->msg, fmt, ap) < 0) {
        abort();
    }
    /* keep errors to one line */
    for (char *p = e->msg; *p; p++) {
        if (*p == '\n' || *p == '\r') {
            *p = ' ';
        }
    }
    *err = e;
    return -1;
}

int sbx_error_set(sbx_error_t **err, int code, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = sbx_error_setv(err, code, fmt, ap);
    va_end(ap);
    return r;
}

int sbx_error_wrapv(sbx_error_t **err, const char *fmt, va_list ap)
{
    char *ctx = NULL;
    char *msg = NULL;

    if (err == NULL || *err == NULL) {
        return -1;
    }
    if (vasprintf(&ctx, fmt, ap) < 0) {
        abort();
    }
    if (asprintf(&msg, "%s: %s", ctx, (*err)->msg) < 0) {
        abort();
    }
    free(ctx);
    free((*err)->msg);
    (*err)->msg = msg;
    return -1;
}

int sbx_error_wrap(sbx_error_t **err, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = sbx_error_wrapv(err, fmt, ap);
    va_end(ap);
    return r;
}

void sbx_error_free(sbx_error_t **err)
{
    if (err == NULL || *err == NULL) {
        return;
    }
    free((*err)->msg);
    free(*err);
    *err = NULL;
}

void sbx_error_freep(sbx_error_t **err)
{
    sbx_error_free(err);
}

const char *sbx_error_msg(const sbx_error_t *err)
{
    return err ? err->msg : "(no error)";
}
