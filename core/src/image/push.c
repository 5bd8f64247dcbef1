/* push.c - push to the configured registry, pull by digest (push.h). */
#include "image/push.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "image/registry.h"
#include "sandbox/statedir.h"
#include "util/log.h"
#include "util/xalloc.h"

int sbx_image_op_supported(struct sbx_open_instance *oi, sbx_error_t **err)
{
    if (sbx_instance_provider(oi)->image_op != NULL) {
        return 1;
    }
    sbx_error_set(err, SBX_E_USAGE, "provider '%s' (%s) cannot push or pull images", oi->cfg->name,
                  oi->cfg->plugin);
    return 0;
}

int sbx_image_ref_by_digest(const char *ref)
{
    const char *at = ref ? strrchr(ref, '@') : NULL;

    if (at == NULL || at == ref || strncmp(at + 1, "sha256:", 7) != 0 || strlen(at + 8) != 64) {
        return 0;
    }
    return strspn(at + 8, "0123456789abcdef") == 64;
}

/* A content-hash tag: REPO:<16 lower-case hex>. */
static const char *hash_of_tag(const char *tag)
{
    const char *colon = tag ? strrchr(tag, ':') : NULL;

    if (colon == NULL || strlen(colon + 1) != 16 || strspn(colon + 1, "0123456789abcdef") != 16) {
        return NULL;
    }
    return colon + 1;
}

struct found {
    char hash[64];
    char id[160];
    char digest[128];
    int n;
};

static int on_inspect(void *ud, const struct sbx_image_info *info)
{
    struct found *f = ud;
    const char *h;

    f->n++;
    snprintf(f->id, sizeof(f->id), "%s", info->id ? info->id : "");
    snprintf(f->digest, sizeof(f->digest), "%s", info->digest ? info->digest : "");
    h = hash_of_tag(info->ref);
    for (size_t i = 0; h == NULL && info->tags != NULL && info->tags[i] != NULL; i++) {
        h = hash_of_tag(info->tags[i]);
    }
    if (h != NULL) {
        snprintf(f->hash, sizeof(f->hash), "%s", h);
    }
    return 0;
}

