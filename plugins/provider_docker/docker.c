/* docker.c - provider_docker: one fresh, limited sandbox per task on the
 * local Docker engine (ADR 0287 decisions 4, 5, 7). */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "docker.h"

#include "sbx/sbx_agent_proto.h"
#include "sbx/sbx_plugin.h"

/* Capabilities kept by default: enough for root in the image to install
 * packages and own its files; everything else is dropped. */
static const char *const default_caps[] = {"CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID",
                                           "KILL",  "SETGID",       "SETUID", NULL};

static const struct sbx_option options[] = {
    {"socket", SBX_OPT_STRING, NULL, 0,
     "engine unix socket (default: $DOCKER_HOST if unix://, else /var/run/docker.sock)"},
    {"cap_add", SBX_OPT_STRINGS, NULL, 0,
     "capabilities kept after dropping all (default CHOWN DAC_OVERRIDE FOWNER FSETID KILL "
     "SETGID SETUID)"},
    {"disk_enforcement", SBX_OPT_STRING, "auto", 0,
     "auto (a quota where the storage driver has one: btrfs, zfs, overlay2 on xfs; on other "
     "overlay2 a per-sandbox loop-mounted ext4; else the watchdog), storage-opt, loop or "
     "watchdog"},
    {"disk_check_interval", SBX_OPT_DURATION, "2s", 0,
     "how often the disk watchdog measures each sandbox's writable layer (it also measures at "
     "each command's end)"},
    {"remove_in_background", SBX_OPT_BOOL, "true", 0,
     "a sandbox's end kills it and returns; the engine removes it in the background (its "
     "backlog shows in sbx info and /healthz)"},
    {"image", SBX_OPT_STRING, NULL, 0,
     "image of this instance's sandboxes (default: the top-level image; a pool's image comes "
     "first; docs/image.md, Which image)"},
    {"docker_sidecar", SBX_OPT_BOOL, "false", 0,
     "give every sandbox its own Docker daemon in a sidecar (docs/testcontainers.md)"},
    {"sidecar_image", SBX_OPT_STRING, "sbx-dind:current", 0,
     "image of the Docker sidecar (sbx image build --sidecar)"},
    {"sidecar_mode", SBX_OPT_STRING, "auto", 0,
     "auto (rootless when the engine remaps users, else rootful), rootless or rootful"},
    {"sidecar_data_size", SBX_OPT_SIZE, "4G", 0,
     "tmpfs size of the inner daemon's data root (counts against the sidecar's memory)"},
    {"sidecar_timeout", SBX_OPT_DURATION, "60s", 0,
     "how long create waits for the inner daemon to answer"},
    {"sidecar_images", SBX_OPT_STRINGS, NULL, 0,
     "images of the host's engine loaded into every sidecar at create (docker save/load)"},
    {"sidecar_insecure_registries", SBX_OPT_STRINGS, NULL, 0,
     "registries (host or host:port) the inner daemon may pull from over plain HTTP; pulls still "
     "go through the sandbox's egress proxy and its policy"},
    {"seccomp", SBX_OPT_STRING, "sbx", 0,
     "the sandbox's seccomp profile: sbx (the engine's default minus socket families and "
     "io_uring, docs/operations.md), default (the engine's own) or an absolute path to a "
     "profile (JSON)"},
    {"worktree_idmap", SBX_OPT_STRING, "auto", 0,
     "auto (an idmapped worktree when the engine remaps users, else a plain bind mount with a "
     "warning), required (refuse the task instead) or off (always a plain bind mount)"},
    {"userns_remap_user", SBX_OPT_STRING, "dockremap", 0,
     "the engine's userns-remap user: the first ids of its /etc/subuid and /etc/subgid ranges "
     "are the sandbox's root"},
    SBX_OPTIONS_END,
};

static char **dup_strv(const char *const *v)
{
    size_t n = 0;
    char **out;

    while (v[n] != NULL) {
        n++;
    }
    out = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        out[i] = xstrdup(v[i]);
    }
    return out;
}

