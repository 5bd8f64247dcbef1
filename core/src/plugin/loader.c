/* loader.c - dlopen a plugin and refuse it, with one clear line, unless it
 * passes every ABI v1 check (docs/architecture.md, Plugin ABI). */
#include "plugin/loader.h"

#include <dlfcn.h>
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/xalloc.h"

typedef const struct sbx_plugin_desc *(*entry_fn)(void);

const char *sbx_plugin_kind_name(enum sbx_plugin_kind kind)
{
    switch (kind) {
    case SBX_PLUGIN_PROVIDER:
        return "provider";
    case SBX_PLUGIN_CREDENTIAL:
        return "credential";
    }
    return "unknown";
}

const char *sbx_plugin_state_name(enum sbx_plugin_state state)
{
    switch (state) {
    case SBX_PLUGIN_READY:
        return "ready";
    case SBX_PLUGIN_STUB:
        return "stub";
    case SBX_PLUGIN_DEFERRED:
        return "deferred";
    }
    return "unknown";
}

char *sbx_plugin_dir_resolve(const char *configured, sbx_error_t **err)
{
    return sbx_asset_dir_resolve(SBX_ASSET_PLUGINS, configured, SBX_E_PLUGIN, err);
}

static int refuse(struct sbx_plugin *p, sbx_error_t **err, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int refuse(struct sbx_plugin *p, sbx_error_t **err, const char *path, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (p != NULL) {
        if (p->handle != NULL) {
            dlclose(p->handle);
        }
        free(p->path);
        free(p);
    }
    return sbx_error_set(err, SBX_E_PLUGIN, "plugin %s: refused: %s", path, msg);
}

/* Required callbacks lie inside ops_size and are non-NULL. */
static const char *missing_callback(const struct sbx_plugin *p)
{
#define REQUIRE(type, field)                                                                       \
    do {                                                                                           \
        if (offsetof(type, field) + sizeof(((type *)0)->field) > p->desc.ops_size ||               \
            ops->field == NULL) {                                                                  \
            return #field;                                                                         \
        }                                                                                          \
    } while (0)
    if (p->desc.kind == SBX_PLUGIN_PROVIDER) {
        const struct sbx_provider_ops *ops = &p->ops.provider;

        REQUIRE(struct sbx_provider_ops, init);
        REQUIRE(struct sbx_provider_ops, destroy_ctx);
        REQUIRE(struct sbx_provider_ops, create);
        REQUIRE(struct sbx_provider_ops, exec);
        REQUIRE(struct sbx_provider_ops, destroy);
        REQUIRE(struct sbx_provider_ops, list);
    }
    else {
        const struct sbx_credential_ops *ops = &p->ops.credential;

        REQUIRE(struct sbx_credential_ops, init);
        REQUIRE(struct sbx_credential_ops, destroy_ctx);
        REQUIRE(struct sbx_credential_ops, acquire);
        REQUIRE(struct sbx_credential_ops, revoke);
    }
#undef REQUIRE
    return NULL;
}

static int path_inside(const char *dir, const char *path)
{
    size_t n = strlen(dir);

    return strncmp(dir, path, n) == 0 && path[n] == '/' && strchr(path + n + 1, '/') == NULL;
}

/* Steps 1 and 2: path is absolute, inside the plugin dir, a regular file (not a
 * symlink) named NAME.so. Returns NAME (the caller frees it); NULL: refused. */
static char *plugin_file_name(const char *plugin_dir, const char *path, sbx_error_t **err)
{
    cleanup_free char *dir = NULL;
    struct stat st;
    const char *base;

    /* 1. an absolute path inside the plugin dir */
    if (path == NULL || path[0] != '/') {
        refuse(NULL, err, path ? path : "(null)", "path is not absolute");
        return NULL;
    }
    dir = realpath(plugin_dir, NULL);
    if (dir == NULL) {
        refuse(NULL, err, path, "plugin dir '%s': %s", plugin_dir, strerror(errno));
        return NULL;
    }
    if (!path_inside(dir, path)) {
        refuse(NULL, err, path, "not inside the plugin dir %s", dir);
        return NULL;
    }
    /* 2. a regular file, not a symlink */
    if (lstat(path, &st) < 0) {
        refuse(NULL, err, path, "%s", strerror(errno));
        return NULL;
    }
    if (S_ISLNK(st.st_mode)) {
        refuse(NULL, err, path, "is a symbolic link");
        return NULL;
    }
    if (!S_ISREG(st.st_mode)) {
        refuse(NULL, err, path, "not a regular file");
        return NULL;
    }
    base = strrchr(path, '/') + 1;
    if (strlen(base) < 4 || strcmp(base + strlen(base) - 3, ".so") != 0) {
        refuse(NULL, err, path, "file name does not end in .so");
        return NULL;
    }
    return xstrndup(base, strlen(base) - 3);
}

/* Steps 3 and 4: dlopen path into p and call its entry. Returns the plugin's
 * descriptor; NULL: refused (p freed). */
static const struct sbx_plugin_desc *plugin_open(struct sbx_plugin *p, const char *path,
                                                 sbx_error_t **err)
{
    const struct sbx_plugin_desc *d;
    entry_fn entry;

    /* 3. dlopen with every symbol resolved now */
    p->handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (p->handle == NULL) {
        const char *e = dlerror();

        refuse(p, err, path, "dlopen: %s (try: ldd %s)", e ? e : "unknown error", path);
        return NULL;
    }
    /* 4. the entry symbol */
    *(void **)&entry = dlsym(p->handle, SBX_PLUGIN_ENTRY_SYMBOL);
    if (entry == NULL) {
        refuse(p, err, path, "no entry symbol '%s'", SBX_PLUGIN_ENTRY_SYMBOL);
        return NULL;
    }
    d = entry();
    if (d == NULL) {
        refuse(p, err, path, "%s() returned NULL", SBX_PLUGIN_ENTRY_SYMBOL);
        return NULL;
    }
    return d;
}

/* Steps 5 to 7: d's ABI version and sizes, copied into p->desc and p->ops, its kind,
 * name, version and state, its required callbacks. -1: refused (p freed). */
static int plugin_check_desc(struct sbx_plugin *p, const struct sbx_plugin_desc *d,
                             const char *path, sbx_error_t **err)
{
    const char *missing;
    size_t ops_max;

    /* 5. the ABI version: same major, minor not newer */
    if (d->abi_major != SBX_PLUGIN_ABI_MAJOR) {
        return refuse(p, err, path, "ABI major %u, this sbx speaks %u", d->abi_major,
                      SBX_PLUGIN_ABI_MAJOR);
    }
    if (d->abi_minor > SBX_PLUGIN_ABI_MINOR) {
        /* same major: the fields up to ops_size have the same layout */
        return refuse(p, err, path,
                      "%s %s is built for plugin ABI %u.%u, newer than this sbx's %u.%u (rebuild "
                      "it against this sbx's SDK, or upgrade sbx)",
                      d->name != NULL ? d->name : "(no name)", d->version != NULL ? d->version : "",
                      d->abi_major, d->abi_minor, SBX_PLUGIN_ABI_MAJOR, SBX_PLUGIN_ABI_MINOR);
    }
    /* 6. sizes not larger than the core's; copy into zeroed storage */
    if (d->desc_size > sizeof(struct sbx_plugin_desc) ||
        d->desc_size < offsetof(struct sbx_plugin_desc, ops_size) + sizeof(uint32_t)) {
        return refuse(p, err, path, "descriptor size %u does not match this sbx (%zu)",
                      d->desc_size, sizeof(struct sbx_plugin_desc));
    }
    memcpy(&p->desc, d, d->desc_size);
    if (p->desc.kind != SBX_PLUGIN_PROVIDER && p->desc.kind != SBX_PLUGIN_CREDENTIAL) {
        return refuse(p, err, path, "unknown plugin kind %u", p->desc.kind);
    }
    ops_max = p->desc.kind == SBX_PLUGIN_PROVIDER ? sizeof(struct sbx_provider_ops)
                                                  : sizeof(struct sbx_credential_ops);
    if (p->desc.ops == NULL) {
        return refuse(p, err, path, "no ops table");
    }
    if (p->desc.ops_size > ops_max) {
        return refuse(p, err, path, "%s ops struct of %u bytes is larger than this sbx's %zu",
                      sbx_plugin_kind_name(p->desc.kind), p->desc.ops_size, ops_max);
    }
    memcpy(&p->ops, p->desc.ops, p->desc.ops_size);
    if (p->desc.name == NULL || p->desc.version == NULL) {
        return refuse(p, err, path, "descriptor has no name or version");
    }
    if (p->desc.state < SBX_PLUGIN_READY || p->desc.state > SBX_PLUGIN_DEFERRED) {
        return refuse(p, err, path, "unknown plugin state %u", p->desc.state);
    }
    /* 7. required callbacks present */
    missing = missing_callback(p);
    if (missing != NULL) {
        return refuse(p, err, path, "required callback '%s' is missing", missing);
    }
    return 0;
}

/* Step 8: the kind expected (0: any), the name of the file (file_name) and the one
 * configured (expect_name, NULL: any). -1: refused (p freed). */
static int plugin_check_names(struct sbx_plugin *p, const char *path, const char *file_name,
                              enum sbx_plugin_kind expect_kind, const char *expect_name,
                              sbx_error_t **err)
{
    /* 8. kind and name match */
    if (expect_kind != 0 && p->desc.kind != (uint32_t)expect_kind) {
        return refuse(p, err, path, "is a %s plugin, a %s plugin was expected",
                      sbx_plugin_kind_name(p->desc.kind), sbx_plugin_kind_name(expect_kind));
    }
    if (strcmp(p->desc.name, file_name) != 0) {
        return refuse(p, err, path, "descriptor name '%s' does not match the file name '%s'",
                      p->desc.name, file_name);
    }
    if (expect_name != NULL && strcmp(p->desc.name, expect_name) != 0) {
        return refuse(p, err, path, "plugin name '%s' does not match the configured '%s'",
                      p->desc.name, expect_name);
    }
    return 0;
}

struct sbx_plugin *sbx_plugin_load(const char *plugin_dir, const char *path,
                                   enum sbx_plugin_kind expect_kind, const char *expect_name,
                                   sbx_error_t **err)
{
    struct sbx_plugin *p;
    cleanup_free char *file_name = plugin_file_name(plugin_dir, path, err);
    const struct sbx_plugin_desc *d;

    if (file_name == NULL) {
        return NULL;
    }
    p = xcalloc(1, sizeof(*p));
    p->path = xstrdup(path);
    d = plugin_open(p, path, err);
    if (d == NULL || plugin_check_desc(p, d, path, err) < 0 ||
        plugin_check_names(p, path, file_name, expect_kind, expect_name, err) < 0) {
        return NULL;
    }
    sbx_debug("plugin loader: loaded %s %s (%s, ABI %u.%u, %s) from %s", p->desc.name,
              p->desc.version, sbx_plugin_kind_name(p->desc.kind), p->desc.abi_major,
              p->desc.abi_minor, sbx_plugin_state_name(p->desc.state), path);
    return p;
}

struct sbx_plugin *sbx_plugin_load_name(const char *plugin_dir, const char *name,
                                        enum sbx_plugin_kind expect_kind, sbx_error_t **err)
{
    cleanup_free char *path = NULL;

    if (strchr(name, '/') != NULL || name[0] == '.' || name[0] == '\0') {
        sbx_error_set(err, SBX_E_PLUGIN, "plugin name '%s' is not a plain name", name);
        return NULL;
    }
    path = xasprintf("%s/%s.so", plugin_dir, name);
    return sbx_plugin_load(plugin_dir, path, expect_kind, name, err);
}

void sbx_plugin_unload(struct sbx_plugin *p)
{
    const char *keep;

    if (p == NULL) {
        return;
    }
    keep = getenv("SBX_NO_DLCLOSE");
    if (p->handle != NULL && !(keep != NULL && keep[0] == '1')) {
        dlclose(p->handle);
    }
    free(p->path);
    free(p);
}
