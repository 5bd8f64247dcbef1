/* docker_disk.c - the disk cap (docs/operations.md, "The disk cap").
 *
 * Where the engine's storage driver has a per-container quota (btrfs, zfs,
 * overlay2 on xfs mounted with pquota), each container is created with
 * HostConfig.StorageOpt {"size"}: writes past it fail inside the sandbox at
 * once. On overlay2 elsewhere (ext4: no project quotas in the kernel), each
 * container's writable layer gets its own ext4 of the cap's size
 * (docker_loopcap.c), which fails writes past it at once too. Where neither
 * works (sbx not root, no loop devices, another driver) the watchdog is the
 * last resort: the core calls the check
 * op about once a second and at each command's end; it measures the
 * sandbox's writable layer every disk_check_interval (and at every command's
 * end), and ends the task when the layer is over the cap or cannot be
 * measured (it fails closed). */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "docker.h"

/* sandboxes the watchdog has seen in this process, at most this many */
#define DK_WATCH_MAX 1024

int dk_disk_init(struct dk_ctx *c, const char *mode, sbx_error_t **err)
{
    const char *drv = c->storage_driver;
    int quota_driver = strcmp(drv, "btrfs") == 0 || strcmp(drv, "zfs") == 0;
    int overlay = strcmp(drv, "overlay2") == 0;
    int overlay_xfs = overlay && strcmp(c->backing_fs, "xfs") == 0;
    char why[160];
    int loop_ok = overlay && dk_loopcap_available(why, sizeof(why));

    if (!overlay) {
        snprintf(why, sizeof(why), "storage driver %.32s is not overlay2", drv[0] ? drv : "?");
    }
    snprintf(c->disk_loop_why, sizeof(c->disk_loop_why), "%s", why);

    pthread_mutex_init(&c->disk_mu, NULL);
    c->disk_mu_init = 1;
    /* a btrfs or zfs container is a snapshot of its image: its quota counts
     * the image's bytes too, so the size asked for is the cap plus those */
    c->disk_counts_image = quota_driver;
    if (strcmp(mode, "storage-opt") == 0) {
        c->disk_mode = DK_DISK_STORAGE_OPT;
    }
    else if (strcmp(mode, "watchdog") == 0) {
        c->disk_mode = DK_DISK_WATCHDOG;
        c->disk_forced = 1;
    }
    else if (strcmp(mode, "loop") == 0) {
        if (!loop_ok) {
            return c->host->error_set(err, SBX_E_CONFIG,
                                      "%s: disk_enforcement 'loop' cannot work here: %s",
                                      c->host->opt_where(c->opts, "disk_enforcement"), why);
        }
        c->disk_mode = DK_DISK_LOOP;
    }
    else if (strcmp(mode, "auto") == 0) {
        c->disk_mode = quota_driver || overlay_xfs ? DK_DISK_STORAGE_OPT
                       : loop_ok                   ? DK_DISK_LOOP
                                                   : DK_DISK_WATCHDOG;
        /* the engine does not say whether xfs is mounted with pquota: the
         * first create it refuses turns this context to the per-sandbox
         * filesystem (or the watchdog) */
        c->disk_fallback = overlay_xfs;
        c->disk_fallback_to = loop_ok ? DK_DISK_LOOP : DK_DISK_WATCHDOG;
    }
    else {
        return c->host->error_set(err, SBX_E_CONFIG,
                                  "%s: disk_enforcement '%s': use auto, "
                                  "storage-opt, loop or watchdog",
                                  c->host->opt_where(c->opts, "disk_enforcement"), mode);
    }
    return 0;
}

void dk_disk_free(struct dk_ctx *c)
{
    while (c->watches != NULL) {
        struct dk_watch *w = c->watches;

        c->watches = w->next;
        free(w);
    }
    if (c->disk_mu_init) {
        pthread_mutex_destroy(&c->disk_mu);
        c->disk_mu_init = 0;
    }
}

static int disk_mode(struct dk_ctx *c)
{
    int m;

    pthread_mutex_lock(&c->disk_mu);
    m = c->disk_mode;
    pthread_mutex_unlock(&c->disk_mu);
    return m;
}

int dk_disk_quota(struct dk_ctx *c)
{
    return disk_mode(c) == DK_DISK_STORAGE_OPT;
}

int dk_disk_mode(struct dk_ctx *c)
{
    return disk_mode(c);
}

