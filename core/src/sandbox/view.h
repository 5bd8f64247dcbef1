/* view.h - the worktree's checks and the lifecycle of a provider's view of it
 * (<state>/tasks/<task>/workspace, struct sbx_sandbox_spec.view_dir; the
 * Docker provider mounts an idmapped mount there). A view is unmounted when
 * its task ends, on every path, and swept when its task's owner is gone. */
#ifndef SBX_SANDBOX_VIEW_H
#define SBX_SANDBOX_VIEW_H

#include "util/error.h"

/* The name of the view directory inside a task directory. */
#define SBX_VIEW_NAME "workspace"

/* Canonicalises a worktree path (*out, caller frees) and refuses one that is
 * /, the state directory, inside it or above it, or in /proc, /sys or /dev. */
int sbx_worktree_check(const char *w, const char *state, char **out, sbx_error_t **err);
/* Unmounts whatever is mounted on the view of task directory dir (lazily,
 * never following a symlink) and removes the directory if it is empty. */
void sbx_view_release(const char *dir);
/* Unmounts every mount under <state>/tasks/<task>/ whose task is dead (no
 * record, an ended record, or a record whose owner is gone); returns how
 * many. */
int sbx_view_sweep(const char *state);
/* Makes this process the owner in the record of task directory dir (a task
 * re-adopted after a restart of its owner), so sweeps keep its view. */
int sbx_task_record_reown(const char *dir);
/* Whether path is a mount point in /proc/self/mountinfo: 1, 0, -1 unknown. */
int sbx_view_mounted(const char *path);

#endif
