/* docker_sidecar.c - a per-sandbox Docker daemon for Testcontainers
 * (ADR 0287 decision 5; docs/architecture.md "Decisions taken" and "Egress
 * topology"). The daemon runs in a sidecar container that joins the
 * sandbox's loopback-only network namespace; its unix socket sits in a
 * per-sandbox host directory mounted in both; it is removed with the
 * sandbox. It never sees the host engine's socket. See docs/testcontainers.md.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "docker.h"
#include "docker_seedtar.h"

/* The size of the engine's remapped range (dockremap's 65536 in
 * /etc/subuid): ids a seeded layer may carry, shifted back by the base. */
#define DK_REMAP_COUNT 65536u

/* Added to the engine's default set; under user remapping they apply only
 * inside the sidecar's user namespace. Never --privileged: it fails on the
 * project's machines (reference/docker-on-the-ci-machines.md). */
static const char *const sidecar_caps[] = {"SYS_ADMIN", "NET_ADMIN",  "MKNOD",       "SYS_PTRACE",
                                           "SETFCAP",   "SYS_CHROOT", "AUDIT_WRITE", NULL};

/* The inner bridge (docker0) lives in the sandbox's network namespace,
 * which has no other interface: inner containers reach the sandbox's
 * addresses on it and nothing beyond (no forwarding, no route out). A
 * published port is Docker's userland proxy listening in that namespace,
 * so it answers on the sandbox's 127.0.0.1 (Testcontainers' host). The plain
 * docker-proxy: rootless mode would pick rootlesskit-docker-proxy, which
 * needs a RootlessKit that does not run here. */
#define DK_DAEMON_ARGS                                                                             \
    "dockerd --host unix://" DK_DOCKER_SOCKET " --data-root /var/lib/docker "                      \
    "--exec-root /run/docker --pidfile /run/docker.pid --iptables=false "                          \
    "--ip-forward=false --ip-masq=false --userland-proxy=true "                                    \
    "--userland-proxy-path=/usr/sbin/docker-proxy --storage-driver=vfs"

/* Rootless mode: dockerd sees ROOTLESSKIT_STATE_DIR and runs as it would
 * under RootlessKit; no cgroup is touched (inner --memory is not applied on
 * cgroup v1; the sidecar's own limits bound inner containers). */
static const char rootless_script[] =
    "set -e; mkdir -p /run/rk /run/user/0 /root; rm -f " DK_DOCKER_SOCKET "; "
    "exec " DK_DAEMON_ARGS " \"$@\"";

/* Rootful: the cgroup v1 hierarchies are mounted read-only in a container;
 * mount them afresh so the inner runc can create cgroups. */
static const char rootful_script[] =
    "set -e; rm -f " DK_DOCKER_SOCKET "; "
    "for d in /sys/fs/cgroup/*/; do umount -l \"$d\" 2>/dev/null || true; done; "
    "umount -l /sys/fs/cgroup 2>/dev/null || true; "
    "mount -t tmpfs -o mode=755 cgroup /sys/fs/cgroup; "
    "for c in memory blkio cpu cpuacct cpuset devices freezer pids; do "
    "mkdir -p /sys/fs/cgroup/$c; mount -t cgroup -o $c cgroup /sys/fs/cgroup/$c || "
    "rmdir /sys/fs/cgroup/$c; done; "
    "exec " DK_DAEMON_ARGS " \"$@\"";

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};

    nanosleep(&ts, NULL);
}

static void free_strv(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

/* host or host:port: letters, digits, '-', '.', one ':' and a port. The
 * values reach dockerd as arguments ("$@"), never through the shell's
 * parser; checked anyway. */
static int registry_ok(const char *r)
{
    const char *colon = strchr(r, ':');
    size_t host = colon ? (size_t)(colon - r) : strlen(r);

    if (host == 0 || host > 253 || r[0] == '-' || r[0] == '.') {
        return 0;
    }
    for (size_t i = 0; i < host; i++) {
        if (!((r[i] >= 'a' && r[i] <= 'z') || (r[i] >= 'A' && r[i] <= 'Z') ||
              (r[i] >= '0' && r[i] <= '9') || r[i] == '-' || r[i] == '.')) {
            return 0;
        }
    }
    if (colon != NULL) {
        char *end = NULL;
        long port = strtol(colon + 1, &end, 10);

        if (colon[1] < '1' || colon[1] > '9' || *end != '\0' || port > 65535) {
            return 0;
        }
    }
    return 1;
}

static int insecure_init(struct dk_ctx *c, sbx_error_t **err)
{
    const struct sbx_host_api *h = c->host;
    const char *const *regs = h->opt_strings(c->opts, "sidecar_insecure_registries");
    size_t n = 0;

    while (regs != NULL && regs[n] != NULL) {
        if (!registry_ok(regs[n])) {
            return h->error_set(err, SBX_E_CONFIG,
                                "%s: sidecar_insecure_registries[%zu] '%.80s' is not host or "
                                "host:port",
                                h->opt_where(c->opts, "sidecar_insecure_registries"), n, regs[n]);
        }
        n++;
    }
    c->sidecar_insecure = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        c->sidecar_insecure[i] = xasprintf("--insecure-registry=%s", regs[i]);
    }
    return 0;
}

