/* docker_scan.c - the scan_secrets op (the spike's "only short-lived
 * credentials inside"): looks for each needle in the environment of every
 * process of the sandbox (the engine's top: host pids, read through /proc),
 * in the engine's inspect output and in the container's filesystem (export,
 * streamed, also across chunk boundaries). Needles are secret values: they
 * are never logged and the buffers that held them are zeroed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"

#define DK_ENVIRON_MAX (1 << 20)

static size_t longest(const struct sbx_secret_scan *s)
{
    size_t m = 0;

    for (size_t i = 0; i < s->n_needles; i++) {
        size_t l = strlen(s->needles[i]);

        m = l > m ? l : m;
    }
    return m;
}

static int has(const char *buf, size_t len, const char *needle)
{
    return memmem(buf, len, needle, strlen(needle)) != NULL;
}

static char *read_environ(const char *pid, size_t *len)
{
    char path[64];
    FILE *f;
    char *buf;

    *len = 0;
    snprintf(path, sizeof(path), "/proc/%s/environ", pid);
    f = fopen(path, "re");
    if (f == NULL) {
        return NULL;
    }
    buf = xmalloc(DK_ENVIRON_MAX);
    *len = fread(buf, 1, DK_ENVIRON_MAX, f);
    fclose(f);
    return buf;
}

static int scan_processes(struct dk_ctx *c, const char *id, struct sbx_secret_scan *s,
                          sbx_error_t **err)
{
    char path[256];
    json_t *top = NULL;
    json_t *p;
    long status = 0;
    size_t i;

    snprintf(path, sizeof(path), "/containers/%s/top?ps_args=-eo%%20pid,args", id);
    if (dk_request(c, "GET", path, NULL, &status, &top, err) < 0) {
        return -1;
    }
    if (status != 200) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: top %s: %s", id, dk_reply_message(top));
        json_decref(top);
        return -1;
    }
    json_array_foreach(json_object_get(top, "Processes"), i, p)
    {
        const char *pid = json_string_value(json_array_get(p, 0));
        const char *args = json_string_value(json_array_get(p, 1));
        int mine = args != NULL && s->exec_args != NULL && strcmp(args, s->exec_args) == 0;
        size_t len;
        char *env;

        if (pid == NULL || strspn(pid, "0123456789") != strlen(pid)) {
            continue;
        }
        s->processes++;
        env = read_environ(pid, &len);
        if (env == NULL) {
            continue;
        }
        for (size_t k = 0; k < s->n_needles; k++) {
            if (has(env, len, s->needles[k]) && mine) {
                s->hits[k].exec_env++;
            }
            else if (has(env, len, s->needles[k])) {
                s->hits[k].other_env++;
            }
        }
        c->host->secret_zero(env, len);
        free(env);
    }
    json_decref(top);
    return 0;
}

static int scan_inspect(struct dk_ctx *c, const char *id, struct sbx_secret_scan *s,
                        sbx_error_t **err)
{
    char path[256];
    json_t *insp = NULL;
    long status = 0;
    char *text;

    snprintf(path, sizeof(path), "/containers/%s/json", id);
    if (dk_request(c, "GET", path, NULL, &status, &insp, err) < 0) {
        return -1;
    }
    if (status != 200 || insp == NULL) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: inspect %s: %s", id, dk_reply_message(insp));
        json_decref(insp);
        return -1;
    }
    text = json_dumps(insp, 0);
    json_decref(insp);
    for (size_t k = 0; text != NULL && k < s->n_needles; k++) {
        s->hits[k].metadata += has(text, strlen(text), s->needles[k]);
    }
    if (text != NULL) {
        c->host->secret_zero(text, strlen(text));
    }
    free(text);
    return 0;
}

struct export_scan {
    struct sbx_secret_scan *s;
    char *win; /* the last (longest needle - 1) bytes of the previous chunk */
    size_t wlen;
    size_t keep;
};

static int export_chunk(void *ud, const char *data, size_t len)
{
    struct export_scan *e = ud;
    size_t total = e->wlen + len;
    char *buf = xmalloc(total + 1);
    memcpy(buf, e->win, e->wlen);
    memcpy(buf + e->wlen, data, len);
    for (size_t k = 0; k < e->s->n_needles; k++) {
        const char *p = buf;
        size_t left = total;
        size_t nl = strlen(e->s->needles[k]);
        const char *hit;

        while ((hit = memmem(p, left, e->s->needles[k], nl)) != NULL) {
            e->s->hits[k].files++;
            left -= (size_t)(hit - p) + nl;
            p = hit + nl;
        }
    }
    e->s->file_bytes += (int64_t)len;
    e->wlen = total < e->keep ? total : e->keep;
    memcpy(e->win, buf + total - e->wlen, e->wlen);
    free(buf);
    return 0;
}

int dk_scan_export(struct dk_ctx *c, const char *id, struct sbx_secret_scan *s, sbx_error_t **err)
{
    struct export_scan e = {.s = s};
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    char url[512];
    int r;

    e.keep = longest(s) > 0 ? longest(s) - 1 : 0;
    e.win = xmalloc(e.keep + 1);
    snprintf(url, sizeof(url), "http://localhost/%s/containers/%s/export", c->api, id);
    req.method = "GET";
    req.url = url;
    req.unix_socket = c->socket;
    req.on_data = export_chunk;
    req.userdata = &e;
    r = c->host->http(&req, &resp, err);
    if (r == 0 && resp.status != 200) {
        r = c->host->error_set(err, SBX_E_ENGINE, "docker: export %s: HTTP %ld", id, resp.status);
    }
    c->host->http_response_free(&resp);
    c->host->secret_zero(e.win, e.keep);
    free(e.win);
    return r;
}

int dk_scan_secrets(void *ctx, const char *id, struct sbx_secret_scan *s, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;

    if (scan_processes(c, id, s, err) < 0 || scan_inspect(c, id, s, err) < 0 ||
        dk_scan_export(c, id, s, err) < 0) {
        return c->host->error_wrap(err, "scanning sandbox %s for secrets", id);
    }
    return 0;
}
