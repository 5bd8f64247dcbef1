/* store.h - the runner's durable state: SQLite (WAL, synchronous=FULL) on one
 * box, or PostgreSQL shared by a fleet of boxes (docs/runner.md, "Several
 * boxes"); the same calls and the same rules on both (store/db.h).
 *
 * Jobs (the queue and the evidence records) and tasks (one sandbox each).
 * Every call is one transaction: when it returns 0 the change survives a
 * `kill -9` of the daemon and a power cut. Secrets never come here: a job
 * keeps its credential lease ids only.
 *
 * One struct sbx_store is one connection: use it from one thread at a time
 * (the daemon's loop thread). Several processes may open the same file; the
 * busy timeout (5 s) serialises them.
 *
 * Times are milliseconds since the Unix epoch (0 = not yet); JSON records
 * carry seconds as numbers (docs/architecture.md, Units).
 */
#ifndef SBX_STORE_STORE_H
#define SBX_STORE_STORE_H

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

#include "sbx/sbx_provider.h"
#include "util/error.h"

enum sbx_job_state {
    SBX_JOB_QUEUED = 0,
    SBX_JOB_RUNNING,
    SBX_JOB_FINISHED,
    SBX_JOB_CANCELLED,
    SBX_JOB_INTERRUPTED,
};

const char *sbx_job_state_name(enum sbx_job_state st);
/* name -> state; -1 when unknown */
int sbx_job_state_parse(const char *name);

/* A job record. Every string may be NULL unless said otherwise. In records
 * returned by the store, everything is owned by the record: free it with
 * sbx_job_rec_clear(). */
struct sbx_job_rec {
    char *id;       /* required: 1-63 of [A-Za-z0-9._:-] */
    char *task;     /* the task (sandbox) the job runs in; NULL: id */
    char *pool;     /* required: "ci" | "agent" */
    char *cls;      /* required: "light" | "heavy" */
    json_t *argv;   /* required: non-empty array of strings */
    json_t *labels; /* object of string values, or NULL */
    /* The command's variables: object NAME -> string value, or NULL (none).
     * Names follow util/envname.h. Stored with the job (they are not secrets:
     * those come from credential leases); JSON records show the names only. */
    json_t *env;
    char *worktree; /* resolved below runner.worktree_roots at submit */
    char *provider;
    char *image;
    /* The API client that submitted it (docs/api.md, "Clients and scopes"):
     * "local" for the unix socket; "" for jobs from before clients. */
    char *client;
    struct sbx_limits limits;
    enum sbx_job_state state;
    int64_t queued_at, granted_at, ready_at, finished_at; /* ms */
    int has_exit_status;
    int exit_status;
    char *reason;
    int64_t egress_allowed, egress_denied;
    char **leases; /* credential lease ids, never values */
    size_t n_leases;
    int64_t seq;       /* submit order, set by the store */
    json_t *isolation; /* (added) {"isolation", "unenforced"} once the task ran, or NULL */
    char *exec_path;   /* (added) "agent" or "engine" once the command ran, or NULL */
    /* (added) A fleet (runner.database): the box that claimed it (NULL: none
     * yet, or one box on SQLite) and the claim's fencing token (0: none). */
    char *box;
    int64_t token;
};

void sbx_job_rec_clear(struct sbx_job_rec *rec);
/* The record as docs/architecture.md "Records": id, task, pool, class, provider, image,
 * state, limits, created_at, started_at (slot granted), ended_at,
 * exit_status, reason, egress {allowed, denied}, credential_leases; plus
 * argv, labels, worktree, env_names (the names of env, never the values) and
 * timings {queued_at, granted_at, ready_at, finished_at}. A new reference. */
json_t *sbx_job_rec_to_json(const struct sbx_job_rec *rec);

enum sbx_task_state {
    SBX_TASK_STARTING = 0, /* sandbox being created */
    SBX_TASK_READY,        /* sandbox up; execs may run */
    SBX_TASK_ENDED,
    SBX_TASK_INTERRUPTED,
};

const char *sbx_task_state_name(enum sbx_task_state st);

