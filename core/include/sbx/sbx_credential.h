/* sbx_credential.h - credential source ops (SDK, plugin ABI v1).
 *
 * The runner holds the machine identity; a credential plugin turns a task's
 * scope into a lease of environment values (docs/architecture.md, Credentials). Lease
 * memory is owned by the core: the plugin adds values with
 * host->lease_add_secret() and the core zeroes them when the lease is freed.
 * Secret values never reach logs, Lua, the store, or disk.
 *
 * Required: init, destroy_ctx, acquire, revoke. Optional: renew.
 */
#ifndef SBX_SDK_CREDENTIAL_H
#define SBX_SDK_CREDENTIAL_H

#include <stdint.h>

#include "sbx_error.h"
#include "sbx_host.h"

/* (added 1.4) The client of a lease taken on the unix socket or by the CLI
 * (`sbx run`, `sbx task start` without serve). */
#define SBX_CRED_CLIENT_LOCAL "local"

struct sbx_cred_scope {
    const char *task_id;
    const char *job_id;
    const char *path; /* the secrets path for this task, from the plugin's template */
    /* (added 1.4) who the lease is for: the API client that submitted the job
     * ("local" for the unix socket and the CLI, "default" for
     * runner.token_env) and the task's pool ("ci" or "agent"). A plugin
     * built against 1.3 or older never reads them; one built against 1.4
     * always gets them (the core refuses a plugin newer than itself). An
     * empty client: the job has none (it predates clients). */
    const char *client;
    const char *pool;
};

/* Core-owned. The plugin sets id (never a secret: it is written to records),
 * expires_at and renew_at; provider_data is the plugin's own (for example the
 * access token, which it must zero and free in revoke or release). */
struct sbx_lease {
    char id[128];
    int64_t expires_at; /* unix seconds, 0 = unknown */
    int64_t renew_at;   /* unix seconds when renew() should be called, 0 = never */
    void *provider_data;
    /* secrets, managed by the core through host->lease_add_secret */
    struct sbx_kv *secrets;
    size_t n_secrets;
};

struct sbx_credential_ops {
    int (*init)(const struct sbx_host_api *host, const struct sbx_options *opts, void **ctx,
                sbx_error_t **err);
    void (*destroy_ctx)(void *ctx);

    /* Fills the lease for the scope. */
    int (*acquire)(void *ctx, const struct sbx_cred_scope *scope, struct sbx_lease *lease,
                   sbx_error_t **err);
    /* Revokes the lease and frees lease->provider_data. lease_id alone must be
     * enough when lease->provider_data is NULL (a lease left by a crash). */
    int (*revoke)(void *ctx, struct sbx_lease *lease, sbx_error_t **err);
    /* Optional: extends the lease; updates expires_at and renew_at. */
    int (*renew)(void *ctx, struct sbx_lease *lease, sbx_error_t **err);
};

#endif
