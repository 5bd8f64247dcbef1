/* opensandbox_api.c - provider_opensandbox: calls to the lifecycle API
 * (auth header, retries, both error body shapes) and the cache of the
 * sandboxes this process knows (execd endpoint, expiration, renewal). */
#include "opensandbox.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

static const long ok_200[] = {200, 0};

void osb_sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

void osb_strv_free(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

static char **strv_copy(char *const *v)
{
    size_t n = 0;
    char **out;

    while (v != NULL && v[n] != NULL) {
        n++;
    }
    out = xmalloc((n + 1) * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        out[i] = osb_strdup_opt(v[i]);
    }
    out[n] = NULL;
    return out;
}

/* Sandbox ids go into URL paths: the server makes UUIDs; refuse anything
 * that could change the path. */
int osb_id_check(struct osb_ctx *c, const char *id, sbx_error_t **err)
{
    if (id == NULL || *id == '\0' || strlen(id) > 128) {
        return c->host->error_set(err, SBX_E_USAGE,
                                  "opensandbox '%s': empty or too long "
                                  "sandbox id",
                                  c->instance);
    }
    for (const char *p = id; *p; p++) {
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') {
            return c->host->error_set(err, SBX_E_USAGE,
                                      "opensandbox '%s': sandbox id '%.40s' "
                                      "holds a character other than [A-Za-z0-9._-]",
                                      c->instance, id);
        }
    }
    return 0;
}

static int retryable(long status)
{
    return status == 429 || status == 502 || status == 503 || status == 504;
}

int osb_api_call(struct osb_ctx *c, const char *method, const char *path, json_t *body,
                 long timeout_s, const long *ok, int tolerate_404, long *status_out, json_t **out,
                 sbx_error_t **err)
{
    const char *headers[4];
    cleanup_free char *keyhdr = NULL;
    cleanup_free char *url = xasprintf("%s%s", c->base, path);
    cleanup_free char *data = NULL;
    struct sbx_http_response resp;
    int idempotent = strcmp(method, "GET") == 0 || strcmp(method, "DELETE") == 0;
    long backoff = 500;
    size_t nh = 0;
    int r = -1;

    headers[nh++] = "Accept: application/json";
    if (body != NULL) {
        headers[nh++] = "Content-Type: application/json";
        data = json_dumps(body, JSON_COMPACT);
        if (data == NULL) {
            abort();
        }
    }
    if (c->api_key != NULL) {
        keyhdr = xasprintf("OPEN-SANDBOX-API-KEY: %s", c->api_key);
        headers[nh++] = keyhdr;
    }
    headers[nh] = NULL;
    for (int attempt = 0;; attempt++) {
        struct sbx_http_request req = {
            .method = method,
            .url = url,
            .headers = headers,
            .body = data,
            .body_len = data ? strlen(data) : 0,
            .timeout_ms = timeout_s * 1000,
        };
        sbx_error_t *e = NULL;

        memset(&resp, 0, sizeof(resp));
        r = c->host->http(&req, &resp, &e);
        if (r == 0 && idempotent && retryable(resp.status) && attempt < 3) {
            c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: %s %s: HTTP %ld, retrying",
                         method, path, resp.status);
            c->host->http_response_free(&resp);
            osb_sleep_ms(backoff);
            backoff *= 2;
            continue;
        }
        if (r < 0 && idempotent && attempt < 3 && e != NULL && e->code == SBX_E_ENGINE) {
            c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: %s %s: %s, retrying", method,
                         path, e->msg);
            c->host->error_free(&e);
            osb_sleep_ms(backoff);
            backoff *= 2;
            continue;
        }
        if (r < 0) {
            if (err != NULL && *err == NULL) {
                *err = e;
                c->host->error_wrap(err, "opensandbox '%s'", c->instance);
            }
            else if (e != NULL) {
                c->host->error_free(&e);
            }
            break;
        }
        break;
    }
    if (keyhdr != NULL) {
        c->host->secret_zero(keyhdr, strlen(keyhdr));
    }
    if (r < 0) {
        return -1;
    }
    if (status_out != NULL) {
        *status_out = resp.status;
    }
    if (resp.status == 404 && tolerate_404) {
        c->host->http_response_free(&resp);
        if (out != NULL) {
            *out = NULL;
        }
        return 0;
    }
    for (size_t i = 0; ok[i] != 0; i++) {
        if (resp.status == ok[i]) {
            r = 1;
        }
    }
    if (r != 1) {
        osb_reply_error(c, method, path, resp.status, resp.body, resp.body_len, err);
        c->host->http_response_free(&resp);
        return -1;
    }
    r = 0;
    if (out != NULL) {
        *out = NULL;
        if (resp.body_len > 0) {
            json_error_t je;

            *out = json_loadb(resp.body, resp.body_len, 0, &je);
            if (*out == NULL) {
                r = c->host->error_set(err, SBX_E_PROTOCOL,
                                       "opensandbox '%s': %s %s: HTTP %ld "
                                       "reply is not JSON: %s",
                                       c->instance, method, path, resp.status, je.text);
            }
        }
    }
    c->host->http_response_free(&resp);
    return r;
}

