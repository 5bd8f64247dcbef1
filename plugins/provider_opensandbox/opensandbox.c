/* opensandbox.c - provider_opensandbox: sandboxes on an OpenSandbox server.
 *
 * Lifecycle through the server's REST API (/v1/sandboxes: create, wait
 * until Running, endpoints, renew-expiration, delete, list by metadata);
 * commands through the execd inside each sandbox (execd.c). Every call goes
 * through host->http. Wire facts: shared/reference/opensandbox-api.md;
 * behaviour and limits: docs/providers.md.
 */
#include "opensandbox.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define OSB_FLAGS (SBX_PROVIDER_ENFORCES_LIMITS | SBX_PROVIDER_ENFORCES_EGRESS | \
                   SBX_PROVIDER_ENFORCES_MAX)

static const long ok_200[] = {200, 0};
static const long ok_create[] = {202, 200, 201, 0};
static const long ok_delete[] = {204, 200, 202, 0};

static void sleep_ms(long ms)
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
    out = osb_xmalloc((n + 1) * sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        out[i] = osb_xstrdup(v[i]);
    }
    out[n] = NULL;
    return out;
}

/* Sandbox ids go into URL paths: the server makes UUIDs; refuse anything
 * that could change the path. */
static int id_check(struct osb_ctx *c, const char *id, sbx_error_t **err)
{
    if (id == NULL || *id == '\0' || strlen(id) > 128) {
        return c->host->error_set(err, SBX_E_USAGE, "opensandbox '%s': empty or too long "
                                  "sandbox id", c->instance);
    }
    for (const char *p = id; *p; p++) {
        if (!isalnum((unsigned char)*p) && *p != '-' && *p != '_' && *p != '.') {
            return c->host->error_set(err, SBX_E_USAGE, "opensandbox '%s': sandbox id '%.40s' "
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

static int api_call(struct osb_ctx *c, const char *method, const char *path, json_t *body,
                    long timeout_s, const long *ok, int tolerate_404, long *status_out,
                    json_t **out, sbx_error_t **err)
{
    const char *headers[4];
    osb_autofree char *keyhdr = NULL;
    osb_autofree char *url = osb_xasprintf("%s%s", c->base, path);
    osb_autofree char *data = NULL;
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
        keyhdr = osb_xasprintf("OPEN-SANDBOX-API-KEY: %s", c->api_key);
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
            sleep_ms(backoff);
            backoff *= 2;
            continue;
        }
        if (r < 0 && idempotent && attempt < 3 && e != NULL && e->code == SBX_E_ENGINE) {
            c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: %s %s: %s, retrying", method,
                         path, e->msg);
            free(e->msg);
            free(e);
            sleep_ms(backoff);
            backoff *= 2;
            continue;
        }
        if (r < 0) {
            if (err != NULL && *err == NULL) {
                *err = e;
                c->host->error_wrap(err, "opensandbox '%s'", c->instance);
            }
            else if (e != NULL) {
                free(e->msg);
                free(e);
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
                r = c->host->error_set(err, SBX_E_PROTOCOL, "opensandbox '%s': %s %s: HTTP %ld "
                                       "reply is not JSON: %s", c->instance, method, path,
                                       resp.status, je.text);
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
    return api_call(c, method, path, body, (long)c->request_timeout, ok_statuses, tolerate_404,
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

static void box_free(struct osb_box *b)
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
static void box_put(struct osb_ctx *c, struct osb_box *b)
{
    pthread_mutex_lock(&c->lock);
    for (struct osb_box **pp = &c->boxes; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->id, b->id) == 0) {
            struct osb_box *old = *pp;

            *pp = old->next;
            box_free(old);
            break;
        }
    }
    b->next = c->boxes;
    c->boxes = b;
    pthread_mutex_unlock(&c->lock);
}

static void box_drop(struct osb_ctx *c, const char *id)
{
    pthread_mutex_lock(&c->lock);
    for (struct osb_box **pp = &c->boxes; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->id, id) == 0) {
            struct osb_box *old = *pp;

            *pp = old->next;
            box_free(old);
            break;
        }
    }
    pthread_mutex_unlock(&c->lock);
}

/* Fills b->execd and b->headers from GET /sandboxes/{id}/endpoints/44772. */
static int box_endpoint(struct osb_ctx *c, struct osb_box *b, sbx_error_t **err)
{
    osb_autofree char *path = osb_xasprintf("/sandboxes/%s/endpoints/%d", b->id,
                                            OSB_EXECD_PORT);
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
        return c->host->error_set(err, SBX_E_PROTOCOL, "opensandbox '%s': GET %s: reply has no "
                                  "'endpoint'", c->instance, path);
    }
    /* the endpoint has no scheme unless a proxy put one in */
    if (strncmp(ep, "http://", 7) == 0 || strncmp(ep, "https://", 8) == 0) {
        b->execd = osb_xstrdup(ep);
    }
    else {
        b->execd = osb_xasprintf("http://%s", ep);
    }
    while (strlen(b->execd) > 0 && b->execd[strlen(b->execd) - 1] == '/') {
        b->execd[strlen(b->execd) - 1] = '\0';
    }
    hdrs = json_object_get(j, "headers");
    b->headers = osb_xmalloc((json_object_size(hdrs) + 1) * sizeof(char *));
    json_object_foreach(hdrs, k, v) {
        if (json_is_string(v) && strpbrk(k, "\r\n:") == NULL &&
            strpbrk(json_string_value(v), "\r\n") == NULL) {
            b->headers[n++] = osb_xasprintf("%s: %s", k, json_string_value(v));
        }
    }
    b->headers[n] = NULL;
    json_decref(j);
    return 0;
}

static void box_times_from(struct osb_box *b, json_t *sandbox)
{
    const char *exp = json_string_value(json_object_get(sandbox, "expiresAt"));
    const char *dl = json_string_value(
        json_object_get(json_object_get(sandbox, "metadata"), "sbx.deadline"));
    int64_t t = osb_time_parse(exp);

    b->expires_at = t > 0 ? t : 0;
    b->deadline = dl != NULL ? strtoll(dl, NULL, 10) : 0;
}

int osb_box_get(struct osb_ctx *c, const char *id, char **execd, char ***headers,
                sbx_error_t **err)
{
    struct osb_box *b;
    osb_autofree char *path = NULL;
    json_t *j = NULL;
    long status = 0;

    if (id_check(c, id, err) < 0) {
        return -1;
    }
    pthread_mutex_lock(&c->lock);
    b = box_find(c, id);
    if (b != NULL) {
        *execd = osb_xstrdup(b->execd);
        *headers = strv_copy(b->headers);
        pthread_mutex_unlock(&c->lock);
        return 0;
    }
    pthread_mutex_unlock(&c->lock);
    /* created by another process: look it up */
    path = osb_xasprintf("/sandboxes/%s", id);
    if (osb_api(c, "GET", path, NULL, ok_200, 1, &status, &j, err) < 0) {
        return -1;
    }
    if (status == 404) {
        return c->host->error_set(err, SBX_E_NOTFOUND, "opensandbox '%s': sandbox %s does not "
                                  "exist (GET %s: HTTP 404)", c->instance, id, path);
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        abort();
    }
    b->id = osb_xstrdup(id);
    box_times_from(b, j);
    json_decref(j);
    if (box_endpoint(c, b, err) < 0) {
        box_free(b);
        return -1;
    }
    *execd = osb_xstrdup(b->execd);
    *headers = strv_copy(b->headers);
    box_put(c, b);
    return 0;
}

void osb_box_maybe_renew(struct osb_ctx *c, const char *id)
{
    struct osb_box *b;
    int64_t now = (int64_t)time(NULL), want;
    char stamp[40];
    osb_autofree char *path = NULL;
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
    path = osb_xasprintf("/sandboxes/%s/renew-expiration", id);
    body = json_pack("{ss}", "expiresAt", stamp);
    if (osb_api(c, "POST", path, body, ok_200, 0, NULL, &j, &e) < 0) {
        c->host->log(c->instance, SBX_LOG_WARN, "opensandbox: renewing %s: %s", id, e->msg);
        free(e->msg);
        free(e);
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
        c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: sandbox %s now expires at %s",
                     id, stamp);
    }
    json_decref(j);
}