struct sbx_task_rec {
    char *id;         /* required */
    char *sandbox_id; /* the provider's id, once created */
    char *provider;
    char *pool;
    enum sbx_task_state state;
    int in_flight;                               /* an exec is running */
    int64_t created_at, last_activity, ended_at; /* ms */
    char *reason;
};

void sbx_task_rec_clear(struct sbx_task_rec *rec);

struct sbx_store;

/* Opens (creating if needed) the database at path, in WAL mode with a busy
 * timeout and the schema in place. A path that starts with postgresql://
 * (or postgres://) is a PostgreSQL DSN: see sbx_store_open_ex. */
struct sbx_store *sbx_store_open(const char *path, sbx_error_t **err);
/* (added) As sbx_store_open; for a DSN the password comes from the environment
 * variable named password_env (NULL: none, or libpq's own means such as
 * ~/.pgpass); a DSN that holds a password itself is refused. A database that
 * cannot be reached, refuses the login, or holds a schema of another version
 * is SBX_E_CONFIG (exit 2 at start) with one line naming the DSN. */
struct sbx_store *sbx_store_open_ex(const char *path, const char *password_env, sbx_error_t **err);
/* (added) The limits of every PostgreSQL connection opened after this call
 * (docs/runner.md, "A slow or silent database"): statement_timeout
 * (timeout_ms, also each call's deadline on the client side, plus 1 s), and
 * TCP keepalives (probes after keepalive_s idle, every third of it, 3 lost
 * probes end the connection; also TCP_USER_TIMEOUT). 0 keeps a default (5 s,
 * 10 s). Set once at start, before any open. */
void sbx_store_pg_limits(int timeout_ms, int keepalive_s);
/* (added) The client-side deadline of one PostgreSQL call, ms. */
int sbx_store_pg_deadline_ms(void);
/* (added) A gate shared by connections and the thread that probes the
 * database: down_since (monotonic ms, 0 open) set when a call passed its
 * deadline; a connection with a closed gate fails every call at once
 * (sbx_store_down is 1) until the probe finds the database answering again
 * and opens it. The loop thread's connection has one so that it never waits
 * on a database already known to be stalled. */
struct sbx_store_gate {
    int64_t down_since; /* atomic: __atomic builtins */
};
void sbx_store_set_gate(struct sbx_store *st, struct sbx_store_gate *g);
int64_t sbx_store_gate_down(const struct sbx_store_gate *g);
void sbx_store_gate_set(struct sbx_store_gate *g, int down);
/* (added) 1 when location is a PostgreSQL DSN. */
int sbx_store_location_is_pg(const char *location);
void sbx_store_close(struct sbx_store *st);
/* (added) 1 when the connection can serve another caller as it is: connected
 * (on PostgreSQL, what the server sent meanwhile is read first, so a restart
 * of the server shows), and no transaction left open. A pool of connections keeps only those. */
int sbx_store_reusable(struct sbx_store *st);

/* Jobs. */
/* Accepts a new job: state queued; queued_at 0 means now. Validates every
 * field (one clear line on bad input); a duplicate id is EEXIST. (changed) In
 * the same transaction its task id gets its owner, the job's client, unless
 * it has one: a task of another client is EPERM and nothing is stored
 * (docs/runner.md, "Task ids"). */
int sbx_store_job_insert(struct sbx_store *st, const struct sbx_job_rec *job, sbx_error_t **err);
/* Loads a job into *out (cleared first). Unknown id: SBX_E_NOTFOUND. */
int sbx_store_job_get(struct sbx_store *st, const char *id, struct sbx_job_rec *out,
                      sbx_error_t **err);
/* Jobs in a state (or all when state < 0), in submit order; *out is an array
 * of *n records, freed with sbx_job_rec_free_array(). */
int sbx_store_job_list(struct sbx_store *st, int state, struct sbx_job_rec **out, size_t *n,
                       sbx_error_t **err);
void sbx_job_rec_free_array(struct sbx_job_rec *recs, size_t n);
/* (added) A page of jobs for GET /v1/jobs, newest first (list.c). Each
 * filter is optional: state < 0, pool/client NULL, since 0 (ms, queued at or
 * after), before_seq 0 (paging: only jobs submitted before that seq). */