static void free_ctx(struct dk_ctx *c)
{
    if (c == NULL) {
        return;
    }
    if (c->cap_add != NULL) {
        for (size_t i = 0; c->cap_add[i] != NULL; i++) {
            free(c->cap_add[i]);
        }
        free(c->cap_add);
    }
    dk_sidecar_free(c);
    dk_disk_free(c);
    free(c->seccomp);
    free(c->socket);
    free(c);
}

/* The engine line was logged at info since the plugin was loaded. */
static int engine_logged;

static int cb_docker_init(const struct sbx_host_api *host, const struct sbx_options *opts,
                          void **out, sbx_error_t **err)
{
    struct dk_ctx *c = xcalloc(1, sizeof(*c));
    const char *sock = host->opt_string(opts, "socket");
    const char *env = getenv("DOCKER_HOST");
    const char *const *caps = host->opt_strings(opts, "cap_add");
    const char *disk = host->opt_string(opts, "disk_enforcement");

    c->host = host;
    c->opts = opts;
    if (sock == NULL && env != NULL && strncmp(env, "unix://", 7) == 0) {
        sock = env + 7;
    }
    else if (sock == NULL && env != NULL && env[0] != '\0') {
        host->error_set(err, SBX_E_CONFIG, "DOCKER_HOST=%s: only unix:// sockets are supported",
                        env);
        free_ctx(c);
        return -1;
    }
    c->socket = strdup(sock ? sock : "/var/run/docker.sock");
    c->cap_add = dup_strv(caps ? caps : default_caps);
    c->disk_interval = host->opt_int(opts, "disk_check_interval");
    c->rm_background = host->opt_bool(opts, "remove_in_background");
    if (c->disk_interval <= 0) {
        c->disk_interval = 5;
    }
    if (strlen(c->socket) > 107) {
        host->error_set(err, SBX_E_CONFIG, "%s: socket path longer than 107 bytes",
                        host->opt_where(opts, "socket"));
        free_ctx(c);
        return -1;
    }
    if (access(c->socket, F_OK) < 0) {
        host->error_set(err, SBX_E_ENGINE,
                        "docker engine socket %s: %s: is the engine running? "
                        "(scripts/dockerd.sh start)",
                        c->socket, strerror(errno));
        free_ctx(c);
        return -1;
    }
    if (access(c->socket, R_OK | W_OK) < 0) {
        host->error_set(err, SBX_E_ENGINE,
                        "docker engine socket %s: %s (run as root or as a "
                        "member of the socket's group)",
                        c->socket, strerror(errno));
        free_ctx(c);
        return -1;
    }
    if (dk_negotiate(c, err) < 0) {
        free_ctx(c);
        return -1;
    }
    if (dk_sidecar_init(c, err) < 0 || dk_seccomp_init(c, err) < 0 ||
        dk_worktree_init(c, err) < 0) {
        free_ctx(c);
        return -1;
    }
    if (dk_disk_init(c, disk, err) < 0) {
        free_ctx(c);
        return -1;
    }
    /* at info once per load of the plugin; the runner opens the instance for
     * every job, and those repeats are debug */
    host->log(host->instance_name(opts),
              __atomic_exchange_n(&engine_logged, 1, __ATOMIC_SEQ_CST) ? SBX_LOG_DEBUG
                                                                       : SBX_LOG_INFO,
              "%s on %s, user namespaces %s, disk cap "
              "by %s",
              c->engine, c->socket, c->userns ? "on" : "OFF",
              dk_disk_quota(c)                  ? "a quota (storage-opt)"
              : dk_disk_mode(c) == DK_DISK_LOOP ? "a per-sandbox filesystem (loop)"
                                                : "the watchdog");
    dk_remove_hold();
    *out = c;
    return 0;
}

static void cb_docker_destroy_ctx(void *ctx)
{
    free_ctx(ctx);
    dk_remove_release();
}

