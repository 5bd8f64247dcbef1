/* host_api_mock.c - the host vtable without the core (host_api_mock.h). */
#include "host_api_mock.h"

#include "test_common.h"

#define MOCK_LOG_MAX 16384

static struct {
    const char *instance;
    const struct sbx_mock_opt *opts;
    char log[MOCK_LOG_MAX];
    size_t log_len;
} mock;

static const struct sbx_mock_opt *find(const char *key)
{
    for (size_t i = 0; mock.opts != NULL && mock.opts[i].key != NULL; i++) {
        if (strcmp(mock.opts[i].key, key) == 0) {
            return &mock.opts[i];
        }
    }
    return NULL;
}

static void m_log(const char *instance, enum sbx_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    size_t left = sizeof(mock.log) - mock.log_len;
    va_list ap;
    int n;

    (void)instance;
    if (left < 2) {
        return;
    }
    n = snprintf(mock.log + mock.log_len, left, "%s: ", names[level & 3]);
    mock.log_len += n > 0 && (size_t)n < left ? (size_t)n : 0;
    left = sizeof(mock.log) - mock.log_len;
    va_start(ap, fmt);
    n = vsnprintf(mock.log + mock.log_len, left, fmt, ap);
    va_end(ap);
    mock.log_len += n > 0 && (size_t)n < left - 1 ? (size_t)n : 0;
    mock.log[mock.log_len++] = '\n';
    mock.log[mock.log_len] = '\0';
}

static int m_error_set(sbx_error_t **err, int code, const char *fmt, ...)
{
    va_list ap;
    char *msg = NULL;

    if (err == NULL || *err != NULL) {
        return -1;
    }
    va_start(ap, fmt);
    if (vasprintf(&msg, fmt, ap) < 0) {
        abort();
    }
    va_end(ap);
    *err = calloc(1, sizeof(**err));
    if (*err == NULL) {
        abort();
    }
    (*err)->code = code;
    (*err)->msg = msg;
    return -1;
}

static int m_error_wrap(sbx_error_t **err, const char *fmt, ...)
{
    va_list ap;
    char *ctx = NULL;
    char *msg = NULL;

    if (err == NULL || *err == NULL) {
        return -1;
    }
    va_start(ap, fmt);
    if (vasprintf(&ctx, fmt, ap) < 0 || asprintf(&msg, "%s: %s", ctx, (*err)->msg) < 0) {
        abort();
    }
    va_end(ap);
    free(ctx);
    free((*err)->msg);
    (*err)->msg = msg;
    return -1;
}

static void m_error_free(sbx_error_t **err)
{
    if (err != NULL && *err != NULL) {
        free((*err)->msg);
        free(*err);
        *err = NULL;
    }
}

static const char *m_opt_string(const struct sbx_options *o, const char *key)
{
    const struct sbx_mock_opt *v = find(key);

    (void)o;
    return v ? v->str : NULL;
}

static int64_t m_opt_int(const struct sbx_options *o, const char *key)
{
    const struct sbx_mock_opt *v = find(key);

    (void)o;
    return v ? v->num : 0;
}

static int m_opt_bool(const struct sbx_options *o, const char *key)
{
    return m_opt_int(o, key) != 0;
}

static double m_opt_float(const struct sbx_options *o, const char *key)
{
    return (double)m_opt_int(o, key);
}

static const char *const *m_opt_strings(const struct sbx_options *o, const char *key)
{
    (void)o;
    (void)key;
    return NULL;
}

static const char *m_opt_where(const struct sbx_options *o, const char *key)
{
    (void)o;
    (void)key;
    return "mock.conf:1";
}

static const char *m_instance_name(const struct sbx_options *o)
{
    (void)o;
    return mock.instance;
}

int sbx_mock_http(const struct sbx_http_request *req, struct sbx_http_response *resp,
                  sbx_error_t **err)
{
    const char *method = req->method;
    const char *url = req->url;
    long status;
    const char *body;

    check_expected_ptr(method);
    check_expected_ptr(url);
    status = mock_type(long);
    body = mock_ptr_type(const char *);
    memset(resp, 0, sizeof(*resp));
    if (status == 0) {
        return m_error_set(err, SBX_E_ENGINE, "mock: connection refused");
    }
    resp->status = status;
    resp->body = strdup(body ? body : "");
    resp->body_len = strlen(resp->body);
    resp->content_type = strdup("application/json");
    return 0;
}

static void m_http_response_free(struct sbx_http_response *resp)
{
    free(resp->body);
    free(resp->content_type);
    memset(resp, 0, sizeof(*resp));
}

static void m_secret_zero(void *p, size_t n)
{
    explicit_bzero(p, n);
}

static int m_lease_add_secret(struct sbx_lease *lease, const char *name, const char *value,
                              sbx_error_t **err)
{
    struct sbx_kv *kv = realloc(lease->secrets, (lease->n_secrets + 1) * sizeof(*kv));

    (void)err;
    if (kv == NULL) {
        abort();
    }
    kv[lease->n_secrets].name = strdup(name);
    kv[lease->n_secrets].value = strdup(value);
    lease->secrets = kv;
    lease->n_secrets++;
    return 0;
}

static const struct sbx_host_api api = {
    .size = sizeof(struct sbx_host_api),
    .log = m_log,
    .error_set = m_error_set,
    .error_wrap = m_error_wrap,
    .opt_string = m_opt_string,
    .opt_int = m_opt_int,
    .opt_bool = m_opt_bool,
    .opt_float = m_opt_float,
    .opt_strings = m_opt_strings,
    .opt_where = m_opt_where,
    .instance_name = m_instance_name,
    .http = sbx_mock_http,
    .http_response_free = m_http_response_free,
    .secret_zero = m_secret_zero,
    .lease_add_secret = m_lease_add_secret,
    .error_free = m_error_free,
};

void sbx_host_mock_init(const char *instance, const struct sbx_mock_opt *opts)
{
    memset(&mock, 0, sizeof(mock));
    mock.instance = instance;
    mock.opts = opts;
}

const struct sbx_host_api *sbx_host_mock_api(void)
{
    return &api;
}

const struct sbx_options *sbx_host_mock_options(void)
{
    /* opaque to the plugin: every getter reads the table set by init */
    return (const struct sbx_options *)&mock;
}

const char *sbx_host_mock_log(void)
{
    return mock.log;
}

void sbx_host_mock_lease_free(struct sbx_lease *lease)
{
    for (size_t i = 0; i < lease->n_secrets; i++) {
        free((char *)lease->secrets[i].name);
        free((char *)lease->secrets[i].value);
    }
    free(lease->secrets);
    lease->secrets = NULL;
    lease->n_secrets = 0;
}
