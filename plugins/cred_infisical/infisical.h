/* infisical.h - cred_infisical internals: configuration (infisical_config.c),
 * the HTTP calls (infisical_api.c) and the runtime (infisical.c). */
#ifndef SBX_PLUGIN_INFISICAL_H
#define SBX_PLUGIN_INFISICAL_H

#include <pthread.h>
#include <stdint.h>

#include "sbx/sbx_credential.h"
#include "sbx/sbx_host.h"
#include "sbx/sbx_plugin.h"
#include "sbx/sbx_util.h"

struct inf_config {
    char *url; /* base URL, no trailing '/' */
    char *client_id_env;
    char *client_secret_env; /* exactly one of these two */
    char *client_secret_file;
    char *project;
    char *environment;
    char *path; /* template: {client}, {pool}, {task}, {job} */
    long timeout_ms;
    int64_t renew_before;   /* seconds */
    int64_t login_cooldown; /* seconds without logins after a rejected login */
    int64_t lockout_wait;   /* seconds without logins after a lockout reply */
    int include_imports;
};

struct inf_ctx {
    const struct sbx_host_api *host;
    char *instance;
    struct inf_config cfg;
    pthread_mutex_t lock;  /* guards what follows */
    int64_t blocked_until; /* no login before this time (unix seconds) */
    char *blocked_reason;  /* why, for the error */
};

/* An access token (the lease's provider_data). Never logged, never written. */
struct inf_token {
    char *value;
    int64_t ttl;        /* seconds, from the last reply's expiresIn */
    int64_t max_ttl;    /* seconds, accessTokenMaxTTL (0 = none) */
    int64_t created_at; /* login time: the Max TTL runs from here */
    int64_t expires_at;
};

/* How a call failed, so the runtime can decide what to do next. */
enum inf_fail {
    INF_FAIL_NONE = 0,
    INF_FAIL_TRANSPORT, /* no HTTP status (down, timeout) */
    INF_FAIL_REJECTED,  /* 4xx: bad credentials, expired or revoked token */
    INF_FAIL_LOCKOUT,   /* login locked out after failed attempts (or rate-limited) */
    INF_FAIL_SERVER,    /* 5xx */
    INF_FAIL_PROTOCOL,  /* a reply we cannot read */
};

/* infisical_config.c */
extern const struct sbx_option inf_options[];
int inf_config_init(struct inf_config *cfg, const struct sbx_host_api *host,
                    const struct sbx_options *opts, sbx_error_t **err);
void inf_config_fini(struct inf_config *cfg);
/* Reads the client id and secret (from the environment or the file) into
 * fresh buffers; the caller zeroes and frees them. */
int inf_config_read_identity(const struct inf_config *cfg, const struct sbx_host_api *host,
                             char **client_id, char **client_secret, sbx_error_t **err);
/* The secrets path for a scope: scope->path when set, else the template. */
char *inf_config_path(const struct inf_config *cfg, const struct sbx_host_api *host,
                      const struct sbx_cred_scope *scope, sbx_error_t **err);
/* Checks that a secret file is a regular file owned by us with mode 0600 or
 * 0400 (no group or other bits). */
int inf_config_check_secret_file(const char *path, const char *where,
                                 const struct sbx_host_api *host, sbx_error_t **err);

/* infisical_api.c: each call sets *fail when it fails. */
int inf_api_login(struct inf_ctx *c, const char *client_id, const char *client_secret,
                  struct inf_token *out, enum inf_fail *fail, sbx_error_t **err);
int inf_api_renew(struct inf_ctx *c, const char *token, struct inf_token *out, enum inf_fail *fail,
                  sbx_error_t **err);
int inf_api_revoke(struct inf_ctx *c, const char *token, enum inf_fail *fail, sbx_error_t **err);
/* Fetches the path's secrets (v4, then v3 raw on 404) into the lease. */
int inf_api_fetch(struct inf_ctx *c, const char *token, const char *path, struct sbx_lease *lease,
                  enum inf_fail *fail, sbx_error_t **err);

/* Zeroes and frees a string holding a secret. */
void inf_secret_free(const struct sbx_host_api *host, char *s);

#endif