int dk_sidecar_init(struct dk_ctx *c, sbx_error_t **err)
{
    const struct sbx_host_api *h = c->host;
    const char *mode = h->opt_string(c->opts, "sidecar_mode");
    const char *image = h->opt_string(c->opts, "sidecar_image");
    const char *const *images = h->opt_strings(c->opts, "sidecar_images");
    size_t n = 0;

    c->sidecar = h->opt_bool(c->opts, "docker_sidecar");
    c->sidecar_data = h->opt_int(c->opts, "sidecar_data_size");
    c->sidecar_timeout = h->opt_int(c->opts, "sidecar_timeout");
    if (mode == NULL || strcmp(mode, "auto") == 0) {
        c->sidecar_rootless = c->userns;
    }
    else if (strcmp(mode, "rootless") == 0) {
        c->sidecar_rootless = 1;
    }
    else if (strcmp(mode, "rootful") == 0) {
        c->sidecar_rootless = 0;
    }
    else {
        return h->error_set(err, SBX_E_CONFIG,
                            "%s: sidecar_mode '%s': use auto, rootless or "
                            "rootful",
                            h->opt_where(c->opts, "sidecar_mode"), mode);
    }
    if (image == NULL || image[0] == '\0') {
        return h->error_set(err, SBX_E_CONFIG, "%s: sidecar_image must not be empty",
                            h->opt_where(c->opts, "sidecar_image"));
    }
    if (c->sidecar_data < 64 * 1024 * 1024) {
        return h->error_set(err, SBX_E_CONFIG, "%s: sidecar_data_size must be at least 64M",
                            h->opt_where(c->opts, "sidecar_data_size"));
    }
    if (c->sidecar_timeout <= 0) {
        c->sidecar_timeout = 60;
    }
    if (insecure_init(c, err) < 0) {
        return -1;
    }
    c->sidecar_image = strdup(image);
    while (images != NULL && images[n] != NULL) {
        if (images[n][0] == '\0' || strchr(images[n], ' ') != NULL) {
            return h->error_set(err, SBX_E_CONFIG,
                                "%s: sidecar_images[%zu] is not an image "
                                "reference",
                                h->opt_where(c->opts, "sidecar_images"), n);
        }
        n++;
    }
    c->sidecar_images = calloc(n + 1, sizeof(char *));
    if (c->sidecar_images == NULL || c->sidecar_image == NULL) {
        abort();
    }
    for (size_t i = 0; i < n; i++) {
        c->sidecar_images[i] = xstrdup(images[i]);
    }
    return 0;
}

void dk_sidecar_free(struct dk_ctx *c)
{
    free(c->sidecar_image);
    free_strv(c->sidecar_images);
    free_strv(c->sidecar_insecure);
    c->sidecar_image = NULL;
    c->sidecar_images = NULL;
    c->sidecar_insecure = NULL;
}

void dk_sidecar_describe(struct dk_ctx *c, char *buf, size_t size)
{
    char caps[160] = "";

    for (size_t i = 0; sidecar_caps[i] != NULL; i++) {
        size_t len = strlen(caps);

        snprintf(caps + len, sizeof(caps) - len, "%s%s", i ? "," : "", sidecar_caps[i]);
    }
    /* Without remapping the sidecar's root is host root with SYS_ADMIN, and
     * even a rootless-mode daemon in it runs as host root: only the engine's
     * remapping isolates it. */
    snprintf(buf, size, "%suserns-remap %s, %s inner daemon, caps +%s%s",
             !c->userns ? "ISOLATION FAILURE: " : "", c->userns ? "on" : "off",
             c->sidecar_rootless ? "rootless" : "rootful", caps,
             c->userns ? "" : " (sidecar root is host root)");
}

