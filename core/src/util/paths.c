/* paths.c - locating what ships with sbx relative to the sbx binary (paths.h). */
#include "util/paths.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx_build.h"
#include "util/error.h"
#include "util/xalloc.h"

char *sbx_exe_path(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);

    if (n <= 0) {
        return NULL;
    }
    buf[n] = '\0';
    return xstrdup(buf);
}

char *sbx_exe_dir(void)
{
    char *path = sbx_exe_path();
    char *slash = path ? strrchr(path, '/') : NULL;

    if (slash == NULL) {
        free(path);
        return NULL;
    }
    if (slash == path) {
        slash[1] = '\0'; /* "/" */
    }
    else {
        *slash = '\0';
    }
    return path;
}

int sbx_exe_in_build_tree(void)
{
    char *dir = sbx_exe_dir();
    char *p = dir ? xasprintf("%s/CMakeCache.txt", dir) : NULL;
    int yes = p != NULL && access(p, F_OK) == 0;

    free(p);
    free(dir);
    return yes;
}

char *sbx_asset_dir(enum sbx_asset kind)
{
    /* build tree (CMakeCache.txt beside the binary), then the install tree:
     * the relative install directories come from CMake (sbx_build.h) */
    static const char *const build[] = {"plugins", "share/sbx/policies", "libexec",
                                        "share/sbx/devcontainer"};
    static const char *const installed[] = {SBX_REL_PLUGIN_DIR, SBX_REL_DATA_DIR "/policies",
                                            SBX_REL_LIBEXEC_DIR, SBX_REL_DATA_DIR "/devcontainer"};
    char *dir = sbx_exe_dir();
    char *real;
    char *out;

    if (dir == NULL) {
        return NULL;
    }
    out = xasprintf("%s/%s", strcmp(dir, "/") == 0 ? "" : dir,
                    sbx_exe_in_build_tree() ? build[kind] : installed[kind]);
    free(dir);
    real = realpath(out, NULL); /* bin/../lib/... reads as lib/... */
    if (real != NULL) {
        free(out);
        return real;
    }
    return out;
}

char *sbx_libexec_path(const char *name)
{
    const char *env = getenv("SBX_LIBEXEC_DIR");
    char *dir;
    char *p;

    if (env != NULL && env[0] != '\0') {
        p = xasprintf("%s/%s", env, name);
        if (access(p, X_OK) == 0) {
            return p;
        }
        free(p);
    }
    dir = sbx_asset_dir(SBX_ASSET_LIBEXEC);
    if (dir == NULL) {
        return NULL;
    }
    p = xasprintf("%s/%s", dir, name);
    free(dir);
    if (access(p, X_OK) == 0) {
        return p;
    }
    free(p);
    return NULL;
}

char *sbx_asset_dir_resolve(enum sbx_asset kind, const char *configured, int code,
                            sbx_error_t **err)
{
    const int plugins = kind == SBX_ASSET_PLUGINS;
    const char *what = plugins ? "plugin" : "policy";
    const char *env = getenv(plugins ? "SBX_PLUGIN_DIR" : "SBX_POLICY_DIR");
    const char *dir = configured;
    char *shipped = NULL;
    char *real;

    if (dir == NULL && env != NULL && env[0] != '\0') {
        dir = env;
    }
    if (dir == NULL) {
        shipped = sbx_asset_dir(kind);
        if (shipped == NULL) {
            sbx_error_set(err, code, "%s dir: /proc/self/exe unreadable; set %s_dir or $SBX_%s_DIR",
                          what, what, plugins ? "PLUGIN" : "POLICY");
            return NULL;
        }
        dir = shipped;
    }
    real = realpath(dir, NULL);
    if (real == NULL) {
        sbx_error_set(err, code, "%s dir '%s': %s", what, dir, strerror(errno));
    }
    free(shipped);
    return real;
}