json_t *dk_strv_json(const char *const *v)
{
    json_t *a = json_array();

    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        json_array_append_new(a, json_string(v[i]));
    }
    return a;
}

json_t *dk_bind_mount_rslave(const char *src, const char *dst)
{
    return json_pack("{s:s, s:s, s:s, s:b, s:{s:s}}", "Type", "bind", "Source", src, "Target", dst,
                     "ReadOnly", 0, "BindOptions", "Propagation", "rslave");
}

json_t *dk_bind_mount(const char *src, const char *dst, int ro)
{
    return json_pack("{s:s, s:s, s:s, s:b}", "Type", "bind", "Source", src, "Target", dst,
                     "ReadOnly", ro);
}

static json_t *create_body(struct dk_ctx *c, const struct sbx_sandbox_spec *s,
                           const char *workspace, sbx_error_t **err)
{
    json_t *labels = json_object();
    json_t *env = json_array();
    json_t *mounts = json_array();
    json_t *hc;
    unsigned ru = UINT_MAX; /* (added) the remote user's ids, read once when needed */
    unsigned rg = 0;

    for (size_t i = 0; i < s->n_labels; i++) {
        json_object_set_new(labels, s->labels[i].name, json_string(s->labels[i].value));
    }
    if (s->limits.disk > 0) {
        char disk[32];

        /* read back by the disk watchdog (docker_disk.c) */
        snprintf(disk, sizeof(disk), "%" PRId64, s->limits.disk);
        json_object_set_new(labels, "sbx.disk", json_string(disk));
    }
    for (size_t i = 0; i < s->n_env; i++) {
        char *kv = NULL;

        kv = xasprintf("%s=%s", s->env[i].name, s->env[i].value);
        json_array_append_new(env, json_string(kv));
        free(kv);
    }
    if (workspace == NULL && s->view_later && s->view_dir != NULL) {
        /* a warm sandbox: its worktree comes at claim (docker_claim.c) */
        json_array_append_new(mounts, dk_bind_mount_rslave(s->view_dir, "/workspace"));
    }
    else if (workspace != NULL) {
        json_array_append_new(mounts, dk_bind_mount(workspace, "/workspace", 0));
    }
    for (size_t i = 0; i < s->n_mounts; i++) {
        /* (changed) a read-write mount (the worktree's git dir, wtgit) is given to the
         * sandbox's root, (added) or its remote user (updateRemoteUserUID); the caches
         * stay read-only */
        if (!s->mounts[i].read_only && ru == UINT_MAX) {
            dk_remote_ids(c, s->image, NULL, &ru, &rg);
        }
        if (!s->mounts[i].read_only && dk_worktree_give(c, s->mounts[i].host, ru, rg, err) < 0) {
            json_decref(mounts);
            json_decref(env);
            json_decref(labels);
            return NULL;
        }
        json_array_append_new(
            mounts, dk_bind_mount(s->mounts[i].host, s->mounts[i].path, s->mounts[i].read_only));
    }
    if (s->egress_dir != NULL) {
        json_array_append_new(mounts, dk_bind_mount(s->egress_dir, SBX_EGRESS_DIR, 1));
        if (s->egress_relay != NULL) {
            json_array_append_new(mounts, dk_bind_mount(s->egress_relay, SBX_RELAY_PATH, 1));
        }
        if (s->egress_relay != NULL) {
            /* (added) the relay's resolver is the only nameserver: sbx-resolv.conf
             * lies next to sbx-relay (docs/egress.md, "Without proxy variables") */
            char *conf = dk_resolv_conf_path(s->egress_relay);

            if (conf != NULL) {
                json_array_append_new(mounts, dk_bind_mount(conf, "/etc/resolv.conf", 1));
                free(conf);
            }
        }
        if (s->egress_relay != NULL && s->agent_dir != NULL) {
            json_array_append_new(mounts, dk_bind_mount(s->agent_dir, SBX_AGENT_DIR, 1));
        }
    }
    if (s->nested_containers || c->sidecar) {
        dk_sidecar_sandbox_body(c, s, env, mounts, labels);
    }
    hc = json_pack("{s:I, s:I, s:I, s:I, s:o, s:o, s:[s], s:s, s:b, s:o, s:b}", "NanoCpus",
                   (json_int_t)(s->limits.cpus * 1e9 + 0.5), "Memory", (json_int_t)s->limits.memory,
                   "MemorySwap", (json_int_t)s->limits.memory, /* no swap */
                   "PidsLimit", (json_int_t)s->limits.pids, "CapDrop", json_pack("[s]", "ALL"),
                   "CapAdd", dk_strv_json((const char *const *)c->cap_add), "SecurityOpt",
                   "no-new-privileges", "NetworkMode", "none", "Init", 1, "Mounts", mounts,
                   "Privileged", 0);
    json_object_set_new(hc, "CpuShares", json_integer(DK_CPU_SHARES));
    if (c->seccomp != NULL) {
        json_array_append_new(json_object_get(hc, "SecurityOpt"), json_string(c->seccomp));
    }
    if (dk_disk_storage_opt(c, hc, s->image, "sbx image build", s->limits.disk, err) < 0) {
        json_decref(hc);
        json_decref(env);
        json_decref(labels);
        return NULL;
    }
    /* with egress, the relay starts first: it binds 127.0.0.1:3128, goes to
     * the background and execs the keep-alive command (docs/egress.md) */
    return json_pack(
        "{s:s, s:o, s:[s,s], s:o, s:o, s:s, s:b, s:b, s:b, s:o}", "Image", s->image, "Entrypoint",
        s->egress_dir != NULL && s->egress_relay != NULL
            ? (s->agent_dir != NULL
                   ? json_pack("[s,s,s,s,s,s,s,s]", SBX_RELAY_PATH, "--dns", SBX_RELAY_DNS_LISTEN,
                               "--redirect", SBX_RELAY_REDIRECT_LISTEN, "--agent",
                               SBX_AGENT_DIR "/" SBX_AGENT_SOCK, "--")
                   : json_pack("[s,s,s,s,s,s]", SBX_RELAY_PATH, "--dns", SBX_RELAY_DNS_LISTEN,
                               "--redirect", SBX_RELAY_REDIRECT_LISTEN, "--"))
            : json_array(),
        "Cmd", "sleep", "infinity", "Env", env, "Labels", labels, "WorkingDir", "/workspace",
        "AttachStdout", 0, "AttachStderr", 0, "NetworkDisabled", 1, "HostConfig", hc);
}

