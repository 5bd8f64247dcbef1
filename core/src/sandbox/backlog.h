/* backlog.h (added) - sandboxes killed and still waiting for the engine's
 * removal (docs/operations.md, "Removal in the background"). */
#ifndef SBX_SANDBOX_BACKLOG_H
#define SBX_SANDBOX_BACKLOG_H

#include "plugin/instance.h"

/* Past this many, /healthz says so and the warm pool stops refilling. */
#define SBX_REMOVAL_BACKLOG_MAX 16

/* The provider's sandboxes (label sbx.task) that no longer run (the
 * provider's list reports sbx.engine.state exited, dead or removing), or -1
 * with *err. */
int sbx_removal_backlog(struct sbx_open_instance *prov, sbx_error_t **err);

#endif
