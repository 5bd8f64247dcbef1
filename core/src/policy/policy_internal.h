/* policy_internal.h - what the policy files share beyond policy.h (internal). */
#ifndef SBX_POLICY_POLICY_INTERNAL_H
#define SBX_POLICY_POLICY_INTERNAL_H

#include "policy/policy.h"
#include "policy/sandbox.h"

/* Caps of one policy script evaluation. */
extern const struct sbx_lua_caps sbx_policy_caps;

/* sbx_policy_load with egress.registries replaced (NULL: cfg's own). */
struct sbx_policy *sbx_policy_load_with(const char *dir, const struct sbx_config *cfg,
                                        const char *const *registries, sbx_error_t **err);

#endif
