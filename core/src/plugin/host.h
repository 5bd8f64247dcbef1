/* host.h - the host vtable the core hands to plugins. */
#ifndef SBX_PLUGIN_HOST_H
#define SBX_PLUGIN_HOST_H

#include "sbx/sbx_credential.h"
#include "sbx/sbx_host.h"

const struct sbx_host_api *sbx_host_api_get(void);
/* Frees a lease's secrets (zeroed first) and resets it. */
void sbx_lease_clear(struct sbx_lease *lease);

#endif
