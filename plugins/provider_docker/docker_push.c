/* docker_push.c - the image_op (ABI 1.6): inspect, tag and push, pull by
 * digest, list and remove images of the engine, for `sbx image push|pull|gc|
 * inspect` and the runner's image check (docs/image.md, "Publishing and
 * pulling"). The registry credentials arrive as the engine's X-Registry-Auth
 * value; they are sent to the engine and never logged or kept. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "docker.h"

#define DK_XFER_TIMEOUT_MS (30L * 60 * 1000) /* a push or pull of a large image */
#define DK_REF_MAX 512

/* A reference the engine is asked about: printable, no space, bounded. */
static int ref_ok(const char *s)
{
    size_t n = s ? strlen(s) : 0;

    if (n == 0 || n >= DK_REF_MAX) {
        return 0;
    }
    for (; *s; s++) {
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
              strchr("._-/:@", *s) != NULL)) {
            return 0;
        }
    }
    return 1;
}

/* Percent-encodes s into out (for a query value). */
static void qenc(const char *s, char *out, size_t size)
{
    size_t o = 0;

    for (; *s && o + 4 < size; s++) {
        if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') ||
            *s == '.' || *s == '-' || *s == '_') {
            out[o++] = *s;
        }
        else {
            o += (size_t)snprintf(out + o, size - o, "%%%02X", (unsigned char)*s);
        }
    }
    out[o] = '\0';
}

/* POST path with X-Registry-Auth; the reply is the engine's progress stream
 * (one JSON object a line). An "error" line fails it; aux.Digest is copied
 * into digest. */
static int xfer(struct dk_ctx *c, const char *what, const char *path, const char *auth,
                const volatile int *cancel, char *digest, size_t dsize, sbx_error_t **err)
{
    struct sbx_http_request req = {0};
    struct sbx_http_response resp = {0};
    const char *hdr[2] = {NULL, NULL};
    char *auth_hdr;
    char url[2048];
    size_t len;
    int r;

    /* the engine wants the header on a push even without credentials: "{}" */
    len = strlen("X-Registry-Auth: ") + (auth ? strlen(auth) : 4) + 1;
    auth_hdr = malloc(len);
    if (auth_hdr == NULL) {
        return c->host->error_set(err, SBX_E_GENERIC, "docker: %s: out of memory", what);
    }
    snprintf(auth_hdr, len, "X-Registry-Auth: %s", auth ? auth : "e30=");
    hdr[0] = auth_hdr;
    snprintf(url, sizeof(url), "http://localhost/%s%s", c->api, path);
    req.method = "POST";
    req.url = url;
    req.unix_socket = c->socket;
    req.headers = hdr;
    req.timeout_ms = DK_XFER_TIMEOUT_MS;
    req.cancel = cancel;
    r = c->host->http(&req, &resp, err);
    memset(auth_hdr, 0, len);
    free(auth_hdr);
    if (r < 0) {
        return c->host->error_wrap(err, "docker: %s", what);
    }
    if (resp.status >= 300) {
        json_t *m = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL);

        r = c->host->error_set(err, resp.status == 404 ? SBX_E_NOTFOUND : SBX_E_ENGINE,
                               "docker: %s: HTTP %ld: %.300s", what, resp.status,
                               m ? dk_reply_message(m) : (resp.body ? resp.body : ""));
        json_decref(m);
        c->host->http_response_free(&resp);
        return r;
    }
    for (char *line = resp.body; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');
        json_t *o = json_loadb(line, nl ? (size_t)(nl - line) : strlen(line), 0, NULL);
        const char *e = json_string_value(json_object_get(o, "error"));
        const char *d = json_string_value(json_object_get(json_object_get(o, "aux"), "Digest"));

        if (e != NULL) {
            r = c->host->error_set(err, SBX_E_ENGINE, "docker: %s: %.400s", what, e);
            json_decref(o);
            break;
        }
        if (d != NULL && digest != NULL) {
            snprintf(digest, dsize, "%s", d);
        }
        json_decref(o);
        line = nl ? nl + 1 : NULL;
    }
    c->host->http_response_free(&resp);
    return r;
}

/* The digest part of the first RepoDigests entry ("repo@sha256:..."), or NULL. */
static const char *repo_digest(json_t *img)
{
    const char *rd = json_string_value(json_array_get(json_object_get(img, "RepoDigests"), 0));
    const char *at = rd ? strchr(rd, '@') : NULL;

    return at ? at + 1 : NULL;
}

