/* runner_int.h - the runner's internals, shared by its files. */
#ifndef SBX_RUNNER_RUNNER_INT_H
#define SBX_RUNNER_RUNNER_INT_H

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <pthread.h>

#include "runner/rmetrics.h"
#include "runner/runner.h"
#include "sandbox/task.h"
#include "store/store.h"
#include "util/confine.h"

/* An API client (auth.c): who a request is, and what it may do. */
struct runner_client {
    char name[64];
    char *token; /* never logged */
    size_t token_len;
    unsigned scopes; /* enum sbx_scope */
};

/* A task in the runner: one sandbox, shared by the jobs that name it. */
enum rtask_state { RT_STARTING, RT_READY, RT_FAILED, RT_ENDING };

struct rtask {
    char id[SBX_SCHED_ID_MAX];
    char holder[SBX_SCHED_ID_MAX]; /* the job whose sched slot the task holds */
    char owner[64];                /* the client of the job that started it ("": unknown) */
    enum sbx_pool pool;
    int keep;               /* agent task: kept after its command */
    enum rtask_state state; /* under r->mu; changed by runner_task_move alone (jobstate.h) */
    int has_state;          /* 0: new, before its first move */
    char fail_reason[256];
    struct sbx_task *t; /* set once ready */
    int running;        /* jobs executing or waiting in it */
    int end_requested;
    enum sbx_job_result holder_result;
    struct rtask *next;
};

/* A job the runner knows in memory (queued, running, or recently ended). */
struct rjob {
    char id[SBX_SCHED_ID_MAX];
    char task[SBX_SCHED_ID_MAX];
    char owner[64]; /* the client that submitted it ("": from before clients) */
    enum sbx_pool pool;
    enum sbx_job_class cls;
    int cls_given; /* the request named the class (an override of the policy) */
    char **argv;
    char *worktree, *provider, *credentials;
    /* (added, issue 30) `from`: the snapshot id the request named, and its image
     * ref once checked (api_snap.c); NULL: the configured image */
    char *from, *image;
    json_t *env;   /* the command's variables (object NAME -> value), or NULL */
    int state;     /* enum sbx_job_state, under r->mu; changed by runner_job_move alone */
    int has_state; /* 0: new, before its first move (jobstate.h) */
    int cancel;    /* atomic: runner_job_cancel / runner_job_cancelled (jobstate.h) */
    int executing; /* exec in flight: slot is valid */
    int released;  /* loop only: no worker refers to it any more */
    int granting;  /* (added) loop only: its grant is with the store thread (runner.c) */
    struct sbx_exec_slot slot;
    struct rtask *rt;
    struct sbx_task *warm; /* (added) a warm sandbox taken at the grant, for the worker */
    /* output: the last SBX_RUNNER_MAX_OUTPUT bytes, at out + out_off (read them
     * with runner_output_bytes); total counts all. The allocation (out_cap)
     * grows to twice the maximum, so dropping old bytes moves the kept ones only
     * once per maximum appended: amortised O(1) per byte, however small the
     * pieces (out_moved counts what compaction copied). */
    char *out;
    size_t out_off;
    size_t out_cap;
    size_t out_len;
    size_t out_total;
    size_t out_moved;
    /* which stream each byte came from: runs of one stream, alternating
     * stdout/stderr; seg[i] is the absolute (out_total terms) start of run i,
     * runs before seg_head are gone; run 0 is stream seg_first (1 or 2) */
    size_t *seg;
    size_t n_seg, seg_head, seg_cap;
    int seg_first;
    int exit_status;
    /* (added) a fleet box's claim token: every store write about the job is
     * fenced by it (0: one box, unfenced); lost: the box lost it to a reap */
    int64_t token;
    int lost;                      /* under r->mu */
    struct rjob *next;             /* r->jobs, newest first */
    struct rjob *hnext;            /* r->buckets */
    struct runner_stream *streams; /* loop only */
};

struct runner_stream {
    struct evhttp_request *req;
    struct rjob *job;
    size_t sent; /* in out_total terms */
    int frames;  /* ?frames=1: stdout and stderr kept apart in frames */
    struct runner_stream *next;
};

/* A worker's message to the loop. */
enum rmsg_kind { RMSG_JOB_DONE, RMSG_TASK_ENDED, RMSG_OUTPUT };

