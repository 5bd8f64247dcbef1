/* image_check.c - the box's image before it takes work (docs/image.md,
 * "Publishing and pulling"; docs/operations.md, "The image at start"): a
 * thread makes sure every image the configuration names is in its engine:
 * (changed) on every provider instance that serves sandboxes (the default one
 * and each configured one), the image each pool's sandboxes there are made of
 * (`pools.NAME.image`, else the instance's `image`, else `image`). A missing reference by digest is
 * pulled (`pulling image ...`); meanwhile the box grants and claims no job and /readyz says
 * `image`. A failed pull is retried every 30 s. An image never gets built here. A missing image
 * that is not a reference by digest is logged and the box goes on (its tasks fail at create, as
 * they did before this check). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image/push.h"
#include "config/config.h"
#include "plugin/instance.h"
#include "runner/health.h"
#include "util/monowait.h"
#include "util/log.h"
#include "util/xalloc.h"

#define IMAGE_RETRY_MS 30000

struct runner_image {
    const struct sbx_config *cfg;
    const char *plugin_dir;
    void (*on_ready)(void *arg); /* on the image's thread, once */
    void *arg;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int stop;          /* atomic (__atomic builtins); the pull and the wait poll it too */
    int ready;
    char why[512]; /* what the box waits for, "" when ready */
    int started;   /* (added) the thread runs: some image is configured */
};

static void set_state(struct runner_image *im, int ready, const char *why)
{
    pthread_mutex_lock(&im->mu);
    im->ready = ready;
    snprintf(im->why, sizeof(im->why), "%s", why);
    pthread_mutex_unlock(&im->mu);
}

/* One attempt for IMAGE on provider instance PROVIDER: 1 done (ready), 0
 * retry later. */
static int attempt_one(struct runner_image *im, const char *provider, const char *image)
{
    const struct sbx_config *cfg = im->cfg;
    sbx_error_t *err = NULL;
    struct sbx_open_instance *oi =
        sbx_instance_open(cfg, im->plugin_dir, provider, SBX_PLUGIN_PROVIDER, &err);
    char why[sizeof(im->why)];
    char on[96] = ""; /* (added) which engine, when not the default instance's */
    int pulled = 0;
    int rc;

    if (cfg->provider == NULL || strcmp(provider, cfg->provider) != 0) {
        snprintf(on, sizeof(on), " on provider instance %.64s", provider);
    }

    if (oi == NULL && sbx_image_ref_by_digest(image)) {
        /* the engine is not up yet: the image is still owed */
        snprintf(why, sizeof(why), "image %s%s: %s (retried every %d s)", image, on,
                 sbx_error_msg(err), IMAGE_RETRY_MS / 1000);
        sbx_error_free(&err);
        set_state(im, 0, why);
        return 0;
    }
    if (oi == NULL || sbx_instance_provider(oi)->image_op == NULL) {
        /* a provider without images: nothing to check here; the health
         * probe reports an engine that cannot be opened */
        sbx_error_free(&err);
        sbx_instance_close(oi);
        return 1;
    }
    if (sbx_image_ref_by_digest(image)) {
        snprintf(why, sizeof(why), "checking image %s%s", image, on);
        set_state(im, 0, why);
    }
    rc = sbx_image_ensure(cfg, im->plugin_dir, oi, image, &im->stop, 0, &pulled, &err);
    sbx_instance_close(oi);
    if (rc == 0) {
        return 1;
    }
    if (err->code == SBX_E_NOTFOUND && !sbx_image_ref_by_digest(image)) {
        sbx_warn("runner: %s%s", sbx_error_msg(err), on);
        sbx_error_free(&err);
        return 1;
    }
    snprintf(why, sizeof(why), "image %s%s: %s (retried every %d s)", image, on, sbx_error_msg(err),
             IMAGE_RETRY_MS / 1000);
    sbx_error_log("runner: %s", why);
    sbx_error_free(&err);
    set_state(im, 0, why);
    return 0;
}

/* (changed) The provider instances that serve this box's sandboxes: the
 * default one and every one the file configures. */
static int serves(const struct sbx_config *cfg, const struct sbx_instance *in)
{
    return in->kind == SBX_PLUGIN_PROVIDER &&
           (in->group != NULL || (cfg->provider != NULL && strcmp(in->name, cfg->provider) == 0));
}

