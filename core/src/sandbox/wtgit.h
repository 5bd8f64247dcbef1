/* wtgit.h - the sandbox's own git directory for a worktree that is a repository
 * (docs/tasks.md, "Worktrees"): the host's .git is never visible inside, so
 * nothing the sandbox writes there is configuration, hooks or refs of the host;
 * the host takes back the commits of the task's branch after each command.
 *
 * <task dir>/git/repo     the sandbox's git dir (config by sbx, no hooks, a copy
 *                         of the refs and of the index, objects/ with an alternate
 *                         to the host's object store mounted read-only)
 * <task dir>/git/gitfile  "gitdir: /run/sbx-git/repo" (a linked worktree)
 * <task dir>/git/branch   the task's branch (refs/heads/NAME), or absent
 * <task dir>/git/base     its value the host last saw
 * <task dir>/git/objects  the host's object directory (a path)
 */
#ifndef SBX_SANDBOX_WTGIT_H
#define SBX_SANDBOX_WTGIT_H

#include <stddef.h>

#include "sbx/sbx_provider.h"
#include "util/error.h"

#define SBX_WTGIT_INSIDE_REPO "/run/sbx-git/repo"
#define SBX_WTGIT_INSIDE_OBJECTS "/run/sbx-git/objects"
#define SBX_WTGIT_INSIDE_MODULES "/run/sbx-git/modules"

/* The mounts that replace the worktree's .git inside (at most 4, in *mounts,
 * the strings owned by the task dir's lifetime: free with sbx_wtgit_mounts_free).
 * 0 with *n = 0 when the worktree has no .git; -1 when its .git cannot be given
 * safely (a symlink). When the host's git cannot read the repository, the
 * worktree's .git is mounted read-only instead (one warning). */
int sbx_wtgit_prepare(const char *worktree, const char *task_dir, struct sbx_mount **mounts,
                      size_t *n, sbx_error_t **err);
/* The worktree has a .git of any type, or a protected path: its mounts are made at
 * create, so a warm sandbox cannot take it (a cold start). */
int sbx_wtgit_needs_cold(const char *worktree, const char *const *protect);
void sbx_wtgit_mounts_free(struct sbx_mount *mounts, size_t n);

/* After a command: takes back the objects reachable from the task's branch in the
 * sandbox's git dir and moves only that branch on the host, compare-and-swap
 * against the value the host last saw. 1: moved (msg says from where to where),
 * 0: nothing to do, -1: not taken (msg says why). */
int sbx_wtgit_harvest(const char *worktree, const char *task_dir, const char *task_id, char *msg,
                      size_t len);

#endif
