/* egress.h - the host's egress proxy: HTTP CONNECT and absolute-URI HTTP, one unix
 * socket per sandbox, deny by default, one JSON log line per connection
 * (docs/egress.md).
 *
 * Threads: an egress made by sbx_egress_start runs its own thread and event loop;
 * sbx_egress_add, _remove, _summary and _stop may then be called from any thread
 * (they run on the loop thread and wait for it). An egress made by
 * sbx_egress_attach runs on the caller's event_base; call everything from the thread
 * that runs that loop. */
#ifndef SBX_EGRESS_EGRESS_H
#define SBX_EGRESS_EGRESS_H

#include <stdint.h>

#include "config/config.h"
#include "util/error.h"

#define SBX_EGRESS_SOCKET "proxy.sock"

/* Inside a sandbox (docs/egress.md, "What the Docker driver does"). */
#define SBX_EGRESS_MOUNT "/run/sbx-egress"      /* the per-sandbox dir, read-only */
#define SBX_EGRESS_RELAY_MOUNT "/run/sbx-relay" /* the relay binary, read-only */
#define SBX_EGRESS_PROXY_URL "http://127.0.0.1:3128"

/* The proxy variables a sandbox gets, NULL-terminated ("HTTP_PROXY=...", ...). */
extern const char *const sbx_egress_sandbox_env[];

/* Path of the sbx-relay binary on the host: $SBX_RELAY, else next to the running
 * binary (build tree: <dir>/libexec/sbx-relay; installed: <dir>/../libexec/sbx/
 * sbx-relay), else the install path. Caller frees. */
char *sbx_egress_relay_path(sbx_error_t **err);

struct event_base;
struct sbx_egress;

struct sbx_egress_summary {
    uint64_t allowed;    /* connections the rules allowed */
    uint64_t denied;     /* connections refused (rules, bad requests, timeouts) */
    uint64_t log_errors; /* log lines that could not be written (whole proxy) */
    uint64_t open;       /* connections open now (not yet logged) */
    uint64_t refused;    /* refused over a budget or for lack of descriptors/memory */
    uint64_t reserved;   /* bytes of egress.max_buffer its open tunnels reserve now */
    uint64_t held;       /* bytes the proxy holds for it now (pipes, buffers, queues) */
};

/* Starts the proxy on its own thread. Uses cfg->egress (log, hosts, timeouts); the
 * log file is opened here, and failure to open it is an error. */
struct sbx_egress *sbx_egress_start(const struct sbx_config *cfg, sbx_error_t **err);
/* The same with the log file given (embedded tasks default it to
 * <state>/egress.log when egress.log is not set). */
struct sbx_egress *sbx_egress_start_log(const struct sbx_config *cfg, const char *log,
                                        sbx_error_t **err);
/* The same on an existing event_base (e.g. `sbx serve`'s loop). */
struct sbx_egress *sbx_egress_attach(struct event_base *base, const struct sbx_config *cfg,
                                     sbx_error_t **err);

/* Creates DIR (mode 0755, if missing) and DIR/proxy.sock (mode 0666) for one sandbox;
 * connections on that socket are checked against allow_rules (NULL-terminated, see
 * docs/egress.md; NULL or empty denies everything) and logged with job, task and
 * sandbox (any may be NULL). */
int sbx_egress_add(struct sbx_egress *e, const char *dir, const char *job, const char *task,
                   const char *sandbox, const char *const *allow_rules, sbx_error_t **err);
/* The job the sandbox at DIR now runs (a kept task runs one job after another):
 * connections logged from now on carry it. -1 if DIR is unknown. */
int sbx_egress_set_job(struct sbx_egress *e, const char *dir, const char *job);
/* (added) The sandbox at DIR now belongs to another task (a warm sandbox
 * claimed, docs/runner.md "Warm pool"): its job, task and allow rules are
 * replaced, its counts start again, open connections are closed. -1 with
 * *err if DIR is unknown or a rule does not parse (the old rules stay). */
int sbx_egress_rebind(struct sbx_egress *e, const char *dir, const char *job, const char *task,
                      const char *const *allow_rules, sbx_error_t **err);
/* (added) A running task's egress changed (`sbx task allow|deny`, docs/egress.md):
 * the sandbox at DIR checks its next connections against allow_rules; open
 * connections, names and counts stay. -1 with *err if DIR is unknown or a rule does
 * not parse (the old rules stay). */
int sbx_egress_set_rules(struct sbx_egress *e, const char *dir, const char *const *allow_rules,
                         sbx_error_t **err);
/* Counters of the sandbox at DIR so far. -1 if DIR is unknown. */
int sbx_egress_summary(struct sbx_egress *e, const char *dir, struct sbx_egress_summary *out);
/* Closes the sandbox's socket (unlinks DIR/proxy.sock, leaves DIR) and its open
 * connections (each logged); fills out (may be NULL). -1 if DIR is unknown. */
int sbx_egress_remove(struct sbx_egress *e, const char *dir, struct sbx_egress_summary *out);
/* Removes every sandbox, stops the thread (if any) and frees e. NULL is fine. */
void sbx_egress_stop(struct sbx_egress *e);

#endif
