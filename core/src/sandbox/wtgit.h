/* wtgit.h - the sandbox's own git directory for a worktree that is a repository
 * (docs/tasks.md, "Worktrees"): the host's .git is never visible inside, so
 * nothing the sandbox writes there is configuration, hooks or refs of the host;
 * the host takes back the commits of the task's branch after each command.
 *
 * <task dir>/git/repo     the sandbox's git dir (config by sbx, no hooks, a copy
 *                         of the refs and of the index, objects/ with an alternate
 *                         to the host's object store mounted read-only); its
 *                         modules/NAME: each submodule's, made the same way
 * <task dir>/git/gitfile  "gitdir: /run/sbx-git/repo" (a linked worktree)
 * <task dir>/git/empty    an empty file mounted over the host stores' own
 *                         info/alternates inside (their chain: /run/sbx-git/alt/N)
 * (changed) a take spec: <task dir>/git for the superproject, <task dir>/git/sub/N
 * for each submodule:
 *   target    the ref the task moves: refs/heads/NAME, or HEAD (detached at start)
 *   base      its value the host last saw
 *   objects   the host's object directory (a path)
 *   rundir    where the host's git runs (the worktree; the submodule's git dir)
 *   path      the sandbox's git dir below <task dir>/git/repo ("." or modules/NAME)
 *   orig-*    copies of the files sbx wrote there (config, ...)
 */
#ifndef SBX_SANDBOX_WTGIT_H
#define SBX_SANDBOX_WTGIT_H

#include <stddef.h>

#include "sbx/sbx_provider.h"
#include "util/error.h"

#define SBX_WTGIT_INSIDE_REPO "/run/sbx-git/repo"
#define SBX_WTGIT_INSIDE_OBJECTS "/run/sbx-git/objects"
#define SBX_WTGIT_INSIDE_MODULES "/run/sbx-git/modules"

/* The mounts that replace the worktree's .git inside (in *mounts,
 * the strings owned by the task dir's lifetime: free with sbx_wtgit_mounts_free).
 * 0 with *n = 0 when the worktree has no .git; -1 when its .git cannot be given
 * safely (a symlink) or (added) an alternate object store of the host's cannot
 * (absent, not a directory, not the owner's to open: one line naming the file
 * and line). When the host's git cannot read the repository, the
 * worktree's .git is mounted read-only instead (one warning). */
int sbx_wtgit_prepare(const char *worktree, const char *task_dir, struct sbx_mount **mounts,
                      size_t *n, sbx_error_t **err);
/* The worktree has a .git of any type, or a protected path: its mounts are made at
 * create, so a warm sandbox cannot take it (a cold start). */
int sbx_wtgit_needs_cold(const char *worktree, const char *const *protect);
void sbx_wtgit_mounts_free(struct sbx_mount *mounts, size_t n);

/* One finding for the task's record and log (recorded once per text). */
typedef void (*sbx_wtgit_note_fn)(void *ud, const char *what);

/* (changed) After a command: for the superproject and each submodule, takes back
 * the objects of the task's ref (its branch, or its HEAD when it was detached at
 * the start) in the sandbox's git dir and moves only that ref on the host,
 * compare-and-swap against the value the host last saw; then notes what the
 * sandbox changed there that is not taken (config, hooks, other branches) and
 * each take that failed. Returns how many refs moved (each logged), or -1 when
 * the task dir's lock could not be taken (noted). */
int sbx_wtgit_harvest(const char *worktree, const char *task_dir, const char *task_id,
                      sbx_wtgit_note_fn note, void *ud);

#endif
