/* roots.h - the worktree roots and what the runner reads as denied (roots.c). */
#ifndef SBX_RUNNER_ROOTS_H
#define SBX_RUNNER_ROOTS_H

#include "util/error.h"

struct sbx_runner;

/* roots.c: the worktree roots from the configuration (at start), then what
 * the runner reads from outside the state directory as denied (once the store
 * is open). */
int runner_roots_init(struct sbx_runner *r, sbx_error_t **err);
void runner_roots_deny(struct sbx_runner *r);

#endif
