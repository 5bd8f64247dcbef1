/* host.c - provider_host: the provider ops. Everything a sandbox would hold
 * back is absent here: no limits, no network control, host user ids; the
 * flags say so (0), and the core refuses it unless the instance is
 * `unisolated = true`. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "host.h"
#include "sbx/sbx_plugin.h"

static const struct sbx_option options[] = {
    {"root", SBX_OPT_STRING, NULL, 0,
     "directory holding one directory per sandbox (default /tmp/sbx-host-UID, mode 0700)"},
    SBX_OPTIONS_END,
};

static int cb_host_init(const struct sbx_host_api *host, const struct sbx_options *opts, void **ctx,
                        sbx_error_t **err)
{
    struct hx_ctx *c = calloc(1, sizeof(*c));
    const char *root = host->opt_string(opts, "root");

    if (c == NULL) {
        return host->error_set(err, SBX_E_GENERIC, "out of memory");
    }
    c->host = host;
    c->instance = host->instance_name(opts);
    if (root != NULL && root[0] != '/') {
        free(c);
        return host->error_set(err, SBX_E_CONFIG, "%s: root '%s': use an absolute path",
                               host->opt_where(opts, "root"), root);
    }
    if (root != NULL) {
        c->root = strdup(root);
    }
    else if (asprintf(&c->root, "/tmp/sbx-host-%u", (unsigned)getuid()) < 0) {
        c->root = NULL;
    }
    if (c->root == NULL) {
        free(c);
        return host->error_set(err, SBX_E_GENERIC, "out of memory");
    }
    if (hx_root_prepare(c, err) < 0) {
        free(c->root);
        free(c);
        return -1;
    }
    pthread_mutex_init(&c->mu, NULL);
    *ctx = c;
    return 0;
}

static void cb_host_destroy_ctx(void *ctx)
{
    struct hx_ctx *c = ctx;

    pthread_mutex_destroy(&c->mu);
    free(c->root);
    free(c);
}

static int cb_host_create(void *ctx, const struct sbx_sandbox_spec *spec, char *id_out,
                          size_t id_size, sbx_error_t **err)
{
    return hx_store_create(ctx, spec, id_out, id_size, err);
}

static int cb_host_destroy(void *ctx, const char *sandbox_id, sbx_error_t **err)
{
    struct hx_ctx *c = ctx;

    if (!hx_id_valid(sandbox_id)) {
        return c->host->error_set(err, SBX_E_NOTFOUND,
                                  "sandbox id '%.64s' is not this "
                                  "provider's",
                                  sandbox_id);
    }
    hx_kill_sandbox(c, sandbox_id);
    return hx_store_remove(c, sandbox_id, err);
}

static int cb_host_list(void *ctx, const char *key, const char *value, sbx_sandbox_fn fn, void *ud,
                        sbx_error_t **err)
{
    return hx_store_list(ctx, key, value, fn, ud, err);
}

static int cb_host_info(void *ctx, struct sbx_provider_info *info, sbx_error_t **err)
{
    struct hx_ctx *c = ctx;

    (void)err;
    snprintf(info->engine, sizeof(info->engine), "host processes under %.90s (no isolation)",
             c->root);
    info->userns = 0; /* a command's root is the host's root */
    return 0;
}

static const struct sbx_provider_ops provider_host_ops = {
    .flags = 0, /* enforces nothing: no limits, no egress control, no user namespaces */
    .init = cb_host_init,
    .destroy_ctx = cb_host_destroy_ctx,
    .create = cb_host_create,
    .exec = hx_exec,
    .destroy = cb_host_destroy,
    .list = cb_host_list,
    .cancel = hx_cancel,
    .info = cb_host_info,
};

SBX_PLUGIN_DEFINE(SBX_PLUGIN_PROVIDER, HX_NAME, "0.1.0", SBX_PLUGIN_READY, NULL, options,
                  provider_host_ops)