static int valid_name(const char *s)
{
    if (s == NULL || *s == '\0' || strlen(s) > 64) {
        return 0;
    }
    for (; *s; s++) {
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              *s == '-' || *s == '_' || *s == '.')) {
            return 0;
        }
    }
    return 1;
}

static int cb_docker_destroy(void *ctx, const char *id, sbx_error_t **err);

/* (added) Waits until the container `name` is gone: a removal already in
 * progress (the background worker's) can outlast dk_remove_now's own retries
 * on a loaded engine (its layer and its disk cap's filesystem go with it). At
 * most DK_GONE_WAIT_S, then an error naming it. */
#define DK_GONE_WAIT_S 60
static int wait_gone(struct dk_ctx *c, const char *name, sbx_error_t **err)
{
    char path[160];

    snprintf(path, sizeof(path), "/containers/%s/json", name);
    for (int i = 0; i < DK_GONE_WAIT_S * 10; i++) {
        json_t *reply = NULL;
        long status = 0;
        struct timespec ts = {0, 100 * 1000 * 1000};

        if (dk_request(c, "GET", path, NULL, &status, &reply, err) < 0) {
            return -1;
        }
        json_decref(reply);
        if (status == 404) {
            return 0;
        }
        nanosleep(&ts, NULL);
    }
    return c->host->error_set(err, SBX_E_ENGINE,
                              "docker: %s is still being removed after %d s: try again later", name,
                              DK_GONE_WAIT_S);
}