/* Calls fn for one image of the engine's inspect (or list) reply. */
static int emit(const struct sbx_image_op *op, const char *ref, json_t *img, const char *digest,
                int in_use)
{
    json_t *labels = json_object_get(json_object_get(img, "Config"), "Labels");
    json_t *tags = json_object_get(img, "RepoTags");
    const char *tagv[65];
    char *ltext = NULL;
    size_t n = 0;
    size_t i;
    json_t *v;
    int rc;

    if (op->fn == NULL) {
        return 0;
    }
    if (labels == NULL) {
        labels = json_object_get(img, "Labels"); /* the list's shape */
    }
    json_array_foreach(tags, i, v)
    {
        if (n < 64 && json_is_string(v)) {
            tagv[n++] = json_string_value(v);
        }
    }
    tagv[n] = NULL;
    if (json_is_object(labels)) {
        ltext = json_dumps(labels, JSON_COMPACT | JSON_SORT_KEYS);
    }
    {
        json_t *cr = json_object_get(img, "Created");
        struct sbx_image_info info = {
            .ref = ref,
            .id = json_string_value(json_object_get(img, "Id")),
            .digest = digest ? digest : repo_digest(img),
            .labels = ltext,
            .created = json_is_integer(cr) ? (int64_t)json_integer_value(cr) : 0,
            .tags = tagv,
            .in_use = in_use,
        };

        if (json_is_string(cr)) { /* inspect: RFC 3339 */
            struct tm tm = {0};

            if (strptime(json_string_value(cr), "%Y-%m-%dT%H:%M:%S", &tm) != NULL) {
                info.created = (int64_t)timegm(&tm);
            }
        }
        rc = op->fn(op->userdata, &info);
    }
    free(ltext);
    return rc;
}

