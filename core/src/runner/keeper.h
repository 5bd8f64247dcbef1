/* keeper.h - the per-task keeper behind `sbx task start`: a small background
 * process that owns the task (its sbx.owner label names the keeper), holds
 * its slot lock and credential lease, and (changed, issue 31: moved here from
 * core/src/sandbox/) hosts it in a private runner (private.h, adopt.h) whose API
 * runs each `sbx exec` on its behalf (so secret values never leave it); the task's
 * timer enforces idle and maximum lifetime, and the runner destroys the sandbox
 * when the task ends, on every path. Clients find that runner's socket with
 * sbx_keeper_runner_socket (sandbox/keeper.h). */
#ifndef SBX_RUNNER_KEEPER_H
#define SBX_RUNNER_KEEPER_H

#include "sandbox/task.h"

/* Starts a keeper and waits until its task runs (or failed). o->task_id must
 * be set. Returns 0 in the calling process; never returns in the keeper. */
int sbx_keeper_spawn(const struct sbx_config *cfg, const char *plugin_dir,
                     const struct sbx_task_opts *o, sbx_error_t **err);

#endif
