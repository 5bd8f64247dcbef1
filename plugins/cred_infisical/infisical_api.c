/* infisical_api.c - the Infisical calls of cred_infisical, all through
 * host->http: Universal Auth login, token renew and revoke, and the secrets of
 * a path (v4, falling back to v3 raw). Every reply body is zeroed before it
 * is freed, and so is every JSON string parsed from it. */
#include <ctype.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "infisical.h"

/* Names a secret may not take: they would change how the sandbox runs, or
 * route its traffic around the egress proxy (Infisical's CLI drops the same
 * shell names). */
static const char *const reserved_names[] = {
    "HOME",       "PATH",       "PS1",         "PS2",        "PWD",         "EDITOR",
    "XAUTHORITY", "USER",       "TERM",        "TERMINFO",   "SHELL",       "MAIL",
    "IFS",        "ENV",        "BASH_ENV",    "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
    "ALL_PROXY",  "http_proxy", "https_proxy", "no_proxy",   "all_proxy",   NULL,
};
static const char *const reserved_prefixes[] = {"XDG_", "LC_", "LD_", "SBX_", NULL};

/* Zeroes every string of a parsed reply (the values may be secrets). */
static void json_wipe(const struct sbx_host_api *host, json_t *j)
{
    const char *key;
    json_t *v;
    size_t i;

    if (json_is_string(j)) {
        host->secret_zero((char *)json_string_value(j), json_string_length(j));
    }
    else if (json_is_object(j)) {
        json_object_foreach(j, key, v)
        {
            json_wipe(host, v);
        }
    }
    else if (json_is_array(j)) {
        json_array_foreach(j, i, v)
        {
            json_wipe(host, v);
        }
    }
}

static void json_free(const struct sbx_host_api *host, json_t *j)
{
    if (j != NULL) {
        json_wipe(host, j);
        json_decref(j);
    }
}

static void response_free(const struct sbx_host_api *host, struct sbx_http_response *resp)
{
    if (resp->body != NULL) {
        host->secret_zero(resp->body, resp->body_len);
    }
    host->http_response_free(resp);
}

/* One exchange. path_query starts with '/'. token (may be NULL) goes in an
 * Authorization header that is zeroed afterwards. */
static int call(struct inf_ctx *c, const char *method, const char *what, const char *path_query,
                const char *ctype, const char *body, const char *token,
                struct sbx_http_response *resp, enum inf_fail *fail, sbx_error_t **err)
{
    const struct sbx_host_api *host = c->host;
    char ctype_hdr[128];
    char *auth = NULL;
    char *url;
    const char *headers[4];
    size_t nh = 0;
    struct sbx_http_request req;
    int r;

    url = xmalloc(strlen(c->cfg.url) + strlen(path_query) + 1);
    strcpy(url, c->cfg.url);
    strcat(url, path_query);
    headers[nh++] = "Accept: application/json";
    if (body != NULL) {
        snprintf(ctype_hdr, sizeof(ctype_hdr), "Content-Type: %s", ctype);
        headers[nh++] = ctype_hdr;
    }
    if (token != NULL) {
        auth = xmalloc(strlen(token) + sizeof("Authorization: Bearer "));
        strcpy(auth, "Authorization: Bearer ");
        strcat(auth, token);
        headers[nh++] = auth;
    }
    headers[nh] = NULL;
    memset(&req, 0, sizeof(req));
    req.method = method;
    req.url = url;
    req.headers = headers;
    req.body = body;
    req.body_len = body ? strlen(body) : 0;
    req.timeout_ms = c->cfg.timeout_ms;
    req.connect_timeout_ms = c->cfg.timeout_ms < 10000 ? c->cfg.timeout_ms : 10000;
    r = host->http(&req, resp, err);
    inf_secret_free(host, auth);
    free(url);
    if (r < 0) {
        *fail = INF_FAIL_TRANSPORT;
        return host->error_wrap(err, "cred_infisical: %s: cannot reach Infisical", what);
    }
    return 0;
}

/* The reply's "message" as printable ASCII, at most 160 characters. */
static void server_message(const struct sbx_host_api *host, const struct sbx_http_response *resp,
                           char *buf, size_t n)
{
    json_t *root = json_loadb(resp->body ? resp->body : "", resp->body_len, 0, NULL);
    json_t *m = root ? json_object_get(root, "message") : NULL;
    const char *s = json_is_string(m) ? json_string_value(m) : NULL;
    size_t i = 0;

    if (s == NULL && root != NULL) {
        m = json_object_get(root, "error");
        s = json_is_string(m) ? json_string_value(m) : NULL;
    }
    if (s == NULL) {
        s = "no message";
    }
    for (; *s && i + 1 < n && i < 160; s++) {
        buf[i++] = (*s >= 0x20 && *s < 0x7f) ? *s : '?';
    }
    buf[i] = '\0';
    json_free(host, root);
}

