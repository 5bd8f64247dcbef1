/* keeper.h - where a kept task's host is: (changed, issue 31) the keeper of a task
 * (runner/keeper.h) is a private runner whose socket is
 * <state>/tasks/<task>/runner/runner.sock (keeper_client.c). */
#ifndef SBX_SANDBOX_KEEPER_H
#define SBX_SANDBOX_KEEPER_H

/* The socket of the runner that hosts the task (its keeper's), resolved to a path
 * a client can connect to (caller frees), or NULL when there is none (no such task
 * runs). */
char *sbx_keeper_runner_socket(const char *state, const char *task);

#endif
