/* sbx_stub.h - honest stubs (SDK). A stub loads, reports its state and
 * reason, and every call fails with that reason. Include in exactly one .c.
 *
 *   SBX_STUB_PROVIDER("provider_daytona", "0.1.0", SBX_PLUGIN_STUB, "reason");
 */
#ifndef SBX_SDK_STUB_H
#define SBX_SDK_STUB_H

#include <stddef.h>

#include "sbx_credential.h"
#include "sbx_plugin.h"
#include "sbx_provider.h"

#define SBX_STUB_COMMON_(NAME, REASON)                                                             \
    static const struct sbx_host_api *stub_host_;                                                  \
    static int stub_fail_(sbx_error_t **err)                                                       \
    {                                                                                              \
        if (stub_host_ == NULL) {                                                                  \
            return -1;                                                                             \
        }                                                                                          \
        return stub_host_->error_set(err, SBX_E_STUB, "%s: %s", NAME, REASON);                     \
    }                                                                                              \
    static int stub_init_(const struct sbx_host_api *host, const struct sbx_options *opts,         \
                          void **ctx, sbx_error_t **err)                                           \
    {                                                                                              \
        (void)opts;                                                                                \
        stub_host_ = host;                                                                         \
        *ctx = NULL;                                                                               \
        return stub_fail_(err);                                                                    \
    }                                                                                              \
    static void stub_destroy_ctx_(void *ctx)                                                       \
    {                                                                                              \
        (void)ctx;                                                                                 \
    }

#define SBX_STUB_PROVIDER(NAME, VERSION, STATE, REASON)                                            \
    SBX_STUB_COMMON_(NAME, REASON)                                                                 \
    static int stub_create_(void *ctx, const struct sbx_sandbox_spec *spec, char *id, size_t n,    \
                            sbx_error_t **err)                                                     \
    {                                                                                              \
        (void)ctx, (void)spec, (void)id, (void)n;                                                  \
        return stub_fail_(err);                                                                    \
    }                                                                                              \
    static int stub_exec_(void *ctx, const char *id, const struct sbx_exec_spec *spec,             \
                          struct sbx_exec_ctl *ctl, int *st, sbx_error_t **err)                    \
    {                                                                                              \
        (void)ctx, (void)id, (void)spec, (void)ctl, (void)st;                                      \
        return stub_fail_(err);                                                                    \
    }                                                                                              \
    static int stub_destroy_(void *ctx, const char *id, sbx_error_t **err)                         \
    {                                                                                              \
        (void)ctx, (void)id;                                                                       \
        return stub_fail_(err);                                                                    \
    }                                                                                              \
    static int stub_list_(void *ctx, const char *k, const char *v, sbx_sandbox_fn fn, void *ud,    \
                          sbx_error_t **err)                                                       \
    {                                                                                              \
        (void)ctx, (void)k, (void)v, (void)fn, (void)ud;                                           \
        return stub_fail_(err);                                                                    \
    }                                                                                              \
    static const struct sbx_provider_ops stub_ops_ = {                                             \
        .flags = 0,                                                                                \
        .init = stub_init_,                                                                        \
        .destroy_ctx = stub_destroy_ctx_,                                                          \
        .create = stub_create_,                                                                    \
        .exec = stub_exec_,                                                                        \
        .destroy = stub_destroy_,                                                                  \
        .list = stub_list_,                                                                        \
    };                                                                                             \
    SBX_PLUGIN_DEFINE(SBX_PLUGIN_PROVIDER, NAME, VERSION, STATE, REASON, NULL, stub_ops_)

#define SBX_STUB_CREDENTIAL(NAME, VERSION, STATE, REASON)                                          \
    SBX_STUB_COMMON_(NAME, REASON)                                                                 \
    static int stub_acquire_(void *ctx, const struct sbx_cred_scope *s, struct sbx_lease *l,       \
                             sbx_error_t **err)                                                    \
    {                                                                                              \
        (void)ctx, (void)s, (void)l;                                                               \
        return stub_fail_(err);                                                                    \
    }                                                                                              \
    static int stub_revoke_(void *ctx, struct sbx_lease *l, sbx_error_t **err)                     \
    {                                                                                              \
        (void)ctx, (void)l;                                                                        \
        return stub_fail_(err);                                                                    \
    }                                                                                              \
    static const struct sbx_credential_ops stub_ops_ = {                                           \
        .init = stub_init_,                                                                        \
        .destroy_ctx = stub_destroy_ctx_,                                                          \
        .acquire = stub_acquire_,                                                                  \
        .revoke = stub_revoke_,                                                                    \
    };                                                                                             \
    SBX_PLUGIN_DEFINE(SBX_PLUGIN_CREDENTIAL, NAME, VERSION, STATE, REASON, NULL, stub_ops_)

#endif
