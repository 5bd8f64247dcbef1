/* opensandbox_config.c - provider_opensandbox: options, label rules, time
 * and quoting helpers, and the one-line form of the server's error bodies. */
#include "opensandbox.h"

#include <ctype.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

const struct sbx_option osb_options[] = {
    /* `url` is required, but is checked in init(): the built-in instance
     * `opensandbox` exists in every configuration and must still load for
     * `sbx config check` when nobody uses it. */
    {"url", SBX_OPT_STRING, NULL, 0,
     "base URL of the OpenSandbox lifecycle server, e.g. http://10.0.0.5:8080"},
    {"api_key_env", SBX_OPT_STRING, "OPEN_SANDBOX_API_KEY", 0,
     "name of the environment variable holding the API key"},
    {"image", SBX_OPT_STRING, NULL, 0, "image for every sandbox (overrides the task's image)"},
    {"snapshot", SBX_OPT_STRING, NULL, 0, "create sandboxes from this snapshot id instead"},
    {"entrypoint", SBX_OPT_STRINGS, NULL, 0,
     "the sandbox's main process (default [\"tail\", \"-f\", \"/dev/null\"])"},
    {"workdir", SBX_OPT_STRING, NULL, 0, "working directory of execs (default: execd's)"},
    {"host_mounts", SBX_OPT_BOOL, "false", 0,
     "mount the worktree and caches as host volumes (server must allow the paths)"},
    {"create_timeout", SBX_OPT_DURATION, "5m", 0, "create and wait until Running"},
    {"ready_timeout", SBX_OPT_DURATION, "30s", 0, "wait for execd to answer /ping"},
    {"request_timeout", SBX_OPT_DURATION, "60s", 0, "any other lifecycle call"},
    {"timeout_cap", SBX_OPT_DURATION, "24h", 0,
     "the server's max_sandbox_timeout_seconds; longer lifetimes are renewed"},
    {"renew_before", SBX_OPT_DURATION, "10m", 0, "renew the expiration this long before it"},
    {"poll_interval", SBX_OPT_INT, "500", 0, "milliseconds between state polls"},
    SBX_OPTIONS_END,
};

static const char *const default_entrypoint[] = {"tail", "-f", "/dev/null", NULL};

static char *strip_slashes(const char *s)
{
    char *p = osb_strdup_opt(s);
    size_t n = strlen(p);

    while (n > 0 && p[n - 1] == '/') {
        p[--n] = '\0';
    }
    return p;
}

int osb_config_init(struct osb_ctx *c, const struct sbx_host_api *host,
                    const struct sbx_options *opts, sbx_error_t **err)
{
    const char *url, *keyenv, *key;
    int64_t poll;

    c->host = host;
    c->instance = host->instance_name(opts);
    url = host->opt_string(opts, "url");
    if (url == NULL || *url == '\0') {
        return host->error_set(err, SBX_E_CONFIG,
                               "%s: %s instance '%s' needs option 'url' (base URL of the "
                               "OpenSandbox lifecycle server)",
                               host->opt_where(opts, "url"), OSB_NAME, c->instance);
    }
    /* parsed by libcurl's URL API, as the requests will be */
    if (!sbx_url_is_http_base(url)) {
        return host->error_set(err, SBX_E_CONFIG,
                               "%s: option 'url' must start with http:// "
                               "or https:// and name a host (no query, fragment or user), got '%s'",
                               host->opt_where(opts, "url"), url);
    }
    c->url = strip_slashes(url);
    /* a url already ending in /v1 is taken as the versioned base */
    if (strlen(c->url) >= 3 && strcmp(c->url + strlen(c->url) - 3, "/v1") == 0) {
        c->base = osb_strdup_opt(c->url);
    }
    else {
        c->base = xasprintf("%s/v1", c->url);
    }
    keyenv = host->opt_string(opts, "api_key_env");
    c->api_key_env = osb_strdup_opt(keyenv);
    key = keyenv != NULL ? getenv(keyenv) : NULL;
    if (key != NULL && *key != '\0') {
        if (strpbrk(key, "\r\n") != NULL) {
            return host->error_set(err, SBX_E_CONFIG,
                                   "%s: the API key in $%s holds a line "
                                   "break",
                                   host->opt_where(opts, "api_key_env"), keyenv);
        }
        c->api_key = osb_strdup_opt(key);
    }
    else {
        host->log(c->instance, SBX_LOG_INFO,
                  "opensandbox: $%s is not set; calling %s without "
                  "an API key",
                  keyenv ? keyenv : "(none)", c->url);
    }
    c->image = host->opt_string(opts, "image");
    c->snapshot = host->opt_string(opts, "snapshot");
    c->workdir = host->opt_string(opts, "workdir");
    c->entrypoint = host->opt_strings(opts, "entrypoint");
    if (c->entrypoint == NULL || c->entrypoint[0] == NULL) {
        c->entrypoint = default_entrypoint;
    }
    c->host_mounts = host->opt_bool(opts, "host_mounts");
    c->create_timeout = host->opt_int(opts, "create_timeout");
    c->ready_timeout = host->opt_int(opts, "ready_timeout");
    c->request_timeout = host->opt_int(opts, "request_timeout");
    c->timeout_cap = host->opt_int(opts, "timeout_cap");
    c->renew_before = host->opt_int(opts, "renew_before");
    poll = host->opt_int(opts, "poll_interval");
    if (c->create_timeout <= 0 || c->ready_timeout <= 0 || c->request_timeout <= 0) {
        return host->error_set(err, SBX_E_CONFIG,
                               "%s: %s instance '%s': create_timeout, "
                               "ready_timeout and request_timeout must be positive",
                               host->opt_where(opts, "create_timeout"), OSB_NAME, c->instance);
    }
    if (c->timeout_cap < 60) {
        return host->error_set(err, SBX_E_CONFIG,
                               "%s: option 'timeout_cap' must be at least "
                               "60 s (OpenSandbox's minimum timeout)",
                               host->opt_where(opts, "timeout_cap"));
    }
    if (poll < 10 || poll > 60000) {
        return host->error_set(err, SBX_E_CONFIG,
                               "%s: option 'poll_interval' must be 10..60000 "
                               "milliseconds",
                               host->opt_where(opts, "poll_interval"));
    }
    c->poll_ms = (long)poll;
    return 0;
}