/* --- create --------------------------------------------------------------- */

static void put_label(json_t *meta, const char *key, const char *value)
{
    osb_autofree char *k = osb_label_map(key);
    osb_autofree char *v = NULL;

    if (value == NULL || *value == '\0' || *k == '\0') {
        return;
    }
    v = osb_label_map(value);
    json_object_set_new(meta, k, json_string(v));
}

static json_t *limits_json(const struct sbx_limits *l)
{
    json_t *r = json_object();

    if (l->cpus > 0) {
        long long milli = (long long)(l->cpus * 1000.0 + 0.5);

        if (milli % 1000 == 0) {
            json_object_set_new(r, "cpu", json_sprintf("%lld", milli / 1000));
        }
        else {
            json_object_set_new(r, "cpu", json_sprintf("%lldm", milli));
        }
    }
    if (l->memory > 0) {
        long long mib = (long long)((l->memory + (1 << 20) - 1) >> 20);

        json_object_set_new(r, "memory", json_sprintf("%lldMi", mib));
    }
    return r;
}

/* networkPolicy from the allow-list: deny by default, one allow rule per
 * host. OpenSandbox takes FQDNs and *.wildcards only, so ports are dropped
 * and IP literals are left out (fail closed; logged). */
static json_t *network_json(struct osb_ctx *c, const struct sbx_sandbox_spec *spec)
{
    json_t *rules = json_array();
    const char *dflt = "deny";

    for (size_t i = 0; i < spec->n_egress_allow; i++) {
        const char *h = spec->egress_allow[i];
        osb_autofree char *host = NULL;
        char *colon;
        int ip = 1;

        if (h == NULL || *h == '\0') {
            continue;
        }
        if (strcmp(h, "*") == 0) {
            dflt = "allow";
            continue;
        }
        host = osb_xstrdup(h);
        colon = strrchr(host, ':');
        if (colon != NULL && strchr(host, ':') == colon) {
            *colon = '\0'; /* host:port */
        }
        for (const char *p = host; *p; p++) {
            if (!isdigit((unsigned char)*p) && *p != '.' && *p != '/') {
                ip = 0;
            }
        }
        if (ip || strchr(host, ':') != NULL) {
            c->host->log(c->instance, SBX_LOG_WARN, "opensandbox: egress rule '%s' is an IP "
                         "address or range, which networkPolicy cannot express; left out", h);
            continue;
        }
        json_array_append_new(rules, json_pack("{ssss}", "action", "allow", "target", host));
    }
    return json_pack("{ssso}", "defaultAction", dflt, "egress", rules);
}