/* <state>/images/pushed.json: {"<hash>": {"digest", "pull_ref", "pushed_at"}}. */
static void record(const struct sbx_config *c, const struct sbx_pushed *p)
{
    sbx_error_t *err = NULL;
    char *state = sbx_state_dir(c->state_dir, &err);
    char *dir;
    char *path;
    char *tmp;
    json_t *root;

    if (state == NULL) {
        sbx_warn("image push: the digest is not recorded: %s", sbx_error_msg(err));
        sbx_error_free(&err);
        return;
    }
    dir = xasprintf("%s/images", state);
    path = xasprintf("%s/pushed.json", dir);
    tmp = xasprintf("%s.tmp", path);
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        sbx_warn("image push: cannot create %s: %s", dir, strerror(errno));
    }
    root = json_load_file(path, 0, NULL);
    if (!json_is_object(root)) {
        json_decref(root);
        root = json_object();
    }
    json_object_set_new(root, p->hash,
                        json_pack("{s:s, s:s, s:s, s:I}", "target", p->target, "digest", p->digest,
                                  "pull_ref", p->pull_ref, "pushed_at", (json_int_t)time(NULL)));
    if (json_dump_file(root, tmp, JSON_INDENT(2) | JSON_SORT_KEYS) < 0 || rename(tmp, path) < 0) {
        sbx_warn("image push: cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
    json_decref(root);
    free(tmp);
    free(path);
    free(dir);
    free(state);
}

int sbx_image_push(const struct sbx_config *c, const char *plugin_dir, struct sbx_open_instance *oi,
                   const char *ref, struct sbx_pushed *out, sbx_error_t **err)
{
    const struct sbx_provider_ops *ops = sbx_instance_provider(oi);
    struct sbx_registry reg;
    struct found f = {0};
    struct found pushed = {0};
    char *auth;
    int rc;

    memset(out, 0, sizeof(*out));
    if (!sbx_image_op_supported(oi, err) || sbx_registry_from_config(c, &reg, err) < 0) {
        return -1;
    }
    if (ops->image_op(
            oi->ctx,
            &(struct sbx_image_op){
                .action = SBX_IMAGE_INSPECT, .ref = ref, .fn = on_inspect, .userdata = &f},
            err) < 0) {
        return sbx_error_wrap(err, "image push");
    }
    if (f.hash[0] == '\0') {
        return sbx_error_set(err, SBX_E_USAGE,
                             "image push: '%s' has no content-hash tag (REPO:<16 hex>): push "
                             "an image that sbx image build made",
                             ref);
    }
    snprintf(out->hash, sizeof(out->hash), "%s", f.hash);
    snprintf(out->target, sizeof(out->target), "%s:%s", reg.repo, f.hash);
    auth = sbx_registry_auth(c, plugin_dir, &reg, &out->auth_source, err);
    if (auth == NULL && *err != NULL) {
        return -1;
    }
    sbx_info("image push: %s to %s (credentials: %s)", ref, out->target, out->auth_source);
    if (sbx_log_get_level() < SBX_LOG_INFO) {
        fprintf(stderr, "sbx: pushing image %s to %s (credentials: %s)\n", ref, out->target,
                out->auth_source);
    }
    rc = ops->image_op(oi->ctx,
                       &(struct sbx_image_op){.action = SBX_IMAGE_PUSH,
                                              .ref = ref,
                                              .target = out->target,
                                              .auth = auth,
                                              .fn = on_inspect,
                                              .userdata = &pushed},
                       err);
    sbx_registry_auth_free(auth);
    if (rc < 0) {
        return sbx_error_wrap(err, "image push to %s", reg.host);
    }
    snprintf(out->digest, sizeof(out->digest), "%s", pushed.digest);
    snprintf(out->pull_ref, sizeof(out->pull_ref), "%s@%s", reg.repo, pushed.digest);
    record(c, out);
    return 0;
}

/* The registry of a reference: its first part when it names a host
 * ("a.b", "a:5000", "localhost"), with the configured credentials when it is
 * the configured registry's host. */
static char *auth_for(const struct sbx_config *c, const char *plugin_dir, const char *ref,
                      const char **source, sbx_error_t **err)
{
    struct sbx_registry conf;
    struct sbx_registry reg = {0};
    const char *slash = strchr(ref, '/');
    size_t hl = slash ? (size_t)(slash - ref) : 0;
    struct sbx_config anon;

    *source = "none";
    if (hl == 0 || hl >= sizeof(reg.host) ||
        (memchr(ref, '.', hl) == NULL && memchr(ref, ':', hl) == NULL &&
         strncmp(ref, "localhost/", 10) != 0)) {
        return NULL;
    }
    snprintf(reg.host, sizeof(reg.host), "%.*s", (int)hl, ref);
    if (c->image_registry.url != NULL &&
        sbx_registry_parse(c->image_registry.url, &conf, NULL, 0) == 0 &&
        strcmp(conf.host, reg.host) == 0) {
        return sbx_registry_auth(c, plugin_dir, &reg, source, err);
    }
    /* another registry: the engine's login only */
    memcpy(&anon, c, sizeof(anon));
    anon.image_registry.credential = NULL;
    return sbx_registry_auth(&anon, plugin_dir, &reg, source, err);
}

int sbx_image_ensure(const struct sbx_config *c, const char *plugin_dir,
                     struct sbx_open_instance *oi, const char *ref, const volatile int *cancel,
                     int say, int *pulled, sbx_error_t **err)
{
    const struct sbx_provider_ops *ops = sbx_instance_provider(oi);
    sbx_error_t *e = NULL;
    const char *source = "none";
    char *auth;
    int64_t t0;
    int rc;

    *pulled = 0;
    if (!sbx_image_op_supported(oi, err)) {
        return -1;
    }
    if (ops->image_op(oi->ctx, &(struct sbx_image_op){.action = SBX_IMAGE_INSPECT, .ref = ref},
                      &e) == 0) {
        return 0;
    }
    if (e->code != SBX_E_NOTFOUND) {
        *err = e;
        return -1;
    }
    sbx_error_free(&e);
    if (!sbx_image_ref_by_digest(ref)) {
        return sbx_error_set(err, SBX_E_NOTFOUND,
                             "image '%s' is not in the engine of provider '%s' and is not a "
                             "reference by digest to pull (HOST[:PORT]/PATH@sha256:...): build "
                             "it with 'sbx image build' or push it with 'sbx image push' and "
                             "name its digest in 'image'",
                             ref, oi->cfg->name);
    }
    auth = auth_for(c, plugin_dir, ref, &source, err);
    if (auth == NULL && *err != NULL) {
        return -1;
    }
    sbx_info("pulling image %s (credentials: %s)", ref, source);
    if (say && sbx_log_get_level() < SBX_LOG_INFO) {
        fprintf(stderr, "sbx: pulling image %s (credentials: %s)\n", ref, source);
    }
    t0 = (int64_t)time(NULL);
    rc = ops->image_op(oi->ctx,
                       &(struct sbx_image_op){
                           .action = SBX_IMAGE_PULL, .ref = ref, .auth = auth, .cancel = cancel},
                       err);
    sbx_registry_auth_free(auth);
    if (rc < 0) {
        return sbx_error_wrap(err, "pulling image %s", ref);
    }
    sbx_info("pulled image %s in %llds", ref, (long long)((int64_t)time(NULL) - t0));
    *pulled = 1;
    return 0;
}