void osb_config_fini(struct osb_ctx *c)
{
    if (c->api_key != NULL) {
        c->host->secret_zero(c->api_key, strlen(c->api_key));
        free(c->api_key);
        c->api_key = NULL;
    }
    free(c->api_key_env);
    free(c->base);
    free(c->url);
}

/* --- labels -------------------------------------------------------------- */

static int label_char(int ch)
{
    return isalnum(ch) || ch == '-' || ch == '_' || ch == '.';
}

int osb_label_valid(const char *s)
{
    size_t n = strlen(s);

    if (n == 0) {
        return 1;
    }
    if (n > OSB_LABEL_MAX || !isalnum((unsigned char)s[0]) || !isalnum((unsigned char)s[n - 1])) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        if (!label_char((unsigned char)s[i])) {
            return 0;
        }
    }
    return 1;
}

char *osb_label_map(const char *s)
{
    uint32_t h = 2166136261u; /* FNV-1a */
    char out[OSB_LABEL_MAX + 1];
    size_t n = 0;

    if (osb_label_valid(s)) {
        return osb_strdup_opt(s);
    }
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        h = (h ^ *p) * 16777619u;
    }
    if (!isalnum((unsigned char)s[0])) {
        out[n++] = 'x';
    }
    for (size_t i = 0; s[i] != '\0' && n < OSB_LABEL_MAX - 9; i++) {
        out[n++] = label_char((unsigned char)s[i]) ? s[i] : '_';
    }
    snprintf(out + n, sizeof(out) - n, "-%08x", h);
    return osb_strdup_opt(out);
}

/* --- time ---------------------------------------------------------------- */

int64_t osb_time_parse(const char *s)
{
    struct tm tm;
    const char *p;
    int64_t t;

    memset(&tm, 0, sizeof(tm));
    if (s == NULL) {
        return -1;
    }
    p = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (p == NULL) {
        return -1;
    }
    t = (int64_t)timegm(&tm);
    if (*p == '.') {
        p++;
        while (isdigit((unsigned char)*p)) {
            p++;
        }
    }
    if (*p == 'Z' || *p == 'z') {
        return p[1] == '\0' ? t : -1;
    }
    if ((*p == '+' || *p == '-') && isdigit((unsigned char)p[1]) && isdigit((unsigned char)p[2]) &&
        p[3] == ':' && isdigit((unsigned char)p[4]) && isdigit((unsigned char)p[5]) &&
        p[6] == '\0') {
        int64_t off =
            ((p[1] - '0') * 10 + (p[2] - '0')) * 3600 + ((p[4] - '0') * 10 + (p[5] - '0')) * 60;

        return *p == '+' ? t - off : t + off;
    }
    /* no zone: Pydantic's naive datetimes are UTC on this server */
    return *p == '\0' ? t : -1;
}