static json_t *create_body(struct osb_ctx *c, const struct sbx_sandbox_spec *spec,
                           int64_t deadline, int64_t timeout, sbx_error_t **err)
{
    const char *image = c->image != NULL ? c->image : spec->image;
    json_t *b = json_object();
    json_t *ep = json_array();
    json_t *env = json_object();
    json_t *meta = json_object();
    char dl[32];
    int has_task = 0, has_job = 0;

    if (c->snapshot != NULL) {
        json_object_set_new(b, "snapshotId", json_string(c->snapshot));
    }
    else if (image != NULL && *image != '\0') {
        json_object_set_new(b, "image", json_pack("{ss}", "uri", image));
    }
    else {
        json_decref(b);
        json_decref(ep);
        json_decref(env);
        json_decref(meta);
        c->host->error_set(err, SBX_E_CONFIG, "opensandbox '%s': no image: set option 'image' "
                           "or 'snapshot', or give the task an image", c->instance);
        return NULL;
    }
    for (size_t i = 0; c->entrypoint[i] != NULL; i++) {
        json_array_append_new(ep, json_string(c->entrypoint[i]));
    }
    json_object_set_new(b, "entrypoint", ep);
    json_object_set_new(b, "resourceLimits", limits_json(&spec->limits));
    json_object_set_new(b, "timeout", json_integer(timeout));
    /* non-secret environment only; secrets go per exec (envs) */
    for (size_t i = 0; i < spec->n_env; i++) {
        if (spec->env[i].name != NULL && spec->env[i].value != NULL) {
            json_object_set_new(env, spec->env[i].name, json_string(spec->env[i].value));
        }
    }
    json_object_set_new(b, "env", env);
    for (size_t i = 0; i < spec->n_labels; i++) {
        put_label(meta, spec->labels[i].name, spec->labels[i].value);
        has_task |= strcmp(spec->labels[i].name, "sbx.task") == 0;
        has_job |= strcmp(spec->labels[i].name, "sbx.job") == 0;
    }
    if (!has_task) {
        put_label(meta, "sbx.task", spec->task_id);
    }
    if (!has_job) {
        put_label(meta, "sbx.job", spec->job_id);
    }
    snprintf(dl, sizeof(dl), "%lld", (long long)deadline);
    json_object_set_new(meta, "sbx.deadline", json_string(dl));
    json_object_set_new(b, "metadata", meta);
    json_object_set_new(b, "networkPolicy", network_json(c, spec));
    if (c->host_mounts && (spec->worktree != NULL || spec->n_mounts > 0)) {
        json_t *vols = json_array();

        if (spec->worktree != NULL) {
            json_array_append_new(vols, json_pack("{sss{ss}sb}", "name", "workspace",
                                                  "mountPath", "/workspace", "host", "path",
                                                  spec->worktree, "readOnly", 0));
        }
        for (size_t i = 0; i < spec->n_mounts; i++) {
            char name[32];

            snprintf(name, sizeof(name), "cache-%zu", i);
            json_array_append_new(vols, json_pack("{sss{ss}sb}", "name", name, "mountPath",
                                                  spec->mounts[i].path, "host", "path",
                                                  spec->mounts[i].host, "readOnly", 1));
        }
        json_object_set_new(b, "volumes", vols);
    }
    else if (spec->worktree != NULL || spec->n_mounts > 0) {
        c->host->log(c->instance, SBX_LOG_WARN, "opensandbox: the worktree and caches are not "
                     "mounted (option host_mounts is off; the server may be on another host)");
    }
    return b;
}

