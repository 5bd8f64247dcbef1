/* policy_internal.h - what the policy files share beyond policy.h (internal). */
#ifndef SBX_POLICY_POLICY_INTERNAL_H
#define SBX_POLICY_POLICY_INTERNAL_H

#include "policy/policy.h"
#include "policy/sandbox.h"

/* Caps of one policy script evaluation. Not const for one reason: the unit
 * tests raise timeout_ms, so that under the sanitizers on a loaded machine the
 * deterministic caps (instructions, memory, pattern cost) are what stops a
 * script, not the wall clock (tests/unit/test_policy_sandbox.c). */
extern struct sbx_lua_caps sbx_policy_caps;

/* sbx_policy_load with egress.registries replaced (NULL: cfg's own). */
struct sbx_policy *sbx_policy_load_with(const char *dir, const struct sbx_config *cfg,
                                        const char *const *registries, sbx_error_t **err);

/* (added) for egress_change.c: the state, a part's compiled chunk and the registry
 * reference of the read-only `config` table. */
struct sbx_lua *sbx_policy_lua(struct sbx_policy *p);
int sbx_policy_part_ref(const struct sbx_policy *p, int part);
int sbx_policy_config_ref(const struct sbx_policy *p);

#endif
