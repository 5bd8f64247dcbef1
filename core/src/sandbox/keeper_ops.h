/* keeper_ops.h - (added) the keeper's requests beyond exec, end and ping, and the
 * client's side of them: "snapshot" (docs/tasks.md, "Snapshots and forks") and
 * "egress" (docs/egress.md, "Changing a running task's egress"). The reply is one 'X'
 * frame: {"status":0, "result":{...}} or {"error":"...", "code":125, "sbx_code":N}. */
#ifndef SBX_SANDBOX_KEEPER_OPS_H
#define SBX_SANDBOX_KEEPER_OPS_H

#include <jansson.h>

#include "sandbox/task.h"

/* In the keeper: answers req on fd when op is one of these; 1 handled, 0 not. */
int sbx_keeper_extra_op(struct sbx_task *t, const char *op, json_t *req, int fd);
/* In a client: sends req to task's keeper and returns its result (caller decrefs),
 * or NULL with the keeper's error (its code kept). */
json_t *sbx_keeper_call(const char *state, const char *task, json_t *req, sbx_error_t **err);

#endif