/* 1 when the container of task `task` no longer runs (exited, dead or being
 * removed): a removal in the background, not a live sandbox. */
static int ending(struct dk_ctx *c, const char *task)
{
    char path[256];
    json_t *reply = NULL;
    long status = 0;
    const char *st;
    int r;

    snprintf(path, sizeof(path), "/containers/sbx-%s/json", task);
    if (dk_request(c, "GET", path, NULL, &status, &reply, NULL) < 0) {
        return 0;
    }
    st = json_string_value(json_object_get(json_object_get(reply, "State"), "Status"));
    r = status == 200 && st != NULL &&
        (strcmp(st, "exited") == 0 || strcmp(st, "dead") == 0 || strcmp(st, "removing") == 0);
    /* killed by this process a moment ago (an orphan reaped at this start) but
     * not seen stopped yet by the engine: its removal is ours to finish now */
    if (!r && status == 200 && json_is_string(json_object_get(reply, "Id"))) {
        r = dk_remove_queued(json_string_value(json_object_get(reply, "Id")));
    }
    json_decref(reply);
    return r;
}

/* Creates and starts the container; on failure removes what it made. */
static int create_container(struct dk_ctx *c, const struct sbx_sandbox_spec *s,
                            const char *workspace, char *id_out, size_t id_size, sbx_error_t **err)
{
    int retried = 0;
    json_t *body;
    json_t *reply = NULL;
    json_t *warnings;
    long status = 0;
    char path[256];
    const char *id;
    int64_t t0 = dk_now_ms(), t1, t2, t3;

    snprintf(path, sizeof(path), "/containers/create?name=sbx-%s", s->task_id);
again:
    for (int attempt = 0;; attempt++) {
        body = create_body(c, s, workspace, err);
        if (body == NULL) {
            return -1;
        }
        if (dk_request(c, "POST", path, body, &status, &reply, err) < 0) {
            json_decref(body);
            return -1;
        }
        json_decref(body);
        /* auto on overlay2/xfs: an engine that cannot apply the quota
         * refuses the create; once, the context turns to the watchdog */
        if (attempt > 0 || status < 400 || !dk_disk_fallback(c, status, reply)) {
            break;
        }
        json_decref(reply);
        reply = NULL;
    }
    if (status == 404) {
        c->host->error_set(err, SBX_E_NOTFOUND,
                           "docker: image '%s' not found in the engine "
                           "(build it with 'sbx image build')",
                           s->image);
        json_decref(reply);
        return -1;
    }
    if (status == 409 && !retried && ending(c, s->task_id)) {
        /* a sandbox of this name killed and waiting for its removal in the
         * background (an orphan just reaped, a task id reused): removed now */
        char name[96];

        json_decref(reply);
        reply = NULL;
        snprintf(name, sizeof(name), "sbx-%s", s->task_id);
        if (dk_remove_now(c, name, err) < 0 || wait_gone(c, name, err) < 0) {
            return -1;
        }
        retried = 1;
        goto again;
    }
    if (status == 409) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: a sandbox for task '%s' already exists",
                           s->task_id);
        json_decref(reply);
        return -1;
    }
    id = json_string_value(json_object_get(reply, "Id"));
    if (status != 201 || id == NULL) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: create: HTTP %ld: %s", status,
                           dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    snprintf(id_out, id_size, "%s", id);
    warnings = json_object_get(reply, "Warnings");
    if (json_array_size(warnings) > 0) {
        /* the engine dropped a limit: never run without it */
        c->host->error_set(err, SBX_E_ENGINE, "docker: the engine dropped a limit: %s",
                           json_string_value(json_array_get(warnings, 0)) ?: "?");
        json_decref(reply);
        cb_docker_destroy(c, id_out, NULL);
        return -1;
    }
    json_decref(reply);
    reply = NULL;
    t1 = dk_now_ms();
    if (dk_disk_after_create(c, id_out, s->limits.disk, err) < 0) {
        cb_docker_destroy(c, id_out, NULL);
        return -1;
    }
    t2 = dk_now_ms();
    snprintf(path, sizeof(path), "/containers/%s/start", id_out);
    if (dk_request(c, "POST", path, NULL, &status, &reply, err) < 0 ||
        (status != 204 && status != 304)) {
        if (status != 0) {
            c->host->error_set(err, SBX_E_ENGINE, "docker: start: HTTP %ld: %s", status,
                               dk_reply_message(reply));
        }
        json_decref(reply);
        cb_docker_destroy(c, id_out, NULL);
        return -1;
    }
    json_decref(reply);
    t3 = dk_now_ms();
    c->host->log(c->host->instance_name(c->opts), SBX_LOG_DEBUG,
                 "task %s: engine create %" PRId64 " ms, disk cap %" PRId64
                 " ms, engine start %" PRId64 " ms",
                 s->task_id, t1 - t0, t2 - t1, t3 - t2);
    if (c->userns) {
        sbx_error_t *uerr = NULL;

        if (dk_userns_caps(c, id_out, &uerr) < 0) {
            c->host->log(c->host->instance_name(c->opts), SBX_LOG_WARN,
                         "task %s: no per-sandbox inotify cap (%s): its inotify instances and "
                         "watches count only against the box's shared pool "
                         "(docs/operations.md)",
                         s->task_id, uerr ? uerr->msg : "?");
            c->host->error_free(&uerr);
        }
    }
    if (s->egress_dir != NULL && s->egress_relay != NULL) {
        sbx_error_t *nerr = NULL;

        if (dk_netns_redirect(c, id_out, &nerr) < 0) {
            c->host->log(c->host->instance_name(c->opts), SBX_LOG_WARN,
                         "task %s: no transparent egress (%s): only programs that use "
                         "HTTP(S)_PROXY get out (docs/egress.md)",
                         s->task_id, nerr ? nerr->msg : "?");
            c->host->error_free(&nerr);
        }
    }
    if ((s->nested_containers || c->sidecar) && dk_sidecar_start(c, id_out, s, err) < 0) {
        cb_docker_destroy(c, id_out, NULL);
        return -1;
    }
    if (dk_post_start(c, id_out, s->image, err) < 0) {
        cb_docker_destroy(c, id_out, NULL);
        return -1;
    }
    return 0;
}