#define SBX_STORE_PAGE_MAX 1000
struct sbx_job_filter {
    int state;
    const char *pool;
    const char *client;
    int64_t since;
    int64_t before_seq;
    size_t limit; /* 1..SBX_STORE_PAGE_MAX */
};
int sbx_store_job_page(struct sbx_store *st, const struct sbx_job_filter *f,
                       struct sbx_job_rec **out, size_t *n, sbx_error_t **err);
/* (added) Task ids are owned (store/owner.c; docs/runner.md, "Task ids").
 * The client that owns task: 1 and out, 0 none yet, -1 error. */
int sbx_store_task_owner(struct sbx_store *st, const char *task, char *out, size_t len,
                         sbx_error_t **err);
/* (added) A job of client may use a task of owner: the same client, or the
 * unix socket's "local" for a task from before clients (owner ""). */
int sbx_store_owner_ok(const char *owner, const char *client);
/* (added) What holds task besides job: another job of it queued (claimed or
 * not) or running, anywhere, or its live sandbox (starting or ready). 1 and
 * *out, 0 nothing, -1 error. */
struct sbx_task_busy {
    char job[64]; /* the other job ("" for a live task with none) */
    char box[64]; /* the box that holds it ("": none, or one box) */
    int queued;   /* that job is queued */
    int live;     /* the task's sandbox is starting or ready */
};
int sbx_store_task_busy(struct sbx_store *st, const char *task, const char *job,
                        struct sbx_task_busy *out, sbx_error_t **err);
/* (added) The database answers a read (GET /healthz). */
int sbx_store_ping(struct sbx_store *st, sbx_error_t **err);
/* (added) How a job ends: finished, cancelled or interrupted. exit_status < 0:
 * none; reason may be NULL; at 0: now. */
struct sbx_job_end {
    enum sbx_job_state state;
    int exit_status;
    const char *reason;
    int64_t egress_allowed, egress_denied;
    int64_t at;
};

/* (added) A job's transitions (move.c). */
enum sbx_job_step {
    SBX_JOB_STEP_GRANTED, /* queued -> running: a slot granted */
    SBX_JOB_STEP_READY,   /* running: its sandbox is ready (task, provider, image: NULL keeps) */
    SBX_JOB_STEP_END,     /* queued|running -> end.state */
};

struct sbx_job_move {
    const char *id;
    /* > 0: the write is fenced: it happens only while the job still carries
     * this claim token, else ESTALE (another box took it over); 0: unfenced
     * (one box on SQLite, or a box's own recovery) */
    int64_t token;
    enum sbx_job_step step;
    int64_t at; /* ms; 0 = now */
    const char *task, *provider, *image;
    struct sbx_job_end end;
};

/* (added) The one transition function: a job in another state is EINVAL
 * ("job X is S, not W"), an unknown one SBX_E_NOTFOUND, a fenced write whose
 * token moved on ESTALE; its record is kept as it is in each case. */
int sbx_store_job_move(struct sbx_store *st, const struct sbx_job_move *m, sbx_error_t **err);
/* queued -> running, slot granted at `at` (ms, 0 = now). */
int sbx_store_job_granted(struct sbx_store *st, const char *id, int64_t at, sbx_error_t **err);
/* running: the sandbox is ready (task id, provider, image may be NULL to keep). */
int sbx_store_job_ready(struct sbx_store *st, const char *id, const char *task,
                        const char *provider, const char *image, int64_t at, sbx_error_t **err);
/* The job's credential lease ids (replaces the list). */
/* (added) The isolation of the job's task: {"isolation": "sandbox"|"partial"|"none",
 * "unenforced": [...]} (sandbox/caps.h), shown in the job's record. */
int sbx_store_job_set_isolation(struct sbx_store *st, const char *id, json_t *isolation,
                                sbx_error_t **err);
/* (added) How the job's command ran: "agent" (the sandbox's exec agent) or "engine". */
int sbx_store_job_set_exec_path(struct sbx_store *st, const char *id, const char *path,
                                sbx_error_t **err);
int sbx_store_job_set_leases(struct sbx_store *st, const char *id, const char *const *leases,
                             size_t n, sbx_error_t **err);