static int wait_running(struct osb_ctx *c, const char *id, const char *state, int64_t start,
                        json_t **sandbox, sbx_error_t **err)
{
    osb_autofree char *path = osb_xasprintf("/sandboxes/%s", id);
    osb_autofree char *last = osb_xstrdup(state);
    int64_t last_log = start;

    for (;;) {
        json_t *j = NULL;
        json_t *st;
        const char *s;
        int64_t now = (int64_t)time(NULL);

        if (now - start > c->create_timeout) {
            return c->host->error_set(err, SBX_E_TIMEOUT, "opensandbox '%s': sandbox %s did not "
                                      "reach Running within %lld s (last state %s)",
                                      c->instance, id, (long long)c->create_timeout, last);
        }
        sleep_ms(c->poll_ms);
        if (osb_api(c, "GET", path, NULL, ok_200, 0, NULL, &j, err) < 0) {
            return -1;
        }
        st = json_object_get(j, "status");
        s = json_string_value(json_object_get(st, "state"));
        if (s == NULL) {
            json_decref(j);
            return c->host->error_set(err, SBX_E_PROTOCOL, "opensandbox '%s': GET %s: reply has "
                                      "no status.state", c->instance, path);
        }
        if (strcmp(s, "Running") == 0) {
            *sandbox = j;
            return 0;
        }
        if (strcmp(s, "Pending") != 0 && strcmp(s, "Resuming") != 0) {
            const char *reason = json_string_value(json_object_get(st, "reason"));
            const char *msg = json_string_value(json_object_get(st, "message"));

            c->host->error_set(err, SBX_E_ENGINE, "opensandbox '%s': sandbox %s is %s%s%s%s%s%s "
                               "instead of Running", c->instance, id, s,
                               reason || msg ? " (" : "", reason ? reason : "",
                               reason && msg ? ": " : "", msg ? msg : "",
                               reason || msg ? ")" : "");
            for (char *q = (*err)->msg; *q; q++) {
                *q = (unsigned char)*q < 0x20 ? ' ' : *q; /* one line */
            }
            json_decref(j);
            return -1;
        }
        if (strcmp(s, last) != 0 || now - last_log >= 10) {
            c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: sandbox %s is %s (%lld s)",
                         id, s, (long long)(now - start));
            last_log = now;
            free(last);
            last = osb_xstrdup(s);
        }
        json_decref(j);
    }
}

