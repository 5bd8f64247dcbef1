/* spike_creds.c - the spike's "only short-lived credentials inside"
 * criterion, for the Docker provider: while a task holds a lease, no
 * credential of the runner (the machine identity's client id and secret) is
 * anywhere in the sandbox (every process's environment, the filesystem, the
 * engine's inspect output), the lease's values are only in the environment
 * of the task's own exec, and the lease is revoked when the task ends. The
 * access token never leaves the credential plugin, so it cannot be inside. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/http.h"
#include "plugin/instance.h"
#include "sandbox/task.h"
#include "spike/spike_int.h"
#include "util/xalloc.h"

#define MAX_NEEDLES 64

struct needles {
    const char *v[MAX_NEEDLES];
    size_t n;
    size_t maxlen;
};

static void add_needle(struct needles *nd, const char *v)
{
    if (v != NULL && strlen(v) >= 4 && nd->n < MAX_NEEDLES) {
        nd->v[nd->n++] = v;
        if (strlen(v) > nd->maxlen) {
            nd->maxlen = strlen(v);
        }
    }
}

static int contains(const struct needles *nd, const char *buf, size_t len)
{
    for (size_t i = 0; i < nd->n; i++) {
        if (memmem(buf, len, nd->v[i], strlen(nd->v[i])) != NULL) {
            return 1;
        }
    }
    return 0;
}

/* Streams the container's filesystem (export) and counts needle hits, also
 * across chunk boundaries. */
struct scan {
    const struct needles *nd;
    char *win;
    size_t wlen;
    long hits;
    int64_t bytes;
};

static int scan_chunk(void *ud, const char *data, size_t len)
{
    struct scan *s = ud;
    size_t keep = s->nd->maxlen > 0 ? s->nd->maxlen - 1 : 0;
    size_t total = s->wlen + len;
    char *buf = xmalloc(total + 1);

    memcpy(buf, s->win, s->wlen);
    memcpy(buf + s->wlen, data, len);
    for (size_t i = 0; i < s->nd->n; i++) {
        const char *p = buf;
        size_t left = total;
        size_t nl = strlen(s->nd->v[i]);
        const char *hit;

        while ((hit = memmem(p, left, s->nd->v[i], nl)) != NULL) {
            s->hits++;
            left -= (size_t)(hit - p) + nl;
            p = hit + nl;
        }
    }
    s->bytes += (int64_t)len;
    s->wlen = total < keep ? total : keep;
    memcpy(s->win, buf + total - s->wlen, s->wlen);
    free(buf);
    return 0;
}

static long scan_export(const char *sock, const char *id, const struct needles *nd, int64_t *bytes)
{
    struct scan s = {.nd = nd};
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char url[512];

    s.win = xmalloc(nd->maxlen + 1);
    snprintf(url, sizeof(url), "http://localhost/containers/%s/export", id);
    req.method = "GET";
    req.url = url;
    req.unix_socket = sock;
    req.on_data = scan_chunk;
    req.userdata = &s;
    if (sbx_http_request(&req, &resp, &err) < 0 || resp.status != 200) {
        sbx_error_free(&err);
        s.hits = -1;
    }
    sbx_http_response_free(&resp);
    free(s.win);
    *bytes = s.bytes;
    return s.hits;
}

static json_t *engine_get(const char *sock, const char *path)
{
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    sbx_error_t *err = NULL;
    char url[512];
    json_t *j = NULL;

    snprintf(url, sizeof(url), "http://localhost%s", path);
    req.method = "GET";
    req.url = url;
    req.unix_socket = sock;
    req.timeout_ms = 30000;
    if (sbx_http_request(&req, &resp, &err) == 0 && resp.status == 200) {
        j = json_loadb(resp.body, resp.body_len, 0, NULL);
    }
    sbx_error_free(&err);
    sbx_http_response_free(&resp);
    return j;
}

static char *read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "r");
    char *buf;

    *len = 0;
    if (f == NULL) {
        return NULL;
    }
    buf = xmalloc(1 << 20);
    *len = fread(buf, 1, (1 << 20) - 1, f);
    fclose(f);
    return buf;
}

struct bg_exec {
    struct sbx_task *t;
    int status;
    int r;
};

static void *bg_main(void *arg)
{
    static const char *const argv[] = {"sleep", "3", NULL};
    struct bg_exec *b = arg;
    sbx_error_t *err = NULL;

    b->r = sbx_task_exec(b->t, argv, NULL, 0, NULL, NULL, NULL, &b->status, &err);
    sbx_error_free(&err);
    return NULL;
}

static int discard(void *ud, int stream, const char *d, size_t n)
{
    (void)ud, (void)stream, (void)d, (void)n;
    return 0;
}