void dk_sidecar_sandbox_body(struct dk_ctx *c, const struct sbx_sandbox_spec *s, json_t *env,
                             json_t *mounts, json_t *labels)
{
    (void)c;
    if (s->provider_dir != NULL) {
        json_array_append_new(mounts, dk_bind_mount(s->provider_dir, DK_DOCKER_DIR, 1));
    }
    json_array_append_new(env, json_string("DOCKER_HOST=unix://" DK_DOCKER_SOCKET));
    /* the daemon and all it holds die with the sandbox: no reaper needed */
    json_array_append_new(env, json_string("TESTCONTAINERS_RYUK_DISABLED=true"));
    /* published ports answer on the sandbox's loopback (the userland proxy
     * runs in its network namespace); without this Testcontainers would use
     * the inner bridge's gateway */
    json_array_append_new(env, json_string("TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1"));
    json_object_set_new(labels, "sbx.docker_sidecar", json_string("1"));
}

/* The last lines of the sidecar's log (it runs with a TTY: plain text). */
static void sidecar_log_tail(struct dk_ctx *c, const char *sid, char *out, size_t size)
{
    struct sbx_http_response resp = {0};
    sbx_error_t *e = NULL;
    char path[256];

    out[0] = '\0';
    snprintf(path, sizeof(path), "/%s/containers/%s/logs?stdout=1&stderr=1&tail=8", c->api, sid);
    if (dk_raw(c, NULL, "GET", path, NULL, 0, NULL, 10000, &resp, &e) < 0) {
        snprintf(out, size, "(no log: %s)", e ? e->msg : "?");
    }
    else {
        size_t j = 0;

        for (size_t i = 0; i < resp.body_len && j + 3 < size; i++) {
            char ch = resp.body[i];

            if (ch == '\r') {
                continue;
            }
            out[j++] = ch == '\n' ? '|' : ch;
        }
        out[j] = '\0';
    }
    c->host->http_response_free(&resp);
    if (e != NULL) {
        c->host->error_free(&e);
    }
}

static int sidecar_running(struct dk_ctx *c, const char *sid)
{
    json_t *reply = NULL;
    long status = 0;
    char path[256];
    sbx_error_t *e = NULL;
    int running = -1;

    snprintf(path, sizeof(path), "/containers/%s/json", sid);
    if (dk_request(c, "GET", path, NULL, &status, &reply, &e) == 0 && status == 200) {
        running = json_is_true(json_object_get(json_object_get(reply, "State"), "Running"));
    }
    if (e != NULL) {
        c->host->error_free(&e);
    }
    json_decref(reply);
    return running;
}

/* Polls the inner daemon's /_ping until it answers OK. */
static int wait_daemon(struct dk_ctx *c, const char *sid, const char *sock, sbx_error_t **err)
{
    struct timespec start;
    struct timespec now;
    char log[1024];

    clock_gettime(CLOCK_MONOTONIC, &start);
    for (int i = 0;; i++) {
        struct sbx_http_response resp = {0};
        sbx_error_t *e = NULL;
        int ok = 0;

        if (access(sock, F_OK) == 0 &&
            dk_raw(c, sock, "GET", "/_ping", NULL, 0, NULL, 2000, &resp, &e) == 0) {
            ok = resp.status == 200;
        }
        c->host->http_response_free(&resp);
        if (e != NULL) {
            c->host->error_free(&e);
        }
        if (ok) {
            return 0;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (i % 10 == 9 && sidecar_running(c, sid) == 0) {
            sidecar_log_tail(c, sid, log, sizeof(log));
            return c->host->error_set(err, SBX_E_ENGINE,
                                      "docker sidecar exited before its "
                                      "daemon answered; last log lines: %s",
                                      log);
        }
        if (now.tv_sec - start.tv_sec >= c->sidecar_timeout) {
            sidecar_log_tail(c, sid, log, sizeof(log));
            return c->host->error_set(err, SBX_E_TIMEOUT,
                                      "docker sidecar: the inner daemon did "
                                      "not answer on %s within %" PRId64 "s; last log lines: %s",
                                      sock, c->sidecar_timeout, log);
        }
        sleep_ms(100);
    }
}

/* Layers of the host engine may carry its remapped ids (files a sandbox
 * wrote, imported or added); the inner daemon knows only 0..65535. */
static int shift_ids(struct dk_ctx *c, const char *image, struct sbx_http_response *got,
                     sbx_error_t **err)
{
    char msg[400];
    int changed = 0;

    if (dk_seed_shift((unsigned char *)got->body, got->body_len, c->remap_uid, c->remap_gid,
                      DK_REMAP_COUNT, &changed, msg, sizeof(msg)) < 0) {
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "docker sidecar: image '%s' (option sidecar_images): %s", image,
                                  msg);
    }
    if (changed) {
        c->host->log(c->host->instance_name(c->opts), SBX_LOG_DEBUG,
                     "docker sidecar: image '%s': owners shifted back by %u:%u", image,
                     c->remap_uid, c->remap_gid);
    }
    return 0;
}

