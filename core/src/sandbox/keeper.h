/* keeper.h - the per-task keeper behind `sbx task start`: a small background
 * process that owns the task (its sbx.owner label names the keeper), holds
 * its slot lock and credential lease, and (changed, issue 31) hosts it in a
 * private runner (runner/private.h, runner/adopt.h) whose API runs each `sbx exec`
 * on its behalf (so secret values never leave it); the task's timer enforces idle
 * and maximum lifetime, and the runner destroys the sandbox when the task ends, on
 * every path. */
#ifndef SBX_SANDBOX_KEEPER_H
#define SBX_SANDBOX_KEEPER_H

#include "sandbox/task.h"

/* Starts a keeper and waits until its task runs (or failed). o->task_id must
 * be set. Returns 0 in the calling process; never returns in the keeper. */
int sbx_keeper_spawn(const struct sbx_config *cfg, const char *plugin_dir,
                     const struct sbx_task_opts *o, sbx_error_t **err);
/* (added, issue 31) The socket of the runner that hosts the task (its keeper's),
 * resolved to a path a client can connect to (caller frees), or NULL when there is
 * none (no such task runs). */
char *sbx_keeper_runner_socket(const char *state, const char *task);

#endif