static int cb_opensandbox_destroy(void *ctx, const char *sandbox_id, sbx_error_t **err);

static int cb_opensandbox_create(void *ctx, const struct sbx_sandbox_spec *spec, char *id_out,
                                 size_t id_size, sbx_error_t **err)
{
    struct osb_ctx *c = ctx;
    int64_t start = (int64_t)time(NULL);
    int64_t max = spec->limits.max > 0 ? spec->limits.max : c->timeout_cap;
    int64_t timeout, deadline;
    json_t *body, *reply = NULL, *sandbox = NULL;
    const char *id, *state;
    struct osb_box *b;
    sbx_error_t *e2 = NULL;

    if (max < 60) {
        max = 60; /* OpenSandbox refuses timeouts under 60 s */
    }
    timeout = max < c->timeout_cap ? max : c->timeout_cap;
    deadline = start + max;
    body = create_body(c, spec, deadline, timeout, err);
    if (body == NULL) {
        return -1;
    }
    c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: creating a sandbox for task %s on %s",
                 spec->task_id ? spec->task_id : "?", c->url);
    if (api_call(c, "POST", "/sandboxes", body, (long)c->create_timeout, ok_create, 0, NULL,
                 &reply, err) < 0) {
        json_decref(body);
        return -1;
    }
    json_decref(body);
    id = json_string_value(json_object_get(reply, "id"));
    state = json_string_value(json_object_get(json_object_get(reply, "status"), "state"));
    if (id == NULL || id_check(c, id, NULL) < 0) {
        json_decref(reply);
        return c->host->error_set(err, SBX_E_PROTOCOL, "opensandbox '%s': POST /sandboxes: "
                                  "reply has no usable 'id'", c->instance);
    }
    if (strlen(id) + 1 > id_size) {
        c->host->error_set(err, SBX_E_PROTOCOL, "opensandbox '%s': sandbox id '%s' is longer "
                           "than %zu bytes", c->instance, id, id_size - 1);
        goto fail;
    }
    snprintf(id_out, id_size, "%s", id);
    c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: sandbox %s created (%s)", id_out,
                 state ? state : "no state");
    if (state == NULL || strcmp(state, "Running") != 0) {
        if (wait_running(c, id_out, state ? state : "unknown", start, &sandbox, err) < 0) {
            goto fail;
        }
    }
    b = calloc(1, sizeof(*b));
    if (b == NULL) {
        abort();
    }
    b->id = osb_xstrdup(id_out);
    box_times_from(b, sandbox != NULL ? sandbox : reply);
    if (b->deadline == 0) {
        b->deadline = deadline;
    }
    if (box_endpoint(c, b, err) < 0 ||
        osb_execd_wait_ready(c, b->execd, b->headers, err) < 0) {
        box_free(b);
        goto fail;
    }
    box_put(c, b);
    c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: sandbox %s is ready (%lld s)", id_out,
                 (long long)((int64_t)time(NULL) - start));
    json_decref(sandbox);
    json_decref(reply);
    return 0;

