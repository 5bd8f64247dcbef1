/* roots.c - where a job's worktree may come from (docs/runner.md, "Worktree
 * roots"): the operator's runner.worktree_roots, and what no worktree may hold
 * whatever the roots say (util/confine.h). */
#include <stdlib.h>

#include "runner/state.h"
#include "runner/roots.h"
#include "sandbox/statedir.h"

/* What the runner reads or serves from outside the state directory: a job
 * whose worktree holds one of these could rewrite the policy or the store, or
 * read another client's token (docs/runner.md, "Worktree roots"). */
void runner_roots_deny(struct sbx_runner *r)
{
    const struct sbx_config *cfg = r->cfg;

    if (!sbx_store_location_is_pg(r->store_path)) {
        sbx_confine_deny(&r->confine, r->store_path, "the runner's store");
    }
    sbx_confine_deny(&r->confine, r->ep.unix_path, "the runner's socket");
    sbx_confine_deny(&r->confine, r->policy_dir, "the policy directory");
    sbx_confine_deny(&r->confine, r->plugin_dir, "the plugin directory");
    if (cfg->path != NULL) {
        sbx_confine_deny(&r->confine, cfg->path, "the configuration file");
    }
    for (size_t i = 0; i < cfg->runner.n_clients; i++) {
        if (cfg->runner.clients[i].token_file != NULL) {
            sbx_confine_deny(&r->confine, cfg->runner.clients[i].token_file,
                             "a client's token file");
        }
    }
}

int runner_roots_init(struct sbx_runner *r, sbx_error_t **err)
{
    char why[512];
    char *state = sbx_state_dir(r->cfg->state_dir, err);
    int rc;

    if (state == NULL) {
        return -1;
    }
    rc = sbx_confine_init(&r->confine, "runner.worktree_roots", r->cfg->runner.worktree_roots,
                          r->cfg->runner.n_worktree_roots, state, why, sizeof(why));
    free(state);
    if (rc < 0) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: %s",
                             r->cfg->runner.worktree_roots_where
                                 ? r->cfg->runner.worktree_roots_where
                                 : "runner.worktree_roots",
                             why);
    }
    return 0;
}