static int op_inspect(struct dk_ctx *c, const struct sbx_image_op *op, const char *digest,
                      sbx_error_t **err)
{
    char path[DK_REF_MAX + 32];
    json_t *reply = NULL;
    long status = 0;
    int rc;

    snprintf(path, sizeof(path), "/images/%s/json", op->ref);
    if (dk_request(c, "GET", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    if (status == 404) {
        json_decref(reply);
        return c->host->error_set(err, SBX_E_NOTFOUND, "docker: image '%s' is not in the engine",
                                  op->ref);
    }
    if (status != 200) {
        rc = c->host->error_set(err, SBX_E_ENGINE, "docker: image inspect %s: HTTP %ld: %s",
                                op->ref, status, dk_reply_message(reply));
        json_decref(reply);
        return rc;
    }
    rc = emit(op, op->ref, reply, digest, 0);
    json_decref(reply);
    return rc < 0 ? c->host->error_set(err, SBX_E_GENERIC, "image inspect: stopped") : 0;
}

static int op_push(struct dk_ctx *c, const struct sbx_image_op *op, sbx_error_t **err)
{
    char repo[DK_REF_MAX], q1[DK_REF_MAX * 3], q2[DK_REF_MAX * 3];
    char path[DK_REF_MAX * 7];
    char digest[128] = "";
    const char *colon;
    const char *slash;
    json_t *reply = NULL;
    long status = 0;
    int rc;

    if (op->target == NULL || !ref_ok(op->target)) {
        return c->host->error_set(err, SBX_E_USAGE, "image push: bad target reference");
    }
    slash = strrchr(op->target, '/');
    colon = strrchr(op->target, ':');
    if (slash == NULL || colon == NULL || colon < slash) {
        return c->host->error_set(err, SBX_E_USAGE,
                                  "image push: target '%s' is not host:port/path:tag", op->target);
    }
    snprintf(repo, sizeof(repo), "%.*s", (int)(colon - op->target), op->target);
    qenc(repo, q1, sizeof(q1));
    qenc(colon + 1, q2, sizeof(q2));
    snprintf(path, sizeof(path), "/images/%s/tag?repo=%s&tag=%s", op->ref, q1, q2);
    if (dk_request(c, "POST", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    if (status != 201 && status != 200) {
        rc = c->host->error_set(err, status == 404 ? SBX_E_NOTFOUND : SBX_E_ENGINE,
                                "docker: tag %s as %s: HTTP %ld: %s", op->ref, op->target, status,
                                dk_reply_message(reply));
        json_decref(reply);
        return rc;
    }
    json_decref(reply);
    snprintf(path, sizeof(path), "/images/%s/push?tag=%s", repo, q2);
    if (xfer(c, "push", path, op->auth, op->cancel, digest, sizeof(digest), err) < 0) {
        return -1;
    }
    if (digest[0] == '\0') {
        return c->host->error_set(err, SBX_E_PROTOCOL,
                                  "docker: push %s: the engine reported no digest", op->target);
    }
    {
        struct sbx_image_op in = *op;

        in.ref = op->target;
        return op_inspect(c, &in, digest, err);
    }
}

static int op_pull(struct dk_ctx *c, const struct sbx_image_op *op, sbx_error_t **err)
{
    char repo[DK_REF_MAX], q1[DK_REF_MAX * 3], q2[DK_REF_MAX * 3];
    char path[DK_REF_MAX * 7];
    const char *at = strchr(op->ref, '@');

    if (at == NULL || strncmp(at + 1, "sha256:", 7) != 0) {
        return c->host->error_set(err, SBX_E_USAGE,
                                  "image pull: '%s' is not a reference by digest "
                                  "(host:port/path@sha256:...)",
                                  op->ref);
    }
    snprintf(repo, sizeof(repo), "%.*s", (int)(at - op->ref), op->ref);
    qenc(repo, q1, sizeof(q1));
    qenc(at + 1, q2, sizeof(q2));
    snprintf(path, sizeof(path), "/images/create?fromImage=%s&tag=%s", q1, q2);
    if (xfer(c, "pull", path, op->auth, op->cancel, NULL, 0, err) < 0) {
        return -1;
    }
    return op_inspect(c, op, at + 1, err);
}

static int op_list(struct dk_ctx *c, const struct sbx_image_op *op, sbx_error_t **err)
{
    char filt[DK_REF_MAX + 64], q[DK_REF_MAX * 4], path[DK_REF_MAX * 4 + 64];
    json_t *imgs = NULL;
    json_t *ctrs = NULL;
    json_t *img;
    long status = 0;
    size_t i;
    int rc = 0;

    snprintf(filt, sizeof(filt), "{\"reference\":[\"%s\"]}", op->ref);
    qenc(filt, q, sizeof(q));
    snprintf(path, sizeof(path), "/images/json?filters=%s", q);
    if (dk_request(c, "GET", path, NULL, &status, &imgs, err) < 0) {
        return -1;
    }
    if (status != 200 || !json_is_array(imgs)) {
        rc = c->host->error_set(err, SBX_E_ENGINE, "docker: image list: HTTP %ld: %s", status,
                                dk_reply_message(imgs));
        json_decref(imgs);
        return rc;
    }
    if (dk_request(c, "GET", "/containers/json?all=1", NULL, &status, &ctrs, err) < 0) {
        json_decref(imgs);
        return -1;
    }
    json_array_foreach(imgs, i, img)
    {
        const char *id = json_string_value(json_object_get(img, "Id"));
        json_t *ct;
        size_t k;
        int used = 0;

        json_array_foreach(ctrs, k, ct)
        {
            const char *cid = json_string_value(json_object_get(ct, "ImageID"));

            used |= id != NULL && cid != NULL && strcmp(id, cid) == 0;
        }
        if (emit(op, json_string_value(json_array_get(json_object_get(img, "RepoTags"), 0)), img,
                 NULL, used) < 0) {
            break;
        }
    }
    json_decref(ctrs);
    json_decref(imgs);
    return rc;
}

static int op_remove(struct dk_ctx *c, const struct sbx_image_op *op, sbx_error_t **err)
{
    char path[DK_REF_MAX + 32];
    json_t *reply = NULL;
    long status = 0;
    int rc = 0;

    snprintf(path, sizeof(path), "/images/%s", op->ref);
    if (dk_request(c, "DELETE", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    if (status != 200) {
        rc = c->host->error_set(err, status == 404 ? SBX_E_NOTFOUND : SBX_E_ENGINE,
                                "docker: remove image %s: HTTP %ld: %s", op->ref, status,
                                dk_reply_message(reply));
    }
    json_decref(reply);
    return rc;
}

int dk_image_op(void *ctx, const struct sbx_image_op *op, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;

    if (op == NULL || !ref_ok(op->ref)) {
        return c->host->error_set(err, SBX_E_USAGE, "image: bad image reference");
    }
    switch (op->action) {
    case SBX_IMAGE_INSPECT:
        return op_inspect(c, op, NULL, err);
    case SBX_IMAGE_PUSH:
        return op_push(c, op, err);
    case SBX_IMAGE_PULL:
        return op_pull(c, op, err);
    case SBX_IMAGE_LIST:
        return op_list(c, op, err);
    case SBX_IMAGE_REMOVE:
        return op_remove(c, op, err);
    default:
        return c->host->error_set(err, SBX_E_USAGE, "image: unknown action %d", op->action);
    }
}
