/* roots.h - the worktree roots and what the runner reads as denied (roots.c).
 * The module owns no state of the runner: it fills the sbx_confine it is
 * given (the runner's, util/confine.h). */
#ifndef SBX_RUNNER_ROOTS_H
#define SBX_RUNNER_ROOTS_H

#include "util/confine.h"
#include "util/error.h"

struct sbx_config;

/* What the runner reads or serves from outside the state directory. */
struct runner_roots_paths {
    const char *store; /* the store's location (a PostgreSQL one is no file) */
    const char *socket;
    const char *policy_dir;
    const char *plugin_dir;
};

/* roots.c: the worktree roots from the configuration (at start), then what
 * the runner reads from outside the state directory as denied (once the store
 * is open): p's paths, the configuration file and the clients' token files. */
int runner_roots_init(struct sbx_confine *c, const struct sbx_config *cfg, sbx_error_t **err);
void runner_roots_deny(struct sbx_confine *c, const struct sbx_config *cfg,
                       const struct runner_roots_paths *p);

#endif
