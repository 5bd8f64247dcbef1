/* docker_files.c - files of a running sandbox through the engine's archive API
 * (GET/HEAD/PUT /containers/{id}/archive; docs/tasks.md, "Files").
 *
 * The engine resolves the path in the container's own root (its mounts
 * included) and packs or unpacks the archive chrooted there, so a symlink the
 * sandbox planted (/tmp/x -> /etc/shadow) names the sandbox's /etc/shadow,
 * never the host's; sbx never resolves a sandbox path on the host. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"

static char *archive_path(struct dk_ctx *c, const char *id, const char *path, const char *extra)
{
    char *eid = sbx_url_escape(id);
    char *epath = sbx_url_escape(path);
    char *url = NULL;

    if (eid != NULL && epath != NULL) {
        size_t n = strlen(eid) + strlen(epath) + strlen(c->api) + 64 + (extra ? strlen(extra) : 0);

        url = malloc(n);
        if (url != NULL) {
            snprintf(url, n, "/%s/containers/%s/archive?path=%s%s", c->api, eid, epath,
                     extra ? extra : "");
        }
    }
    free(eid);
    free(epath);
    return url;
}

/* The engine's message from an error reply's body ("{"message":"..."}"). */
static void reply_message(const struct sbx_http_response *resp, char *buf, size_t len)
{
    json_t *j = resp->body_len > 0 ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    const char *m = json_string_value(json_object_get(j, "message"));

    snprintf(buf, len, "%.*s", 300, m ? m : resp->body_len > 0 ? resp->body : "no message");
    buf[strcspn(buf, "\n")] = '\0';
    json_decref(j);
}

static int status_error(struct dk_ctx *c, const char *what, const char *path,
                        const struct sbx_http_response *resp, sbx_error_t **err)
{
    char msg[320];

    reply_message(resp, msg, sizeof(msg));
    if (resp->status == 404) {
        return c->host->error_set(err, SBX_E_NOTFOUND,
                                  "%s: no such file or directory in the sandbox", path);
    }
    return c->host->error_set(err, SBX_E_ENGINE, "docker: %s %s: HTTP %ld: %s", what, path,
                              resp->status, msg);
}

struct get_state {
    int (*sink)(void *ud, const char *data, size_t len);
    void *ud;
    int stopped;
};

static int on_archive(void *ud, const char *data, size_t len)
{
    struct get_state *g = ud;

    if (g->sink(g->ud, data, len) != 0) {
        g->stopped = 1;
        return 1;
    }
    return 0;
}

int dk_files_get(void *ctx, const char *id, const char *path,
                 int (*sink)(void *ud, const char *data, size_t len), void *ud, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    struct get_state g = {.sink = sink, .ud = ud};
    char *p = archive_path(c, id, path, NULL);
    char url[4200];
    int rc;

    if (p == NULL || strlen(p) >= sizeof(url) - 32) {
        free(p);
        return c->host->error_set(err, SBX_E_USAGE, "%.200s: path too long", path);
    }
    snprintf(url, sizeof(url), "http://localhost%s", p);
    free(p);
    /* the status first: a streamed body is handed on before its status is known */
    req.method = "HEAD";
    req.url = url;
    req.unix_socket = c->socket;
    req.timeout_ms = 60000;
    req.connect_timeout_ms = 2000;
    if (c->host->http(&req, &resp, err) < 0) {
        return c->host->error_wrap(err, "docker engine at %s", c->socket);
    }
    if (resp.status != 200) {
        rc = status_error(c, "reading", path, &resp, err);
        c->host->http_response_free(&resp);
        return rc;
    }
    c->host->http_response_free(&resp);
    memset(&resp, 0, sizeof(resp));
    req.method = "GET";
    req.timeout_ms = 0; /* a stream: bounded by the sink */
    req.on_data = on_archive;
    req.userdata = &g;
    rc = c->host->http(&req, &resp, err);
    if (rc < 0) {
        c->host->http_response_free(&resp);
        if (g.stopped) {
            return -1; /* the sink said why, or the caller knows */
        }
        return c->host->error_wrap(err, "docker engine at %s", c->socket);
    }
    if (resp.status != 200) {
        rc = status_error(c, "reading", path, &resp, err);
    }
    c->host->http_response_free(&resp);
    return rc;
}

