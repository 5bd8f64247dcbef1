/* session.c - one task's credential lease, start to end (see session.h). */
#include "cred/session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin/host.h"
#include "plugin/instance.h"
#include "util/log.h"
#include "util/xalloc.h"

struct sbx_cred_session {
    struct sbx_open_instance *oi;
    struct sbx_lease lease;
    struct sbx_redactor *redactor;
};

struct sbx_cred_session *sbx_cred_session_open(const struct sbx_config *c, const char *plugin_dir,
                                               const char *instance,
                                               const struct sbx_cred_scope *scope,
                                               sbx_error_t **err)
{
    struct sbx_cred_session *s = xcalloc(1, sizeof(*s));
    const struct sbx_credential_ops *ops;

    s->oi = sbx_instance_open(c, plugin_dir, instance, SBX_PLUGIN_CREDENTIAL, err);
    if (s->oi == NULL) {
        free(s);
        return NULL;
    }
    ops = sbx_instance_credential(s->oi);
    if (ops->acquire(s->oi->ctx, scope, &s->lease, err) < 0) {
        sbx_error_wrap(err, "credentials '%s' for task %s", instance,
                       scope->task_id ? scope->task_id : "?");
        if (s->lease.provider_data != NULL) { /* a plugin should not, but never leak it */
            ops->revoke(s->oi->ctx, &s->lease, NULL);
        }
        sbx_lease_clear(&s->lease);
        sbx_instance_close(s->oi);
        free(s);
        return NULL;
    }
    s->redactor = sbx_redactor_from_lease(&s->lease);
    return s;
}

const char *sbx_cred_session_lease_id(const struct sbx_cred_session *s)
{
    return s->lease.id;
}

const struct sbx_kv *sbx_cred_session_env(const struct sbx_cred_session *s, size_t *n)
{
    *n = s->lease.n_secrets;
    return s->lease.secrets;
}

const struct sbx_redactor *sbx_cred_session_redactor(const struct sbx_cred_session *s)
{
    return s->redactor;
}

int64_t sbx_cred_session_renew_at(const struct sbx_cred_session *s)
{
    return sbx_instance_credential(s->oi)->renew != NULL ? s->lease.renew_at : 0;
}

int sbx_cred_session_renew_due(struct sbx_cred_session *s, int64_t now, sbx_error_t **err)
{
    const struct sbx_credential_ops *ops = sbx_instance_credential(s->oi);

    if (ops->renew == NULL || s->lease.renew_at == 0 || now < s->lease.renew_at) {
        return 0;
    }
    if (ops->renew(s->oi->ctx, &s->lease, err) < 0) {
        return sbx_error_wrap(err, "renewing lease %s", s->lease.id);
    }
    return 0;
}

int sbx_cred_session_close(struct sbx_cred_session *s, sbx_error_t **err)
{
    const struct sbx_credential_ops *ops;
    int r;

    if (s == NULL) {
        return 0;
    }
    ops = sbx_instance_credential(s->oi);
    r = ops->revoke(s->oi->ctx, &s->lease, err);
    if (r < 0) {
        sbx_error_wrap(err, "revoking lease %s", s->lease.id);
    }
    sbx_redactor_destroy(s->redactor);
    sbx_lease_clear(&s->lease);
    sbx_instance_close(s->oi);
    free(s);
    return r < 0 ? -1 : 0;
}

int sbx_cred_revoke_orphan(const struct sbx_config *c, const char *plugin_dir, const char *instance,
                           const char *lease_id, sbx_error_t **err)
{
    struct sbx_open_instance *oi;
    struct sbx_lease lease;
    int r;

    if (lease_id == NULL || strlen(lease_id) >= sizeof(lease.id)) {
        return sbx_error_set(err, SBX_E_USAGE, "lease id '%.64s' is not a lease id",
                             lease_id ? lease_id : "");
    }
    oi = sbx_instance_open(c, plugin_dir, instance, SBX_PLUGIN_CREDENTIAL, err);
    if (oi == NULL) {
        return -1;
    }
    memset(&lease, 0, sizeof(lease));
    snprintf(lease.id, sizeof(lease.id), "%s", lease_id);
    r = sbx_instance_credential(oi)->revoke(oi->ctx, &lease, err);
    if (r < 0) {
        sbx_error_wrap(err, "revoking lease %s left by an earlier sbx", lease_id);
    }
    sbx_lease_clear(&lease);
    sbx_instance_close(oi);
    return r < 0 ? -1 : 0;
}
