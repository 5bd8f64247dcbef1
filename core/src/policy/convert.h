/* convert.h - between C and policy values: jobs in, results out (internal).
 *
 * Results are read with raw accesses only (lua_next, lua_rawgeti), so no
 * script metamethod runs and nothing allocates in Lua while C reads them.
 */
#ifndef SBX_POLICY_CONVERT_H
#define SBX_POLICY_CONVERT_H

#include <lua.h>

#include "policy/policy.h"

#define SBX_POLICY_MAX_RULES 256
#define SBX_POLICY_MAX_PORTS 16
#define SBX_POLICY_MAX_REASON 200
/* The flag a rule {host=..., opaque=true} carries in its canonical form,
 * "git.example.com:22 opaque" (the egress layer's SBX_EGRESS_OPAQUE). */
#define SBX_POLICY_OPAQUE "opaque"

/* lua_CFunction for sbx_lua_pcall_c: light userdata = const struct
 * sbx_job_desc *; returns the read-only job table. */
int sbx_policy_push_job(lua_State *L);

/* Pushes a fresh (writable) Lua table of the decision (for the test harness). */
void sbx_policy_push_decision(lua_State *L, const struct sbx_policy_decision *d);

/* Result readers. WHERE is "policies/NAME.lua:LINE" for messages. Limits
 * not given by the script are left 0 (the caller fills in the caps). */
int sbx_policy_read_limits(lua_State *L, int idx, const char *where, struct sbx_limits *out,
                           char **reason, sbx_error_t **err);
/* Canonical forms of the string rules of the last result, by position: the
 * shipped egress.lua returns the same list every time. */
struct sbx_rule_cache {
    char *spec[SBX_POLICY_MAX_RULES];
    size_t len[SBX_POLICY_MAX_RULES];
    char *canon[SBX_POLICY_MAX_RULES];
};
void sbx_rule_cache_fini(struct sbx_rule_cache *c);

/* cache may be NULL. */
int sbx_policy_read_egress(lua_State *L, int idx, const char *where, struct sbx_rule_cache *cache,
                           char ***allow, size_t *n, char **reason, sbx_error_t **err);
int sbx_policy_read_slot(lua_State *L, int idx, const char *where, char **slot_class, char **reason,
                         sbx_error_t **err);

/* Canonical rule "host:p1,p2" (a table rule with opaque = true adds " opaque") from
 * "HOST[:PORT[,PORT...]]" (ports default to 80 and 443), or NULL with a reason in why. */
char *sbx_policy_rule_canon(const char *spec, size_t len, const int *ports, size_t n_ports,
                            char *why, size_t why_len);

/* Host of a registry setting: "https://HOST[:PORT]/path" or "HOST[:PORT]" ->
 * canonical rule, or NULL with why. */
char *sbx_policy_registry_rule(const char *setting, char *why, size_t why_len);

#endif