struct rmsg {
    enum rmsg_kind kind;
    char id[SBX_SCHED_ID_MAX]; /* the job (RMSG_JOB_DONE, RMSG_OUTPUT) */
    struct rtask *rt;          /* (changed) RMSG_TASK_ENDED: the task itself, never its id */
    enum sbx_job_result result;
    struct rmsg *next;
};

struct runner_listener {
    struct sbx_runner *r;
    int tcp;
    /* connections still sending their first request (api_limits.c) */
    struct runner_conn_guard *guards;
    int n_guards;
    int over; /* the pending cap was hit (logged once until below it) */
    struct event *sweep;
};

struct sbx_runner {
    struct runner_listener lis[2]; /* unix, tcp */
    struct runner_fwd *fwds;       /* (added) forwards in flight (forward.c) */
    const struct sbx_config *cfg;
    char *plugin_dir;
    char *store_path;
    struct sbx_runner_endpoint ep;
    struct runner_client *clients; /* TCP clients (auth.c) */
    struct runner_client local;    /* (added) the unix socket's client (auth.c) */
    size_t n_clients;
    struct sbx_confine confine; /* runner.worktree_roots */
    struct event_base *base;
    struct evhttp *http_unix, *http_tcp;
    struct event *wake, *tick, *alert_ev;
    int alert_interval_ms;
    unsigned long alert_ticks; /* (added) alert timer runs done (atomic: sbx_runner_alert_ticks) */
    struct sbx_sched *sched;
    struct sbx_store *store;
    struct sbx_egress *egress; /* the box's egress proxy: every task's socket is on it */
    struct sbx_policy *policy; /* under mu; swapped by sbx_runner_reload_policy */
    char *policy_dir;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct rjob *jobs;
    size_t n_jobs;
#define RUNNER_BUCKETS 4096
    struct rjob *buckets[RUNNER_BUCKETS]; /* by id: O(1) lookups with long queues */
    struct rtask *tasks;
    struct rmsg *msgs, **msgs_tail;
    int workers;  /* threads alive */
    int stopping; /* under mu (the loop alone writes it, and reads it without) */

    struct runner_metrics metrics; /* (added) rmetrics.h */
    /* (added) limits.cpus/memory clamped per pool on a small box (runner.c) */
    double pool_cpus[SBX_POOL_COUNT];
    int64_t pool_memory[SBX_POOL_COUNT];
    struct runner_health *health;         /* (added) health.c */
    struct runner_storeprobe *storeprobe; /* (added) storeprobe.c */
    struct runner_sq *sq;                 /* (added) storeq.c: the store thread (fleet) */
    struct runner_fleet *fleet;           /* (added) fleet.c: NULL on SQLite (one box) */
    struct runner_status *status;         /* (added) status.c: the status page's sessions */
    struct runner_warm *warm;             /* (added) warm.c, under mu */
    struct runner_image *image;           /* (added) image_check.c: the image before work */
};

/* (added) image_check.c: the configured image is in the engine (pulled by
 * digest when missing) before the box grants or claims a job. ready: 1, else
 * 0 with what it waits for in why (may be NULL). */
int runner_image_start(struct sbx_runner *r, sbx_error_t **err);
int runner_image_ready(struct sbx_runner *r, char *why, size_t len);
void runner_image_free(struct sbx_runner *r);

/* runner.c */
struct rjob *runner_job_find(struct sbx_runner *r, const char *id);
/* Adds a job to the list and the table (caller holds r->mu or is the loop
 * before workers exist). */
void runner_job_link(struct sbx_runner *r, struct rjob *j);
/* The task of id on this box: at most one exists (runner_schedule refuses a
 * second, docs/runner.md "Task ids"). */
struct rtask *runner_task_find(struct sbx_runner *r, const char *id);
void runner_post(struct sbx_runner *r, enum rmsg_kind kind, const char *id,
                 enum sbx_job_result result);
/* (added) RMSG_TASK_ENDED for t: the loop removes that task, found by its
 * address (two tasks of one id never live on one box, and a message must
 * not meet the wrong one if they did). */
