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

/* cpu and memory per sandbox (resourceLimits); pids is server-wide only, no
 * disk field, and the server's user namespaces are unknown: not declared */
#define OSB_FLAGS                                                                                  \
    (SBX_PROVIDER_ENFORCES_CPU | SBX_PROVIDER_ENFORCES_MEMORY | SBX_PROVIDER_ENFORCES_EGRESS |     \
     SBX_PROVIDER_ENFORCES_MAX)

static const long ok_200[] = {200, 0};
static const long ok_create[] = {202, 200, 201, 0};
static const long ok_delete[] = {204, 200, 202, 0};

/* --- create --------------------------------------------------------------- */

static void put_label(json_t *meta, const char *key, const char *value)
{
    cleanup_free char *k = osb_label_map(key);
    cleanup_free char *v = NULL;

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
        cleanup_free char *host = NULL;
        char *colon;
        int ip = 1;

        if (h == NULL || *h == '\0') {
            continue;
        }
        if (strcmp(h, "*") == 0) {
            dflt = "allow";
            continue;
        }
        host = osb_strdup_opt(h);
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
            c->host->log(c->instance, SBX_LOG_WARN,
                         "opensandbox: egress rule '%s' is an IP "
                         "address or range, which networkPolicy cannot express; left out",
                         h);
            continue;
        }
        json_array_append_new(rules, json_pack("{ssss}", "action", "allow", "target", host));
    }
    return json_pack("{ssso}", "defaultAction", dflt, "egress", rules);
}

static json_t *create_body(struct osb_ctx *c, const struct sbx_sandbox_spec *spec, int64_t deadline,
                           int64_t timeout, sbx_error_t **err)
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
        c->host->error_set(err, SBX_E_CONFIG,
                           "opensandbox '%s': no image: set option 'image' "
                           "or 'snapshot', or give the task an image",
                           c->instance);
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
            json_array_append_new(vols, json_pack("{s:s, s:s, s:{s:s}, s:b}", "name", "workspace",
                                                  "mountPath", "/workspace", "host", "path",
                                                  spec->worktree, "readOnly", 0));
        }
        for (size_t i = 0; i < spec->n_mounts; i++) {
            char name[32];

            snprintf(name, sizeof(name), "cache-%zu", i);
            json_array_append_new(vols, json_pack("{s:s, s:s, s:{s:s}, s:b}", "name", name,
                                                  "mountPath", spec->mounts[i].path, "host", "path",
                                                  spec->mounts[i].host, "readOnly",
                                                  spec->mounts[i].read_only != 0));
        }
        json_object_set_new(b, "volumes", vols);
    }
    else if (spec->worktree != NULL || spec->n_mounts > 0) {
        c->host->log(c->instance, SBX_LOG_WARN,
                     "opensandbox: the worktree and caches are not "
                     "mounted (option host_mounts is off; the server may be on another host)");
    }
    return b;
}

