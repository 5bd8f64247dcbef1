/* instance.h - a configured provider or credential instance, opened: its
 * plugin loaded, its options checked, its init() called. */
#ifndef SBX_PLUGIN_INSTANCE_H
#define SBX_PLUGIN_INSTANCE_H

#include "config/config.h"
#include "plugin/loader.h"
#include "plugin/options.h"

struct sbx_open_instance {
    const struct sbx_instance *cfg;
    struct sbx_plugin *plugin;
    struct sbx_options *opts;
    void *ctx; /* the plugin's, after a successful init */
};

/* Loads and checks the plugin and options of instance `name` (no init).
 * Used by `sbx config check`. */
struct sbx_open_instance *sbx_instance_load(const struct sbx_config *c, const char *plugin_dir,
                                            const char *name, enum sbx_plugin_kind kind,
                                            sbx_error_t **err);
/* sbx_instance_load + init; refuses stub and deferred plugins with their
 * reason. */
struct sbx_open_instance *sbx_instance_open(const struct sbx_config *c, const char *plugin_dir,
                                            const char *name, enum sbx_plugin_kind kind,
                                            sbx_error_t **err);
void sbx_instance_close(struct sbx_open_instance *oi);

static inline const struct sbx_provider_ops *
sbx_instance_provider(const struct sbx_open_instance *oi)
{
    return &oi->plugin->ops.provider;
}

static inline const struct sbx_credential_ops *
sbx_instance_credential(const struct sbx_open_instance *oi)
{
    return &oi->plugin->ops.credential;
}

#endif
