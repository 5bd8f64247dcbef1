/* kernel_pool.c - the shared inotify pool against the box's maximum sandboxes. */
#include "sandbox/kernel_pool.h"

#include <stdio.h>
#include <stdlib.h>

#include "sbx/sbx_provider.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

static long long read_value(const char *dir, const char *rel)
{
    cleanup_free char *path = xasprintf("%s/%s", dir, rel);
    cleanup_fclose FILE *f = fopen(path, "re");
    long long v = -1;

    if (f == NULL || fscanf(f, "%lld", &v) != 1) {
        return -1;
    }
    return v;
}

int sbx_kernel_pools(const char *sysctl_dir, int max_sandboxes,
                     struct sbx_kernel_pool out[SBX_KERNEL_POOLS])
{
    const char *dir = sysctl_dir ? sysctl_dir : "/proc/sys";
    long long n = max_sandboxes > 0 ? max_sandboxes : 0;
    int low = 0;

    out[0].key = "fs.inotify.max_user_instances";
    out[0].have = read_value(dir, "fs/inotify/max_user_instances");
    out[0].need = n * SBX_SANDBOX_INOTIFY_INSTANCES + SBX_HOST_INOTIFY_INSTANCES;
    out[1].key = "fs.inotify.max_user_watches";
    out[1].have = read_value(dir, "fs/inotify/max_user_watches");
    out[1].need = n * SBX_SANDBOX_INOTIFY_WATCHES + SBX_HOST_INOTIFY_WATCHES;
    for (int i = 0; i < SBX_KERNEL_POOLS; i++) {
        low += out[i].have < out[i].need;
    }
    return low;
}
