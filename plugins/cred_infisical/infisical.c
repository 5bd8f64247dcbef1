/* infisical.c - cred_infisical: short-lived credentials from Infisical.
 *
 * The runner holds the machine identity (Universal Auth client id and
 * secret); each task gets a lease: a fresh access token (kept only in this
 * process's memory, as the lease's provider_data) and the values of the
 * task's secrets path, which the core puts in each exec's environment. The
 * token is renewed before it expires (a fresh login once the identity's Max
 * TTL would refuse a renew) and revoked when the task ends. A rejected login
 * stops logins for login_cooldown, a lockout for lockout_wait: failed logins
 * never turn into a retry storm that locks the identity out.
 *
 * Infisical revokes a token only when given the token itself, and sbx never
 * writes tokens to disk, so a lease left by a crashed sbx (a record with its
 * id only) cannot be revoked: it lapses at the token's TTL, which is why the
 * identity's Access Token TTL should be minutes (docs/credentials.md).
 */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

#include "infisical.h"
#include "sbx/sbx_plugin.h"

/* A TTL above this draws a warning: a crash would leave the token alive. */
#define INF_LONG_TTL 3600

static int64_t now_s(void)
{
    return (int64_t)time(NULL);
}

static void token_free(const struct sbx_host_api *host, struct inf_token *t)
{
    if (t != NULL) {
        inf_secret_free(host, t->value);
        host->secret_zero(t, sizeof(*t));
        free(t);
    }
}

static void set_times(const struct inf_ctx *c, struct sbx_lease *lease, struct inf_token *t)
{
    int64_t margin = c->cfg.renew_before;

    if (margin > t->ttl / 3) {
        margin = t->ttl / 3;
    }
    t->expires_at = now_s() + t->ttl;
    lease->expires_at = t->expires_at;
    lease->renew_at = t->expires_at - margin;
}

static int login_allowed(struct inf_ctx *c, sbx_error_t **err)
{
    int64_t now = now_s();
    int r = 0;

    pthread_mutex_lock(&c->lock);
    if (now < c->blocked_until) {
        r = c->host->error_set(err, SBX_E_ENGINE,
                               "cred_infisical: login not attempted: %s; the "
                               "next attempt is allowed in %" PRId64 " s",
                               c->blocked_reason ? c->blocked_reason : "logins are paused",
                               c->blocked_until - now);
    }
    pthread_mutex_unlock(&c->lock);
    return r;
}

static void block_logins(struct inf_ctx *c, int64_t seconds, const char *reason)
{
    if (seconds <= 0) {
        return;
    }
    pthread_mutex_lock(&c->lock);
    c->blocked_until = now_s() + seconds;
    free(c->blocked_reason);
    c->blocked_reason = strdup(reason);
    pthread_mutex_unlock(&c->lock);
    c->host->log(c->instance, SBX_LOG_WARN, "logins paused for %" PRId64 " s: %s", seconds, reason);
}

/* A fresh Universal Auth login; *out is a new token. */
static int login(struct inf_ctx *c, struct inf_token **out, sbx_error_t **err)
{
    enum inf_fail fail = INF_FAIL_NONE;
    char *client_id = NULL;
    char *client_secret = NULL;
    struct inf_token *t;
    int r;

    if (login_allowed(c, err) < 0) {
        return -1;
    }
    if (inf_config_read_identity(&c->cfg, c->host, &client_id, &client_secret, err) < 0) {
        return -1;
    }
    t = xcalloc(1, sizeof(*t));
    r = inf_api_login(c, client_id, client_secret, t, &fail, err);
    inf_secret_free(c->host, client_id);
    inf_secret_free(c->host, client_secret);
    if (r < 0) {
        if (fail == INF_FAIL_LOCKOUT) {
            block_logins(c, c->cfg.lockout_wait,
                         "Infisical locked the identity out after "
                         "failed logins");
        }
        else if (fail == INF_FAIL_REJECTED) {
            block_logins(c, c->cfg.login_cooldown,
                         "the last login was rejected (wrong client "
                         "id or secret?), and repeated failures lock the identity out");
        }
        token_free(c->host, t);
        return -1;
    }
    t->created_at = now_s();
    if (t->ttl > INF_LONG_TTL) {
        c->host->log(c->instance, SBX_LOG_WARN,
                     "the access token lives %" PRId64 " s: set the "
                     "identity's Access Token TTL to minutes, so that a lease left by a crash "
                     "lapses soon (see docs/credentials.md)",
                     t->ttl);
    }
    *out = t;
    return 0;
}

