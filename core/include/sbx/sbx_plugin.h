/* sbx_plugin.h - the versioned plugin descriptor (SDK, plugin ABI v1).
 *
 * A plugin is a shared object exporting exactly one function,
 *     const struct sbx_plugin_desc *sbx_plugin_entry(void);
 * Define it with SBX_PLUGIN_DEFINE(). The core checks, in order: absolute path
 * inside the plugin dir, regular file (no symlink), dlopen(RTLD_NOW|RTLD_LOCAL),
 * entry symbol, abi_major equal and abi_minor not newer, desc_size and
 * ops_size not larger than the core's, required callbacks present, kind and
 * name matching the configuration. See docs/plugins.md.
 */
#ifndef SBX_SDK_PLUGIN_H
#define SBX_SDK_PLUGIN_H

#include <stddef.h>
#include <stdint.h>

#ifndef SBX_PLUGIN_ABI_MAJOR
#define SBX_PLUGIN_ABI_MAJOR 1u /* bump: removal or incompatible change */
#endif
/* The minor version of these headers. Every append to a struct that the
 * core and plugins share (the descriptor, the ops, the host vtable, the
 * sandbox, exec and info structs, the structs they point to) bumps it, in the
 * same change (docs/plugins.md, Versioning). 1.1: image_build, scan_secrets.
 * 1.2: claim_worktree, sbx_sandbox_spec.view_later (the runner's warm pool).
 * 1.3: update_limits (a warm sandbox resized at its claim).
 * 1.4: sbx_cred_scope.client and .pool (secrets bound to the client).
 * 1.5: sbx_image_request.options (the Dev Container build, the tags).
 * 1.6: image_op (sbx image push, pull, gc, inspect; the runner's image check).
 * 1.7: snapshot, snapshot_remove (snapshot/fork of a task).
 * 1.8: port_connect (terminals/ports: sbx port, the API's ports).
 * 1.9: files_get, files_put, pause, resume (files and pause of a task).
 * 1.10: files_put_stream, sbx_host_api.http_upload (`sbx cp` into a task streamed). */
#define SBX_PLUGIN_ABI_MINOR_CURRENT 10u
#ifndef SBX_PLUGIN_ABI_MINOR
#define SBX_PLUGIN_ABI_MINOR SBX_PLUGIN_ABI_MINOR_CURRENT
#endif

#define SBX_PLUGIN_ENTRY_SYMBOL "sbx_plugin_entry"

enum sbx_plugin_kind {
    SBX_PLUGIN_PROVIDER = 1,
    SBX_PLUGIN_CREDENTIAL = 2,
};

/* What a plugin can do today. A stub or deferred plugin loads, says why, and
 * every call fails with that reason. */
enum sbx_plugin_state {
    SBX_PLUGIN_READY = 1,    /* works end to end */
    SBX_PLUGIN_STUB = 2,     /* not built yet, or a placeholder for a later driver */
    SBX_PLUGIN_DEFERRED = 3, /* deliberately deferred by an ADR */
};

/* Declarative option table: the core validates an instance's config group
 * against it (types, required keys, unknown keys) before init(). */
enum sbx_option_type {
    SBX_OPT_STRING = 1,
    SBX_OPT_INT,
    SBX_OPT_BOOL,
    SBX_OPT_FLOAT,
    SBX_OPT_SIZE,     /* bytes; config takes "8G" (binary suffixes) or an integer */
    SBX_OPT_DURATION, /* seconds; config takes "60m", "8h", "30s" or an integer */
    SBX_OPT_STRINGS,  /* an array of strings */
};

struct sbx_option {
    const char *key;
    enum sbx_option_type type;
    const char *def; /* default as in the file ("8G", "true", "30s"; a string's quotes
                        may be left out: "auto" = "\"auto\""), or NULL */
    int required;    /* non-zero: the key must be present */
    const char *help;
};

#define SBX_OPTIONS_END                                                                            \
    {                                                                                              \
        NULL, 0, NULL, 0, NULL                                                                     \
    }

struct sbx_plugin_desc {
    uint32_t abi_major; /* MUST stay first: they protect the rest */
    uint32_t abi_minor;
    uint32_t desc_size; /* sizeof(struct sbx_plugin_desc) at plugin build */
    uint32_t kind;      /* enum sbx_plugin_kind */
    const char *name;   /* file name without ".so", e.g. "provider_docker" */
    const char *version;
    uint32_t state;                   /* enum sbx_plugin_state */
    const char *reason;               /* why it is a stub or deferred; NULL when ready */
    const struct sbx_option *options; /* terminated by SBX_OPTIONS_END; may be NULL */
    const void *ops;                  /* struct sbx_provider_ops or struct sbx_credential_ops */
    uint32_t ops_size;                /* sizeof(*ops) at plugin build */
};

#define SBX_PLUGIN_EXPORT __attribute__((visibility("default")))

/* Defines the descriptor and the exported entry function. OPS is an object
 * (not a pointer) of the kind's ops struct type. */
#define SBX_PLUGIN_DEFINE(KIND, NAME, VERSION, STATE, REASON, OPTIONS, OPS)                        \
    static const struct sbx_plugin_desc sbx_plugin_desc_ = {                                       \
        SBX_PLUGIN_ABI_MAJOR,                                                                      \
        SBX_PLUGIN_ABI_MINOR,                                                                      \
        (uint32_t)sizeof(struct sbx_plugin_desc),                                                  \
        (KIND),                                                                                    \
        (NAME),                                                                                    \
        (VERSION),                                                                                 \
        (STATE),                                                                                   \
        (REASON),                                                                                  \
        (OPTIONS),                                                                                 \
        &(OPS),                                                                                    \
        (uint32_t)sizeof(OPS)};                                                                    \
    SBX_PLUGIN_EXPORT const struct sbx_plugin_desc *sbx_plugin_entry(void);                        \
    SBX_PLUGIN_EXPORT const struct sbx_plugin_desc *sbx_plugin_entry(void)                         \
    {                                                                                              \
        return &sbx_plugin_desc_;                                                                  \
    }

#endif
