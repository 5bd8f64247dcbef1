/* image_check.c - the box's image before it takes work (docs/image.md,
 * "Publishing and pulling"; docs/operations.md, "The image at start"): a
 * thread makes sure every image the configuration names is in its engine:
 * `image` and each `pools.NAME.image` in the default provider instance's,
 * each provider instance's `image` option in that instance's. A missing reference by digest is
 * pulled (`pulling image ...`); meanwhile the box grants and claims no job and /readyz says
 * `image`. A failed pull is retried every 30 s. An image never gets built here. A missing image
 * that is not a reference by digest is logged and the box goes on (its tasks fail at create, as
 * they did before this check). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "image/push.h"
#include "plugin/instance.h"
#include "runner/runner_int.h"
#include "util/monowait.h"
#include "util/log.h"
#include "util/xalloc.h"

#define IMAGE_RETRY_MS 30000

struct runner_image {
    struct sbx_runner *r;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int stop;          /* atomic (__atomic builtins); the pull and the wait poll it too */
    int ready;
    char why[512]; /* what the box waits for, "" when ready */
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
    struct sbx_runner *r = im->r;
    const struct sbx_config *cfg = r->cfg;
    sbx_error_t *err = NULL;
    struct sbx_open_instance *oi =
        sbx_instance_open(cfg, r->plugin_dir, provider, SBX_PLUGIN_PROVIDER, &err);
    char why[sizeof(im->why)];
    int pulled = 0;
    int rc;

    if (oi == NULL && sbx_image_ref_by_digest(image)) {
        /* the engine is not up yet: the image is still owed */
        snprintf(why, sizeof(why), "image %s: %s (retried every %d s)", image, sbx_error_msg(err),
                 IMAGE_RETRY_MS / 1000);
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
        snprintf(why, sizeof(why), "checking image %s", image);
        set_state(im, 0, why);
    }
    rc = sbx_image_ensure(cfg, r->plugin_dir, oi, image, &im->stop, 0, &pulled, &err);
    sbx_instance_close(oi);
    if (rc == 0) {
        return 1;
    }
    if (err->code == SBX_E_NOTFOUND && !sbx_image_ref_by_digest(image)) {
        sbx_warn("runner: %s", sbx_error_msg(err));
        sbx_error_free(&err);
        return 1;
    }
    snprintf(why, sizeof(why), "image %s: %s (retried every %d s)", image, sbx_error_msg(err),
             IMAGE_RETRY_MS / 1000);
    sbx_error_log("runner: %s", why);
    sbx_error_free(&err);
    set_state(im, 0, why);
    return 0;
}

/* (added) One attempt for every image the configuration names: the top-level
 * `image` and each pool's on the default provider instance, each provider
 * instance's `image` option on that instance. 1 when all are ready. */
static int attempt(struct runner_image *im)
{
    const struct sbx_config *cfg = im->r->cfg;
    int ok = 1;

    if (cfg->image != NULL && !attempt_one(im, cfg->provider, cfg->image)) {
        return 0;
    }
    for (size_t i = 0; ok && i < cfg->n_pools; i++) {
        if (cfg->pools[i].image != NULL) {
            ok = attempt_one(im, cfg->provider, cfg->pools[i].image);
        }
    }
    for (size_t i = 0; ok && i < cfg->n_instances; i++) {
        if (cfg->instances[i].kind == SBX_PLUGIN_PROVIDER && cfg->instances[i].image != NULL) {
            ok = attempt_one(im, cfg->instances[i].name, cfg->instances[i].image);
        }
    }
    return ok;
}

static void *image_main(void *arg)
{
    struct runner_image *im = arg;

    while (!__atomic_load_n(&im->stop, __ATOMIC_ACQUIRE)) {
        int64_t at;

        if (attempt(im)) {
            set_state(im, 1, "");
            runner_post(im->r, RMSG_OUTPUT, "", SBX_RESULT_OK); /* the loop schedules */
            break;
        }
        at = sbx_mono_ms() + IMAGE_RETRY_MS;
        pthread_mutex_lock(&im->mu);
        sbx_cond_wait_until_ms(&im->cv, &im->mu, at, &im->stop);
        pthread_mutex_unlock(&im->mu);
    }
    return NULL;
}

int runner_image_start(struct sbx_runner *r, sbx_error_t **err)
{
    struct runner_image *im = xcalloc(1, sizeof(*im));

    im->r = r;
    snprintf(im->why, sizeof(im->why), "checking image %s", r->cfg->image ? r->cfg->image : "");
    pthread_mutex_init(&im->mu, NULL);
    sbx_cond_init_mono(&im->cv);
    if (r->cfg->image == NULL) {
        im->ready = 1;
        im->why[0] = '\0';
        r->image = im;
        return 0;
    }
    if (pthread_create(&im->th, NULL, image_main, im) != 0) {
        pthread_mutex_destroy(&im->mu);
        pthread_cond_destroy(&im->cv);
        free(im);
        return sbx_error_set(err, SBX_E_GENERIC, "runner: cannot start the image thread");
    }
    r->image = im;
    return 0;
}

int runner_image_ready(struct sbx_runner *r, char *why, size_t len)
{
    struct runner_image *im = r->image;
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

void runner_image_free(struct sbx_runner *r)
{
    struct runner_image *im = r->image;

    if (im == NULL) {
        return;
    }
    pthread_mutex_lock(&im->mu);
    __atomic_store_n(&im->stop, 1, __ATOMIC_RELEASE); /* also cancels a pull in flight */
    pthread_cond_signal(&im->cv);
    pthread_mutex_unlock(&im->mu);
    if (r->cfg->image != NULL) {
        pthread_join(im->th, NULL);
    }
    pthread_mutex_destroy(&im->mu);
    pthread_cond_destroy(&im->cv);
    free(im);
    r->image = NULL;
}
