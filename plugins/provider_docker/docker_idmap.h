/* docker_idmap.h - the worktree through an idmapped mount (docs/tasks.md, "The
 * worktree and user namespaces"). No provider state here: the unit test
 * compiles docker_idmap.c on its own. Each function that can fail writes one
 * line saying why into why[n]. */
#ifndef SBX_PROVIDER_DOCKER_IDMAP_H
#define SBX_PROVIDER_DOCKER_IDMAP_H

#include <stddef.h>

/* The first id of user's first range in a subordinate id file (/etc/subuid,
 * /etc/subgid: "NAME:FIRST:COUNT" lines; a line may name the user by its
 * numeric id, uid, or -1 for none). 0 found, -1 not (why says so). */
int dk_subid_first(const char *file, const char *user, long uid, unsigned *first, char *why,
                   size_t n);
/* Whether capability cap is in the CapEff line of a /proc/PID/status file:
 * 1 yes, 0 no (why says so), -1 unreadable (why). */
int dk_cap_effective(const char *status_file, int cap, char *why, size_t n);
/* Whether the kernel has open_tree, mount_setattr and move_mount: 1 yes,
 * 0 no (why). */
int dk_idmap_kernel(char *why, size_t n);
/* Mounts the directory src (a canonical path) on the directory view as an
 * idmapped mount that maps src's owner (uid and gid) to host_uid/host_gid,
 * the sandbox's root. 0 done, -1 nothing mounted (why). */
int dk_idmap_mount(const char *src, const char *view, unsigned host_uid, unsigned host_gid,
                   char *why, size_t n);
/* The same view without the id mapping: a clone of the directory src, opened
 * once and checked to still be the canonical path src, mounted on view. The
 * engine then binds view, so a path swapped after the check (a symlink put in
 * place of a component) cannot change what the sandbox gets. 0 done, -1
 * nothing mounted (why). */
int dk_pinned_bind(const char *src, const char *view, char *why, size_t n);
/* Whether the process serving the unix socket path (the engine) shares our
 * mount namespace, so that it sees a view we mount: 1 yes, 0 no (why), -1
 * cannot tell (why). */
int dk_same_mount_ns(const char *socket, char *why, size_t n);
/* Unmounts whatever is mounted on view (MNT_DETACH, never following a
 * symlink); a view that is not a mount point is fine. */
void dk_idmap_release(const char *view);

#endif
