/* devc_opts.c - the helper's options for a definition (devc.h), the layer
 * folder's removal, and which definition moves the current tag. */
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/devc.h"
#include "image/image.h"
#include "util/xalloc.h"

struct opts {
    char **v;
    size_t n;
};

static void add(struct opts *o, const char *name, const char *value)
{
    o->v = xrealloc(o->v, (o->n + 3) * sizeof(char *));
    o->v[o->n++] = xstrdup(name);
    o->v[o->n++] = xstrdup(value);
    o->v[o->n] = NULL;
}

char **sbx_devc_options(const struct sbx_image_def *d, const char *layer_dir,
                        const char *const *tags)
{
    struct opts o = {xcalloc(1, sizeof(char *)), 0};
    const struct sbx_devc *dc = d ? d->devc : NULL;

    if (d != NULL) {
        add(&o, "--definition", d->path);
    }
    if (dc != NULL) {
        /* debootstrap's base is named by the shortcut's fields alone */
        json_t *c = json_loads(d->canonical, 0, NULL);
        char *base;

        json_object_del(c, "devc");
        base = json_dumps(c, JSON_COMPACT | JSON_SORT_KEYS);
        add(&o, "--base-spec", base);
        free(base);
        json_decref(c);
        if (dc->image != NULL) {
            add(&o, "--base-image", dc->image);
        }
        if (dc->dockerfile != NULL) {
            add(&o, "--dockerfile", dc->dockerfile);
            add(&o, "--context", dc->context);
            for (size_t i = 0; dc->args != NULL && dc->args[i] != NULL; i++) {
                add(&o, "--build-arg", dc->args[i]);
            }
            if (dc->target != NULL) {
                add(&o, "--target", dc->target);
            }
            for (size_t i = 0; dc->cache_from != NULL && dc->cache_from[i] != NULL; i++) {
                add(&o, "--cache-from", dc->cache_from[i]);
            }
        }
        add(&o, "--layer", layer_dir);
        if (!dc->update_uid) {
            /* (added) no dev.sbx.remote-ids label: the worktree stays root's */
            o.v = xrealloc(o.v, (o.n + 2) * sizeof(char *));
            o.v[o.n++] = xstrdup("--no-update-uid");
            o.v[o.n] = NULL;
        }
    }
    for (size_t i = 0; tags != NULL && tags[i] != NULL; i++) {
        add(&o, "--tag", tags[i]);
    }
    return o.v;
}

void sbx_devc_options_free(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    if (flag == FTW_DP) {
        rmdir(path);
    }
    else {
        unlink(path);
    }
    return 0;
}

void sbx_devc_remove_layer(const char *dir)
{
    if (dir != NULL) {
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
}

int sbx_devc_is_configured(const char *path)
{
    char *def = sbx_image_def_find(NULL, NULL);
    char *a = def ? realpath(def, NULL) : NULL;
    char *b = realpath(path, NULL);
    int same = a != NULL && b != NULL && strcmp(a, b) == 0;

    free(def);
    free(a);
    free(b);
    return same;
}
