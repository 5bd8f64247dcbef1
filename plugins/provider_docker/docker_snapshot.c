/* docker_snapshot.c - the snapshot and snapshot_remove ops (ABI 1.7; docs/tasks.md,
 * "Snapshots and forks"): `docker commit` of a running sandbox with a config that is
 * sbx's own, never the sandbox's, tagged sbx-snapshot:s-<12 hex of its digest>, and
 * scanned for the task's lease values in a container made from it (created, never
 * started) before anyone can start from it.
 *
 * What a sandbox can influence in a commit: only its files. Its container config
 * (entrypoint, command, env, labels, user) is what the provider set at create and
 * what the engine merges from the base image; the commit replaces every field that
 * makes something run (Entrypoint, Cmd, User, WorkingDir, Healthcheck, OnBuild) and
 * blanks every label the sandbox carried, so an image made from a sandbox carries no
 * owner, task or disk label of it into a later sandbox. Mounts (the worktree, the
 * caches, /run/sbx-*) are never part of a commit. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "docker.h"

#define DK_SNAP_REPO "sbx-snapshot"
#define DK_SNAP_TIMEOUT_MS (30L * 60 * 1000) /* a commit of many GiB on a slow disk */

static int engine_fail(struct dk_ctx *c, sbx_error_t **err, const char *what, const char *id,
                       struct sbx_http_response *resp)
{
    json_t *j = resp->body_len ? json_loadb(resp->body, resp->body_len, 0, NULL) : NULL;
    int r = c->host->error_set(err, SBX_E_ENGINE, "docker: %s %s: HTTP %ld: %s", what, id,
                               resp->status, dk_reply_message(j));

    json_decref(j);
    return r;
}

/* The commit's config: sbx's own run fields, the sandbox's labels blanked, req's labels. */
static json_t *commit_config(struct dk_ctx *c, const char *id, const struct sbx_snapshot_req *req,
                             char *base, size_t base_size, sbx_error_t **err)
{
    char path[256];
    json_t *insp = NULL;
    json_t *labels = json_object();
    json_t *old;
    const char *k;
    json_t *v;
    long status = 0;

    snprintf(path, sizeof(path), "/containers/%s/json", id);
    if (dk_request(c, "GET", path, NULL, &status, &insp, err) < 0) {
        json_decref(labels);
        return NULL;
    }
    if (status != 200) {
        c->host->error_set(err, status == 404 ? SBX_E_NOTFOUND : SBX_E_ENGINE,
                           "docker: inspect %s: %s", id, dk_reply_message(insp));
        json_decref(insp);
        json_decref(labels);
        return NULL;
    }
    snprintf(base, base_size, "%s", json_string_value(json_object_get(insp, "Image")) ?: "");
    old = json_object_get(json_object_get(insp, "Config"), "Labels");
    json_object_foreach(old, k, v)
    {
        /* the engine merges the container's labels into the image's: each one a
         * later sandbox could inherit is overridden, blank */
        json_object_set_new(labels, k, json_string(""));
    }
    json_decref(insp);
    for (size_t i = 0; i < req->n_labels; i++) {
        json_object_set_new(labels, req->labels[i].name, json_string(req->labels[i].value));
    }
    return json_pack("{s:o, s:[], s:[s,s], s:s, s:s, s:{s:[s]}, s:[]}", "Labels", labels,
                     "Entrypoint", "Cmd", "sleep", "infinity", "User", "0:0", "WorkingDir",
                     "/workspace", "Healthcheck", "Test", "NONE", "OnBuild");
}

static int commit(struct dk_ctx *c, const char *id, json_t *cfg, char *digest, size_t size,
                  sbx_error_t **err)
{
    struct sbx_http_response resp = {0};
    char path[512];
    char *body = json_dumps(cfg, JSON_COMPACT);
    json_t *j = NULL;
    const char *got;
    int r;

    /* pause=1: the sandbox's processes are frozen while its layer is read */
    snprintf(path, sizeof(path), "/%s/commit?container=%s&pause=1", c->api, id);
    r = dk_raw(c, NULL, "POST", path, body, strlen(body), "application/json", DK_SNAP_TIMEOUT_MS,
               &resp, err);
    free(body);
    if (r < 0) {
        return c->host->error_wrap(err, "docker: commit %s", id);
    }
    if (resp.status != 201 && resp.status != 200) {
        r = engine_fail(c, err, "commit", id, &resp);
        c->host->http_response_free(&resp);
        return r;
    }
    j = json_loadb(resp.body, resp.body_len, 0, NULL);
    c->host->http_response_free(&resp);
    got = json_string_value(json_object_get(j, "Id"));
    if (got == NULL || strncmp(got, "sha256:", 7) != 0 || strlen(got) != 71 ||
        strspn(got + 7, "0123456789abcdef") != 64) {
        json_decref(j);
        return c->host->error_set(err, SBX_E_PROTOCOL, "docker: commit %s: no image id in reply",
                                  id);
    }
    snprintf(digest, size, "%s", got);
    json_decref(j);
    return 0;
}

