/* sbx_host.h - core services offered to plugins (SDK, plugin ABI v1).
 *
 * The core passes `const struct sbx_host_api *` to every plugin's init(). The
 * table is append-only: `size` tells how much of it this core has, and
 * appending a member bumps SBX_PLUGIN_ABI_MINOR. Plugins never call core
 * symbols directly (they link with -Wl,--no-undefined) and never own global
 * library state (no curl_global_init). They may link Debian libraries of their
 * own, such as jansson, for parsing.
 */
#ifndef SBX_SDK_HOST_H
#define SBX_SDK_HOST_H

#include <stddef.h>
#include <stdint.h>

#include "sbx_error.h"

enum sbx_log_level {
    SBX_LOG_ERROR = 0,
    SBX_LOG_WARN = 1,
    SBX_LOG_INFO = 2,
    SBX_LOG_DEBUG = 3,
};

/* Opaque: an instance's validated options. */
struct sbx_options;

/* One HTTP exchange through the core's libcurl wrapper. */
struct sbx_http_request {
    const char *method;         /* "GET", "POST", "DELETE", ... */
    const char *url;            /* full URL; with unix_socket, "http://localhost/..." */
    const char *unix_socket;    /* path of a unix socket to connect to, or NULL */
    const char *const *headers; /* "Name: value" strings, NULL-terminated, or NULL */
    const char *body;           /* request body or NULL */
    size_t body_len;
    long timeout_ms;         /* whole transfer; 0 = none (streams) */
    long connect_timeout_ms; /* 0 = 10 s */
    /* Streaming: when set, the body is handed to this callback as it arrives
     * (and not kept in the response). Return 0 to continue, non-zero to abort. */
    int (*on_data)(void *userdata, const char *data, size_t len);
    void *userdata;
    /* When non-NULL and it becomes non-zero (another thread may set it), the
     * transfer is aborted soon after (within about a second when nothing flows)
     * with SBX_E_CANCELLED. */
    const volatile int *cancel;
};

struct sbx_http_response {
    long status; /* HTTP status code */
    char *body;  /* NUL-terminated body (when not streamed), owned by the core */
    size_t body_len;
    char *content_type;
};

/* A name and a value: environment variables, labels. */
struct sbx_kv {
    const char *name;
    const char *value;
};

struct sbx_lease; /* defined in sbx_credential.h */

struct sbx_host_api {
    uint32_t size; /* sizeof(struct sbx_host_api) of the running core */

    /* Logs one line to stderr, prefixed with "[plugin:instance]". Never pass
     * secret values. */
    void (*log)(const char *instance, enum sbx_log_level level, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));

    /* Sets *err (if err and *err is NULL) and returns -1. printf-style. */
    int (*error_set)(sbx_error_t **err, int code, const char *fmt, ...)
        __attribute__((format(printf, 3, 4)));
    /* Prefixes context onto an existing error ("context: old message");
     * returns -1. */
    int (*error_wrap)(sbx_error_t **err, const char *fmt, ...)
        __attribute__((format(printf, 2, 3)));

    /* Option getters: the option must be declared in the plugin's table; an
     * absent optional key without a default reads as NULL / 0 / false. */
    const char *(*opt_string)(const struct sbx_options *o, const char *key);
    int64_t (*opt_int)(const struct sbx_options *o, const char *key); /* INT, SIZE, DURATION */
    int (*opt_bool)(const struct sbx_options *o, const char *key);
    double (*opt_float)(const struct sbx_options *o, const char *key);
    /* STRINGS: NULL-terminated, owned by the options; NULL if absent. */
    const char *const *(*opt_strings)(const struct sbx_options *o, const char *key);
    /* "FILE:LINE" of the key in the configuration, or the instance name. */
    const char *(*opt_where)(const struct sbx_options *o, const char *key);
    /* The instance's name ("docker", "ci-docker", ...). */
    const char *(*instance_name)(const struct sbx_options *o);

    /* HTTP through the core's libcurl. Returns 0 when an HTTP status was
     * received (any status), -1 on transport failure (connect, timeout,
     * cancel). Free the response with http_response_free. */
    int (*http)(const struct sbx_http_request *req, struct sbx_http_response *resp,
                sbx_error_t **err);
    void (*http_response_free)(struct sbx_http_response *resp);

    /* Zeroes memory holding a secret (explicit_bzero). */
    void (*secret_zero)(void *p, size_t n);

    /* Credential leases (core-owned memory; values are zeroed on free). */
    int (*lease_add_secret)(struct sbx_lease *lease, const char *name, const char *value,
                            sbx_error_t **err);

    /* Frees an error made by error_set and sets *err to NULL (NULL-safe). */
    void (*error_free)(sbx_error_t **err);

    /* (added, ABI 1.10) http with the request body read from source as it is sent
     * (chunked; req->body ignored): source fills buf with up to cap bytes, *n 0 at the
     * end, non-zero to stop (the call then fails with SBX_E_CANCELLED). Check size
     * before calling: a core older than 1.10 has no such member. */
    int (*http_upload)(const struct sbx_http_request *req,
                       int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                       struct sbx_http_response *resp, sbx_error_t **err);
};

#endif