int osb_api(struct osb_ctx *c, const char *method, const char *path, json_t *body,
            const long *ok_statuses, int tolerate_404, long *status, json_t **out,
            sbx_error_t **err)
{
    return osb_api_call(c, method, path, body, (long)c->request_timeout, ok_statuses, tolerate_404,
                        status, out, err);
}

/* --- the box cache -------------------------------------------------------- */

static struct osb_box *box_find(struct osb_ctx *c, const char *id)
{
    for (struct osb_box *b = c->boxes; b != NULL; b = b->next) {
        if (strcmp(b->id, id) == 0) {
            return b;
        }
    }
    return NULL;
}

void osb_box_free(struct osb_box *b)
{
    if (b == NULL) {
        return;
    }
    free(b->id);
    free(b->execd);
    osb_strv_free(b->headers);
    free(b);
}

/* Takes ownership of b; replaces a box of the same id. */
void osb_box_put(struct osb_ctx *c, struct osb_box *b)
{
    pthread_mutex_lock(&c->lock);
    for (struct osb_box **pp = &c->boxes; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->id, b->id) == 0) {
            struct osb_box *old = *pp;

            *pp = old->next;
            osb_box_free(old);
            break;
        }
    }
    b->next = c->boxes;
    c->boxes = b;
    pthread_mutex_unlock(&c->lock);
}

void osb_box_drop(struct osb_ctx *c, const char *id)
{
    pthread_mutex_lock(&c->lock);
    for (struct osb_box **pp = &c->boxes; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->id, id) == 0) {
            struct osb_box *old = *pp;

            *pp = old->next;
            osb_box_free(old);
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
}

/* Fills b->execd and b->headers from GET /sandboxes/{id}/endpoints/44772. */
int osb_box_endpoint(struct osb_ctx *c, struct osb_box *b, sbx_error_t **err)
{
    cleanup_free char *path = xasprintf("/sandboxes/%s/endpoints/%d", b->id, OSB_EXECD_PORT);
    json_t *j = NULL;
    json_t *hdrs;
    const char *ep, *k;
    json_t *v;
    size_t n = 0;

    if (osb_api(c, "GET", path, NULL, ok_200, 0, NULL, &j, err) < 0) {
        return -1;
    }
    ep = json_string_value(json_object_get(j, "endpoint"));
    if (ep == NULL || *ep == '\0') {
        json_decref(j);
        return c->host->error_set(err, SBX_E_PROTOCOL,
                                  "opensandbox '%s': GET %s: reply has no "
                                  "'endpoint'",
                                  c->instance, path);
    }
    /* the endpoint has no scheme unless a proxy put one in */
    if (strncmp(ep, "http://", 7) == 0 || strncmp(ep, "https://", 8) == 0) {
        b->execd = osb_strdup_opt(ep);
    }
    else {
        b->execd = xasprintf("http://%s", ep);
    }
    while (strlen(b->execd) > 0 && b->execd[strlen(b->execd) - 1] == '/') {
        b->execd[strlen(b->execd) - 1] = '\0';
    }
    hdrs = json_object_get(j, "headers");
    b->headers = xmalloc((json_object_size(hdrs) + 1) * sizeof(char *));
    json_object_foreach(hdrs, k, v)
    {
        if (json_is_string(v) && strpbrk(k, "\r\n:") == NULL &&
            strpbrk(json_string_value(v), "\r\n") == NULL) {
            b->headers[n++] = xasprintf("%s: %s", k, json_string_value(v));
        }
    }
    b->headers[n] = NULL;
    json_decref(j);
    return 0;
}