void runner_post_task_ended(struct sbx_runner *r, struct rtask *t, enum sbx_job_result result);
void runner_schedule(struct sbx_runner *r);
int64_t runner_now(struct sbx_runner *r);
int runner_cancel(struct sbx_runner *r, const char *id, sbx_error_t **err);
int runner_task_end(struct sbx_runner *r, const char *id, sbx_error_t **err);
void runner_job_free(struct rjob *j);
/* (added) Writes a job's end (fenced by token) on the store thread of a
 * fleet box, at once on one box; the loop does not wait for it. */
void runner_job_end_write(struct sbx_runner *r, const char *id, int64_t token,
                          enum sbx_job_state state, const char *why);
/* Drops the output of ended jobs past the newest 1000 (jobtab.c). Loop thread. */
void runner_trim_finished(struct sbx_runner *r);

/* worker.c */
static inline const char *runner_output_bytes(const struct rjob *j)
{
    return j->out + j->out_off;
}
int runner_worker_start(struct sbx_runner *r, struct rjob *j);
int runner_task_ender_start(struct sbx_runner *r, struct rtask *t);
/* stream: 1 stdout, 2 stderr */
/* A job that ended keeps only its bytes: the room for appending goes (under r->mu). */
void runner_output_settle(struct rjob *j);
void runner_output_append(struct sbx_runner *r, struct rjob *j, int stream, const char *data,
                          size_t len);
/* The stream (1 or 2) of the byte at absolute offset off (>= the first kept
 * byte, < out_total) and where its run ends (absolute). Under r->mu. */
int runner_output_stream_at(const struct rjob *j, size_t off, size_t *run_end);

/* forward.c (added): a request about a job or task that another box of the
 * fleet holds goes to that box (docs/runner.md, "Several boxes"). */
#define RUNNER_FWD_HEADER "X-Sbx-Forwarded-By" /* the forwarding box: never forwarded again */
#define RUNNER_FWD_CLIENT "X-Sbx-Client"       /* the client, honoured on the unix socket */
#define RUNNER_FWD_SCOPES "X-Sbx-Scopes"       /* ... and its scopes (enum sbx_scope bits) */
struct runner_fwd;
/* Sends req (its method, URI and body) to o's box and relays the answer,
 * streamed when stream (the output; frames: ?frames=1). Always answers req:
 * 409 when req was already forwarded once, 503 when o's box is not alive,
 * 502 when it cannot be reached or its reply is bad. who was checked against
 * the shared record by the caller. */
void runner_forward(struct sbx_runner *r, struct evhttp_request *req,
                    const struct runner_client *who, const struct sbx_store_owner *o,
                    const char *what, int stream, int frames);
/* (added) The box that holds task id when it is another box of the fleet:
 * 1 with *o set (sbx_store_owner_clear it), 0 when no other box holds it (a
 * box of one, not found, this box), -1 after answering req 503 (the database
 * is down). */
int runner_task_owner(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                      struct sbx_store_owner *o);
/* (added) The task routes of issue 30 (files, pause and resume, snapshot,
 * egress): when another box holds task id, req goes there as runner_forward
 * does (flags: RUNNER_FWD_STREAM a 200 relayed as it comes, a file or a tar of
 * up to 64 MiB; RUNNER_FWD_SLOW the owner may take 600 s to answer, a snapshot
 * or a pause). 1 when req was answered, 0 when no other box holds the task. */
#define RUNNER_FWD_STREAM 1u
#define RUNNER_FWD_SLOW 2u
int runner_forward_task(struct sbx_runner *r, struct evhttp_request *req,
                        const struct runner_client *who, const char *id, unsigned flags);
/* (added) A task's terminal (terminal 1) or port preview on another box
 * (fwd_tunnel.c): the request goes to the owner and the caller's connection
 * becomes a byte relay to it. 1 when req was answered (or taken over), 0 when
 * no other box holds the task. */
int runner_forward_tunnel(struct sbx_runner *r, struct evhttp_request *req,
                          const struct runner_client *who, const char *id, int terminal);
/* (added) 1 after answering req when it may not go to o's box: 409 when it
 * was forwarded once already, 503 when o's box is not alive, 502 when o is on
 * TCP and req carries no bearer token; else 0. */
int runner_fwd_refused(struct evhttp_request *req, const struct sbx_store_owner *o,
                       const char *what);