/* (changed) queued|running -> end->state (unfenced sbx_store_job_move). A job
 * already ended is EINVAL (its record is kept). */
int sbx_store_job_end(struct sbx_store *st, const char *id, const struct sbx_job_end *end,
                      sbx_error_t **err);

/* (added) Boxes of a fleet on PostgreSQL (fleet.c; docs/runner.md, "Several
 * boxes"). Each call is EINVAL on SQLite. */
struct sbx_box_rec {
    char *id;
    json_t *pools;                              /* ["ci", "agent"] it serves */
    json_t *capacity;                           /* {"cpus", "memory"} it measured */
    char *api;                                  /* its API address (runner.listen) */
    char *version;                              /* its sbx version */
    int64_t started_at, heartbeat, lease_until; /* ms; lease_until 0: reaped */
    int64_t epoch;                              /* bumped by each registration and by its reap */
};
void sbx_box_rec_clear(struct sbx_box_rec *b);
void sbx_box_rec_free_array(struct sbx_box_rec *b, size_t n);
/* Registers (or re-registers) a box with a lease of lease_ms from now; *epoch
 * is what its renewals must show. */
int sbx_store_box_register(struct sbx_store *st, const struct sbx_box_rec *b, int64_t lease_ms,
                           int64_t *epoch, sbx_error_t **err);
/* Renews the lease; ESTALE when another box reaped this one meanwhile. */
int sbx_store_box_renew(struct sbx_store *st, const char *id, int64_t epoch, int64_t lease_ms,
                        sbx_error_t **err);
int sbx_store_box_list(struct sbx_store *st, struct sbx_box_rec **out, size_t *n,
                       sbx_error_t **err);
/* (added) Which box holds a job (task 0: any state, its output stays there)
 * or a live task (task 1: starting or ready), its API address and whether
 * its lease runs (store/where.c). 1 found on a box, 0 none (not found, not
 * claimed, or SQLite: one box), -1 error. */
struct sbx_store_owner {
    char *box, *api; /* api NULL: the box row is gone */
    int64_t lease_until;
    int alive;
};
int sbx_store_where(struct sbx_store *st, int task, const char *id, struct sbx_store_owner *out,
                    sbx_error_t **err);
void sbx_store_owner_clear(struct sbx_store_owner *o);
/* (added) A command that runs at once in a task of this box (no claim):
 * its record names this box (sbx_store_set_box), so that the other boxes
 * find it. 0 on SQLite. */
int sbx_store_job_own(struct sbx_store *st, const char *id, sbx_error_t **err);
/* (added) 1 when the store is PostgreSQL and its connection is down now (the
 * last statement could not reach the server): the API answers 503. */
int sbx_store_down(struct sbx_store *st);
/* Reaps every box whose lease lapsed before now (ms, 0 = now), in one
 * transaction: its claimed queued jobs go back to the queue, its running jobs
 * end interrupted "box lost" and its live tasks end interrupted; each such job
 * takes a new token (the lost box's fenced writes fail). */
struct sbx_reap {
    size_t boxes, requeued, interrupted, tasks;
};
int sbx_store_reap(struct sbx_store *st, int64_t now, struct sbx_reap *out, sbx_error_t **err);
/* Decides a claim candidate (oldest first): 1 take it, 0 pass over it (a
 * heavy job parked behind the box's busy heavy slot), -1 stop (FIFO: the
 * oldest job waits for room, nothing younger passes it). */
typedef int (*sbx_claim_fit_fn)(void *ctx, const struct sbx_job_rec *job);
/* Claims for box the oldest queued unclaimed job of pool that fit() takes:
 * sets its box and a new token from one sequence. (changed) In the same
 * transaction, under a lock of the task id: a job whose task another job
 * holds (claimed or running) or whose task is live is passed over, and a job
 * whose task belongs to another client ends cancelled (store/owner.c). 1 and *out (cleared first,
 * with box and token), 0 nothing to claim, -1 error. */
int sbx_store_claim(struct sbx_store *st, const char *box, const char *pool, sbx_claim_fit_fn fit,
                    void *ctx, struct sbx_job_rec *out, sbx_error_t **err);