int dk_disk_after_create(struct dk_ctx *c, const char *id, int64_t disk, sbx_error_t **err)
{
    if (disk <= 0 || disk_mode(c) != DK_DISK_LOOP) {
        return 0;
    }
    return dk_loopcap_apply(c, id, disk, err);
}

void dk_disk_describe(struct dk_ctx *c, char *buf, size_t size)
{
    char why[256];

    if (disk_mode(c) == DK_DISK_STORAGE_OPT) {
        if (strcmp(c->storage_driver, "btrfs") == 0) {
            char qg[400];

            dk_qgroup_describe(qg, sizeof(qg));
            snprintf(buf, size, "btrfs quota (storage-opt size)%s", qg);
        }
        else if (strcmp(c->storage_driver, "overlay2") == 0) {
            snprintf(buf, size, "xfs project quota (storage-opt size, overlay2 on %.32s%s)",
                     c->backing_fs, c->disk_fallback ? "; the watchdog if it lacks pquota" : "");
        }
        else {
            snprintf(buf, size, "%.32s quota (storage-opt size)", c->storage_driver);
        }
        return;
    }
    if (disk_mode(c) == DK_DISK_LOOP) {
        snprintf(buf, size,
                 "per-sandbox ext4 (a sparse loop-mounted filesystem of the cap under the "
                 "overlay2 upper layer; overlay2 on %.32s)",
                 c->backing_fs[0] ? c->backing_fs : "?");
        return;
    }
    if (c->disk_forced) {
        snprintf(why, sizeof(why), "disk_enforcement = watchdog");
    }
    else {
        snprintf(why, sizeof(why), "no quota in storage driver %.32s%s%.32s; %.64s",
                 c->storage_driver[0] ? c->storage_driver : "?", c->backing_fs[0] ? " on " : "",
                 c->backing_fs, c->disk_loop_why);
    }
    snprintf(buf, size,
             "watchdog: writable layer measured every %" PRId64 "s and after each command, "
             "fails closed (%s)",
             c->disk_interval, why);
}

