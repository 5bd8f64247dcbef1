/* opensandbox.h - provider_opensandbox internals shared by its files:
 * opensandbox_config.c (options, labels, helpers), opensandbox.c (the ops),
 * opensandbox_api.c (lifecycle calls and the box cache) and execd.c (the
 * in-sandbox execd client). See docs/providers.md. */
#ifndef SBX_PLUGIN_OPENSANDBOX_H
#define SBX_PLUGIN_OPENSANDBOX_H

#include <jansson.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "sbx/sbx_plugin.h"
#include "sbx/sbx_provider.h"
#include "sbx/sbx_util.h"

#define OSB_NAME "provider_opensandbox"
#define OSB_EXECD_PORT 44772
#define OSB_LABEL_MAX 63

/* One sandbox this process knows: where its execd answers and when it
 * expires. Filled at create, or on first use by a later process. */
struct osb_box {
    char *id;
    char *execd;        /* "http://host:port[/path]", no trailing slash */
    char **headers;     /* endpoint headers, "Name: value", NULL-terminated */
    int64_t expires_at; /* unix seconds; 0 = never or unknown */
    int64_t deadline;   /* unix seconds of the maximum lifetime; 0 = none */
    int64_t last_renew_try;
    struct osb_box *next;
};

struct osb_ctx {
    const struct sbx_host_api *host;
    const char *instance; /* the instance name (owned by the options) */
    char *base;           /* url + "/v1", no trailing slash */
    char *url;            /* as configured, no trailing slash */
    char *api_key;        /* secret: zeroed on free; NULL when unset */
    char *api_key_env;
    const char *image;    /* overrides the task's image when set */
    const char *snapshot; /* create from this snapshot id instead */
    const char *workdir;  /* cwd for execs when the exec gives none */
    const char *const *entrypoint;
    int host_mounts;         /* send the worktree and caches as host volumes */
    int64_t create_timeout;  /* s: POST + wait until Running */
    int64_t ready_timeout;   /* s: execd /ping */
    int64_t request_timeout; /* s: every other lifecycle call */
    int64_t timeout_cap;     /* s: the server's max_sandbox_timeout_seconds */
    int64_t renew_before;    /* s: renew when fewer seconds than this remain */
    long poll_ms;            /* state and ping polling interval */
    pthread_mutex_t lock;
    struct osb_box *boxes;
};

/* --- opensandbox_config.c ------------------------------------------------ */

extern const struct sbx_option osb_options[];

int osb_config_init(struct osb_ctx *c, const struct sbx_host_api *host,
                    const struct sbx_options *opts, sbx_error_t **err);
void osb_config_fini(struct osb_ctx *c);

/* A copy of s, or NULL for NULL (allocation: the SDK helper library's). */
static inline char *osb_strdup_opt(const char *s)
{
    return s != NULL ? xstrdup(s) : NULL;
}

/* Maps a label key or value onto OpenSandbox's metadata rules (Kubernetes
 * label syntax, at most 63 characters, [A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?).
 * A valid input is returned as is; anything else is rewritten
 * deterministically (bad characters to '_', shortened, with a hash of the
 * original appended), so list() can filter on the same mapped value.
 * Returns a heap string; "" maps to "". */
char *osb_label_map(const char *s);
int osb_label_valid(const char *s);

/* RFC 3339 (fractional seconds, Z or +hh:mm) to unix seconds; -1 if bad. */
int64_t osb_time_parse(const char *s);
/* Unix seconds to "YYYY-MM-DDTHH:MM:SSZ" in buf (at least 32 bytes). */
void osb_time_format(int64_t t, char *buf, size_t n);

/* Quotes argv as one POSIX shell command line (execd runs `sh -c`). */
char *osb_shell_join(const char *const *argv);

/* The error of a failed reply as one line: "opensandbox 'NAME': METHOD PATH:
 * HTTP STATUS CODE: message" for {code,message} bodies, the joined `detail`
 * items for FastAPI's 422, or the start of any other body. Returns -1. */
int osb_reply_error(struct osb_ctx *c, const char *method, const char *path, long status,
                    const char *body, size_t len, sbx_error_t **err);

/* --- opensandbox_api.c (lifecycle calls, the box cache) ----------------- */

/* One JSON call to the lifecycle API: path below /v1, body may be NULL.
 * Retries GET and DELETE on 429/502/503/504 and dropped connections. On
 * success *out holds the parsed reply (NULL for an empty body) and *status
 * the HTTP status; a status not in ok_statuses (zero-terminated) is an error
 * unless tolerate_404 and it is 404. osb_api uses request_timeout. */
int osb_api_call(struct osb_ctx *c, const char *method, const char *path, json_t *body,
                 long timeout_s, const long *ok_statuses, int tolerate_404, long *status,
                 json_t **out, sbx_error_t **err);
int osb_api(struct osb_ctx *c, const char *method, const char *path, json_t *body,
            const long *ok_statuses, int tolerate_404, long *status, json_t **out,
            sbx_error_t **err);

void osb_sleep_ms(long ms);
/* Sandbox ids go into URL paths: [A-Za-z0-9._-], at most 128 bytes. */
int osb_id_check(struct osb_ctx *c, const char *id, sbx_error_t **err);

void osb_box_free(struct osb_box *b);
/* Takes ownership of b; replaces a box of the same id. */
void osb_box_put(struct osb_ctx *c, struct osb_box *b);
void osb_box_drop(struct osb_ctx *c, const char *id);
/* Fills b->execd and b->headers from GET /sandboxes/{id}/endpoints/44772. */
int osb_box_endpoint(struct osb_ctx *c, struct osb_box *b, sbx_error_t **err);
/* expiresAt and the sbx.deadline label of a Sandbox object. */
void osb_box_times_from(struct osb_box *b, json_t *sandbox);

/* The known sandbox `id` (looked up and cached if this process has not seen
 * it); returns copies of its execd base and headers. */
int osb_box_get(struct osb_ctx *c, const char *id, char **execd, char ***headers,
                sbx_error_t **err);
/* Renews the expiration when it is near and the deadline allows. Errors are
 * logged, not returned: the exec goes on. */
void osb_box_maybe_renew(struct osb_ctx *c, const char *id);
void osb_strv_free(char **v);

/* --- execd.c ------------------------------------------------------------- */

int osb_execd_wait_ready(struct osb_ctx *c, const char *execd, char *const *headers,
                         sbx_error_t **err);
int osb_execd_exec(struct osb_ctx *c, const char *sandbox_id, const struct sbx_exec_spec *spec,
                   struct sbx_exec_ctl *ctl, int *exit_status, sbx_error_t **err);

#endif
