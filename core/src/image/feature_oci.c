/* feature_oci.c - a feature from an OCI registry (the Dev Container spec's
 * "Features distribution"): REGISTRY/NAMESPACE/NAME[:TAG|@sha256:HEX], from a
 * registry the configuration lists (image_registry.feature_registries), with
 * the login push and pull use (registry.h). The manifest's layer
 * (application/vnd.devcontainers.layer.v1+tar) is read once, its sha256
 * checked, and extracted as hostile input (sandbox/tarx.h) into
 * <cache>/features/<hex>; the folder is then a local feature (devc.h). */
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "http/oci.h"
#include "image/devc.h"
#include "image/registry.h"
#include "sandbox/tarx.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/xalloc.h"

#define FEATURE_MANIFEST_MAX (1024 * 1024)
#define FEATURE_LAYER_MAX (64L * 1024 * 1024)
#define FEATURE_LAYER_TYPE "application/vnd.devcontainers.layer.v1+tar"
#define FEATURE_CONFIG_TYPE "application/vnd.devcontainers"

static int lower_or_digit(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static int is_hex64(const char *s)
{
    return strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64;
}

int sbx_feature_ref_parse(const char *ref, struct sbx_feature_ref *out)
{
    const char *slash = strchr(ref, '/');
    const char *at;
    const char *path;
    const char *end;
    size_t hl;

    memset(out, 0, sizeof(*out));
    if (slash == NULL || strlen(ref) > 400) {
        return -1;
    }
    hl = (size_t)(slash - ref);
    if (hl == 0 || hl >= sizeof(out->host) ||
        (memchr(ref, '.', hl) == NULL && memchr(ref, ':', hl) == NULL &&
         strncmp(ref, "localhost/", 10) != 0)) {
        return -1; /* no registry host: not an OCI reference */
    }
    snprintf(out->host, sizeof(out->host), "%.*s", (int)hl, ref);
    for (const char *p = out->host; *p; p++) {
        if (!lower_or_digit(*p) && *p != '.' && *p != '-' && *p != ':') {
            return -1;
        }
    }
    path = slash + 1;
    at = strchr(path, '@');
    if (at != NULL) {
        if (strncmp(at, "@sha256:", 8) != 0 || !is_hex64(at + 8)) {
            return -1;
        }
        snprintf(out->digest, sizeof(out->digest), "%s", at + 1);
        end = at;
    }
    else {
        const char *colon = strrchr(path, ':');

        end = colon ? colon : path + strlen(path);
        snprintf(out->tag, sizeof(out->tag), "%s", colon ? colon + 1 : "latest");
        if (out->tag[0] == '\0' || strlen(out->tag) > 128 ||
            strspn(out->tag, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-") !=
                strlen(out->tag) ||
            out->tag[0] == '.' || out->tag[0] == '-') {
            return -1;
        }
    }
    if (end == path || (size_t)(end - path) >= sizeof(out->repo)) {
        return -1;
    }
    snprintf(out->repo, sizeof(out->repo), "%.*s", (int)(end - path), path);
    /* Docker's repository rules: lower-case parts joined by one separator */
    for (const char *p = out->repo; *p; p++) {
        int sep = *p == '/' || *p == '.' || *p == '_' || *p == '-';

        if (!(lower_or_digit(*p) || sep) ||
            (sep && (p == out->repo || p[1] == '\0' || !lower_or_digit(p[-1])))) {
            return -1;
        }
    }
    return 0;
}

static int allowed(const struct sbx_config *c, const char *host)
{
    for (size_t i = 0; c != NULL && c->image_registry.feature_registries != NULL &&
                       c->image_registry.feature_registries[i] != NULL;
         i++) {
        if (strcmp(c->image_registry.feature_registries[i], host) == 0) {
            return 1;
        }
    }
    return 0;
}

/* What the blob's reader keeps: its hash, its size, the extractor. */
struct blob {
    struct sbx_sha256 sha;
    int64_t bytes;
    struct sbx_tar_extract x;
    int first;
    char why[600];
};

static int on_blob(void *ud, const char *data, size_t len)
{
    struct blob *b = ud;

    if (b->first && len > 0) {
        b->first = 0;
        if ((unsigned char)data[0] == 0x1f && len > 1 && (unsigned char)data[1] == 0x8b) {
            snprintf(b->why, sizeof(b->why),
                     "the layer is gzip-compressed; the spec's layer is a plain tar (%s)",
                     FEATURE_LAYER_TYPE);
            return -1;
        }
    }
    sbx_sha256_update(&b->sha, data, len);
    b->bytes += (int64_t)len;
    if (sbx_tar_extract_feed(&b->x, data, len) < 0) {
        snprintf(b->why, sizeof(b->why), "its tar: %s", b->x.rd.err);
        return -1;
    }
    return 0;
}

/* Removes what an extraction left (files and folders only: no link followed). */
static void rm_tree(const char *dir)
{
    sbx_devc_remove_layer(dir);
}

/* Fetches and extracts the layer of digest (sha256:HEX, size bytes) into
 * <cache>/features/HEX unless it is there. */
static int fetch_layer(struct sbx_oci *o, const struct sbx_feature_ref *fr, const char *label,
                       const char *digest, int64_t size, const char *cache, char **dir,
                       sbx_error_t **err)
{
    char *base = xasprintf("%s/features", cache);
    char *final = xasprintf("%s/%s", base, digest + 7);
    char *tmp = xasprintf("%s/.tmp-XXXXXX", base);
    char *path = xasprintf("/v2/%s/blobs/%s", fr->repo, digest);
    struct blob *b = NULL;
    struct sbx_oci_reply r;
    struct stat st;
    int fd = -1;
    int ret = -1;
    char hex[65];

    if (lstat(final, &st) == 0 && S_ISDIR(st.st_mode)) {
        *dir = final; /* written only after its digest was checked */
        final = NULL;
        ret = 0;
        goto out;
    }
    if ((mkdir(cache, 0700) < 0 && errno != EEXIST) || (mkdir(base, 0700) < 0 && errno != EEXIST) ||
        mkdtemp(tmp) == NULL || (fd = open(tmp, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0) {
        sbx_error_set(err, SBX_E_GENERIC, "%s: cannot make a folder under %s: %s", label, base,
                      strerror(errno));
        goto out;
    }
    b = xcalloc(1, sizeof(*b));
    b->first = 1;
    sbx_sha256_init(&b->sha);
    sbx_tar_extract_init(&b->x, fd, NULL);
    if (sbx_oci_request(o, "GET", path, NULL, (size_t)size, on_blob, b, &r, err) < 0) {
        if (b->why[0] != '\0') {
            sbx_error_free(err);
            sbx_error_set(err, SBX_E_PROTOCOL, "%s: layer %s from %s: %s", label, digest, o->host,
                          b->why);
        }
        else {
            sbx_error_wrap(err, "%s", label);
        }
        sbx_tar_extract_fini(&b->x);
        goto out;
    }
    if (sbx_tar_extract_fini(&b->x) < 0 && r.status / 100 == 2) {
        sbx_error_set(err, SBX_E_PROTOCOL, "%s: layer %s from %s: the tar is cut short", label,
                      digest, o->host);
        sbx_oci_reply_free(&r);
        goto out;
    }
    if (r.status / 100 != 2) {
        sbx_error_set(err, r.status == 404 ? SBX_E_NOTFOUND : SBX_E_ENGINE,
                      "%s: layer %s: %s answered %ld", label, digest, o->host, r.status);
        sbx_oci_reply_free(&r);
        goto out;
    }
    sbx_oci_reply_free(&r);
    sbx_sha256_hex(&b->sha, hex);
    if (strcmp(hex, digest + 7) != 0 || b->bytes != size) {
        sbx_error_set(err, SBX_E_PROTOCOL,
                      "%s: layer from %s does not match its digest: the manifest says %s (%lld "
                      "bytes), the registry sent sha256:%s (%lld bytes)",
                      label, o->host, digest, (long long)size, hex, (long long)b->bytes);
        goto out;
    }
    if (b->x.links > 0 || b->x.skipped > 0) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "%s: its layer holds links or devices; a feature holds regular files and "
                      "folders only",
                      label);
        goto out;
    }
    if (rename(tmp, final) < 0) {
        if (errno != EEXIST && errno != ENOTEMPTY) {
            sbx_error_set(err, SBX_E_GENERIC, "%s: %s: %s", label, final, strerror(errno));
            goto out;
        }
        /* another build put it there first: the same bytes */
    }
    *dir = final;
    final = NULL;
    ret = 0;
out:
    if (fd >= 0) {
        close(fd);
    }
    if (access(tmp, F_OK) == 0) {
        rm_tree(tmp);
    }
    free(b);
    free(path);
    free(tmp);
    free(final);
    free(base);
    return ret;
}

/* The manifest: by digest (checked) or by tag (its sha256 is the pin). */
static int fetch_manifest(struct sbx_oci *o, const struct sbx_feature_ref *fr, const char *label,
                          json_t **manifest, char *pinned, size_t pinned_size, sbx_error_t **err)
{
    static const char *const accept[] = {"application/vnd.oci.image.manifest.v1+json", NULL};
    char *path = xasprintf("/v2/%s/manifests/%s", fr->repo, fr->digest[0] ? fr->digest : fr->tag);
    struct sbx_oci_reply r;
    struct sbx_sha256 sha;
    char hex[65];
    int ret = -1;

    if (sbx_oci_request(o, "GET", path, accept, FEATURE_MANIFEST_MAX, NULL, NULL, &r, err) < 0) {
        sbx_error_wrap(err, "%s", label);
        free(path);
        return -1;
    }
    free(path);
    if (r.status == 401 || r.status == 403) {
        sbx_error_set(err, SBX_E_ENGINE,
                      "%s: %s refused the request (%ld): log in (docker login, or "
                      "image_registry.credential for image_registry.url's host)",
                      label, o->host, r.status);
        goto out;
    }
    if (r.status == 404) {
        sbx_error_set(err, SBX_E_NOTFOUND, "%s: %s has no %s %s in %s", label, o->host,
                      fr->digest[0] ? "manifest" : "tag", fr->digest[0] ? fr->digest : fr->tag,
                      fr->repo);
        goto out;
    }
    if (r.status != 200) {
        sbx_error_set(err, SBX_E_ENGINE, "%s: %s answered %ld for the manifest", label, o->host,
                      r.status);
        goto out;
    }
    sbx_sha256_init(&sha);
    sbx_sha256_update(&sha, r.body, r.len);
    sbx_sha256_hex(&sha, hex);
    snprintf(pinned, pinned_size, "sha256:%s", hex);
    if ((fr->digest[0] && strcmp(fr->digest, pinned) != 0) ||
        (r.digest[0] && strcmp(r.digest, pinned) != 0)) {
        sbx_error_set(err, SBX_E_PROTOCOL,
                      "%s: the manifest from %s does not match its digest (asked %s, the "
                      "registry says %s, its bytes are %s)",
                      label, o->host, fr->digest[0] ? fr->digest : fr->tag,
                      r.digest[0] ? r.digest : "-", pinned);
        goto out;
    }
    *manifest = json_loadb(r.body, r.len, 0, NULL);
    if (*manifest == NULL) {
        sbx_error_set(err, SBX_E_PROTOCOL, "%s: the manifest from %s is not JSON", label, o->host);
        goto out;
    }
    ret = 0;
out:
    sbx_oci_reply_free(&r);
    return ret;
}

int sbx_feature_oci_fetch(const struct sbx_devc_fetch *fetch, const char *path, const char *ref,
                          char **dir, char **pinned, sbx_error_t **err)
{
    char *label = xasprintf("%s: features[\"%.200s\"]", path, ref);
    int r = sbx_feature_oci_fetch_as(fetch, label, ref, dir, pinned, err);

    free(label);
    return r;
}

int sbx_feature_oci_fetch_as(const struct sbx_devc_fetch *fetch, const char *label, const char *ref,
                             char **dir, char **pinned, sbx_error_t **err)
{
    struct sbx_feature_ref fr;
    struct sbx_registry_login login = {0};
    struct sbx_oci o = {0};
    const char *source = "none";
    json_t *m = NULL;
    json_t *layer = NULL;
    json_t *x;
    size_t i;
    char pin[80];
    const char *digest;
    json_int_t size;
    int ret = -1;

    *dir = *pinned = NULL;
    if (sbx_feature_ref_parse(ref, &fr) < 0) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "%s: not a local feature (\"./folder\") nor a feature reference "
                      "REGISTRY/NAMESPACE/NAME[:TAG|@sha256:HEX]",
                      label);
        goto out;
    }
    if (fetch == NULL || !allowed(fetch->cfg, fr.host)) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "%s: registry %s is not one of image_registry.feature_registries (%s): "
                      "list it there, or copy the feature into the definition's folder and name "
                      "it \"./<folder>\"",
                      label, fr.host,
                      fetch && fetch->cfg && fetch->cfg->path ? fetch->cfg->path
                                                              : "the configuration");
        goto out;
    }
    if (sbx_registry_login(fetch->cfg, fetch->plugin_dir, fr.host, &login, &source, err) < 0) {
        sbx_error_wrap(err, "%s", label);
        goto out;
    }
    snprintf(o.host, sizeof(o.host), "%s", fr.host);
    o.ca_file = fetch->cfg->image_registry.ca_file;
    o.user = login.user; /* the client owns and zeroes them now */
    o.pass = login.secret;
    login.user = login.secret = NULL;
    if (fetch_manifest(&o, &fr, label, &m, pin, sizeof(pin), err) < 0) {
        goto out;
    }
    if (json_integer_value(json_object_get(m, "schemaVersion")) != 2 ||
        strcmp(json_string_value(json_object_get(json_object_get(m, "config"), "mediaType")) ?: "",
               FEATURE_CONFIG_TYPE) != 0) {
        sbx_error_set(err, SBX_E_PROTOCOL,
                      "%s: %s@%s is not a feature (its config's mediaType is not %s)", label,
                      fr.repo, pin, FEATURE_CONFIG_TYPE);
        goto out;
    }
    json_array_foreach(json_object_get(m, "layers"), i, x)
    {
        if (layer == NULL && strcmp(json_string_value(json_object_get(x, "mediaType")) ?: "",
                                    FEATURE_LAYER_TYPE) == 0) {
            layer = x;
        }
    }
    digest = json_string_value(json_object_get(layer, "digest"));
    size = json_integer_value(json_object_get(layer, "size"));
    if (digest == NULL || strncmp(digest, "sha256:", 7) != 0 || !is_hex64(digest + 7) ||
        !json_is_integer(json_object_get(layer, "size")) || size <= 0 || size > FEATURE_LAYER_MAX) {
        sbx_error_set(err, SBX_E_PROTOCOL,
                      "%s: %s@%s has no layer %s with a sha256 digest and a size of at most "
                      "%ld MiB",
                      label, fr.repo, pin, FEATURE_LAYER_TYPE, FEATURE_LAYER_MAX >> 20);
        goto out;
    }
    if (fetch_layer(&o, &fr, label, digest, (int64_t)size, fetch->cache, dir, err) < 0) {
        goto out;
    }
    *pinned = xasprintf("%s/%s@%s", fr.host, fr.repo, pin);
    sbx_info("image build: %s is %s (credentials: %s)", ref, *pinned, source);
    ret = 0;
out:
    json_decref(m);
    sbx_oci_fini(&o);
    sbx_registry_login_free(&login);
    return ret;
}