/* (changed) One attempt for every image a sandbox of each serving instance
 * can be made of (sbx_config_image): each pool's, else the instance's, else
 * the top-level `image`, on that instance. 1 when all are ready. */
static int attempt(struct runner_image *im)
{
    const struct sbx_config *cfg = im->cfg;

    for (size_t i = 0; i < cfg->n_instances; i++) {
        const struct sbx_instance *in = &cfg->instances[i];

        if (!serves(cfg, in)) {
            continue;
        }
        for (size_t p = 0; p <= cfg->n_pools; p++) {
            /* p == n_pools: a sandbox of no configured pool */
            const char *image =
                sbx_config_image(cfg, p < cfg->n_pools ? cfg->pools[p].name : NULL, in->name);
            int seen = 0;

            for (size_t q = 0; image != NULL && q < p; q++) {
                const char *prev = sbx_config_image(cfg, cfg->pools[q].name, in->name);

                seen |= prev != NULL && strcmp(prev, image) == 0;
            }
            if (image != NULL && !seen && !attempt_one(im, in->name, image)) {
                return 0;
            }
        }
    }
    return 1;
}

/* (added) The first image the check will look for, or NULL: nothing to check. */
static const char *first_image(const struct sbx_config *cfg)
{
    for (size_t i = 0; i < cfg->n_instances; i++) {
        for (size_t p = 0; serves(cfg, &cfg->instances[i]) && p <= cfg->n_pools; p++) {
            const char *image = sbx_config_image(cfg, p < cfg->n_pools ? cfg->pools[p].name : NULL,
                                                 cfg->instances[i].name);

            if (image != NULL) {
                return image;
            }
        }
    }
    return NULL;
}

static void *image_main(void *arg)
{
    struct runner_image *im = arg;

    while (!__atomic_load_n(&im->stop, __ATOMIC_ACQUIRE)) {
        int64_t at;

        if (attempt(im)) {
            set_state(im, 1, "");
            im->on_ready(im->arg); /* the loop schedules */
            break;
        }
        at = sbx_mono_ms() + IMAGE_RETRY_MS;
        pthread_mutex_lock(&im->mu);
        sbx_cond_wait_until_ms(&im->cv, &im->mu, at, &im->stop);
        pthread_mutex_unlock(&im->mu);
    }
    return NULL;
}

struct runner_image *runner_image_start(const struct sbx_config *cfg, const char *plugin_dir,
                                        void (*on_ready)(void *arg), void *arg, sbx_error_t **err)
{
    struct runner_image *im = xcalloc(1, sizeof(*im));

    const char *first = first_image(cfg);

    im->cfg = cfg;
    im->plugin_dir = plugin_dir;
    im->on_ready = on_ready;
    im->arg = arg;
    snprintf(im->why, sizeof(im->why), "checking image %s", first ? first : "");
    pthread_mutex_init(&im->mu, NULL);
    sbx_cond_init_mono(&im->cv);
    if (first == NULL) {
        im->ready = 1;
        im->why[0] = '\0';
        return im;
    }
    if (pthread_create(&im->th, NULL, image_main, im) != 0) {
        pthread_mutex_destroy(&im->mu);
        pthread_cond_destroy(&im->cv);
        free(im);
        sbx_error_set(err, SBX_E_GENERIC, "runner: cannot start the image thread");
        return NULL;
    }
    im->started = 1;
    return im;
}

int runner_image_ready(struct runner_image *im, char *why, size_t len)
{
    int ready;

    if (im == NULL) {
        return 1; /* a runner made without the check (tests' harnesses) */
    }
    pthread_mutex_lock(&im->mu);
    ready = im->ready;
    if (why != NULL) {
        snprintf(why, len, "%s", im->why);
    }
    pthread_mutex_unlock(&im->mu);
    return ready;
}

void runner_image_free(struct runner_image *im)
{

    if (im == NULL) {
        return;
    }
    pthread_mutex_lock(&im->mu);
    __atomic_store_n(&im->stop, 1, __ATOMIC_RELEASE); /* also cancels a pull in flight */
    pthread_cond_signal(&im->cv);
    pthread_mutex_unlock(&im->mu);
    if (im->started) {
        pthread_join(im->th, NULL);
    }
    pthread_mutex_destroy(&im->mu);
    pthread_cond_destroy(&im->cv);
    free(im);
}