void sbx_spike_credentials(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    const char *bar = "only short-lived task secrets inside";
    struct sbx_open_instance *prov = NULL;
    struct sbx_open_instance *cred = NULL;
    struct needles runner = {0};
    struct needles values = {0};
    struct sbx_task_opts o = {.provider = s->provider, .pool = "agent", .ephemeral = 1};
    struct sbx_task *t = NULL;
    struct bg_exec bg = {0};
    sbx_error_t *err = NULL;
    const struct sbx_opt_value *v;
    char sock[256] = "/var/run/docker.sock";
    char path[300];
    long env_runner = 0;
    long env_values_outside = 0;
    long env_values_exec = 0;
    long inspect_hits = 0;
    long fs_hits;
    int64_t fs_bytes = 0;
    int procs = 0;
    int revoked;
    json_t *top;
    json_t *insp;
    pthread_t th;

    if (s->credentials == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          "no credential instance given (--credentials NAME)", "-");
        return;
    }
    prov = sbx_instance_load(s->cfg, s->plugin_dir, s->provider, SBX_PLUGIN_PROVIDER, &err);
    if (prov == NULL || strcmp(prov->cfg->plugin, "provider_docker") != 0) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          "the check reads the engine's processes, inspect output and "
                          "filesystem: it runs for provider_docker only",
                          "-");
        sbx_instance_close(prov);
        sbx_error_free(&err);
        return;
    }
    v = sbx_options_get(prov->opts, "socket");
    if (v != NULL && v->present && v->str != NULL) {
        snprintf(sock, sizeof(sock), "%s", v->str);
    }
    else if (getenv("DOCKER_HOST") != NULL && strncmp(getenv("DOCKER_HOST"), "unix://", 7) == 0) {
        snprintf(sock, sizeof(sock), "%s", getenv("DOCKER_HOST") + 7);
    }
    sbx_instance_close(prov);
    /* the runner's own credentials: the values behind the plugin's *_env options */
    cred = sbx_instance_load(s->cfg, s->plugin_dir, s->credentials, SBX_PLUGIN_CREDENTIAL, &err);
    if (cred == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar, sbx_error_msg(err),
                          "credential instance "
                          "unusable");
        sbx_error_free(&err);
        return;
    }
    for (size_t i = 0; i < cred->opts->n; i++) {
        const struct sbx_opt_value *ov = &cred->opts->v[i];
        size_t kl = strlen(ov->decl->key);

        if (ov->present && ov->str != NULL && kl > 4 &&
            strcmp(ov->decl->key + kl - 4, "_env") == 0) {
            add_needle(&runner, getenv(ov->str));
        }
    }
    o.credentials = s->credentials;
    fprintf(stderr, "spike: %s: credentials inside a sandbox\n", s->provider);
    if (sbx_task_start(s->cfg, s->plugin_dir, &o, &t, &err) < 0) {
        sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar, sbx_error_msg(err),
                          "task with credentials "
                          "did not start");
        sbx_error_free(&err);
        sbx_instance_close(cred);
        return;
    }
    for (size_t i = 0; sbx_task_held_lease(t) != NULL && i < sbx_task_held_lease(t)->n_secrets;
         i++) {
        add_needle(&values, sbx_task_held_lease(t)->secrets[i].value);
    }
    bg.t = t;
    pthread_create(&th, NULL, bg_main, &bg);
    usleep(800 * 1000);
    snprintf(path, sizeof(path), "/containers/%s/top?ps_args=-eo%%20pid,args", sbx_task_sandbox(t));
    top = engine_get(sock, path);
    {
        size_t i;
        json_t *p;

        json_array_foreach(json_object_get(top, "Processes"), i, p)
        {
            const char *pid = json_string_value(json_array_get(p, 0));
            const char *args = json_string_value(json_array_get(p, 1));
            char f[64];
            size_t len;
            char *env;

            if (pid == NULL) {
                continue;
            }
            snprintf(f, sizeof(f), "/proc/%s/environ", pid);
            env = read_file(f, &len);
            procs++;
            if (env == NULL) {
                continue;
            }
            env_runner += contains(&runner, env, len);
            if (args != NULL && strcmp(args, "sleep 3") == 0) {
                env_values_exec += contains(&values, env, len);
            }
            else {
                env_values_outside += contains(&values, env, len);
            }
            free(env);
        }
    }
    json_decref(top);
    snprintf(path, sizeof(path), "/containers/%s/json", sbx_task_sandbox(t));
    insp = engine_get(sock, path);
    if (insp != NULL) {
        char *text = json_dumps(insp, 0);

        inspect_hits =
            contains(&runner, text, strlen(text)) + contains(&values, text, strlen(text));
        free(text);
        json_decref(insp);
    }
    {
        struct needles all = runner;

        for (size_t i = 0; i < values.n; i++) {
            add_needle(&all, values.v[i]);
        }
        fs_hits = scan_export(sock, sbx_task_sandbox(t), &all, &fs_bytes);
    }
    pthread_join(th, NULL);
    (void)discard;
    revoked = sbx_task_end(t, "spike", NULL, &err) == 0;
    sbx_instance_close(cred);
    {
        int ok = env_runner == 0 && env_values_outside == 0 && inspect_hits == 0 && fs_hits == 0 &&
                 revoked && env_values_exec > 0 && procs > 0;

        sbx_spike_row_set(row, ok ? SBX_SPIKE_PASS : SBX_SPIKE_FAIL, bar,
                          ok    ? NULL
                          : err ? sbx_error_msg(err)
                                : "a credential was found outside "
                                  "the task's exec, or the lease was not revoked",
                          "runner credentials: %ld in %d processes' environments, %ld in "
                          "inspect, %ld in %lld filesystem bytes; lease values: %zu, in the "
                          "exec's environment %s, elsewhere %ld; lease revoked: %s",
                          env_runner, procs, inspect_hits, fs_hits < 0 ? 0 : fs_hits,
                          (long long)fs_bytes, values.n, env_values_exec ? "yes" : "NO",
                          env_values_outside, revoked ? "yes" : "NO");
    }
    json_object_set_new(row->raw, "runner_credentials_checked", json_integer((json_int_t)runner.n));
    json_object_set_new(row->raw, "lease_values", json_integer((json_int_t)values.n));
    json_object_set_new(row->raw, "processes", json_integer(procs));
    json_object_set_new(row->raw, "filesystem_bytes", json_integer(fs_bytes));
    json_object_set_new(row->raw, "filesystem_hits", json_integer(fs_hits));
    json_object_set_new(row->raw, "inspect_hits", json_integer(inspect_hits));
    json_object_set_new(row->raw, "revoked", json_boolean(revoked));
    sbx_error_free(&err);
}