fail:
    /* never leave a half-made sandbox behind */
    if (cb_opensandbox_destroy(c, json_string_value(json_object_get(reply, "id")), &e2) < 0) {
        c->host->log(c->instance, SBX_LOG_WARN, "opensandbox: cleaning up after a failed "
                     "create: %s", e2->msg);
        free(e2->msg);
        free(e2);
    }
    json_decref(sandbox);
    json_decref(reply);
    return -1;
}

/* --- destroy, list, exec, cancel, info ------------------------------------ */

static int cb_opensandbox_destroy(void *ctx, const char *sandbox_id, sbx_error_t **err)
{
    struct osb_ctx *c = ctx;
    osb_autofree char *path = NULL;
    long status = 0;

    if (id_check(c, sandbox_id, err) < 0) {
        return -1;
    }
    box_drop(c, sandbox_id);
    path = osb_xasprintf("/sandboxes/%s", sandbox_id);
    if (osb_api(c, "DELETE", path, NULL, ok_delete, 1, &status, NULL, err) < 0) {
        return -1;
    }
    c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: sandbox %s %s", sandbox_id,
                 status == 404 ? "was already gone" : "deleted");
    return 0;
}

static char *url_encode(const char *s)
{
    char *out = osb_xmalloc(strlen(s) * 3 + 1);
    size_t n = 0;

    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (isalnum(*p) || *p == '-' || *p == '_' || *p == '.' || *p == '~') {
            out[n++] = (char)*p;
        }
        else {
            n += (size_t)sprintf(out + n, "%%%02X", *p);
        }
    }
    out[n] = '\0';
    return out;
}

static int cb_opensandbox_list(void *ctx, const char *label_key, const char *label_value,
                               sbx_sandbox_fn fn, void *userdata, sbx_error_t **err)
{
    struct osb_ctx *c = ctx;
    osb_autofree char *key = NULL;
    osb_autofree char *value = label_value ? osb_label_map(label_value) : NULL;
    osb_autofree char *filter = NULL;
    osb_autofree char *query = NULL;

    if (label_key == NULL || *label_key == '\0') {
        return c->host->error_set(err, SBX_E_USAGE, "opensandbox '%s': list needs a label key",
                                  c->instance);
    }
    key = osb_label_map(label_key);

    if (value != NULL) {
        osb_autofree char *kv = osb_xasprintf("%s=%s", key, value);

        filter = url_encode(kv);
    }
    for (int page = 1; page <= 10000; page++) {
        json_t *j = NULL;
        json_t *items, *item;
        size_t i;
        int more;

        free(query);
        query = osb_xasprintf("/sandboxes?page=%d&pageSize=100%s%s", page,
                              filter ? "&metadata=" : "", filter ? filter : "");
        if (osb_api(c, "GET", query, NULL, ok_200, 0, NULL, &j, err) < 0) {
            return -1;
        }
        items = json_object_get(j, "items");
        if (!json_is_array(items)) {
            json_decref(j);
            return c->host->error_set(err, SBX_E_PROTOCOL, "opensandbox '%s': GET /sandboxes: "
                                      "reply has no 'items' array", c->instance);
        }
        json_array_foreach(items, i, item) {
            const char *id = json_string_value(json_object_get(item, "id"));
            json_t *meta = json_object_get(item, "metadata");
            const char *mv = json_string_value(json_object_get(meta, key));
            struct sbx_kv *kvs;
            const char *k;
            json_t *v;
            size_t n = 0;

            /* filter here too: the server may not know the metadata query */
            if (id == NULL || mv == NULL || (value != NULL && strcmp(mv, value) != 0)) {
                continue;
            }
            kvs = osb_xmalloc((json_object_size(meta) + 1) * sizeof(*kvs));
            json_object_foreach(meta, k, v) {
                if (json_is_string(v)) {
                    kvs[n].name = k;
                    kvs[n].value = json_string_value(v);
                    n++;
                }
            }
            fn(userdata, id, kvs, n);
            free(kvs);
        }
        more = json_is_true(json_object_get(json_object_get(j, "pagination"), "hasNextPage"));
        json_decref(j);
        if (!more) {
            return 0;
        }
    }
    return c->host->error_set(err, SBX_E_PROTOCOL, "opensandbox '%s': GET /sandboxes: more "
                              "than 10000 pages", c->instance);
}

