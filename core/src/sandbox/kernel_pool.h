/* kernel_pool.h - the kernel's per-user counters that all sandboxes share
 * (docs/operations.md, "Kernel per-user counters"): every sandbox's user
 * namespace is created by the engine as host root, so the kernel charges
 * their inotify instances and watches to host root's counters, limited by
 * fs.inotify.max_user_*. Each sandbox is capped in its own namespace
 * (SBX_SANDBOX_INOTIFY_*); the pool must hold box.max_sandboxes such shares
 * plus the host's own. scripts/kernel-limits.sh raises it; `sbx info` checks. */
#ifndef SBX_SANDBOX_KERNEL_POOL_H
#define SBX_SANDBOX_KERNEL_POOL_H

#include <stddef.h>

/* What host root itself keeps beside the sandboxes' shares. */
#define SBX_HOST_INOTIFY_INSTANCES 512
#define SBX_HOST_INOTIFY_WATCHES 131072

struct sbx_kernel_pool {
    const char *key; /* "fs.inotify.max_user_instances" */
    long long have;  /* the current value; -1 when it cannot be read */
    long long need;  /* for max_sandboxes sandboxes and the host */
};

#define SBX_KERNEL_POOLS 2

/* Reads the pools from sysctl_dir (NULL: /proc/sys) and what max_sandboxes
 * sandboxes need. Returns how many pools are below their need (or unreadable). */
int sbx_kernel_pools(const char *sysctl_dir, int max_sandboxes,
                     struct sbx_kernel_pool out[SBX_KERNEL_POOLS]);

#endif