/* The bytes of image `image` in the engine, or -1 (404: SBX_E_NOTFOUND). */
static int64_t image_size(struct dk_ctx *c, const char *image, const char *build_hint,
                          sbx_error_t **err)
{
    char *enc = sbx_url_escape(image);
    char path[512];
    json_t *reply = NULL;
    json_t *size;
    long status = 0;
    int64_t v = -1;

    snprintf(path, sizeof(path), "/images/%s/json", enc);
    free(enc);
    if (dk_request(c, "GET", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    size = json_object_get(reply, "Size");
    if (status == 404) {
        c->host->error_set(err, SBX_E_NOTFOUND,
                           "docker: image '%s' not found in the engine "
                           "(build it with '%s')",
                           image, build_hint);
    }
    else if (status != 200 || !json_is_integer(size) || json_integer_value(size) < 0) {
        c->host->error_set(err, SBX_E_ENGINE,
                           "docker: image %s: HTTP %ld: %s (its size sets "
                           "the disk quota)",
                           image, status, dk_reply_message(reply));
    }
    else {
        v = json_integer_value(size);
    }
    json_decref(reply);
    return v;
}

int dk_disk_storage_opt(struct dk_ctx *c, json_t *hc, const char *image, const char *build_hint,
                        int64_t disk, sbx_error_t **err)
{
    char size[32];

    if (disk <= 0 || !dk_disk_quota(c)) {
        return 0;
    }
    if (c->disk_counts_image) {
        int64_t base = image_size(c, image, build_hint, err);

        if (base < 0) {
            return -1;
        }
        disk += base;
    }
    snprintf(size, sizeof(size), "%" PRId64, disk);
    json_object_set_new(hc, "StorageOpt", json_pack("{s:s}", "size", size));
    return 0;
}

int dk_disk_fallback(struct dk_ctx *c, long status, json_t *reply)
{
    const char *m = dk_reply_message(reply);
    int turned = 0;

    if (status < 400 || (strstr(m, "storage-opt") == NULL && strstr(m, "pquota") == NULL)) {
        return 0;
    }
    pthread_mutex_lock(&c->disk_mu);
    if (c->disk_fallback && c->disk_mode == DK_DISK_STORAGE_OPT) {
        c->disk_mode = c->disk_fallback_to;
        turned = 1;
    }
    pthread_mutex_unlock(&c->disk_mu);
    if (turned) {
        c->host->log(c->host->instance_name(c->opts), SBX_LOG_WARN,
                     "the engine cannot apply a "
                     "disk quota (%s): the disk cap falls back to %s (mount the data "
                     "root's xfs with pquota for the engine's quota)",
                     m, c->disk_mode == DK_DISK_LOOP ? "a per-sandbox filesystem" : "the watchdog");
    }
    return turned;
}

/* ---- the watchdog ------------------------------------------------------ */

/* The writable layer's size and *limit (the sbx.disk label, 0: none), or -1
 * with *err saying why it could not be measured. */
static int64_t measure(struct dk_ctx *c, const char *id, int64_t *limit, sbx_error_t **err)
{
    json_t *reply = NULL;
    json_t *rw;
    long status = 0;
    char path[256];
    int64_t v = -1;

    snprintf(path, sizeof(path), "/containers/%s/json?size=1", id);
    if (dk_request(c, "GET", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    rw = json_object_get(reply, "SizeRw");
    if (status != 200) {
        c->host->error_set(err, SBX_E_ENGINE, "the engine answered HTTP %ld: %s", status,
                           dk_reply_message(reply));
    }
    else if (!json_is_integer(rw) || json_integer_value(rw) < 0) {
        c->host->error_set(err, SBX_E_ENGINE, "the engine reported no SizeRw");
    }
    else {
        const char *l = json_string_value(json_object_get(
            json_object_get(json_object_get(reply, "Config"), "Labels"), "sbx.disk"));

        v = json_integer_value(rw);
        *limit = l ? strtoll(l, NULL, 10) : 0;
    }
    json_decref(reply);
    return v;
}

/* Whether the watchdog measures sandbox id now (its interval passed, or a
 * command just ended); remembers it. */
static int due(struct dk_ctx *c, const char *id, int after_exec)
{
    struct dk_watch **pp = &c->watches;
    struct dk_watch *w = NULL;
    int64_t now = (sbx_mono_ms() / 1000);
    size_t n = 0;
    int go;

    pthread_mutex_lock(&c->disk_mu);
    for (; *pp != NULL; pp = &(*pp)->next, n++) {
        if (strcmp((*pp)->id, id) == 0) {
            w = *pp;
            *pp = w->next; /* moved to the front below */
            break;
        }
    }
    if (w == NULL) {
        w = xcalloc(1, sizeof(*w));
        snprintf(w->id, sizeof(w->id), "%s", id);
        /* bounded: the least recently seen goes (its sandbox is likely gone) */
        if (n >= DK_WATCH_MAX) {
            struct dk_watch **last = &c->watches;

            while ((*last)->next != NULL) {
                last = &(*last)->next;
            }
            free(*last);
            *last = NULL;
        }
    }
    w->next = c->watches;
    c->watches = w;
    go = after_exec || now >= w->due;
    if (go) {
        w->due = now + c->disk_interval;
    }
    pthread_mutex_unlock(&c->disk_mu);
    return go;
}

void dk_disk_forget(struct dk_ctx *c, const char *id)
{
    pthread_mutex_lock(&c->disk_mu);
    for (struct dk_watch **pp = &c->watches; *pp != NULL; pp = &(*pp)->next) {
        if (strcmp((*pp)->id, id) == 0) {
            struct dk_watch *w = *pp;

            *pp = w->next;
            free(w);
            break;
        }
    }
    pthread_mutex_unlock(&c->disk_mu);
}

int dk_disk_check(void *ctx, const char *id, int after_exec, sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    sbx_error_t *merr = NULL;
    int64_t limit = 0;
    int64_t used;

    if (disk_mode(c) != DK_DISK_WATCHDOG || !due(c, id, after_exec)) {
        return 0;
    }
    used = measure(c, id, &limit, &merr);
    if (used < 0) {
        c->host->error_set(err, SBX_E_ENGINE,
                           "disk cap: cannot measure the writable layer of "
                           "sandbox %.12s (%s): the disk watchdog fails closed",
                           id, merr ? merr->msg : "no reason given");
        c->host->error_free(&merr);
        return -1;
    }
    if (limit > 0 && used > limit) {
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "disk cap exceeded: the sandbox wrote %" PRId64
                                  " bytes, its limit is %" PRId64 " bytes",
                                  used, limit);
    }
    return 0;
}