static void make_lease_id(struct sbx_lease *lease)
{
    unsigned char rnd[12];
    size_t n = 0;

    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        /* no entropy is unusual; time and address still make it unique here */
        uint64_t x = (uint64_t)now_s() ^ (uint64_t)(uintptr_t)lease;

        memcpy(rnd, &x, sizeof(x));
        memset(rnd + sizeof(x), 0, sizeof(rnd) - sizeof(x));
    }
    n = (size_t)snprintf(lease->id, sizeof(lease->id), "infisical-");
    for (size_t i = 0; i < sizeof(rnd) && n + 2 < sizeof(lease->id); i++) {
        n += (size_t)snprintf(lease->id + n, sizeof(lease->id) - n, "%02x", rnd[i]);
    }
}

static int cb_infisical_init(const struct sbx_host_api *host, const struct sbx_options *opts,
                             void **ctx, sbx_error_t **err)
{
    struct inf_ctx *c;
    const char *name;

    if (host->size < offsetof(struct sbx_host_api, lease_add_secret) + sizeof(void *)) {
        return host->error_set(err, SBX_E_PLUGIN,
                               "cred_infisical: the core's host API is too "
                               "old (no lease_add_secret)");
    }
    c = xcalloc(1, sizeof(*c));
    c->host = host;
    if (inf_config_init(&c->cfg, host, opts, err) < 0) {
        free(c);
        return -1;
    }
    name = getenv(c->cfg.client_id_env);
    if (name == NULL || name[0] == '\0' ||
        (c->cfg.client_secret_env != NULL && (getenv(c->cfg.client_secret_env) == NULL ||
                                              getenv(c->cfg.client_secret_env)[0] == '\0'))) {
        host->error_set(
            err, SBX_E_CONFIG, "%s: environment variable %s is not set", host->instance_name(opts),
            name == NULL || name[0] == '\0' ? c->cfg.client_id_env : c->cfg.client_secret_env);
        inf_config_fini(&c->cfg);
        free(c);
        return -1;
    }
    c->instance = xstrdup(host->instance_name(opts));
    pthread_mutex_init(&c->lock, NULL);
    *ctx = c;
    return 0;
}

static void cb_infisical_destroy_ctx(void *ctx)
{
    struct inf_ctx *c = ctx;

    if (c == NULL) {
        return;
    }
    inf_config_fini(&c->cfg);
    pthread_mutex_destroy(&c->lock);
    free(c->blocked_reason);
    free(c->instance);
    free(c);
}

static int cb_infisical_acquire(void *ctx, const struct sbx_cred_scope *scope,
                                struct sbx_lease *lease, sbx_error_t **err)
{
    struct inf_ctx *c = ctx;
    enum inf_fail fail = INF_FAIL_NONE;
    struct inf_token *t = NULL;
    char *path;

    path = inf_config_path(&c->cfg, c->host, scope, err);
    if (path == NULL) {
        return -1;
    }
    if (login(c, &t, err) < 0) {
        free(path);
        return -1;
    }
    if (inf_api_fetch(c, t->value, path, lease, &fail, err) < 0) {
        /* best effort: the token is useless now */
        inf_api_revoke(c, t->value, &fail, NULL);
        token_free(c->host, t);
        free(path);
        return -1;
    }
    make_lease_id(lease);
    set_times(c, lease, t);
    lease->provider_data = t;
    c->host->log(c->instance, SBX_LOG_INFO,
                 "lease %s: %zu secret(s) from %s, token valid "
                 "%" PRId64 " s",
                 lease->id, lease->n_secrets, path, t->ttl);
    free(path);
    return 0;
}

/* Replaces the lease's token with a fresh login's, revoking the old one. */
static int relogin(struct inf_ctx *c, struct sbx_lease *lease, sbx_error_t **err)
{
    struct inf_token *old = lease->provider_data;
    enum inf_fail fail = INF_FAIL_NONE;
    struct inf_token *t = NULL;

    if (login(c, &t, err) < 0) {
        return c->host->error_wrap(err, "lease %s: renewing by a new login", lease->id);
    }
    inf_api_revoke(c, old->value, &fail, NULL); /* best effort: it may be gone already */
    token_free(c->host, old);
    lease->provider_data = t;
    set_times(c, lease, t);
    c->host->log(c->instance, SBX_LOG_INFO, "lease %s: new token by login, valid %" PRId64 " s",
                 lease->id, t->ttl);
    return 0;
}