static int cb_docker_create(void *ctx, const struct sbx_sandbox_spec *s, char *id_out,
                            size_t id_size, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    const char *workspace = NULL;
    int viewed = 0;

    if (!valid_name(s->task_id)) {
        return c->host->error_set(err, SBX_E_USAGE, "docker: task id '%s' is not a valid name",
                                  s->task_id ? s->task_id : "");
    }
    if (dk_worktree_source(c, s, &workspace, &viewed, err) < 0) {
        return -1;
    }
    if (s->worktree == NULL && s->view_later && s->view_dir != NULL) {
        if (dk_claim_prepare(c, s->view_dir, err) < 0) {
            return -1;
        }
        viewed = 1;
    }
    if (create_container(c, s, workspace, id_out, id_size, err) < 0) {
        if (viewed) {
            dk_worktree_release(s->view_dir);
        }
        return -1;
    }
    return 0;
}

static int cb_docker_destroy(void *ctx, const char *id, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;

    /* the sidecar first: it lives in the sandbox's network namespace */
    if (dk_sidecar_remove(c, id, err) < 0) {
        return -1;
    }
    dk_disk_forget(c, id);
    /* killed now; the engine's removal in the background (docker_remove.c) */
    return c->rm_background ? dk_remove_later(c, id, err) : dk_remove_now(c, id, err);
}

