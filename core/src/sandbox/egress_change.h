/* egress_change.h - `sbx task allow|deny`: a running task's egress rules changed, as
 * egress.lua's change() decides, for its next connections (docs/egress.md, "Changing a
 * running task's egress"). */
#ifndef SBX_SANDBOX_EGRESS_CHANGE_H
#define SBX_SANDBOX_EGRESS_CHANGE_H

#include <jansson.h>

#include "sandbox/task.h"

/* op "allow" or "deny"; spec "HOST[:PORT]" (HOST a name or "*.name"); client who asks
 * ("local" or the API client), via "cli", "api" or "mcp". *out: {task, op, rule,
 * changed, allow[], decided_by, policy_rule, reason}. A refusal is SBX_E_POLICY and
 * names the rule; bad input SBX_E_USAGE. */
int sbx_task_egress_change(struct sbx_task *t, const char *op, const char *spec, const char *client,
                           const char *via, json_t **out, sbx_error_t **err);

#endif