static int cb_infisical_renew(void *ctx, struct sbx_lease *lease, sbx_error_t **err)
{
    struct inf_ctx *c = ctx;
    struct inf_token *t = lease->provider_data;
    enum inf_fail fail = INF_FAIL_NONE;
    struct inf_token nt = {0};

    if (t == NULL) {
        return c->host->error_set(err, SBX_E_NOTFOUND,
                                  "cred_infisical: lease %s: this process "
                                  "holds no token for it (left by a crashed sbx?); take a new "
                                  "lease",
                                  lease->id);
    }
    /* Infisical refuses a renew past the Max TTL (and deletes the token) */
    if (t->max_ttl > 0 && now_s() + t->ttl > t->created_at + t->max_ttl) {
        c->host->log(c->instance, SBX_LOG_INFO,
                     "lease %s: the token's Max TTL is near, "
                     "logging in again",
                     lease->id);
        return relogin(c, lease, err);
    }
    if (inf_api_renew(c, t->value, &nt, &fail, NULL) < 0) {
        c->host->log(c->instance, SBX_LOG_INFO, "lease %s: renew failed (%s), logging in again",
                     lease->id,
                     fail == INF_FAIL_REJECTED    ? "refused: expired or past Max TTL"
                     : fail == INF_FAIL_TRANSPORT ? "Infisical unreachable"
                     : fail == INF_FAIL_PROTOCOL  ? "unreadable reply"
                                                  : "server error");
        return relogin(c, lease, err);
    }
    /* the reply carries a newly signed token: always keep the new one */
    inf_secret_free(c->host, t->value);
    t->value = nt.value;
    t->ttl = nt.ttl;
    if (nt.max_ttl > 0) {
        t->max_ttl = nt.max_ttl;
    }
    set_times(c, lease, t);
    return 0;
}

static int cb_infisical_revoke(void *ctx, struct sbx_lease *lease, sbx_error_t **err)
{
    struct inf_ctx *c = ctx;
    struct inf_token *t = lease->provider_data;
    enum inf_fail fail = INF_FAIL_NONE;
    int64_t left;

    if (t == NULL) {
        c->host->log(c->instance, SBX_LOG_WARN,
                     "lease %s: no token in this process (left by a "
                     "crashed sbx); Infisical revokes a token only with the token itself, which "
                     "sbx never stores, so it lapses at its TTL",
                     lease->id);
        return 0;
    }
    lease->provider_data = NULL;
    left = t->expires_at - now_s();
    if (inf_api_revoke(c, t->value, &fail, NULL) < 0 && fail != INF_FAIL_REJECTED) {
        token_free(c->host, t);
        return c->host->error_set(err, SBX_E_ENGINE,
                                  "cred_infisical: lease %s: revoke failed "
                                  "(%s); the token lapses at its TTL in %" PRId64 " s",
                                  lease->id,
                                  fail == INF_FAIL_TRANSPORT  ? "Infisical unreachable"
                                  : fail == INF_FAIL_PROTOCOL ? "unreadable reply"
                                  : fail == INF_FAIL_LOCKOUT  ? "rate-limited"
                                                              : "server error",
                                  left > 0 ? left : 0);
    }
    /* a 4xx means the token is already expired or revoked: nothing is left */
    token_free(c->host, t);
    c->host->log(c->instance, SBX_LOG_INFO, "lease %s: revoked", lease->id);
    return 0;
}

static const struct sbx_credential_ops credential_infisical_ops = {
    .init = cb_infisical_init,
    .destroy_ctx = cb_infisical_destroy_ctx,
    .acquire = cb_infisical_acquire,
    .revoke = cb_infisical_revoke,
    .renew = cb_infisical_renew,
};

SBX_PLUGIN_DEFINE(SBX_PLUGIN_CREDENTIAL, "cred_infisical", "0.2.0", SBX_PLUGIN_READY, NULL,
                  inf_options, credential_infisical_ops)
