/* session.h - one task's credential lease, start to end: opens the
 * credential instance, acquires the lease, renews it when due, builds its
 * redactor, and revokes and zeroes everything at the end (on every path).
 *
 * Only sbx_cred_session_lease_id() may be written to a task record; the
 * values (sbx_cred_session_env) go into each exec's environment and nowhere
 * else. See docs/credentials.md.
 */
#ifndef SBX_CRED_SESSION_H
#define SBX_CRED_SESSION_H

#include <stdint.h>

#include "config/config.h"
#include "cred/redact.h"
#include "sbx/sbx_credential.h"
#include "util/error.h"

struct sbx_cred_session;

/* Opens credential instance `instance` of c and acquires a lease for scope.
 * NULL with *err when the instance cannot be opened or the lease taken. */
struct sbx_cred_session *sbx_cred_session_open(const struct sbx_config *c, const char *plugin_dir,
                                               const char *instance,
                                               const struct sbx_cred_scope *scope,
                                               sbx_error_t **err);
/* The lease id (not a secret: it is what task records hold). */
const char *sbx_cred_session_lease_id(const struct sbx_cred_session *s);
/* The values, as NAME/value pairs for an exec's environment (owned by the
 * session; valid until the next renew or close). */
const struct sbx_kv *sbx_cred_session_env(const struct sbx_cred_session *s, size_t *n);
/* The redactor of the values (owned by the session). */
const struct sbx_redactor *sbx_cred_session_redactor(const struct sbx_cred_session *s);
/* Unix time at which sbx_cred_session_renew_due() should be called next
 * (0: never). */
int64_t sbx_cred_session_renew_at(const struct sbx_cred_session *s);
/* Renews the lease when now >= renew_at and the plugin can renew; 0 when
 * nothing was due. */
int sbx_cred_session_renew_due(struct sbx_cred_session *s, int64_t now, sbx_error_t **err);
/* Revokes the lease, zeroes its values, closes the instance and frees s,
 * whatever revoke returns; returns revoke's result. NULL is a no-op. */
int sbx_cred_session_close(struct sbx_cred_session *s, sbx_error_t **err);

/* A lease left by a crashed sbx: only its id is known. Opens the instance
 * and asks the plugin to revoke it by id (cred_infisical cannot, and says so
 * in a warning; its token lapses at its TTL). */
int sbx_cred_revoke_orphan(const struct sbx_config *c, const char *plugin_dir, const char *instance,
                           const char *lease_id, sbx_error_t **err);

#endif
