/* host.c - core services for plugins: logging, errors, options, HTTP,
 * secret zeroing and lease values. */
#include "plugin/host.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "http/http.h"
#include "plugin/options.h"
#include "util/error.h"
#include "util/log.h"
#include "util/xalloc.h"

static void host_log(const char *instance, enum sbx_log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    sbx_log_srcv(instance, level, fmt, ap);
    va_end(ap);
}

static int host_error_set(sbx_error_t **err, int code, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = sbx_error_setv(err, code, fmt, ap);
    va_end(ap);
    return r;
}

static int host_error_wrap(sbx_error_t **err, const char *fmt, ...)
{
    va_list ap;
    int r;

    va_start(ap, fmt);
    r = sbx_error_wrapv(err, fmt, ap);
    va_end(ap);
    return r;
}

static const struct sbx_opt_value *value(const struct sbx_options *o, const char *key)
{
    const struct sbx_opt_value *v = sbx_options_get(o, key);

    if (v == NULL) {
        sbx_log(SBX_LOG_WARN, "plugin %s asked for undeclared option '%s'", o ? o->plugin : "?",
                key);
    }
    return v;
}

static const char *host_opt_string(const struct sbx_options *o, const char *key)
{
    const struct sbx_opt_value *v = value(o, key);

    return v && v->present ? v->str : NULL;
}

static int64_t host_opt_int(const struct sbx_options *o, const char *key)
{
    const struct sbx_opt_value *v = value(o, key);

    return v && v->present ? v->i : 0;
}

static int host_opt_bool(const struct sbx_options *o, const char *key)
{
    const struct sbx_opt_value *v = value(o, key);

    return v && v->present ? (int)v->i : 0;
}

static double host_opt_float(const struct sbx_options *o, const char *key)
{
    const struct sbx_opt_value *v = value(o, key);

    return v && v->present ? v->d : 0.0;
}

static const char *const *host_opt_strings(const struct sbx_options *o, const char *key)
{
    const struct sbx_opt_value *v = value(o, key);

    return v && v->present ? (const char *const *)v->strv : NULL;
}

static const char *host_opt_where(const struct sbx_options *o, const char *key)
{
    const struct sbx_opt_value *v = sbx_options_get(o, key);

    return v && v->where ? v->where : (o ? o->instance : "?");
}

static const char *host_instance_name(const struct sbx_options *o)
{
    return o ? o->instance : "?";
}

static void host_secret_zero(void *p, size_t n)
{
    if (p != NULL) {
        explicit_bzero(p, n);
    }
}

static int host_lease_add_secret(struct sbx_lease *lease, const char *name, const char *value,
                                 sbx_error_t **err)
{
    if (lease == NULL || name == NULL || value == NULL || name[0] == '\0') {
        return sbx_error_set(err, SBX_E_GENERIC, "lease: a secret needs a name and a value");
    }
    for (const char *p = name; *p; p++) {
        if (!((*p >= 'A' && *p <= 'Z') || (*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') ||
              *p == '_')) {
            return sbx_error_set(err, SBX_E_PROTOCOL,
                                 "lease: secret name '%s' is not a valid "
                                 "environment variable name",
                                 name);
        }
    }
    lease->secrets = xrealloc(lease->secrets, (lease->n_secrets + 1) * sizeof(*lease->secrets));
    lease->secrets[lease->n_secrets].name = xstrdup(name);
    lease->secrets[lease->n_secrets].value = xstrdup(value);
    lease->n_secrets++;
    return 0;
}

void sbx_lease_clear(struct sbx_lease *lease)
{
    if (lease == NULL) {
        return;
    }
    for (size_t i = 0; i < lease->n_secrets; i++) {
        char *v = (char *)lease->secrets[i].value;

        explicit_bzero(v, strlen(v));
        free(v);
        free((char *)lease->secrets[i].name);
    }
    free(lease->secrets);
    lease->secrets = NULL;
    lease->n_secrets = 0;
}

static const struct sbx_host_api host_api = {
    .size = sizeof(struct sbx_host_api),
    .log = host_log,
    .error_set = host_error_set,
    .error_wrap = host_error_wrap,
    .opt_string = host_opt_string,
    .opt_int = host_opt_int,
    .opt_bool = host_opt_bool,
    .opt_float = host_opt_float,
    .opt_strings = host_opt_strings,
    .opt_where = host_opt_where,
    .instance_name = host_instance_name,
    .http = sbx_http_request,
    .http_response_free = sbx_http_response_free,
    .secret_zero = host_secret_zero,
    .lease_add_secret = host_lease_add_secret,
    .error_free = sbx_error_free,
    .http_upload = sbx_http_upload, /* (added, ABI 1.10) */
};

const struct sbx_host_api *sbx_host_api_get(void)
{
    return &host_api;
}