/* (added) After evhttp_free: ends the relays of fwd_tunnel.c still open. */
void runner_tunnel_drop_all(struct sbx_runner *r);
/* Connects bev to an owner's API address, "unix:PATH" or "tcp:HOST:PORT". */
struct bufferevent;
int runner_fwd_connect(struct bufferevent *bev, const char *api, char *why, size_t len);
/* A follow of a job still in the shared queue: checks the record every
 * 500 ms and, once a box claimed it, answers req as runner_handle_output. */
void runner_forward_wait(struct sbx_runner *r, struct evhttp_request *req,
                         const struct runner_client *who, const char *id, int frames);
int runner_forwarded(struct evhttp_request *req);
/* (changed) Who a request on the unix socket is: the local client (the
 * scopes runner.clients gives "local") when it carries no forwarding header;
 * the client a forwarded request names, with the scopes it carries, only on a
 * fleet box and from a peer of the runner's own user (SO_PEERCRED); else NULL
 * with why (the caller answers 400 and logs it). */
const struct runner_client *runner_forwarded_client(struct sbx_runner *r,
                                                    struct evhttp_request *req,
                                                    struct runner_client *buf, char *why,
                                                    size_t wlen);
/* After evhttp_free: ends the forwards still in flight. */
void runner_forward_drop_all(struct sbx_runner *r);
/* (added, api.c) The box of the fleet that holds a job (task 0) or a live
 * task (task 1) when it is another box: 1 and *o, else 0; on st. */
int runner_elsewhere(struct sbx_runner *r, struct sbx_store *st, int task, const char *id,
                     struct sbx_store_owner *o);
/* (added, api.c) The HTTP status of a refusal. */
int runner_http_code(const sbx_error_t *err);
/* 1 after answering 503 (the database is down), else 0. */
int runner_reply_store_down(struct sbx_runner *r, struct evhttp_request *req,
                            const sbx_error_t *err);

/* dbwait.c (added): write(st, arg, err), a job's end in one transaction of
 * its own (it rolls back what it began when it fails), run again while the
 * database is down; 0, or -1 with *err (another failure, such as a fenced
 * write, or the database stayed down). */
int runner_store_retry(struct sbx_runner *r, struct sbx_store *st, const char *job_id,
                       int (*write)(struct sbx_store *st, void *arg, sbx_error_t **err), void *arg,
                       sbx_error_t **err);