static int fail_status(struct inf_ctx *c, const char *what, const struct sbx_http_response *resp,
                       enum inf_fail *fail, sbx_error_t **err)
{
    char msg[192];

    server_message(c->host, resp, msg, sizeof(msg));
    if (resp->status == 429 ||
        (resp->status >= 400 && resp->status < 500 && strcasestr(msg, "lock") != NULL)) {
        *fail = INF_FAIL_LOCKOUT;
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "cred_infisical: %s: Infisical refused with "
                                  "HTTP %ld (%s): the identity is locked out after failed "
                                  "logins or rate-limited; sbx will not retry until it ends",
                                  what, resp->status, msg);
    }
    if (resp->status >= 400 && resp->status < 500) {
        *fail = INF_FAIL_REJECTED;
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "cred_infisical: %s: Infisical refused with "
                                  "HTTP %ld (%s)",
                                  what, resp->status, msg);
    }
    *fail = INF_FAIL_SERVER;
    return c->host->error_set(err, SBX_E_ENGINE,
                              "cred_infisical: %s: Infisical failed with "
                              "HTTP %ld (%s)",
                              what, resp->status, msg);
}

static json_t *parse(struct inf_ctx *c, const char *what, const struct sbx_http_response *resp,
                     enum inf_fail *fail, sbx_error_t **err)
{
    json_error_t jerr;
    json_t *root = json_loadb(resp->body ? resp->body : "", resp->body_len, 0, &jerr);

    if (root == NULL || !json_is_object(root)) {
        /* never jerr.text: it quotes the reply, which may hold a secret */
        *fail = INF_FAIL_PROTOCOL;
        c->host->error_set(err, SBX_E_PROTOCOL,
                           "cred_infisical: %s: the reply is not a JSON "
                           "object (HTTP %ld, %zu bytes, error at line %d column %d)",
                           what, resp->status, resp->body_len, root ? 1 : jerr.line,
                           root ? 1 : jerr.column);
        json_free(c->host, root);
        return NULL;
    }
    return root;
}

static int token_chars_ok(const char *t)
{
    for (; *t; t++) {
        if (*t <= 0x20 || *t >= 0x7f || *t == '"' || *t == '\\') {
            return 0;
        }
    }
    return 1;
}

/* Reads {accessToken, expiresIn, accessTokenMaxTTL} (login and renew). */
static int parse_token(struct inf_ctx *c, const char *what, const struct sbx_http_response *resp,
                       struct inf_token *out, enum inf_fail *fail, sbx_error_t **err)
{
    json_t *root = parse(c, what, resp, fail, err);
    json_t *tok;
    json_t *ttl;
    json_t *max;

    if (root == NULL) {
        return -1;
    }
    tok = json_object_get(root, "accessToken");
    ttl = json_object_get(root, "expiresIn");
    max = json_object_get(root, "accessTokenMaxTTL");
    if (!json_is_string(tok) || json_string_length(tok) == 0 ||
        json_string_length(tok) != strlen(json_string_value(tok)) ||
        !token_chars_ok(json_string_value(tok))) {
        *fail = INF_FAIL_PROTOCOL;
        json_free(c->host, root);
        return c->host->error_set(err, SBX_E_PROTOCOL,
                                  "cred_infisical: %s: the reply has no "
                                  "usable accessToken",
                                  what);
    }
    if (!json_is_integer(ttl) || json_integer_value(ttl) <= 0 ||
        (max != NULL && !json_is_null(max) &&
         (!json_is_integer(max) || json_integer_value(max) < 0))) {
        *fail = INF_FAIL_PROTOCOL;
        json_free(c->host, root);
        return c->host->error_set(err, SBX_E_PROTOCOL,
                                  "cred_infisical: %s: the reply's "
                                  "expiresIn must be a positive integer and accessTokenMaxTTL a "
                                  "non-negative one",
                                  what);
    }
    out->value = xstrdup(json_string_value(tok));
    out->ttl = json_integer_value(ttl);
    out->max_ttl = json_is_integer(max) ? json_integer_value(max) : 0;
    json_free(c->host, root);
    return 0;
}

