/* roots.c - where a job's worktree may come from (docs/runner.md, "Worktree
 * roots"): the operator's runner.worktree_roots, and what no worktree may hold
 * whatever the roots say (util/confine.h). */
#include <stdlib.h>

#include "runner/roots.h"
#include "config/config.h"
#include "sandbox/statedir.h"
#include "store/store.h"

/* What the runner reads or serves from outside the state directory: a job
 * whose worktree holds one of these could rewrite the policy or the store, or
 * read another client's token (docs/runner.md, "Worktree roots"). */
void runner_roots_deny(struct sbx_confine *c, const struct sbx_config *cfg,
                       const struct runner_roots_paths *p)
{
    if (!sbx_store_location_is_pg(p->store)) {
        sbx_confine_deny(c, p->store, "the runner's store");
    }
    sbx_confine_deny(c, p->socket, "the runner's socket");
    sbx_confine_deny(c, p->policy_dir, "the policy directory");
    sbx_confine_deny(c, p->plugin_dir, "the plugin directory");
    if (cfg->path != NULL) {
        sbx_confine_deny(c, cfg->path, "the configuration file");
    }
    for (size_t i = 0; i < cfg->runner.n_clients; i++) {
        if (cfg->runner.clients[i].token_file != NULL) {
            sbx_confine_deny(c, cfg->runner.clients[i].token_file, "a client's token file");
        }
    }
}

int runner_roots_init(struct sbx_confine *c, const struct sbx_config *cfg, sbx_error_t **err)
{
    char why[512];
    char *state = sbx_state_dir(cfg->state_dir, err);
    int rc;

    if (state == NULL) {
        return -1;
    }
    rc = sbx_confine_init(c, "runner.worktree_roots", cfg->runner.worktree_roots,
                          cfg->runner.n_worktree_roots, state, why, sizeof(why));
    free(state);
    if (rc < 0) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: %s",
                             cfg->runner.worktree_roots_where ? cfg->runner.worktree_roots_where
                                                              : "runner.worktree_roots",
                             why);
    }
    return 0;
}
