/* runner.h - `sbx serve`: the runner daemon (issue 7, docs/runner.md).
 *
 * One libevent loop owns the HTTP API (unix socket, optionally TCP with a
 * bearer token), the scheduler (sched/) and the store (store/), and the
 * timers (alerts, autoscaler, task ends). Each running job has a worker
 * thread that calls sbx_task_start/exec/end; workers reach the loop's data
 * only under the runner's lock or through a queued message. */
#ifndef SBX_RUNNER_RUNNER_H
#define SBX_RUNNER_RUNNER_H

#include "config/config.h"
#include "runner/endpoint.h"
#include "sched/sched.h"
#include "sbx/sbx_host.h"
#include "util/error.h"

/* Request bodies larger than this are refused with 413. */
#define SBX_RUNNER_MAX_BODY (1u << 20)
/* Before a request reaches the API (docs/api.md, "Limits before
 * authentication"): the request line and headers together (larger: 413 and
 * the connection closed), header lines (more: 431), and seconds from accepting
 * a connection to its first complete request (then the connection is shut). */
#define SBX_RUNNER_MAX_HEAD 16384
#define SBX_RUNNER_MAX_HEADERS 64
#define SBX_RUNNER_HEADER_TIMEOUT_S 10
/* Connections of one listener still sending their first request (each may
 * hold a head and a body): one more is closed at once, logged. */
#define SBX_RUNNER_MAX_PENDING 128
/* Output kept per job (the last bytes). */
#define SBX_RUNNER_MAX_OUTPUT (1u << 20)

struct sbx_runner_opts {
    const struct sbx_config *cfg; /* required; must outlive the runner */
    const char *plugin_dir;       /* required */
    /* Box capacity; NULL: measured. */
    const struct sbx_box_capacity *capacity;
    sbx_clock_fn clock; /* NULL: real time (the scheduler's clock) */
    void *clock_ctx;
    int alert_interval_ms;  /* how often due alerts are asked; 0: 1000 */
    int health_interval_ms; /* (added) how often the engine is probed; 0: 5000 */
    /* (added, issue 31) jobs' tasks also take the box's slot lock in the state
     * directory (sbx_task_opts.slot_lock), waiting with its lines on stderr:
     * a private runner (private.h) beside other sbx processes of the box */
    int slot_lock;
    /* (added, issue 31) a runner for one client's runs (the private runner of
     * `sbx run`, private.h), started for each run, so its start is lighter:
     * no engine health probe (GET /healthz says "the engine probe is not
     * running"), no image check (a missing image fails its task's create, as an
     * embedded `sbx run` always did; nothing is pulled), its first periodic
     * orphan sweep one runner.orphan_sweep after its start, not at once; its
     * small-box lines (smallbox.c) at debug level, not warnings; its recovery
     * opens no provider and sweeps nothing: its jobs' tasks reap gone owners
     * in their start (sbx_task_opts.no_reap 0), as an embedded start did, their
     * task directories too. Every check a job gets is the same. */
    int one_shot;
    /* (added, issue 31) a job's output waits for its followers instead of
     * dropping: its command is held (as a full pipe holds it) while more than
     * SBX_RUNNER_MAX_OUTPUT of its output is not yet written to every follow
     * stream, or to the first one to come; a follower that goes stops the
     * wait. For a runner whose client is the user's terminal (`sbx run`'s
     * private runner): byte for byte, bounded memory. */
    int output_wait;
};

struct sbx_runner;

/* Opens the store, recovers (docs/runner.md "Store and recovery"), creates
 * the scheduler and binds the listeners. Nothing runs until sbx_runner_run. */
struct sbx_runner *sbx_runner_create(const struct sbx_runner_opts *opts, sbx_error_t **err);
/* Runs the loop until sbx_runner_stop (SIGINT/SIGTERM are the caller's). */
int sbx_runner_run(struct sbx_runner *r, sbx_error_t **err);
/* From any thread or a signal-safe context through a flag: asks the loop to
 * stop. Running jobs are left running in their sandboxes only if the process
 * dies; a clean stop cancels them with reason "runner stopped". */
void sbx_runner_stop(struct sbx_runner *r);
/* Loads the policy dir again (SIGHUP): an invalid new policy is refused with
 * the error, and the old one stays in force. Any thread. */
int sbx_runner_reload_policy(struct sbx_runner *r, sbx_error_t **err);
/* (added) How many times the alert timer has run (every alert_interval_ms):
 * a test waits for ticks instead of sleeping. Any thread. */
unsigned long sbx_runner_alert_ticks(struct sbx_runner *r);
void sbx_runner_destroy(struct sbx_runner *r);

/* Client side: one request to the runner over its unix socket (or TCP with
 * the bearer token from runner.token_env). body may be NULL. A runner that
 * does not answer is SBX_E_ENGINE with "runner not reachable at ...". A 4xx
 * or 5xx reply is an error carrying the runner's message; *resp is filled
 * only on 2xx. on_data streams the body (resp->body stays empty). */
int sbx_runner_call(const struct sbx_config *cfg, const char *method, const char *path,
                    const char *body, int (*on_data)(void *ud, const char *data, size_t len),
                    void *ud, struct sbx_http_response *resp, sbx_error_t **err);
/* The same; when *cancel becomes non-zero (a signal handler may set it) the call
 * stops soon after (libcurl looks at it about once a second when nothing flows)
 * with SBX_E_CANCELLED. */
int sbx_runner_call_cancel(const struct sbx_config *cfg, const char *method, const char *path,
                           const char *body, int (*on_data)(void *ud, const char *data, size_t len),
                           void *ud, const volatile int *cancel, struct sbx_http_response *resp,
                           sbx_error_t **err);

/* (added, issue 30) The same with a body of len bytes (NUL bytes allowed) and its
 * Content-Type (NULL: application/json): `sbx cp` through the runner. */
int sbx_runner_call_body(const struct sbx_config *cfg, const char *method, const char *path,
                         const char *body, size_t len, const char *ctype,
                         int (*on_data)(void *ud, const char *data, size_t len), void *ud,
                         struct sbx_http_response *resp, sbx_error_t **err);

/* Follows a job's output until it ends (GET /v1/jobs/ID/output?follow=1&
 * frames=1, docs/api.md) with stdout (1) and stderr (2) kept apart: each piece
 * goes to on_output (return non-zero to stop). *total (may be NULL) gets the
 * number of output bytes received; cancel as sbx_runner_call_cancel (may be
 * NULL). Errors as sbx_runner_call. */
int sbx_runner_follow(const struct sbx_config *cfg, const char *job_id,
                      int (*on_output)(void *ud, int stream, const char *data, size_t len),
                      void *ud, const volatile int *cancel, size_t *total, sbx_error_t **err);
/* The same with follow 0: the output kept so far, returning at once even while
 * the job runs (sbx mcp's sandbox_job); follow 1 is sbx_runner_follow. */
int sbx_runner_output(const struct sbx_config *cfg, const char *job_id, int follow,
                      int (*on_output)(void *ud, int stream, const char *data, size_t len),
                      void *ud, const volatile int *cancel, size_t *total, sbx_error_t **err);

#endif