int inf_api_login(struct inf_ctx *c, const char *client_id, const char *client_secret,
                  struct inf_token *out, enum inf_fail *fail, sbx_error_t **err)
{
    struct sbx_http_response resp;
    char *id = sbx_url_escape(client_id);
    char *secret = sbx_url_escape(client_secret);
    char *body = xmalloc(strlen(id) + strlen(secret) + sizeof("clientId=&clientSecret="));
    int r;

    sprintf(body, "clientId=%s&clientSecret=%s", id, secret);
    inf_secret_free(c->host, secret);
    free(id);
    r = call(c, "POST", "login", "/api/v1/auth/universal-auth/login",
             "application/x-www-form-urlencoded", body, NULL, &resp, fail, err);
    inf_secret_free(c->host, body);
    if (r < 0) {
        return -1;
    }
    if (resp.status != 200) {
        r = fail_status(c, "login", &resp, fail, err);
    }
    else {
        r = parse_token(c, "login", &resp, out, fail, err);
    }
    response_free(c->host, &resp);
    return r;
}

static char *token_body(const char *token)
{
    char *body = xmalloc(strlen(token) + sizeof("{\"accessToken\":\"\"}"));

    sprintf(body, "{\"accessToken\":\"%s\"}", token); /* token_chars_ok: no escaping needed */
    return body;
}

int inf_api_renew(struct inf_ctx *c, const char *token, struct inf_token *out, enum inf_fail *fail,
                  sbx_error_t **err)
{
    struct sbx_http_response resp;
    char *body = token_body(token);
    int r;

    r = call(c, "POST", "renew", "/api/v1/auth/token/renew", "application/json", body, NULL, &resp,
             fail, err);
    inf_secret_free(c->host, body);
    if (r < 0) {
        return -1;
    }
    if (resp.status != 200) {
        r = fail_status(c, "renew", &resp, fail, err);
    }
    else {
        r = parse_token(c, "renew", &resp, out, fail, err);
    }
    response_free(c->host, &resp);
    return r;
}

int inf_api_revoke(struct inf_ctx *c, const char *token, enum inf_fail *fail, sbx_error_t **err)
{
    struct sbx_http_response resp;
    char *body = token_body(token);
    int r = 0;

    r = call(c, "POST", "revoke", "/api/v1/auth/token/revoke", "application/json", body, NULL,
             &resp, fail, err);
    inf_secret_free(c->host, body);
    if (r < 0) {
        return -1;
    }
    if (resp.status != 200) {
        r = fail_status(c, "revoke", &resp, fail, err);
    }
    response_free(c->host, &resp);
    return r;
}

static int reserved(const char *name)
{
    for (size_t i = 0; reserved_names[i] != NULL; i++) {
        if (strcmp(name, reserved_names[i]) == 0) {
            return 1;
        }
    }
    for (size_t i = 0; reserved_prefixes[i] != NULL; i++) {
        if (strncmp(name, reserved_prefixes[i], strlen(reserved_prefixes[i])) == 0) {
            return 1;
        }
    }
    return 0;
}

static int env_name_ok(const char *s)
{
    if (!(isalpha((unsigned char)*s) || *s == '_')) {
        return 0;
    }
    for (; *s; s++) {
        if (!(isalnum((unsigned char)*s) || *s == '_')) {
            return 0;
        }
    }
    return 1;
}

struct kv_list {
    const char **name;
    const char **value;
    size_t n;
    size_t cap;
};

/* Appends one array of secrets; names already present keep their value. */
static int collect(struct inf_ctx *c, const char *what, json_t *arr, struct kv_list *l,
                   enum inf_fail *fail, sbx_error_t **err)
{
    size_t i;
    json_t *s;

