/* deny.h - the text of a refusal: what happened and what to ask for (deny.c). */
#ifndef SBX_EGRESS_DENY_H
#define SBX_EGRESS_DENY_H

#include <stddef.h>

#include "egress/rules.h"

/* Room for any text sbx_egress_deny_text writes. */
#define SBX_EGRESS_DENY_TEXT_MAX 640

/* One line for REASON (an X-Sbx-Deny value) about HOST:PORT (HOST NULL or not a
 * validated host: left out; is_ip: HOST is an IP literal), e.g. "sbx egress
 * not-allowed: registry.example:443 is not in this task's egress allow-list (ask for
 * egress.allow \"registry.example\")". No CR, LF or control byte. Returns its length. */
size_t sbx_egress_deny_text(const char *reason, const char *host, unsigned port, int is_ip,
                            char *out, size_t size);
/* What REASON means, for reasons that name no host; NULL for unknown ones. */
const char *sbx_egress_deny_hint(const char *reason);

#endif
