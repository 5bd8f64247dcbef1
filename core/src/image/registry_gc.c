/* registry_gc.c - `sbx image gc --registry` (registry.h): the manifests of
 * image_registry.url's repository past the newest N are deleted through
 * the distribution API (DELETE /v2/PATH/manifests/DIGEST), never one the
 * configuration names by digest. Newest: the image config's `created`. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "http/oci.h"
#include "image/registry.h"
#include "util/log.h"
#include "util/sha256.h"
#include "util/xalloc.h"

#define GC_MAX_TAGS 10000
#define GC_LIST_MAX (4 * 1024 * 1024)
#define GC_MANIFEST_MAX (1024 * 1024)
#define GC_CONFIG_MAX (4 * 1024 * 1024)

struct gc_image {
    char digest[80];
    double created; /* seconds; 0: unknown (kept) */
    json_t *tags;   /* its tags */
};

static double parse_created(const char *s)
{
    struct tm tm = {0};
    const char *rest = s ? strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) : NULL;
    double frac = 0;

    if (rest == NULL) {
        return 0;
    }
    if (*rest == '.') {
        frac = strtod(rest, NULL);
    }
    return (double)timegm(&tm) + frac;
}

/* GET a manifest or blob, its sha256 computed; 0 with *body, else -1. */
static int get_checked(struct sbx_oci *o, const char *path, const char *const *accept, size_t max,
                       char *digest_out, json_t **body, sbx_error_t **err)
{
    struct sbx_oci_reply r;
    struct sbx_sha256 sha;
    char hex[65];

    if (sbx_oci_request(o, "GET", path, accept, max, NULL, NULL, &r, err) < 0) {
        return -1;
    }
    if (r.status != 200) {
        long st = r.status;

        sbx_oci_reply_free(&r);
        return sbx_error_set(err, st == 404 ? SBX_E_NOTFOUND : SBX_E_ENGINE,
                             "registry %s: GET %s answered %ld", o->host, path, st);
    }
    sbx_sha256_init(&sha);
    sbx_sha256_update(&sha, r.body, r.len);
    sbx_sha256_hex(&sha, hex);
    snprintf(digest_out, 80, "sha256:%s", hex);
    *body = json_loadb(r.body, r.len, 0, NULL);
    sbx_oci_reply_free(&r);
    if (*body == NULL) {
        return sbx_error_set(err, SBX_E_PROTOCOL, "registry %s: %s is not JSON", o->host, path);
    }
    return 0;
}

/* 1 when the configuration names PATH@digest (image, a pool's, an instance's). */
static int configured(const struct sbx_config *c, const char *repo, const char *digest)
{
    char *ref = xasprintf("%s@%s", repo, digest);
    int hit = c->image != NULL && strcmp(c->image, ref) == 0;

    for (size_t i = 0; !hit && i < c->n_pools; i++) {
        hit = c->pools[i].image != NULL && strcmp(c->pools[i].image, ref) == 0;
    }
    for (size_t i = 0; !hit && i < c->n_instances; i++) {
        hit = c->instances[i].image != NULL && strcmp(c->instances[i].image, ref) == 0;
    }
    free(ref);
    return hit;
}

static int newest_first(const void *a, const void *b)
{
    const struct gc_image *x = a;
    const struct gc_image *y = b;

    return x->created < y->created ? 1 : x->created > y->created ? -1 : 0;
}