void osb_time_format(int64_t t, char *buf, size_t n)
{
    time_t tt = (time_t)t;
    struct tm tm;

    gmtime_r(&tt, &tm);
    strftime(buf, n, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

/* --- shell quoting ------------------------------------------------------- */

char *osb_shell_join(const char *const *argv)
{
    size_t cap = 1, n = 0;
    char *out;

    for (size_t i = 0; argv[i] != NULL; i++) {
        cap += strlen(argv[i]) * 4 + 3;
    }
    out = xmalloc(cap);
    for (size_t i = 0; argv[i] != NULL; i++) {
        if (i > 0) {
            out[n++] = ' ';
        }
        out[n++] = '\'';
        for (const char *p = argv[i]; *p; p++) {
            if (*p == '\'') {
                memcpy(out + n, "'\\''", 4);
                n += 4;
            }
            else {
                out[n++] = *p;
            }
        }
        out[n++] = '\'';
    }
    out[n] = '\0';
    return out;
}

/* --- error bodies -------------------------------------------------------- */

/* Appends s to buf (one line: control characters become spaces). */
static void oneline_append(char *buf, size_t size, const char *s)
{
    size_t n = strlen(buf);

    for (; s != NULL && *s != '\0' && n + 1 < size; s++) {
        buf[n++] = (unsigned char)*s < 0x20 ? ' ' : *s;
    }
    buf[n] = '\0';
}

static void detail_item(char *buf, size_t size, json_t *item)
{
    json_t *loc = json_object_get(item, "loc");
    json_t *msg = json_object_get(item, "msg");
    size_t i;
    json_t *v;

    if (json_is_array(loc)) {
        int first = 1;

        json_array_foreach(loc, i, v)
        {
            char tmp[32];

            if (!first) {
                oneline_append(buf, size, ".");
            }
            first = 0;
            if (json_is_string(v)) {
                oneline_append(buf, size, json_string_value(v));
            }
            else if (json_is_integer(v)) {
                snprintf(tmp, sizeof(tmp), "%lld", (long long)json_integer_value(v));
                oneline_append(buf, size, tmp);
            }
        }
        oneline_append(buf, size, ": ");
    }
    if (json_is_string(msg)) {
        oneline_append(buf, size, json_string_value(msg));
    }
    else if (json_is_string(item)) {
        oneline_append(buf, size, json_string_value(item));
    }
    else {
        oneline_append(buf, size, "(unreadable validation item)");
    }
}

int osb_reply_error(struct osb_ctx *c, const char *method, const char *path, long status,
                    const char *body, size_t len, sbx_error_t **err)
{
    char text[512] = "";
    json_t *j = NULL;
    json_t *detail;
    int code = SBX_E_ENGINE;

    if (status == 404) {
        code = SBX_E_NOTFOUND;
    }
    else if (status == 401 || status == 403) {
        code = SBX_E_CONFIG;
    }
    if (body != NULL && len > 0) {
        j = json_loadb(body, len, 0, NULL);
    }
    detail = json_object_get(j, "detail");
    if (json_is_string(json_object_get(j, "code")) ||
        json_is_string(json_object_get(j, "message"))) {
        oneline_append(text, sizeof(text), json_string_value(json_object_get(j, "code")));
        if (json_is_string(json_object_get(j, "message"))) {
            oneline_append(text, sizeof(text), text[0] ? ": " : "");
            oneline_append(text, sizeof(text), json_string_value(json_object_get(j, "message")));
        }
    }
    else if (json_is_array(detail)) {
        size_t i;
        json_t *item;

        oneline_append(text, sizeof(text), "request rejected: ");
        json_array_foreach(detail, i, item)
        {
            if (i > 0) {
                oneline_append(text, sizeof(text), "; ");
            }
            detail_item(text, sizeof(text), item);
        }
    }
    else if (json_is_string(detail)) {
        oneline_append(text, sizeof(text), json_string_value(detail));
    }
    else if (json_is_string(json_object_get(j, "error"))) {
        oneline_append(text, sizeof(text), json_string_value(json_object_get(j, "error")));
    }
    else if (body != NULL && len > 0) {
        char head[121];
        size_t n = len < sizeof(head) - 1 ? len : sizeof(head) - 1;

        memcpy(head, body, n);
        head[n] = '\0';
        oneline_append(text, sizeof(text), "unexpected reply: ");
        oneline_append(text, sizeof(text), head);
    }
    else {
        oneline_append(text, sizeof(text), "empty reply");
    }
    json_decref(j);
    return c->host->error_set(err, code, "opensandbox '%s': %s %s: HTTP %ld: %s", c->instance,
                              method, path, status, text);
}