static int cb_opensandbox_exec(void *ctx, const char *sandbox_id,
                               const struct sbx_exec_spec *spec, struct sbx_exec_ctl *ctl,
                               int *exit_status, sbx_error_t **err)
{
    struct osb_ctx *c = ctx;

    if (id_check(c, sandbox_id, err) < 0) {
        return -1;
    }
    return osb_execd_exec(c, sandbox_id, spec, ctl, exit_status, err);
}

static void cb_opensandbox_cancel(void *ctx, struct sbx_exec_ctl *ctl)
{
    (void)ctx;
    /* the exec's HTTP stream watches this flag (host http `cancel`) and is
     * aborted within about 100 ms; exec() then interrupts the command */
    ctl->cancelled = 1;
}

static int cb_opensandbox_info(void *ctx, struct sbx_provider_info *info, sbx_error_t **err)
{
    struct osb_ctx *c = ctx;
    osb_autofree char *url = osb_xasprintf("%s/health", c->url);
    struct sbx_http_request req = {.method = "GET", .url = url,
                                   .timeout_ms = c->request_timeout * 1000};
    struct sbx_http_response resp;
    json_t *j;
    const char *st;

    if (c->host->http(&req, &resp, err) < 0) {
        return c->host->error_wrap(err, "opensandbox '%s'", c->instance);
    }
    j = json_loadb(resp.body, resp.body_len, 0, NULL);
    st = json_string_value(json_object_get(j, "status"));
    snprintf(info->engine, sizeof(info->engine), "OpenSandbox at %s (health: %s)", c->url,
             resp.status == 200 && st ? st : "unreachable");
    info->userns = -1;
    info->disk_limit[0] = '\0';
    json_decref(j);
    if (resp.status != 200) {
        osb_reply_error(c, "GET", "/health", resp.status, resp.body, resp.body_len, err);
        c->host->http_response_free(&resp);
        return -1;
    }
    c->host->http_response_free(&resp);
    return 0;
}

static int cb_opensandbox_init(const struct sbx_host_api *host, const struct sbx_options *opts,
                               void **ctx, sbx_error_t **err)
{
    struct osb_ctx *c = calloc(1, sizeof(*c));

    if (c == NULL) {
        abort();
    }
    if (osb_config_init(c, host, opts, err) < 0) {
        osb_config_fini(c);
        free(c);
        return -1;
    }
    pthread_mutex_init(&c->lock, NULL);
    *ctx = c;
    return 0;
}

static void cb_opensandbox_destroy_ctx(void *ctx)
{
    struct osb_ctx *c = ctx;

    if (c == NULL) {
        return;
    }
    while (c->boxes != NULL) {
        struct osb_box *b = c->boxes;

        c->boxes = b->next;
        box_free(b);
    }
    pthread_mutex_destroy(&c->lock);
    osb_config_fini(c);
    free(c);
}

static const struct sbx_provider_ops provider_opensandbox_ops = {
    .flags = OSB_FLAGS,
    .init = cb_opensandbox_init,
    .destroy_ctx = cb_opensandbox_destroy_ctx,
    .create = cb_opensandbox_create,
    .exec = cb_opensandbox_exec,
    .destroy = cb_opensandbox_destroy,
    .list = cb_opensandbox_list,
    .cancel = cb_opensandbox_cancel,
    .info = cb_opensandbox_info,
};

SBX_PLUGIN_DEFINE(SBX_PLUGIN_PROVIDER, OSB_NAME, "0.2.0", SBX_PLUGIN_READY, NULL, osb_options,
                  provider_opensandbox_ops)
