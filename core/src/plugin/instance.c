/* instance.c - opening configured plugin instances. */
#include "plugin/instance.h"

#include <stdlib.h>

#include "plugin/host.h"
#include "util/xalloc.h"

struct sbx_open_instance *sbx_instance_load(const struct sbx_config *c, const char *plugin_dir,
                                            const char *name, enum sbx_plugin_kind kind,
                                            sbx_error_t **err)
{
    const struct sbx_instance *in = sbx_config_instance(c, name, kind);
    struct sbx_open_instance *oi;

    if (in == NULL) {
        sbx_error_set(err, SBX_E_CONFIG, "%s: no %s instance named '%s'",
                      c->path ? c->path : "configuration", sbx_plugin_kind_name(kind), name);
        return NULL;
    }
    oi = xcalloc(1, sizeof(*oi));
    oi->cfg = in;
    oi->plugin = sbx_plugin_load_name(plugin_dir, in->plugin, kind, err);
    if (oi->plugin == NULL) {
        sbx_error_wrap(err, "%s: %s instance '%s'", in->where, sbx_plugin_kind_name(kind), name);
        free(oi);
        return NULL;
    }
    oi->opts = sbx_options_build(c, in, oi->plugin->desc.options, err);
    if (oi->opts == NULL) {
        sbx_instance_close(oi);
        return NULL;
    }
    return oi;
}

struct sbx_open_instance *sbx_instance_open(const struct sbx_config *c, const char *plugin_dir,
                                            const char *name, enum sbx_plugin_kind kind,
                                            sbx_error_t **err)
{
    struct sbx_open_instance *oi = sbx_instance_load(c, plugin_dir, name, kind, err);
    const struct sbx_plugin_desc *d;
    int r;

    if (oi == NULL) {
        return NULL;
    }
    d = &oi->plugin->desc;
    if (d->state != SBX_PLUGIN_READY) {
        sbx_error_set(err, SBX_E_STUB, "%s instance '%s' (%s) is %s: %s",
                      sbx_plugin_kind_name(kind), name, d->name, sbx_plugin_state_name(d->state),
                      d->reason ? d->reason : "no reason given");
        sbx_instance_close(oi);
        return NULL;
    }
    if (kind == SBX_PLUGIN_PROVIDER) {
        r = oi->plugin->ops.provider.init(sbx_host_api_get(), oi->opts, &oi->ctx, err);
    }
    else {
        r = oi->plugin->ops.credential.init(sbx_host_api_get(), oi->opts, &oi->ctx, err);
    }
    if (r < 0) {
        sbx_error_wrap(err, "%s instance '%s'", sbx_plugin_kind_name(kind), name);
        oi->ctx = NULL;
        sbx_instance_close(oi);
        return NULL;
    }
    return oi;
}

void sbx_instance_close(struct sbx_open_instance *oi)
{
    if (oi == NULL) {
        return;
    }
    if (oi->ctx != NULL) {
        if (oi->plugin->desc.kind == SBX_PLUGIN_PROVIDER) {
            oi->plugin->ops.provider.destroy_ctx(oi->ctx);
        }
        else {
            oi->plugin->ops.credential.destroy_ctx(oi->ctx);
        }
    }
    sbx_options_destroy(oi->opts);
    sbx_plugin_unload(oi->plugin);
    free(oi);
}
