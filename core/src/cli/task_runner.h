/* task_runner.h - (added, issue 31) the CLI's way to a task `sbx task start` keeps:
 * its keeper is a private runner (sandbox/keeper.c) and every command speaks the
 * runner's API to it (docs/tasks.md, "The keeper"). */
#ifndef SBX_CLI_TASK_RUNNER_H
#define SBX_CLI_TASK_RUNNER_H

#include "config/config.h"
#include "sandbox/task.h"

/* Points cfg->runner.listen at the runner holding task (found from its name in
 * the state directory), so that sbx_runner_call(cfg, ...) reaches it. -1 with
 * err: SBX_E_USAGE for an invalid id, SBX_E_NOTFOUND when no such task runs. */
int sbx_task_runner_use(struct sbx_config *cfg, const char *state, const char *task,
                        sbx_error_t **err);
/* sbx_runner_call to the task's runner without a body sink; a refusal's error is
 * the runner's message alone, its code from the status (400 SBX_E_USAGE, 404
 * SBX_E_NOTFOUND, 422 SBX_E_POLICY, else SBX_E_GENERIC) as the keeper's were. */
struct sbx_http_response;
int sbx_task_runner_call(struct sbx_config *cfg, const char *method, const char *url,
                         const char *body, struct sbx_http_response *resp, sbx_error_t **err);
/* Runs argv in the task as a job of its runner (sbx_task_runner_use first), its
 * output to out (stream 1 or 2), or to fds 1 and 2 when out is NULL; *interrupted
 * cancels it (its end is awaited). 0 with *status, or -1 (*code 125, or 126/127
 * when the command could not be executed or was not found). */
int sbx_task_runner_exec(struct sbx_config *cfg, const char *task, const char *const *argv,
                         const struct sbx_kv *env, size_t n_env, const volatile int *interrupted,
                         sbx_output_fn out, void *ud, int *status, int *code, sbx_error_t **err);
/* Ends the task and waits until its keeper is gone (sbx_task_runner_use first). */
int sbx_task_runner_end(struct sbx_config *cfg, const char *state, const char *task,
                        sbx_error_t **err);

#endif
