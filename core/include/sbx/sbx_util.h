/* sbx_util.h - the plugin SDK helper library (core/sdk/, the static library
 * sbx_sdk_util that sbx_add_plugin links into every plugin and the core links
 * too): cleanup attributes, allocation that aborts on OOM, URL encoding and
 * parsing through libcurl's URL API, and error helpers. Nothing here owns
 * global state: libcurl's URL functions need no curl_global_init. Its
 * symbols are hidden, so each plugin carries its own copy.
 * See docs/plugins.md, "The SDK helper library". */
#ifndef SBX_SDK_UTIL_H
#define SBX_SDK_UTIL_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "sbx_error.h"
#include "sbx_host.h"

/* --- cleanup attributes (crun, bubblewrap) --- */

static inline void sbx_freep(void *p)
{
    void **pp = (void **)p;

    free(*pp);
    *pp = NULL;
}

static inline void sbx_closep(int *fd)
{
    int saved = errno;

    if (*fd >= 0) {
        close(*fd);
        *fd = -1;
    }
    errno = saved;
}

static inline void sbx_fclosep(FILE **f)
{
    int saved = errno;

    if (*f != NULL) {
        fclose(*f);
        *f = NULL;
    }
    errno = saved;
}

#define cleanup_free __attribute__((cleanup(sbx_freep)))
#define cleanup_close __attribute__((cleanup(sbx_closep)))
#define cleanup_fclose __attribute__((cleanup(sbx_fclosep)))

/* Hands ownership out: *out = steal_pointer(&buf); buf is NULL after. */
#define steal_pointer(pp)                                                                          \
    __extension__({                                                                                \
        __typeof__(*(pp)) steal_tmp_ = *(pp);                                                      \
        *(pp) = NULL;                                                                              \
        steal_tmp_;                                                                                \
    })

static inline int sbx_steal_fd(int *fd)
{
    int r = *fd;

    *fd = -1;
    return r;
}

/* --- allocation: abort with "sbx: out of memory" instead of returning NULL --- */

void *xmalloc(size_t n);
void *xcalloc(size_t nmemb, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* --- URLs, through libcurl's URL API --- */

/* Percent-encodes s for a path segment, a query value or a form field
 * (everything but A-Z a-z 0-9 - . _ ~; curl_easy_escape). Caller frees. */
char *sbx_url_escape(const char *s);
/* 1 when url parses (curl_url) as http:// or https:// and its host is the
 * loopback: localhost, 127.0.0.0/8 or ::1 (so "http://127.0.0.1.evil.example"
 * is not); 0 otherwise, also when it does not parse. */
int sbx_url_is_loopback(const char *url);
/* 1 when url parses (curl_url) with scheme http or https and a host, and
 * carries no query, fragment or user info; 0 otherwise. */
int sbx_url_is_http_base(const char *url);

/* --- time: the one monotonic clock (CLOCK_MONOTONIC) --- */

int64_t sbx_mono_ns(void);
int64_t sbx_mono_ms(void);

/* --- identifiers: one validator, two rules --- */

enum sbx_id_rule {
    /* task ids: 1-64 of [A-Za-z0-9_.-], starting with a letter or digit (they
     * name directories: never "", ".", ".." or a path) */
    SBX_ID_TASK = 0,
    /* job ids and the names the scheduler, the store and the runner's API
     * take: 1-63 of [A-Za-z0-9_.:-] */
    SBX_ID_NAME = 1,
};

/* 1 when id follows rule, 0 otherwise (NULL included). */
int sbx_id_valid(const char *id, enum sbx_id_rule rule);

/* --- errors made by the core (host->error_set) --- */

/* Non-zero when the running core's host vtable has member (its size field
 * covers it): members appended in a later minor are absent on older cores. */
#define SBX_HOST_HAS(host, member)                                                                 \
    ((host)->size >= offsetof(struct sbx_host_api, member) + sizeof((host)->member))

/* The message of an error, or "unknown error" for NULL. */
static inline const char *sbx_err_msg(const sbx_error_t *e)
{
    return e != NULL && e->msg != NULL ? e->msg : "unknown error";
}

/* Logs "<what>: <message>" at level through host->log for instance, then
 * frees the error with host->error_free (a plugin never frees a core error
 * by hand). NULL-safe; *err is NULL after. */
void sbx_err_log_free(const struct sbx_host_api *host, const char *instance,
                      enum sbx_log_level level, sbx_error_t **err, const char *what);

#endif
