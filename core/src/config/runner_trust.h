/* runner_trust.h - runner.clients and runner.worktree_roots (the readers of
 * those rows of the key table, config/keys.c; docs/configuration.md). */
#ifndef SBX_CONFIG_RUNNER_TRUST_H
#define SBX_CONFIG_RUNNER_TRUST_H

#include "config/config.h"

/* Reads and checks runner.clients: FILE:LINE errors for a missing or
 * reserved name, a duplicate name, not exactly one of token_env and
 * token_file, an unknown or missing scope. */
int sbx_config_read_runner_clients(struct sbx_config *c, const config_setting_t *list,
                                   sbx_error_t **err);
/* Reads and checks runner.worktree_roots: FILE:LINE errors for a root that is
 * relative or inside /proc, /sys, /dev, /run or state_dir (read before). */
int sbx_config_read_worktree_roots(struct sbx_config *c, const config_setting_t *list,
                                   sbx_error_t **err);
void sbx_config_clear_runner_trust(struct sbx_config *c);

#endif