/* docker save IMAGE on the host engine | docker load in the sidecar. The
 * archive is held in memory: meant for the small images tests start. */
static int seed_image(struct dk_ctx *c, const char *sock, const char *image, sbx_error_t **err)
{
    struct sbx_http_response got = {0};
    struct sbx_http_response put = {0};
    char *enc = sbx_url_escape(image);
    char path[1024];
    int r = 0;

    snprintf(path, sizeof(path), "/%s/images/get?names=%s", c->api, enc);
    free(enc);
    if (dk_raw(c, NULL, "GET", path, NULL, 0, NULL, 600000, &got, err) < 0) {
        return c->host->error_wrap(err, "docker sidecar: saving image '%s'", image);
    }
    if (got.status != 200) {
        r = c->host->error_set(err, SBX_E_NOTFOUND,
                               "docker sidecar: image '%s' (option "
                               "sidecar_images): HTTP %ld from the host engine: %.200s",
                               image, got.status, got.body ? got.body : "");
    }
    else if (c->userns && c->remap_uid != 0 && shift_ids(c, image, &got, err) < 0) {
        r = -1;
    }
    else if (dk_raw(c, sock, "POST", "/images/load?quiet=1", got.body, got.body_len,
                    "application/x-tar", 600000, &put, err) < 0) {
        r = c->host->error_wrap(err, "docker sidecar: loading image '%s'", image);
    }
    else if (put.status != 200 || (put.body != NULL && strstr(put.body, "\"error") != NULL)) {
        r = c->host->error_set(err, SBX_E_ENGINE,
                               "docker sidecar: loading image '%s': HTTP "
                               "%ld: %.200s",
                               image, put.status, put.body ? put.body : "");
    }
    c->host->http_response_free(&got);
    c->host->http_response_free(&put);
    return r;
}

/* The inner daemon pulls through the sandbox's relay (it shares the
 * sandbox's 127.0.0.1): the proxy variables the core gave the sandbox. */