static int image_delete(struct dk_ctx *c, const char *ref, sbx_error_t **err)
{
    char *enc = sbx_url_escape(ref);
    char *path = xasprintf("/images/%s", enc);
    json_t *reply = NULL;
    long status = 0;
    int r;

    free(enc);
    r = dk_request(c, "DELETE", path, NULL, &status, &reply, err);
    free(path);
    if (r == 0 && status == 409) {
        r = c->host->error_set(err, SBX_E_ENGINE,
                               "snapshot image %s is in use by a sandbox (end the tasks started "
                               "from it first): %s",
                               ref, dk_reply_message(reply));
    }
    else if (r == 0 && status != 200 && status != 404) {
        r = c->host->error_set(err, SBX_E_ENGINE, "docker: remove image %s: %s", ref,
                               dk_reply_message(reply));
    }
    json_decref(reply);
    return r;
}

static int tag(struct dk_ctx *c, const char *digest, const char *name, sbx_error_t **err)
{
    char path[256];
    json_t *reply = NULL;
    long status = 0;

    snprintf(path, sizeof(path), "/images/%s/tag?repo=%s&tag=%s", digest, DK_SNAP_REPO, name);
    if (dk_request(c, "POST", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    if (status != 201 && status != 200) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: tag %s: %s", digest,
                           dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    json_decref(reply);
    return 0;
}

/* The image's size (with its parents') and its config, scanned for the needles (metadata). */
static int inspect_image(struct dk_ctx *c, const char *digest, struct sbx_secret_scan *scan,
                         int64_t *size, sbx_error_t **err)
{
    char path[256];
    json_t *insp = NULL;
    long status = 0;
    char *text;

    snprintf(path, sizeof(path), "/images/%s/json", digest);
    if (dk_request(c, "GET", path, NULL, &status, &insp, err) < 0) {
        return -1;
    }
    if (status != 200 || insp == NULL) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: inspect image %s: %s", digest,
                           dk_reply_message(insp));
        json_decref(insp);
        return -1;
    }
    *size = -1;
    if (json_is_integer(json_object_get(insp, "Size"))) {
        *size = (int64_t)json_integer_value(json_object_get(insp, "Size"));
    }
    text = json_dumps(insp, 0);
    json_decref(insp);
    for (size_t k = 0; text != NULL && k < scan->n_needles; k++) {
        scan->hits[k].metadata +=
            memmem(text, strlen(text), scan->needles[k], strlen(scan->needles[k])) != NULL;
    }
    if (text != NULL) {
        c->host->secret_zero(text, strlen(text));
    }
    free(text);
    return 0;
}

/* The files: a container made from the image (created, never started, no network)
 * exported and scanned as the spike scans a sandbox's filesystem. */
static int scan_files(struct dk_ctx *c, const char *digest, struct sbx_secret_scan *scan,
                      sbx_error_t **err)
{
    json_t *body = json_pack("{s:s, s:[s], s:b, s:{s:s}, s:{s:s}}", "Image", digest, "Cmd", "true",
                             "NetworkDisabled", 1, "Labels", "sbx.snapshot.scan", "1", "HostConfig",
                             "NetworkMode", "none");
    json_t *reply = NULL;
    long status = 0;
    char id[80];
    char path[128];
    int r;

    r = dk_request(c, "POST", "/containers/create", body, &status, &reply, err);
    json_decref(body);
    if (r < 0) {
        return -1;
    }
    if (status != 201 || json_string_value(json_object_get(reply, "Id")) == NULL) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: create a container of %s to scan: %s",
                           digest, dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    snprintf(id, sizeof(id), "%s", json_string_value(json_object_get(reply, "Id")));
    json_decref(reply);
    r = dk_scan_export(c, id, scan, err);
    snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
    if (dk_request(c, "DELETE", path, NULL, &status, NULL, NULL) < 0 ||
        (status != 204 && status != 404)) {
        c->host->log(c->host->instance_name(c->opts), SBX_LOG_WARN,
                     "docker: scan container %s of %s not removed (HTTP %ld)", id, digest, status);
    }
    return r;
}

