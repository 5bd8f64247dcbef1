/* statedir.h - where embedded tasks keep their records, sockets and locks.
 *
 *   <state>/tasks/<task>/task.json   the task record (no secret, ever)
 *   <state>/tasks/<task>/runner/     (changed, issue 31) the task keeper's private
 *                                    runner: runner.sock (its API) and runner.db;
 *                                    a link to a shorter path when this one is long
 *   <state>/tasks/<task>/workspace   the provider's view of the worktree (view.h)
 *   <state>/slots/<n>.lock           box.max_sandboxes across processes; the
 *                                    holder's owner and memory (admit.h)
 *   <state>/slots/admit.lock         taken while admitting (admit.h)
 *
 * <state> is config `state_dir`, else $SBX_STATE_DIR, else /var/lib/sbx for
 * root, else $XDG_STATE_HOME/sbx or ~/.local/state/sbx. */
#ifndef SBX_SANDBOX_STATEDIR_H
#define SBX_SANDBOX_STATEDIR_H

#include "util/error.h"

char *sbx_state_dir(const char *configured, sbx_error_t **err);
/* mkdir -p with mode (0700 for private directories). */
int sbx_mkdirs(const char *path, unsigned mode, sbx_error_t **err);
char *sbx_task_dir(const char *state, const char *task);
void sbx_task_id_new(char *buf, unsigned long len);
/* Removes a task directory (record, socket). */
void sbx_task_dir_remove(const char *state, const char *task);

#endif
