/* keeper.h - the per-task keeper behind `sbx task start`: a small background
 * process that owns the task (its sbx.owner label names the keeper), holds
 * its slot lock and credential lease, runs each `sbx exec` on its behalf
 * (so secret values never leave it), enforces idle and maximum lifetime, and
 * destroys the sandbox when the task ends, on every path. */
#ifndef SBX_SANDBOX_KEEPER_H
#define SBX_SANDBOX_KEEPER_H

#include "sandbox/task.h"

/* Starts a keeper and waits until its task runs (or failed). o->task_id must
 * be set. Returns 0 in the calling process; never returns in the keeper. */
int sbx_keeper_spawn(const struct sbx_config *cfg, const char *plugin_dir,
                     const struct sbx_task_opts *o, sbx_error_t **err);
/* Runs argv in the task through its keeper, streaming its output to out
 * (stream 1 or 2), or to fds 1 and 2 when out is NULL (changed).
 * Returns 0 with *status, or -1 (sbx failed; *code is 125, 126 or 127). */
int sbx_keeper_exec(const char *state, const char *task, const char *const *argv,
                    const struct sbx_kv *env, size_t n_env, const volatile int *interrupted,
                    sbx_output_fn out, void *ud, int *status, int *code, sbx_error_t **err);
/* Asks the keeper to end the task and waits for the teardown. */
int sbx_keeper_end(const char *state, const char *task, sbx_error_t **err);
/* The keeper's socket path for a task (caller frees). */
char *sbx_keeper_socket(const char *state, const char *task);
/* (added, issue 31) The socket of the runner that hosts the task (its keeper's),
 * resolved to a path a client can connect to (caller frees), or NULL when there is
 * none (no such task runs). */
char *sbx_keeper_runner_socket(const char *state, const char *task);

#endif