static json_t *sidecar_env(const struct sbx_sandbox_spec *s)
{
    static const char *const proxy_vars[] = {"HTTP_PROXY",  "HTTPS_PROXY", "NO_PROXY", "http_proxy",
                                             "https_proxy", "no_proxy",    NULL};
    json_t *env = json_pack("[s,s,s,s]", "ROOTLESSKIT_STATE_DIR=/run/rk",
                            "XDG_RUNTIME_DIR=/run/user/0", "HOME=/root",
                            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");

    for (size_t i = 0; s->egress_dir != NULL && i < s->n_env; i++) {
        for (size_t k = 0; proxy_vars[k] != NULL; k++) {
            if (strcmp(s->env[i].name, proxy_vars[k]) == 0) {
                char *kv = xasprintf("%s=%s", s->env[i].name, s->env[i].value);

                json_array_append_new(env, json_string(kv));
                free(kv);
            }
        }
    }
    return env;
}

static json_t *sidecar_body(struct dk_ctx *c, const char *id, const struct sbx_sandbox_spec *s,
                            const char *isolation, sbx_error_t **err)
{
    json_t *labels = json_object();
    json_t *mounts = json_array();
    json_t *tmpfs;
    json_t *hc;
    json_t *cmd;
    char caps[160] = "";
    char netmode[128];
    char size[96];

    for (size_t i = 0; i < s->n_labels; i++) {
        json_object_set_new(labels, s->labels[i].name, json_string(s->labels[i].value));
    }
    for (size_t i = 0; sidecar_caps[i] != NULL; i++) {
        size_t len = strlen(caps);

        snprintf(caps + len, sizeof(caps) - len, "%s%s", i ? "," : "", sidecar_caps[i]);
    }
    json_object_set_new(labels, "sbx.role", json_string("docker-sidecar"));
    json_object_set_new(labels, "sbx.sidecar.of", json_string(id));
    json_object_set_new(labels, "sbx.sidecar.userns", json_string(c->userns ? "on" : "off"));
    json_object_set_new(labels, "sbx.sidecar.daemon",
                        json_string(c->sidecar_rootless ? "rootless" : "rootful"));
    json_object_set_new(labels, "sbx.sidecar.caps", json_string(caps));
    json_object_set_new(labels, "sbx.sidecar.isolation", json_string(isolation));
    json_array_append_new(mounts, dk_bind_mount(s->provider_dir, DK_DOCKER_DIR, 0));
    snprintf(size, sizeof(size), "rw,exec,dev,suid,size=%" PRId64 "k", c->sidecar_data / 1024);
    tmpfs = json_pack("{s:s, s:s}", "/var/lib/docker", size, "/run", "rw,exec,size=65536k");
    snprintf(netmode, sizeof(netmode), "container:%s", id);
    hc = json_pack("{s:I, s:I, s:I, s:I, s:o, s:[s,s], s:s, s:s, s:o, s:o, s:b, s:b}", "NanoCpus",
                   (json_int_t)(s->limits.cpus * 1e9 + 0.5), "Memory", (json_int_t)s->limits.memory,
                   "MemorySwap", (json_int_t)s->limits.memory, "PidsLimit",
                   (json_int_t)s->limits.pids, "CapAdd", dk_strv_json(sidecar_caps), "SecurityOpt",
                   "seccomp=unconfined", "apparmor=unconfined", "NetworkMode", netmode,
                   "CgroupnsMode", "private", "Tmpfs", tmpfs, "Mounts", mounts, "Init", 1,
                   "Privileged", 0);
    json_object_set_new(hc, "CpuShares", json_integer(DK_CPU_SHARES));
    if (!c->sidecar_rootless) {
        json_object_set_new(hc, "DeviceCgroupRules", json_pack("[s]", "a *:* rwm"));
    }
    /* its writable layer gets the sandbox's disk cap (its data root is the
     * tmpfs above, charged to its memory) */
    if (dk_disk_storage_opt(c, hc, c->sidecar_image, "sbx image build --sidecar", s->limits.disk,
                            err) < 0) {
        json_decref(hc);
        json_decref(labels);
        return NULL;
    }
    cmd = json_pack("[s,s,s,s]", "sh", "-c", c->sidecar_rootless ? rootless_script : rootful_script,
                    "sh");
    for (size_t i = 0; c->sidecar_insecure != NULL && c->sidecar_insecure[i] != NULL; i++) {
        json_array_append_new(cmd, json_string(c->sidecar_insecure[i]));
    }
    return json_pack("{s:s, s:o, s:o, s:o, s:b, s:o}", "Image", c->sidecar_image, "Cmd", cmd, "Env",
                     sidecar_env(s), "Labels", labels, "Tty", 1, "HostConfig", hc);
}

/* The sidecar's root is the engine's remapped root: it must own the
 * directory it creates its socket in. */
static int prepare_dir(struct dk_ctx *c, const char *dir, sbx_error_t **err)
{
    struct stat st;

    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        return c->host->error_set(err, SBX_E_ENGINE, "docker sidecar: socket directory %s: %s", dir,
                                  errno ? strerror(errno) : "not a directory");
    }
    if ((st.st_uid != c->remap_uid || st.st_gid != c->remap_gid) &&
        chown(dir, c->remap_uid, c->remap_gid) < 0) {
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "docker sidecar: cannot hand %s to the "
                                  "engine's container root (uid %u): %s (run sbx as root)",
                                  dir, c->remap_uid, strerror(errno));
    }
    if (chmod(dir, 0755) < 0) {
        return c->host->error_set(err, SBX_E_ENGINE, "docker sidecar: chmod %s: %s", dir,
                                  strerror(errno));
    }
    return 0;
}