/* The images of the repository: each tag's manifest, grouped by digest. */
static int list_images(struct sbx_oci *o, const char *path, struct gc_image **out, size_t *n,
                       sbx_error_t **err)
{
    static const char *const accept[] = {"application/vnd.oci.image.manifest.v1+json",
                                         "application/vnd.docker.distribution.manifest.v2+json",
                                         NULL};
    char *url = xasprintf("/v2/%s/tags/list?n=%d", path, GC_MAX_TAGS);
    struct sbx_oci_reply r;
    json_t *list;
    json_t *t;
    size_t i;

    *out = NULL;
    *n = 0;
    if (sbx_oci_request(o, "GET", url, NULL, GC_LIST_MAX, NULL, NULL, &r, err) < 0) {
        free(url);
        return -1;
    }
    free(url);
    if (r.status == 404) {
        sbx_oci_reply_free(&r);
        return 0; /* no such repository yet: nothing to collect */
    }
    if (r.status != 200) {
        long st = r.status;

        sbx_oci_reply_free(&r);
        return sbx_error_set(err, SBX_E_ENGINE,
                             "registry %s: listing the tags of %s answered %ld%s", o->host, path,
                             st,
                             st == 401 || st == 403 ? " (log in: image_registry.credential or "
                                                      "docker login)"
                                                    : "");
    }
    list = json_loadb(r.body, r.len, 0, NULL);
    sbx_oci_reply_free(&r);
    json_array_foreach(json_object_get(list, "tags"), i, t)
    {
        char *mpath;
        char digest[80];
        json_t *m = NULL;
        json_t *cfg = NULL;
        const char *cdig;
        size_t k;

        if (!json_is_string(t) || json_string_length(t) > 128 ||
            strspn(json_string_value(t), "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                         "0123456789_.-") != json_string_length(t)) {
            continue;
        }
        mpath = xasprintf("/v2/%s/manifests/%s", path, json_string_value(t));
        if (get_checked(o, mpath, accept, GC_MANIFEST_MAX, digest, &m, err) < 0) {
            free(mpath);
            json_decref(list);
            return -1;
        }
        free(mpath);
        for (k = 0; k < *n && strcmp((*out)[k].digest, digest) != 0; k++) {
        }
        if (k == *n) {
            *out = xrealloc(*out, (*n + 1) * sizeof(**out));
            memset(&(*out)[k], 0, sizeof(**out));
            snprintf((*out)[k].digest, sizeof((*out)[k].digest), "%s", digest);
            (*out)[k].tags = json_array();
            (*n)++;
            cdig = json_string_value(json_object_get(json_object_get(m, "config"), "digest"));
            if (cdig != NULL && strncmp(cdig, "sha256:", 7) == 0 && strlen(cdig) == 71 &&
                strspn(cdig + 7, "0123456789abcdef") == 64) {
                char *bpath = xasprintf("/v2/%s/blobs/%s", path, cdig);
                char got[80];

                if (get_checked(o, bpath, NULL, GC_CONFIG_MAX, got, &cfg, err) == 0 &&
                    strcmp(got, cdig) == 0) {
                    (*out)[k].created =
                        parse_created(json_string_value(json_object_get(cfg, "created")));
                }
                sbx_error_free(err); /* no date: the image is kept */
                free(bpath);
            }
        }
        json_array_append((*out)[k].tags, t);
        json_decref(cfg);
        json_decref(m);
    }
    json_decref(list);
    return 0;
}

int sbx_registry_gc(const struct sbx_config *c, const char *plugin_dir, int keep, int dry,
                    json_t *removed, sbx_error_t **err)
{
    struct sbx_registry reg;
    struct sbx_registry_login login;
    struct sbx_oci o = {0};
    const char *source = "none";
    const char *path;
    struct gc_image *imgs = NULL;
    size_t n = 0;
    int kept = 0;
    int ret = -1;

    if (sbx_registry_from_config(c, &reg, err) < 0) {
        return -1;
    }
    path = reg.repo + strlen(reg.host) + 1;
    if (sbx_registry_login(c, plugin_dir, reg.host, &login, &source, err) < 0) {
        return -1;
    }
    snprintf(o.host, sizeof(o.host), "%s", reg.host);
    o.ca_file = c->image_registry.ca_file;
    o.user = login.user;
    o.pass = login.secret;
    if (list_images(&o, path, &imgs, &n, err) < 0) {
        goto out;
    }
    qsort(imgs, n, sizeof(*imgs), newest_first);
    for (size_t i = 0; i < n; i++) {
        char *dpath;
        struct sbx_oci_reply r;

        if (imgs[i].created == 0 || configured(c, reg.repo, imgs[i].digest) || kept < keep) {
            kept += imgs[i].created != 0 && !configured(c, reg.repo, imgs[i].digest);
            continue;
        }
        if (!dry) {
            dpath = xasprintf("/v2/%s/manifests/%s", path, imgs[i].digest);
            if (sbx_oci_request(&o, "DELETE", dpath, NULL, 65536, NULL, NULL, &r, err) < 0) {
                free(dpath);
                goto out;
            }
            free(dpath);
            if (r.status == 405 || (r.body != NULL && strstr(r.body, "UNSUPPORTED") != NULL)) {
                long st = r.status;

                sbx_oci_reply_free(&r);
                sbx_error_set(err, SBX_E_ENGINE,
                              "registry %s does not allow deleting manifests (%ld UNSUPPORTED): "
                              "enable deletes there (docker-registry: storage.delete.enabled, "
                              "REGISTRY_STORAGE_DELETE_ENABLED=true)",
                              reg.host, st);
                goto out;
            }
            if (r.status != 202 && r.status != 200 && r.status != 404) {
                long st = r.status;

                sbx_oci_reply_free(&r);
                sbx_error_set(err, SBX_E_ENGINE, "registry %s: DELETE %s@%s answered %ld", reg.host,
                              reg.repo, imgs[i].digest, st);
                goto out;
            }
            sbx_oci_reply_free(&r);
            sbx_info("image gc: deleted %s@%s from the registry", reg.repo, imgs[i].digest);
        }
        json_array_append_new(
            removed, json_pack("{s:s, s:O}", "digest", imgs[i].digest, "tags", imgs[i].tags));
    }
    ret = 0;
out:
    for (size_t i = 0; i < n; i++) {
        json_decref(imgs[i].tags);
    }
    free(imgs);
    sbx_oci_fini(&o);
    return ret;
}