/* (added) The fleet's wake-up: a submit NOTIFYs; a box LISTENs on its own
 * connection (sbx_store_listen returns the socket to poll) and, when it turns
 * readable, sbx_store_drain reads what came (>= 0 notifications). */
int sbx_store_notify(struct sbx_store *st, sbx_error_t **err);
int sbx_store_listen(struct sbx_store *st, sbx_error_t **err);
int sbx_store_drain(struct sbx_store *st, sbx_error_t **err);
/* (added) Cancels a job of the shared queue no box has claimed; EBUSY naming
 * the box that holds it, EINVAL when it already ended. */
int sbx_store_job_cancel_queued(struct sbx_store *st, const char *id, const char *reason,
                                sbx_error_t **err);
/* (added) The fleet for `sbx queue` and /metrics: {"boxes": [{id, pools,
 * capacity, api, version, heartbeat_age (s), alive, epoch, holds: [{job,
 * pool, class, state: claimed|running, held_for}]}], "queue": {POOL:
 * {queued, oldest_wait}}} of the shared queue (jobs no box claimed). */
json_t *sbx_store_fleet_json(struct sbx_store *st, sbx_error_t **err);
/* (added) How many live boxes serve pool (their lease runs). */
int sbx_store_pool_boxes(struct sbx_store *st, const char *pool, sbx_error_t **err);
/* ---- (added) the fleet autoscaler's shared rows (store/scale.c) ----
 * One leader decides for the fleet: the box whose connection holds the
 * session advisory lock SBX_LEADER_LOCK (docs/runner.md, "Several boxes"). */
#define SBX_LEADER_LOCK 0x73627820
/* 1: this connection holds the leader lock (it took it now, recording box as
 * the leader in fleet_leader, or held it already), 0: another connection
 * holds it (when fleet_leader names a box whose lease lapsed, that holder's
 * backend is terminated, which frees the lock for the next try), -1: the
 * database failed. A connection opened again lost the lock: this takes it
 * again if free. */
int sbx_store_leader_hold(struct sbx_store *st, const char *box, sbx_error_t **err);
/* A queued job whose wait passed the fleet's alert_after, alerted once. */
struct sbx_fleet_alert {
    char id[64], task[64], pool[16], cls[16];
    int64_t queued_at; /* ms */
};
/* In one transaction under the fleet's lock: the queued jobs (oldest first)
 * enqueued at or before `before` that no leader alerted yet, up to max, each
 * recorded as alerted by `leader`: every job is alerted once in the fleet. */
int sbx_store_fleet_alerts(struct sbx_store *st, int64_t before, const char *leader,
                           struct sbx_fleet_alert *out, size_t max, size_t *n, sbx_error_t **err);
/* What a scale decision reads from the shared rows, and what it writes. */
struct sbx_fleet_scale {
    /* read (under the lock) */
    int64_t now;
    int64_t queued, heavy; /* the pool's queued jobs (claimed or not) */
    int64_t oldest;        /* queued_at of the oldest, 0 if none */
    int live;              /* boxes whose lease runs */
    int pool_live;         /* those serving the pool */
    int promised;          /* paid boxes after the last scale-up younger than window */
    int scaled;            /* 1: last_scale_up is the pool's last scale-up */
    int64_t last_scale_up;
    int64_t scale_ups;             /* scale-ups recorded in the fleet */
    int64_t spend_at;              /* ms; == now when no spend row exists yet */
    double spend_day, spend_month; /* in: recorded; out: accrued to now */
    /* written by decide */
    int up;              /* 1: record a scale-up */
    int current, wanted; /* boxes of the pool before and wanted */
    int paid;            /* boxes paid for once it is done */
    char reason[200];
};
/* decide reads the fields above and sets spend_*, up, current, wanted, paid
 * and reason; it must not call the store. */
typedef void (*sbx_fleet_decide_fn)(void *ctx, struct sbx_fleet_scale *fs);
/* In one transaction under the fleet's lock (pg_advisory_xact_lock): reads the
 * pool's queue, the live boxes, the pool's last scale-up and the spend row,
 * calls decide, writes the spend and, when decide says up, the scale-up row.
 * So two connections never both record a scale-up on the same rows: the
 * second sees the first's row. window_ms: how long a scale-up's boxes count
 * as paid before they join (runner.cooldown). 1 up, 0 not, -1 error. */