int dk_sidecar_start(struct dk_ctx *c, const char *id, const struct sbx_sandbox_spec *s,
                     sbx_error_t **err)
{
    json_t *body;
    json_t *reply = NULL;
    long status = 0;
    char path[256];
    char sock[256];
    char isolation[256];
    char sid[80];
    const char *rid;

    if (s->provider_dir == NULL) {
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "docker sidecar: the core gave no socket "
                                  "directory (spec.provider_dir)");
    }
    if (snprintf(sock, sizeof(sock), "%s/docker.sock", s->provider_dir) > 107) {
        return c->host->error_set(err, SBX_E_CONFIG,
                                  "docker sidecar: socket path %s is longer "
                                  "than 107 bytes (use a shorter state_dir)",
                                  sock);
    }
    if (prepare_dir(c, s->provider_dir, err) < 0) {
        return -1;
    }
    dk_sidecar_describe(c, isolation, sizeof(isolation));
    if (strncmp(isolation, "ISOLATION FAILURE", 17) == 0) {
        c->host->log(c->host->instance_name(c->opts), SBX_LOG_WARN,
                     "task %s: docker sidecar "
                     "runs with %s",
                     s->task_id, isolation);
    }
    body = sidecar_body(c, id, s, isolation, err);
    if (body == NULL) {
        return -1;
    }
    snprintf(path, sizeof(path), "/containers/create?name=sbx-%s-docker", s->task_id);
    if (dk_request(c, "POST", path, body, &status, &reply, err) < 0) {
        json_decref(body);
        return -1;
    }
    json_decref(body);
    rid = json_string_value(json_object_get(reply, "Id"));
    if (status == 404) {
        c->host->error_set(err, SBX_E_NOTFOUND,
                           "docker sidecar: image '%s' not found in the "
                           "engine (build it with 'sbx image build --sidecar')",
                           c->sidecar_image);
        json_decref(reply);
        return -1;
    }
    if (status != 201 || rid == NULL) {
        c->host->error_set(err, SBX_E_ENGINE, "docker sidecar: create: HTTP %ld: %s", status,
                           dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    snprintf(sid, sizeof(sid), "%s", rid);
    json_decref(reply);
    reply = NULL;
    if (dk_disk_after_create(c, sid, s->limits.disk, err) < 0) {
        return -1;
    }
    snprintf(path, sizeof(path), "/containers/%s/start", sid);
    if (dk_request(c, "POST", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    if (status != 204 && status != 304) {
        c->host->error_set(err, SBX_E_ENGINE, "docker sidecar: start: HTTP %ld: %s", status,
                           dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    json_decref(reply);
    if (wait_daemon(c, sid, sock, err) < 0) {
        return -1;
    }
    for (size_t i = 0; c->sidecar_images != NULL && c->sidecar_images[i] != NULL; i++) {
        if (seed_image(c, sock, c->sidecar_images[i], err) < 0) {
            return -1;
        }
    }
    return 0;
}

int dk_sidecar_remove(struct dk_ctx *c, const char *id, sbx_error_t **err)
{
    json_t *reply = NULL;
    json_t *item;
    long status = 0;
    char filter[200];
    char *enc;
    char path[512];
    size_t i;
    int r = 0;

    snprintf(filter, sizeof(filter), "{\"label\":[\"sbx.sidecar.of=%.100s\"]}", id);
    enc = sbx_url_escape(filter);
    snprintf(path, sizeof(path), "/containers/json?all=1&filters=%s", enc);
    free(enc);
    if (dk_request(c, "GET", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    if (status != 200 || !json_is_array(reply)) {
        c->host->error_set(err, SBX_E_ENGINE, "docker sidecar: list: HTTP %ld: %s", status,
                           dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    json_array_foreach(reply, i, item)
    {
        const char *sid = json_string_value(json_object_get(item, "Id"));
        json_t *del = NULL;

        if (sid == NULL) {
            continue;
        }
        snprintf(path, sizeof(path), "/containers/%.80s?force=1&v=1", sid);
        if (dk_request(c, "DELETE", path, NULL, &status, &del, err) < 0) {
            r = -1;
            break;
        }
        if (status != 204 && status != 404 && status != 409) {
            r = c->host->error_set(err, SBX_E_ENGINE,
                                   "docker sidecar: remove %.12s: HTTP %ld: "
                                   "%s",
                                   sid, status, dk_reply_message(del));
            json_decref(del);
            break;
        }
        json_decref(del);
    }
    json_decref(reply);
    return r;
}