static int put_whole(struct dk_ctx *c, const char *id, const char *dir, const char *tar, size_t len,
                     sbx_error_t **err);
static int put_stream(struct dk_ctx *c, const char *id, const char *dir,
                      int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                      sbx_error_t **err);

/* (added) Into the worktree: through a staging dir (docker_stage.c). */
static int put_staged(struct dk_ctx *c, const char *id, const char *dir, const char *tar,
                      size_t len, int (*source)(void *ud, char *buf, size_t cap, size_t *n),
                      void *ud, sbx_error_t **err)
{
    struct dk_stage s;
    int rc;

    if (dk_stage_open(c, id, dir, &s, err) < 0) {
        return -1;
    }
    rc = source != NULL ? put_stream(c, id, s.dir, source, ud, err)
                        : put_whole(c, id, s.dir, tar, len, err);
    if (rc == 0) {
        rc = dk_stage_commit(c, id, dir, &s, err);
    }
    dk_stage_close(c, id, &s);
    return rc;
}

int dk_files_put(void *ctx, const char *id, const char *dir, const char *tar, size_t len,
                 sbx_error_t **err)
{
    struct dk_ctx *c = ctx;

    if (dk_stage_wanted(dir)) {
        return put_staged(c, id, dir, tar, len, NULL, NULL, err);
    }
    return put_whole(c, id, dir, tar, len, err);
}

static int put_whole(struct dk_ctx *c, const char *id, const char *dir, const char *tar, size_t len,
                     sbx_error_t **err)
{
    struct sbx_http_response resp = {0};
    /* a directory is never replaced by a file nor a file by a directory */
    char *p = archive_path(c, id, dir, "&noOverwriteDirNonDir=true");
    int rc;

    if (p == NULL || strlen(p) >= 4000) {
        free(p);
        return c->host->error_set(err, SBX_E_USAGE, "%.200s: path too long", dir);
    }
    rc = dk_raw(c, NULL, "PUT", p, tar, len, "application/x-tar", 0, &resp, err);
    free(p);
    if (rc < 0) {
        return c->host->error_wrap(err, "docker engine at %s", c->socket);
    }
    if (resp.status != 200) {
        rc = status_error(c, "writing into", dir, &resp, err);
    }
    c->host->http_response_free(&resp);
    return rc;
}

/* (added, ABI 1.10) files_put with the archive read from source as it is sent: one
 * chunked PUT, nothing of it held here */
int dk_files_put_stream(void *ctx, const char *id, const char *dir,
                        int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                        sbx_error_t **err)
{
    struct dk_ctx *c = ctx;

    if (dk_stage_wanted(dir)) {
        return put_staged(c, id, dir, NULL, 0, source, ud, err);
    }
    return put_stream(c, id, dir, source, ud, err);
}

static int put_stream(struct dk_ctx *c, const char *id, const char *dir,
                      int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                      sbx_error_t **err)
{
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    const char *hdr[] = {"Content-Type: application/x-tar", NULL};
    char *p = archive_path(c, id, dir, "&noOverwriteDirNonDir=true");
    char url[4200];
    int rc;

    if (c->host->size < offsetof(struct sbx_host_api, http_upload) + sizeof(void *) ||
        c->host->http_upload == NULL) {
        free(p);
        return c->host->error_set(err, SBX_E_ENGINE, "this sbx cannot stream a request body");
    }
    if (p == NULL || strlen(p) >= sizeof(url) - 32) {
        free(p);
        return c->host->error_set(err, SBX_E_USAGE, "%.200s: path too long", dir);
    }
    snprintf(url, sizeof(url), "http://localhost%s", p);
    free(p);
    req.method = "PUT";
    req.url = url;
    req.unix_socket = c->socket;
    req.headers = hdr;
    req.timeout_ms = 0; /* a stream: as long as the source gives */
    req.connect_timeout_ms = 2000;
    if (c->host->http_upload(&req, source, ud, &resp, err) < 0) {
        return c->host->error_wrap(err, "docker engine at %s", c->socket);
    }
    rc = resp.status == 200 ? 0 : status_error(c, "writing into", dir, &resp, err);
    c->host->http_response_free(&resp);
    return rc;
}
