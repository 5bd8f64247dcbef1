/* loader.h - loading a plugin .so with the ABI v1 checks (docs/plugins.md). */
#ifndef SBX_PLUGIN_LOADER_H
#define SBX_PLUGIN_LOADER_H

#include "sbx/sbx_credential.h"
#include "sbx/sbx_plugin.h"
#include "sbx/sbx_provider.h"
#include "util/error.h"

struct sbx_plugin {
    char *path;                  /* absolute, canonical */
    void *handle;                /* dlopen handle */
    struct sbx_plugin_desc desc; /* zeroed core-owned copy */
    union {
        struct sbx_provider_ops provider;
        struct sbx_credential_ops credential;
    } ops; /* zeroed core-owned copy: callbacks newer than the plugin are NULL */
};

/* Loads `path`, which must be an absolute path inside `plugin_dir`.
 * expect_kind 0 accepts either kind; expect_name NULL accepts the file's own
 * name (the descriptor's name must always equal the file name). */
struct sbx_plugin *sbx_plugin_load(const char *plugin_dir, const char *path,
                                   enum sbx_plugin_kind expect_kind, const char *expect_name,
                                   sbx_error_t **err);
/* Loads "<plugin_dir>/<name>.so". */
struct sbx_plugin *sbx_plugin_load_name(const char *plugin_dir, const char *name,
                                        enum sbx_plugin_kind expect_kind, sbx_error_t **err);
void sbx_plugin_unload(struct sbx_plugin *p);

const char *sbx_plugin_kind_name(enum sbx_plugin_kind kind);
const char *sbx_plugin_state_name(enum sbx_plugin_state state);

/* The plugin dir in force: config value, else $SBX_PLUGIN_DIR, else
 * "<dir of the sbx binary>/plugins" when it exists, else the install path.
 * Returns a canonical absolute path, or NULL with an error. */
char *sbx_plugin_dir_resolve(const char *configured, sbx_error_t **err);

#endif