void osb_box_times_from(struct osb_box *b, json_t *sandbox)
{
    const char *exp = json_string_value(json_object_get(sandbox, "expiresAt"));
    const char *dl =
        json_string_value(json_object_get(json_object_get(sandbox, "metadata"), "sbx.deadline"));
    int64_t t = osb_time_parse(exp);

    b->expires_at = t > 0 ? t : 0;
    b->deadline = dl != NULL ? strtoll(dl, NULL, 10) : 0;
}

int osb_box_get(struct osb_ctx *c, const char *id, char **execd, char ***headers, sbx_error_t **err)
{
    struct osb_box *b;
    cleanup_free char *path = NULL;
    json_t *j = NULL;
    long status = 0;

    if (osb_id_check(c, id, err) < 0) {
        return -1;
    }
    pthread_mutex_lock(&c->lock);
    b = box_find(c, id);
    if (b != NULL) {
        *execd = osb_strdup_opt(b->execd);
        *headers = strv_copy(b->headers);
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    pthread_mutex_unlock(&c->lock);
    /* created by another process: look it up */
    path = xasprintf("/sandboxes/%s", id);
    if (osb_api(c, "GET", path, NULL, ok_200, 1, &status, &j, err) < 0) {
        return -1;
    }
    if (status == 404) {
        return c->host->error_set(err, SBX_E_NOTFOUND,
                                  "opensandbox '%s': sandbox %s does not "
                                  "exist (GET %s: HTTP 404)",
                                  c->instance, id, path);
    }
    b = xcalloc(1, sizeof(*b));
    b->id = osb_strdup_opt(id);
    osb_box_times_from(b, j);
    json_decref(j);
    if (osb_box_endpoint(c, b, err) < 0) {
        osb_box_free(b);
        return -1;
    }
    *execd = osb_strdup_opt(b->execd);
    *headers = strv_copy(b->headers);
    osb_box_put(c, b);
    return 0;
}

void osb_box_maybe_renew(struct osb_ctx *c, const char *id)
{
    struct osb_box *b;
    int64_t now = (int64_t)time(NULL), want;
    char stamp[40];
    cleanup_free char *path = NULL;
    json_t *body, *j = NULL;
    sbx_error_t *e = NULL;

    pthread_mutex_lock(&c->lock);
    b = box_find(c, id);
    if (b == NULL || b->expires_at == 0 || b->deadline == 0 || b->expires_at >= b->deadline ||
        b->expires_at - now > c->renew_before || now - b->last_renew_try < 30) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    want = now + c->timeout_cap < b->deadline ? now + c->timeout_cap : b->deadline;
    if (want <= b->expires_at) {
        pthread_mutex_unlock(&c->lock);
        return;
    }
    b->last_renew_try = now;
    pthread_mutex_unlock(&c->lock);

    osb_time_format(want, stamp, sizeof(stamp));
    path = xasprintf("/sandboxes/%s/renew-expiration", id);
    body = json_pack("{ss}", "expiresAt", stamp);
    if (osb_api(c, "POST", path, body, ok_200, 0, NULL, &j, &e) < 0) {
        c->host->log(c->instance, SBX_LOG_WARN, "opensandbox: renewing %s: %s", id, e->msg);
        c->host->error_free(&e);
        json_decref(body);
        return;
    }
    json_decref(body);
    {
        int64_t got = osb_time_parse(json_string_value(json_object_get(j, "expiresAt")));

        pthread_mutex_lock(&c->lock);
        b = box_find(c, id);
        if (b != NULL) {
            b->expires_at = got > 0 ? got : want;
        }
        pthread_mutex_unlock(&c->lock);
        c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: sandbox %s now expires at %s", id,
                     stamp);
    }
    json_decref(j);
}