static int cb_docker_list(void *ctx, const char *key, const char *value, sbx_sandbox_fn fn,
                          void *ud, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    json_t *reply = NULL;
    json_t *filter;
    json_t *item;
    long status = 0;
    char *ftext;
    char *enc;
    char *path = NULL;
    char *label = NULL;
    size_t i;

    if (value != NULL) {
        label = xasprintf("%s=%s", key, value);
    }
    filter = json_pack("{s:[s]}", "label", label ? label : key);
    free(label);
    ftext = json_dumps(filter, JSON_COMPACT);
    json_decref(filter);
    enc = sbx_url_escape(ftext);
    free(ftext);
    path = xasprintf("/containers/json?all=1&filters=%s", enc);
    free(enc);
    if (dk_request(c, "GET", path, NULL, &status, &reply, err) < 0) {
        free(path);
        return -1;
    }
    free(path);
    if (status != 200 || !json_is_array(reply)) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: list: HTTP %ld: %s", status,
                           dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    json_array_foreach(reply, i, item)
    {
        json_t *labels = json_object_get(item, "Labels");
        size_t n = json_object_size(labels);
        struct sbx_kv *kv = xcalloc(n + 1, sizeof(*kv));
        const char *k;
        json_t *v;
        size_t j = 0;

        json_object_foreach(labels, k, v)
        {
            if (strcmp(k, "sbx.engine.state") == 0) {
                continue; /* only the engine says that */
            }
            kv[j].name = k;
            kv[j].value = json_string_value(v) ?: "";
            j++;
        }
        /* (added) the container's state: running, exited, removing, ... */
        kv[j].name = "sbx.engine.state";
        kv[j].value = json_string_value(json_object_get(item, "State")) ?: "";
        j++;
        fn(ud, json_string_value(json_object_get(item, "Id")) ?: "", kv, j);
        free(kv);
    }
    json_decref(reply);
    return 0;
}

static int cb_docker_info(void *ctx, struct sbx_provider_info *info, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;

    (void)err;
    snprintf(info->engine, sizeof(info->engine), "%s", c->engine);
    info->userns = c->userns;
    info->flags_off = c->userns ? 0 : SBX_PROVIDER_ENFORCES_USERNS;
    dk_disk_describe(c, info->disk_limit, sizeof(info->disk_limit));
    dk_sidecar_describe(c, info->nested, sizeof(info->nested));
    snprintf(info->seccomp, sizeof(info->seccomp), "%s", c->seccomp_desc);
    dk_worktree_describe(c, info->worktree, sizeof(info->worktree));
    return 0;
}

static const struct sbx_provider_ops provider_docker_ops = {
    /* user namespaces only when the engine remaps them: info() reports it off */
    .flags = SBX_PROVIDER_ENFORCES_LIMITS | SBX_PROVIDER_ENFORCES_DISK |
             SBX_PROVIDER_EGRESS_SOCKET | SBX_PROVIDER_NESTED_CONTAINERS |
             SBX_PROVIDER_ENFORCES_USERNS | SBX_PROVIDER_WORKTREE_VIEW | SBX_PROVIDER_PAUSE,
    .init = cb_docker_init,
    .destroy_ctx = cb_docker_destroy_ctx,
    .create = cb_docker_create,
    .exec = dk_exec,
    .destroy = cb_docker_destroy,
    .list = cb_docker_list,
    .cancel = dk_cancel,
    .info = cb_docker_info,
    .check = dk_disk_check,
    .image_build = dk_image_build,
    .scan_secrets = dk_scan_secrets,
    .claim_worktree = dk_claim_worktree,
    .update_limits = dk_update_limits,
    .image_op = dk_image_op, /* docker_push.c */
    .snapshot = dk_snapshot, /* (added, ABI 1.7) */
    .snapshot_remove = dk_snapshot_remove,
    /* (added, ABI 1.8) terminals/ports */
    .port_connect = dk_port_connect,
    /* (added, ABI 1.9) files/pause */
    .files_get = dk_files_get,
    .files_put = dk_files_put,
    .files_put_stream = dk_files_put_stream, /* (added, ABI 1.10) */
    .pause = dk_pause,
    .resume = dk_resume,
};

SBX_PLUGIN_DEFINE(SBX_PLUGIN_PROVIDER, DK_NAME, "0.1.0", SBX_PLUGIN_READY, NULL, options,
                  provider_docker_ops)