/* api.c: the handlers, for a client `who` already authenticated */
void runner_reply_json(struct evhttp_request *req, int code, json_t *body);
void runner_reply_error(struct evhttp_request *req, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void runner_handle_submit(struct sbx_runner *r, struct evhttp_request *req,
                          const struct runner_client *who);
void runner_handle_job_get(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                           const struct runner_client *who);
void runner_handle_output(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          int follow, int frames, const struct runner_client *who);
void runner_handle_cancel(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                          const struct runner_client *who);
void runner_handle_task_end(struct sbx_runner *r, struct evhttp_request *req, const char *id,
                            const struct runner_client *who);
/* Parses and checks a POST /v1/jobs body (len bytes, NUL-ended) into *j and
 * *labels (a new reference or NULL): 0, or the HTTP status with the reason in
 * msg. Only r->cfg is used (fuzz/fuzz_api_submit.c calls it without a runner). */
int runner_parse_submit(struct sbx_runner *r, const char *body, size_t len, struct rjob *j,
                        json_t **labels, char *msg, size_t mlen);
void runner_streams_flush(struct sbx_runner *r, struct rjob *j, int final);

/* smallbox.c */
/* After the scheduler split the box: on a box smaller than a default sandbox
 * per pool, each pool's default limits are clamped to what it has (warned). */
void runner_small_box(struct sbx_runner *r);
/* A job whose limits are the configured defaults gets its pool's clamp. */
void runner_fit_limits(struct sbx_runner *r, enum sbx_pool pool, struct sbx_limits *l);

/* api_list.c */
void runner_handle_jobs_list(struct sbx_runner *r, struct evhttp_request *req,
                             const struct runner_client *who);
/* ready 0: /healthz (store and engine); 1: /readyz (and not draining or stopping) */
void runner_handle_health(struct sbx_runner *r, struct evhttp_request *req, int ready);

/* health.c: a thread probes the engine every interval_ms (a list of the
 * default provider), so no request ever waits on a slow engine */
int runner_health_start(struct sbx_runner *r, int interval_ms, sbx_error_t **err);
void runner_health_free(struct sbx_runner *r);
/* 0 when the last probe answered in time, else -1 with why */
int runner_health_engine(struct sbx_runner *r, char *why, size_t len);
/* (added) sandboxes killed and waiting for the engine's removal at the last
 * probe, -1: unknown (sandbox/backlog.h) */
int runner_health_backlog(struct sbx_runner *r);

/* (added) storeprobe.c: a thread reads the store every interval_ms on its
 * own connection and keeps the loop connection's gate, so that no request
 * waits on a stalled database (docs/runner.md, A slow or silent database) */
int runner_storeprobe_start(struct sbx_runner *r, int interval_ms, sbx_error_t **err);
void runner_storeprobe_free(struct sbx_runner *r);
/* 0 when the last read answered, else -1 with why; *age_s: seconds since */
int runner_storeprobe_state(struct sbx_runner *r, char *why, size_t len, double *age_s);
/* 1 while a call of the box passed its deadline and the probe has not seen
 * the database answer since (the loop's calls fail at once meanwhile) */
int runner_store_stalled(struct sbx_runner *r);
/* (added) The gate the probe keeps, for the store thread's connection. */
struct sbx_store_gate *runner_store_gate(struct sbx_runner *r);

/* api_http.c */
int runner_api_bind(struct sbx_runner *r, sbx_error_t **err);

/* api_limits.c */
/* Caps a listener's request heads and bodies and installs the deadline. */
int runner_api_limits(struct runner_listener *l, struct evhttp *http, struct event_base *base);
/* (added, api_term.c) A stopping runner cancels the terminals open now (their tasks
 * end with it). */
void runner_task_io_stop(struct sbx_runner *r);
/* After evhttp_free: drops what the listener still holds. */
void runner_api_limits_free(struct runner_listener *l);
/* The connection of req delivered a complete request: its deadline ends. */
void runner_conn_request_done(struct runner_listener *l, struct evhttp_request *req);

/* roots.c: the worktree roots from the configuration (at start), then what
 * the runner reads from outside the state directory as denied (once the store
 * is open). */
int runner_roots_init(struct sbx_runner *r, sbx_error_t **err);
void runner_roots_deny(struct sbx_runner *r);

/* auth.c */
int runner_clients_load(struct sbx_runner *r, sbx_error_t **err);
void runner_clients_free(struct sbx_runner *r);
/* (changed) The unix socket's client: "local", with the scopes of the
 * runner.clients entry named "local" (every scope without one). */
const struct runner_client *runner_local_client(const struct sbx_runner *r);
/* The client whose token is in `Authorization: Bearer ...`, or NULL. Constant
 * time in the token's bytes. */
const struct runner_client *runner_authenticate(struct sbx_runner *r, const char *authz);
/* (added, issue 25) client's jobs may use the credential instance name: it
 * is in its runner.clients entry's `credentials` (`default`, and `local`
 * without an entry: every one). */
int runner_may_use_credentials(const struct sbx_runner *r, const char *client, const char *name);
/* The client may see (cancel) a job or task of owner. */
int runner_may_read(const struct runner_client *who, const char *owner);
/* (added, issue 30) A submit's `from` (api_snap.c): the snapshot must exist, be the
 * client's own (any with read-all), of the job's provider, the client must have the
 * scope `snapshot`, and the task must not be running yet. 0 and j->image set, or -1
 * having replied (403, 404, 400, 409 naming the field). */
int runner_submit_from(struct sbx_runner *r, struct evhttp_request *req,
                       const struct runner_client *who, struct rjob *j);
/* (added, api_snap.c) A hold (running++) taken off the loop ends, on the loop: a task
 * whose job ended meanwhile is ended now. */
void runner_task_let_go(struct sbx_runner *r, struct rtask *t);
int runner_may_cancel(const struct runner_client *who, const char *owner);

/* hooks.c */
void runner_alerts_tick(struct sbx_runner *r);
/* (added) Fires one wait alert (webhook, alert_command) with the autoscaler's
 * decision d, and runs scale_up_command when d is a scale-up; in detached
 * threads. task: the job's task, NULL to look it up on this box. */
void runner_alert_fire(struct sbx_runner *r, const struct sbx_sched_alert *al, const char *task,
                       const struct sbx_scale_decision *d);
/* Runs argv (no shell) with extra env "K=V" strings and without the variables
 * named in hide (NULL-terminated, may be NULL: the tokens); waits up to 60 s. */
int runner_run_hook(const char *what, char *const argv[], char *const env[], char *const *hide);
/* Splits a config command line on whitespace (no shell, no quoting). */
char **runner_split_command(const char *cmd);
void runner_strv_free(char **v);

/* recover.c */
int runner_recover(struct sbx_runner *r, sbx_error_t **err);
/* (added) The orphan rule (docs/architecture.md, Labels), the one used by the
 * recovery and by the warm pool's periodic sweep: destroys every sandbox of
 * pi with label key (= value unless NULL) whose sbx.owner process is gone,
 * except one whose sbx.task this runner holds (a kept task re-adopted at
 * recovery). The number removed, or -1 when the list failed. Any thread. */
struct sbx_open_instance;
int runner_destroy_orphans(struct sbx_runner *r, struct sbx_open_instance *pi, const char *key,
                           const char *value, sbx_error_t **err);
/* A job of the store as an rjob (queued or running; no token). */
struct rjob *runner_job_from_rec(const struct sbx_job_rec *rec);
/* (added) The scheduler's view of j: its policy limits and when it was
 * queued (0: now). One shape for a submit, a claim and a recovered job. */
static inline struct sbx_sched_job runner_sched_job(const struct rjob *j, double cpus,
                                                    int64_t memory, int64_t enqueued_at)
{
    return (struct sbx_sched_job){
        .id = j->id,
        .task = j->task,
        .pool = j->pool,
        .cls = j->cls,
        .cpus = cpus,
        .memory = memory,
        .enqueued_at = enqueued_at,
    };
}

/* fleet.c (added): a box of a fleet on PostgreSQL (docs/runner.md, "Several
 * boxes"). Start registers the box (nothing on SQLite); claim takes what this
 * box can start now from the shared queue. */
int runner_fleet_start(struct sbx_runner *r, sbx_error_t **err);
void runner_fleet_claim(struct sbx_runner *r);
void runner_fleet_free(struct sbx_runner *r);
/* (added) The fleet in GET /v1/queue ("fleet": this box's id and
 * sbx_store_fleet_json, (changed) read by the store thread), then the
 * answer to req (queue as it is on one box); its series in /metrics. */
void runner_fleet_queue(struct sbx_runner *r, struct evhttp_request *req, json_t *queue);
void runner_fleet_metrics(struct sbx_runner *r, FILE *f);
/* This box's id, NULL on one box. */
const char *runner_fleet_box(const struct sbx_runner *r);
/* (added) The pool of the workers' store connections, NULL on one box. */
struct runner_store_pool *runner_fleet_pool(const struct sbx_runner *r);

/* fleetlead.c (added): the fleet's one autoscaler, the box holding the
 * leader lock. beat: at each fleet beat (creates *l); resign: this box lost
 * its lease (it gives the lock up); metrics: sbx_fleet_leader and, on the
 * leader, the fleet series read at the last beat. */
struct runner_lead;
/* (changed) prepare: on the loop before a beat (creates *l, copies the
 * scheduler's slots); beat: on the store thread */
void runner_lead_prepare(struct sbx_runner *r, struct runner_lead **l);
void runner_lead_beat(struct sbx_runner *r, struct runner_lead *l);
void runner_lead_resign(struct sbx_runner *r, struct runner_lead *l);
void runner_lead_metrics(struct sbx_runner *r, struct runner_lead *l, FILE *f);
void runner_lead_free(struct runner_lead *l);

/* storepool.c (added): a worker's own connection to the store, its rows
 * carrying this box's id: a new one on SQLite, a reused one (or a new one when
 * none is idle) on a fleet box; put gives it back (or closes it). */
struct runner_store_pool *runner_store_pool_new(void);
void runner_store_pool_free(struct runner_store_pool *p);
void runner_store_pool_counts(struct runner_store_pool *p, uint64_t *opened, uint64_t *reused);
struct sbx_store *runner_store_get(struct sbx_runner *r, sbx_error_t **err);
void runner_store_put(struct sbx_runner *r, struct sbx_store *st);

#endif