static int scan_image(struct dk_ctx *c, const char *digest, const char *base,
                      const struct sbx_snapshot_req *req, struct sbx_snapshot_out *out,
                      sbx_error_t **err)
{
    struct sbx_secret_scan none = {0};
    int64_t base_size = -1;
    struct sbx_scan_hits *hits = xcalloc(req->n_needles ? req->n_needles : 1, sizeof(*hits));
    struct sbx_secret_scan scan = {
        .needles = req->needles, .n_needles = req->n_needles, .hits = hits};
    long files = 0;
    long meta = 0;
    int r;

    r = inspect_image(c, digest, &scan, &out->size, err);
    if (r == 0 && base[0] != '\0' && out->size >= 0 &&
        inspect_image(c, base, &none, &base_size, NULL) == 0 && base_size >= 0 &&
        base_size <= out->size) {
        out->size -= base_size; /* the snapshot's own layer */
    }
    if (r == 0 && req->n_needles > 0) {
        r = scan_files(c, digest, &scan, err);
    }
    for (size_t k = 0; r == 0 && k < req->n_needles; k++) {
        files += hits[k].files;
        meta += hits[k].metadata;
    }
    out->scanned = scan.file_bytes;
    free(hits);
    if (r < 0) {
        return c->host->error_wrap(err, "scanning snapshot %s for the lease's values", digest);
    }
    if (files > 0 || meta > 0) {
        return c->host->error_set(err, SBX_E_POLICY,
                                  "snapshot refused: it would hold a value of the task's "
                                  "credential lease (%ld time(s) in its files, %ld in its "
                                  "config); remove it from the sandbox first",
                                  files, meta);
    }
    return 0;
}

int dk_snapshot(void *ctx, const char *id, const struct sbx_snapshot_req *req,
                struct sbx_snapshot_out *out, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    char base[80] = "";
    json_t *cfg = commit_config(c, id, req, base, sizeof(base), err);
    char name[32];
    int64_t t0 = dk_now_ms();

    memset(out, 0, sizeof(*out));
    if (cfg == NULL) {
        return c->host->error_wrap(err, "snapshot of sandbox %s", id);
    }
    if (commit(c, id, cfg, out->digest, sizeof(out->digest), err) < 0) {
        json_decref(cfg);
        return -1;
    }
    json_decref(cfg);
    c->host->log(c->host->instance_name(c->opts), SBX_LOG_DEBUG, "docker: commit %s took %lld ms",
                 id, (long long)(dk_now_ms() - t0));
    if (scan_image(c, out->digest, base, req, out, err) < 0) {
        sbx_error_t *e2 = NULL;

        if (image_delete(c, out->digest, &e2) < 0) {
            c->host->log(c->host->instance_name(c->opts), SBX_LOG_WARN,
                         "docker: refused snapshot %s not removed: %s", out->digest,
                         e2 ? e2->msg : "?");
            c->host->error_free(&e2);
        }
        return -1;
    }
    snprintf(name, sizeof(name), "s-%.12s", out->digest + 7);
    if (tag(c, out->digest, name, err) < 0) {
        image_delete(c, out->digest, NULL);
        return -1;
    }
    snprintf(out->ref, sizeof(out->ref), "%s:%s", DK_SNAP_REPO, name);
    return 0;
}

int dk_snapshot_remove(void *ctx, const char *ref, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;

    if (ref == NULL || (strncmp(ref, DK_SNAP_REPO ":s-", sizeof(DK_SNAP_REPO ":s-") - 1) != 0 &&
                        strncmp(ref, "sha256:", 7) != 0)) {
        return c->host->error_set(err, SBX_E_USAGE, "docker: '%s' is not a snapshot image",
                                  ref ? ref : "(null)");
    }
    return image_delete(c, ref, err);
}