int sbx_store_fleet_scale(struct sbx_store *st, const char *pool, const char *leader,
                          int64_t window_ms, sbx_fleet_decide_fn decide, void *ctx,
                          struct sbx_fleet_scale *fs, sbx_error_t **err);
/* (added) The box this connection writes for: task rows carry it and, on
 * PostgreSQL, recovery touches only its rows. NULL (SQLite, one box): all. */
void sbx_store_set_box(struct sbx_store *st, const char *box);

/* (added) Several writes as one transaction, one commit (the runner's job
 * path, docs/runner.md "Store and recovery"): between batch_begin and
 * batch_end each write joins it. relaxed: the commit need not reach the disk
 * before it returns (SQLite synchronous = NORMAL under WAL, PostgreSQL
 * synchronous_commit off for it): still atomic, and never lost when only the
 * process dies; lost only with the machine, and then only with the writes
 * after it. Use it only for writes that recovery handles when missing. On a
 * failed begin nothing is open; batch_end commits (and, after relaxed,
 * restores full durability for the connection's next writes). */
int sbx_store_batch_begin(struct sbx_store *st, int relaxed, sbx_error_t **err);
int sbx_store_batch_end(struct sbx_store *st, int relaxed, sbx_error_t **err);
/* (added) Rolls the batch back: none of its writes stay. */
void sbx_store_batch_abort(struct sbx_store *st, int relaxed);

/* Tasks. */
/* Creates or replaces a task row. */
int sbx_store_task_put(struct sbx_store *st, const struct sbx_task_rec *task, sbx_error_t **err);
int sbx_store_task_get(struct sbx_store *st, const char *id, struct sbx_task_rec *out,
                       sbx_error_t **err);
/* An exec starts (in_flight = 1) or ends (0) in the task; both are activity. */
int sbx_store_task_exec(struct sbx_store *st, const char *id, int in_flight, int64_t at,
                        sbx_error_t **err);
int sbx_store_task_end(struct sbx_store *st, const char *id, enum sbx_task_state state,
                       const char *reason, int64_t at, sbx_error_t **err);

/* Recovery at daemon start. */
struct sbx_recovered_task {
    char *task_id, *sandbox_id, *provider, *job_id; /* job_id may be NULL */
};

struct sbx_recovery {
    struct sbx_job_rec *queued; /* stay queued: re-submit, in this order */
    size_t n_queued;
    struct sbx_job_rec *adopt_jobs; /* running jobs whose task is re-adopted */
    size_t n_adopt_jobs;
    struct sbx_recovered_task *adopt; /* tasks to re-adopt (sandbox present, no exec) */
    size_t n_adopt;
    struct sbx_recovered_task *cleanup; /* sandboxes the caller must destroy */
    size_t n_cleanup;
    size_t n_interrupted; /* jobs marked interrupted */
};

/* Asks whether the sandbox of a task still exists (provider list). Returns
 * 1 present, 0 gone, -1 unknown (treated as gone; its sandbox is cleaned). */
typedef int (*sbx_sandbox_present_fn)(void *ctx, const char *provider, const char *sandbox_id);

/* In one transaction: queued jobs stay queued (on a fleet box, sbx_store_set_box
 * on PostgreSQL: only its own tasks and jobs are looked at, and the jobs it had
 * claimed but not started go back to the shared queue); a task with an exec in flight
 * is interrupted and its running jobs end `interrupted: runner restarted`
 * (its sandbox goes to cleanup); a task with no exec in flight whose sandbox
 * is present is re-adopted (its running jobs stay running); a task whose
 * sandbox is gone ends interrupted and so do its jobs; a running job with no
 * ready task (the sandbox was being created) is interrupted and its task, if
 * any, goes to cleanup. present may be NULL (every sandbox counts as gone).
 * Free *out with sbx_recovery_clear(). */
int sbx_store_recover(struct sbx_store *st, sbx_sandbox_present_fn present, void *ctx,
                      struct sbx_recovery *out, sbx_error_t **err);
void sbx_recovery_clear(struct sbx_recovery *r);

#endif
