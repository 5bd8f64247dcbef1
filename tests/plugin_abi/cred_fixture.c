/* cred_fixture.c - a credential plugin that leases what its scope says, built
 * against two minor versions of the ABI (tests/plugin_abi/CMakeLists.txt):
 * cred_scope13 (SBX_PLUGIN_ABI_MINOR 3: it knows task_id, job_id and path
 * only, as a plugin built against the 1.3 header) and cred_scope14 (1.4: it
 * also reads client and pool). tests/unit/test_abi.c loads both on this core
 * and acquires a lease through each: SCOPE_TASK, and from 1.4 SCOPE_CLIENT
 * and SCOPE_POOL, hold the scope's values. */
#include <string.h>

#include "sbx/sbx_credential.h"
#include "sbx/sbx_plugin.h"

static const struct sbx_host_api *host;

static int c_init(const struct sbx_host_api *h, const struct sbx_options *o, void **ctx,
                  sbx_error_t **err)
{
    (void)o;
    (void)err;
    host = h;
    *ctx = (void *)&host;
    return 0;
}

static void c_destroy_ctx(void *ctx)
{
    (void)ctx;
}

static int c_acquire(void *ctx, const struct sbx_cred_scope *scope, struct sbx_lease *lease,
                     sbx_error_t **err)
{
    (void)ctx;
    strcpy(lease->id, FIX_NAME "-lease");
    if (host->lease_add_secret(lease, "SCOPE_TASK", scope->task_id, err) < 0) {
        return -1;
    }
#if SBX_PLUGIN_ABI_MINOR >= 4
    /* a 1.4 plugin always gets both: the core is never older than the plugin */
    if (host->lease_add_secret(lease, "SCOPE_CLIENT", scope->client, err) < 0 ||
        host->lease_add_secret(lease, "SCOPE_POOL", scope->pool, err) < 0) {
        return -1;
    }
#endif
    return 0;
}

static int c_revoke(void *ctx, struct sbx_lease *lease, sbx_error_t **err)
{
    (void)ctx;
    (void)lease;
    (void)err;
    return 0;
}

static const struct sbx_credential_ops ops = {
    .init = c_init,
    .destroy_ctx = c_destroy_ctx,
    .acquire = c_acquire,
    .revoke = c_revoke,
};

SBX_PLUGIN_DEFINE(SBX_PLUGIN_CREDENTIAL, FIX_NAME, "1.0.0", SBX_PLUGIN_READY, NULL, NULL, ops)