static int wait_running(struct osb_ctx *c, const char *id, const char *state, int64_t start,
                        json_t **sandbox, sbx_error_t **err)
{
    cleanup_free char *path = xasprintf("/sandboxes/%s", id);
    cleanup_free char *last = osb_strdup_opt(state);
    int64_t last_log = start;

    for (;;) {
        json_t *j = NULL;
        json_t *st;
        const char *s;
        int64_t now = (int64_t)time(NULL);

        if (now - start > c->create_timeout) {
            return c->host->error_set(err, SBX_E_TIMEOUT,
                                      "opensandbox '%s': sandbox %s did not "
                                      "reach Running within %lld s (last state %s)",
                                      c->instance, id, (long long)c->create_timeout, last);
        }
        osb_sleep_ms(c->poll_ms);
        if (osb_api(c, "GET", path, NULL, ok_200, 0, NULL, &j, err) < 0) {
            return -1;
        }
        st = json_object_get(j, "status");
        s = json_string_value(json_object_get(st, "state"));
        if (s == NULL) {
            json_decref(j);
            return c->host->error_set(err, SBX_E_PROTOCOL,
                                      "opensandbox '%s': GET %s: reply has "
                                      "no status.state",
                                      c->instance, path);
        }
        if (strcmp(s, "Running") == 0) {
            *sandbox = j;
            return 0;
        }
        if (strcmp(s, "Pending") != 0 && strcmp(s, "Resuming") != 0) {
            const char *reason = json_string_value(json_object_get(st, "reason"));
            const char *msg = json_string_value(json_object_get(st, "message"));

            c->host->error_set(err, SBX_E_ENGINE,
                               "opensandbox '%s': sandbox %s is %s%s%s%s%s%s "
                               "instead of Running",
                               c->instance, id, s, reason || msg ? " (" : "", reason ? reason : "",
                               reason && msg ? ": " : "", msg ? msg : "", reason || msg ? ")" : "");
            for (char *q = (*err)->msg; *q; q++) {
                *q = (unsigned char)*q < 0x20 ? ' ' : *q; /* one line */
            }
            json_decref(j);
            return -1;
        }
        if (strcmp(s, last) != 0 || now - last_log >= 10) {
            c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: sandbox %s is %s (%lld s)", id, s,
                         (long long)(now - start));
            last_log = now;
            free(last);
            last = osb_strdup_opt(s);
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
    if (osb_api_call(c, "POST", "/sandboxes", body, (long)c->create_timeout, ok_create, 0, NULL,
                     &reply, err) < 0) {
        json_decref(body);
        return -1;
    }
    json_decref(body);
    id = json_string_value(json_object_get(reply, "id"));
    state = json_string_value(json_object_get(json_object_get(reply, "status"), "state"));
    if (id == NULL || osb_id_check(c, id, NULL) < 0) {
        json_decref(reply);
        return c->host->error_set(err, SBX_E_PROTOCOL,
                                  "opensandbox '%s': POST /sandboxes: "
                                  "reply has no usable 'id'",
                                  c->instance);
    }
    if (strlen(id) + 1 > id_size) {
        c->host->error_set(err, SBX_E_PROTOCOL,
                           "opensandbox '%s': sandbox id '%s' is longer "
                           "than %zu bytes",
                           c->instance, id, id_size - 1);
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
    b = xcalloc(1, sizeof(*b));
    b->id = osb_strdup_opt(id_out);
    osb_box_times_from(b, sandbox != NULL ? sandbox : reply);
    if (b->deadline == 0) {
        b->deadline = deadline;
    }
    if (osb_box_endpoint(c, b, err) < 0 || osb_execd_wait_ready(c, b->execd, b->headers, err) < 0) {
        osb_box_free(b);
        goto fail;
    }
    osb_box_put(c, b);
    c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: sandbox %s is ready (%lld s)", id_out,
                 (long long)((int64_t)time(NULL) - start));
    json_decref(sandbox);
    json_decref(reply);
    return 0;

fail:
    /* never leave a half-made sandbox behind */
    if (cb_opensandbox_destroy(c, json_string_value(json_object_get(reply, "id")), &e2) < 0) {
        sbx_err_log_free(c->host, c->instance, SBX_LOG_WARN, &e2,
                         "opensandbox: cleaning up after a failed create");
    }
    json_decref(sandbox);
    json_decref(reply);
    return -1;
}

/* --- destroy, list, exec, cancel, info ------------------------------------ */

static int cb_opensandbox_destroy(void *ctx, const char *sandbox_id, sbx_error_t **err)
{
    struct osb_ctx *c = ctx;
    cleanup_free char *path = NULL;
    long status = 0;

    if (osb_id_check(c, sandbox_id, err) < 0) {
        return -1;
    }
    osb_box_drop(c, sandbox_id);
    path = xasprintf("/sandboxes/%s", sandbox_id);
    if (osb_api(c, "DELETE", path, NULL, ok_delete, 1, &status, NULL, err) < 0) {
        return -1;
    }
    c->host->log(c->instance, SBX_LOG_INFO, "opensandbox: sandbox %s %s", sandbox_id,
                 status == 404 ? "was already gone" : "deleted");
    return 0;
}

static int cb_opensandbox_list(void *ctx, const char *label_key, const char *label_value,
                               sbx_sandbox_fn fn, void *userdata, sbx_error_t **err)
{
    struct osb_ctx *c = ctx;
    cleanup_free char *key = NULL;
    cleanup_free char *value = label_value ? osb_label_map(label_value) : NULL;
    cleanup_free char *filter = NULL;
    cleanup_free char *query = NULL;

    if (label_key == NULL || *label_key == '\0') {
        return c->host->error_set(err, SBX_E_USAGE, "opensandbox '%s': list needs a label key",
                                  c->instance);
    }
    key = osb_label_map(label_key);

    if (value != NULL) {
        cleanup_free char *kv = xasprintf("%s=%s", key, value);

        filter = sbx_url_escape(kv);
    }
    for (int page = 1; page <= 10000; page++) {
        json_t *j = NULL;
        json_t *items, *item;
        size_t i;
        int more;

        free(query);
        query = xasprintf("/sandboxes?page=%d&pageSize=100%s%s", page, filter ? "&metadata=" : "",
                          filter ? filter : "");
        if (osb_api(c, "GET", query, NULL, ok_200, 0, NULL, &j, err) < 0) {
            return -1;
        }
        items = json_object_get(j, "items");
        if (!json_is_array(items)) {
            json_decref(j);
            return c->host->error_set(err, SBX_E_PROTOCOL,
                                      "opensandbox '%s': GET /sandboxes: "
                                      "reply has no 'items' array",
                                      c->instance);
        }
        json_array_foreach(items, i, item)
        {
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
            kvs = xmalloc((json_object_size(meta) + 1) * sizeof(*kvs));
            json_object_foreach(meta, k, v)
            {
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
    return c->host->error_set(err, SBX_E_PROTOCOL,
                              "opensandbox '%s': GET /sandboxes: more "
                              "than 10000 pages",
                              c->instance);
}

static int cb_opensandbox_exec(void *ctx, const char *sandbox_id, const struct sbx_exec_spec *spec,
                               struct sbx_exec_ctl *ctl, int *exit_status, sbx_error_t **err)
{
    struct osb_ctx *c = ctx;

    if (osb_id_check(c, sandbox_id, err) < 0) {
        return -1;
    }
    return osb_execd_exec(c, sandbox_id, spec, ctl, exit_status, err);
}

static void cb_opensandbox_cancel(void *ctx, struct sbx_exec_ctl *ctl)
{
    (void)ctx;
    /* the exec's HTTP stream watches this flag (host http `cancel`) and is
     * aborted within about 100 ms; exec() then interrupts the command */
    __atomic_store_n(&ctl->cancelled, 1, __ATOMIC_RELEASE);
}

static int cb_opensandbox_info(void *ctx, struct sbx_provider_info *info, sbx_error_t **err)
{
    struct osb_ctx *c = ctx;
    cleanup_free char *url = xasprintf("%s/health", c->url);
    struct sbx_http_request req = {
        .method = "GET", .url = url, .timeout_ms = c->request_timeout * 1000};
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
    info->simulated = json_is_true(json_object_get(j, "test_double"));
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
    struct osb_ctx *c = xcalloc(1, sizeof(*c));
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
        osb_box_free(b);
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
