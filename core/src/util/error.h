/* error.h - core side of the error contract (see docs/error_handling.md). */
#ifndef SBX_UTIL_ERROR_H
#define SBX_UTIL_ERROR_H

#include <stdarg.h>

#include "sbx/sbx_error.h"

/* Sets *err (when err != NULL and *err == NULL) and returns -1. */
int sbx_error_set(sbx_error_t **err, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
int sbx_error_setv(sbx_error_t **err, int code, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));
/* Prefixes "context: " to an existing error; returns -1. */
int sbx_error_wrap(sbx_error_t **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int sbx_error_wrapv(sbx_error_t **err, const char *fmt, va_list ap)
    __attribute__((format(printf, 2, 0)));
void sbx_error_free(sbx_error_t **err);
void sbx_error_freep(sbx_error_t **err);
const char *sbx_error_msg(const sbx_error_t *err);

#define cleanup_error __attribute__((cleanup(sbx_error_freep)))

#endif