    if (!json_is_array(arr)) {
        *fail = INF_FAIL_PROTOCOL;
        return c->host->error_set(err, SBX_E_PROTOCOL,
                                  "cred_infisical: %s: the reply has no "
                                  "'secrets' array",
                                  what);
    }
    json_array_foreach(arr, i, s)
    {
        json_t *k = json_object_get(s, "secretKey");
        json_t *v = json_object_get(s, "secretValue");
        const char *name;
        int dup = 0;

        if (!json_is_string(k) || !json_is_string(v)) {
            *fail = INF_FAIL_PROTOCOL;
            return c->host->error_set(err, SBX_E_PROTOCOL,
                                      "cred_infisical: %s: secret %zu has "
                                      "no string secretKey and secretValue",
                                      what, i);
        }
        name = json_string_value(k);
        if (json_is_true(json_object_get(s, "secretValueHidden"))) {
            *fail = INF_FAIL_REJECTED;
            return c->host->error_set(err, SBX_E_ENGINE,
                                      "cred_infisical: %s: the value of %.64s "
                                      "is hidden: the identity lacks the readValue permission",
                                      what, name);
        }
        if (!env_name_ok(name) || strlen(name) != json_string_length(k)) {
            *fail = INF_FAIL_PROTOCOL;
            return c->host->error_set(err, SBX_E_PROTOCOL,
                                      "cred_infisical: %s: secret name "
                                      "'%.64s' is not an environment variable name",
                                      what, name);
        }
        if (json_string_length(v) != strlen(json_string_value(v))) {
            *fail = INF_FAIL_PROTOCOL;
            return c->host->error_set(err, SBX_E_PROTOCOL,
                                      "cred_infisical: %s: the value of "
                                      "%.64s holds a NUL byte and cannot go in an environment",
                                      what, name);
        }
        if (reserved(name)) {
            c->host->log(c->instance, SBX_LOG_WARN,
                         "%s: secret %s skipped: the name is reserved "
                         "(it would change the sandbox's own environment)",
                         what, name);
            continue;
        }
        for (size_t j = 0; j < l->n && !dup; j++) {
            dup = strcmp(l->name[j], name) == 0;
        }
        if (dup) {
            continue;
        }
        if (l->n == l->cap) {
            l->cap = l->cap ? l->cap * 2 : 16;
            l->name = xrealloc(l->name, l->cap * sizeof(*l->name));
            l->value = xrealloc(l->value, l->cap * sizeof(*l->value));
        }
        l->name[l->n] = name;
        l->value[l->n] = json_string_value(v);
        l->n++;
    }
    return 0;
}

static int add_secrets(struct inf_ctx *c, const char *what, json_t *root, struct sbx_lease *lease,
                       enum inf_fail *fail, sbx_error_t **err)
{
    struct kv_list l = {0};
    json_t *imports = json_object_get(root, "imports");
    size_t i;
    json_t *imp;
    int r;

    r = collect(c, what, json_object_get(root, "secrets"), &l, fail, err);
    if (r == 0 && c->cfg.include_imports && json_is_array(imports)) {
        json_array_foreach(imports, i, imp)
        {
            r = collect(c, what, json_object_get(imp, "secrets"), &l, fail, err);
            if (r < 0) {
                break;
            }
        }
    }
    /* all checked first: the lease is filled entirely or not at all */
    for (size_t k = 0; r == 0 && k < l.n; k++) {
        r = c->host->lease_add_secret(lease, l.name[k], l.value[k], err);
    }
    free(l.name);
    free(l.value);
    return r;
}

int inf_api_fetch(struct inf_ctx *c, const char *token, const char *path, struct sbx_lease *lease,
                  enum inf_fail *fail, sbx_error_t **err)
{
    static const char *const fmt[] = {
        "/api/v4/secrets?projectId=%s&environment=%s&secretPath=%s&viewSecretValue=true"
        "&expandSecretReferences=true&include_imports=%s",
        "/api/v3/secrets/raw?workspaceId=%s&environment=%s&secretPath=%s&viewSecretValue=true"
        "&expandSecretReferences=true&include_imports=%s",
    };
    static const char *const what[] = {"secrets (v4)", "secrets (v3 raw)"};
    char *project = sbx_url_escape(c->cfg.project);
    char *env = sbx_url_escape(c->cfg.environment);
    char *p = sbx_url_escape(path);
    const char *imports = c->cfg.include_imports ? "true" : "false";
    struct sbx_http_response resp;
    json_t *root;
    int r = -1;

    for (int v = 0; v < 2; v++) {
        size_t n = strlen(fmt[v]) + strlen(project) + strlen(env) + strlen(p) + 8;
        char *q = xmalloc(n);

        snprintf(q, n, fmt[v], project, env, p, imports);
        r = call(c, "GET", what[v], q, NULL, NULL, token, &resp, fail, err);
        free(q);
        if (r < 0) {
            break;
        }
        if (resp.status == 404 && v == 0) {
            c->host->log(c->instance, SBX_LOG_DEBUG, "GET /api/v4/secrets: 404, trying v3 raw");
            response_free(c->host, &resp);
            continue;
        }
        if (resp.status != 200) {
            r = fail_status(c, what[v], &resp, fail, err);
            if (resp.status == 404) {
                c->host->error_wrap(err, "path %s in environment %s", path, c->cfg.environment);
            }
        }
        else {
            root = parse(c, what[v], &resp, fail, err);
            r = root ? add_secrets(c, what[v], root, lease, fail, err) : -1;
            json_free(c->host, root);
        }
        response_free(c->host, &resp);
        break;
    }
    free(project);
    free(env);
    free(p);
    return r;
}
