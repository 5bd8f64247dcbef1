/* paths.c - locating helper programs next to the sbx binary or installed. */
#include "util/paths.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sbx_build.h"
#include "util/xalloc.h"

char *sbx_exe_dir(void)
{
    char buf[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf) - 1);
    char *slash;

    if (n <= 0) {
        return NULL;
    }
    buf[n] = '\0';
    slash = strrchr(buf, '/');
    if (slash == NULL) {
        return NULL;
    }
    *slash = '\0';
    return xstrdup(buf);
}

char *sbx_libexec_path(const char *name)
{
    const char *env = getenv("SBX_LIBEXEC_DIR");
    char *dir = sbx_exe_dir();
    char *p;

    if (env != NULL && env[0] != '\0') {
        p = xasprintf("%s/%s", env, name);
        if (access(p, X_OK) == 0) {
            free(dir);
            return p;
        }
        free(p);
    }
    if (dir != NULL) {
        p = xasprintf("%s/libexec/%s", dir, name);
        free(dir);
        if (access(p, X_OK) == 0) {
            return p;
        }
        free(p);
    }
    p = xasprintf("%s/%s", SBX_INSTALL_LIBEXEC_DIR, name);
    if (access(p, X_OK) == 0) {
        return p;
    }
    free(p);
    return NULL;
}
