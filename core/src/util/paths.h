/* paths.h - files that ship with sbx (plugins, policies, helper programs, the
 * image definition), found relative to the running binary: next to it in a
 * build tree (build/plugins, build/libexec, build/share/sbx), or in the FHS
 * places under its install prefix (bin/sbx -> lib/sbx/plugins, libexec/sbx,
 * share/sbx). No source or install path is compiled in, so an installed tree
 * can be moved (docs/operations.md, "Install"). */
#ifndef SBX_UTIL_PATHS_H
#define SBX_UTIL_PATHS_H

#include "sbx/sbx_error.h"

enum sbx_asset {
    SBX_ASSET_PLUGINS,  /* the plugin .so files */
    SBX_ASSET_POLICIES, /* limits.lua, egress.lua, slots.lua */
    SBX_ASSET_LIBEXEC,  /* sbx-relay, sbx-image-build */
    SBX_ASSET_IMAGE,    /* the shipped devcontainer.json */
};

/* The running sbx binary's path (caller frees), or NULL: the one reader of
 * /proc/self/exe. */
char *sbx_exe_path(void);
/* The directory holding the running sbx binary (caller frees), or NULL. */
char *sbx_exe_dir(void);
/* 1 when the running binary is in a CMake build tree (CMakeCache.txt beside it). */
int sbx_exe_in_build_tree(void);
/* The directory of one kind of asset for this binary (caller frees; it may not
 * exist), or NULL when /proc/self/exe cannot be read. */
char *sbx_asset_dir(enum sbx_asset kind);
/* A helper program: $SBX_LIBEXEC_DIR/NAME, else the binary's libexec dir.
 * Returns NULL when none is executable. */
char *sbx_libexec_path(const char *name);

/* A configured asset directory, resolved: CONFIGURED when given, else the
 * asset's environment variable (SBX_PLUGIN_DIR, SBX_POLICY_DIR) when set and
 * not empty, else the shipped one; the real path (caller frees), or NULL with
 * "plugin dir '/x': No such file or directory" (CODE) in *err. Plugins and
 * policies only. */
char *sbx_asset_dir_resolve(enum sbx_asset kind, const char *configured, int code,
                            sbx_error_t **err);

#endif
