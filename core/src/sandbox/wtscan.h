/* wtscan.h - the host's check of a worktree after each command of a task
 * (docs/tasks.md, "Worktrees"): what the sandbox made or changed there since the
 * task started that the host's tools would run or that would give a privilege is
 * quarantined or stripped, and each finding is reported:
 *   - a repository: a .git (directory or file) anywhere but the one the task
 *     started with, and a directory that git would take for a bare repository,
 *     changed during the task: renamed NAME.sbx-quarantine (and its HEAD, so that
 *     git does not find it under the new name either);
 *   - a protected path (worktree.protect) created during the task: renamed;
 *   - a set-uid or set-gid bit: removed; a file capability or ACL: removed;
 *   - a FIFO or device node: removed.
 * "During the task" is the inode's change time (which a sandbox cannot set back)
 * after since (CLOCK_REALTIME when the task's directories were made). The walk stays on the
 * worktree's filesystem and follows no symlink. */
#ifndef SBX_SANDBOX_WTSCAN_H
#define SBX_SANDBOX_WTSCAN_H

#include <stddef.h>
#include <time.h>

#include "sbx/sbx_provider.h"

/* The default of worktree.protect: what shells, editors, agents and git on the
 * host load and run from a working tree (NULL-terminated). */
extern const char *const sbx_protect_default[];

/* rel (relative to the worktree, no leading '/') is protected by one of globs: a
 * glob matches it (fnmatch, FNM_PATHNAME) or one of its parent directories. */
int sbx_protect_match(const char *const *globs, const char *rel);

/* The read-only mounts of the protected paths that exist (regular files and
 * directories, not symlinks), at most 64, appended to *v (strings allocated). */
int sbx_protect_mounts(const char *worktree, const char *const *globs, struct sbx_mount **v,
                       size_t *n);

/* A glob of worktree.protect is acceptable: relative, no "..", no empty
 * component, at most 200 bytes. */
int sbx_protect_glob_ok(const char *glob);

typedef void (*sbx_wtscan_note_fn)(void *ud, const char *what);

/* Walks the worktree; had_git: the task started with a .git at the top (the
 * host's own, handled by wtgit.h, not touched here). Returns the number of
 * findings. */
int sbx_wtscan(const char *worktree, const struct timespec *since, int had_git, const char *task_id,
               const char *const *protect, sbx_wtscan_note_fn note, void *ud);

/* The same checks for the entries rels only (relative paths, e.g. what the
 * worktree watcher saw made; each parent opened below the worktree without
 * following a symlink; a directory is walked as the whole scan would).
 * Returns the number of findings. */
int sbx_wtscan_paths(const char *worktree, const struct timespec *since, int had_git,
                     const char *task_id, const char *const *protect, const char *const *rels,
                     size_t n_rels, sbx_wtscan_note_fn note, void *ud);

#endif
