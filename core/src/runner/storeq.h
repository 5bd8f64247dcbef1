/* storeq.h - the store thread (two lanes: writes, reads) of a fleet box (docs/runner.md, "A slow or
 * silent database"; docs/architecture.md, "The store thread").
 *
 * The loop hands a call (work + done) to the store thread and returns to its
 * events; the thread runs work on its own connection and hands the call back
 * through an event of the loop, which runs done. A call that carries an API
 * request and is not back within the store's call deadline
 * (sbx_store_pg_deadline_ms) is answered 503 with Retry-After by the loop
 * itself; its done then runs later with req NULL and late set, and only frees
 * what it owns. The loop never waits on the database.
 *
 * On one box (SQLite: a local file, no network) there is no thread: work
 * runs at once on the loop's connection, then done. */
#ifndef SBX_RUNNER_STOREQ_H
#define SBX_RUNNER_STOREQ_H

#include "util/error.h"

struct sbx_runner;
struct sbx_store;
struct evhttp_request;

/* The store thread (or the loop on one box): st is the connection it owns.
 * work must not touch what the loop owns (only the call's own arg, and what
 * r->mu guards, under r->mu). */
typedef void (*runner_sq_work)(struct sbx_runner *r, struct sbx_store *st, void *arg);
/* The loop: answers req (late 0; req NULL for a call without a request), or
 * late 1: req was answered 503 already, or the runner stops: only free arg. */
typedef void (*runner_sq_done)(struct sbx_runner *r, struct evhttp_request *req, void *arg,
                               int late);

/* Starts the thread on a fleet box (nothing on one box). */
int runner_sq_start(struct sbx_runner *r, sbx_error_t **err);
/* (added, issue 31) The same whatever the store: the threads, each lane's
 * connection from runner_store_get (on one box a new one to r->store_path).
 * runner_sq_start calls it on a fleet box; tests/unit/test_runner_storeq.c
 * on SQLite, without PostgreSQL. */
int runner_sq_start_threads(struct sbx_runner *r, sbx_error_t **err);
/* Stops the thread (the call in flight ends within its deadline), then runs
 * done(late 1) for every call left. After evhttp_free: requests are gone. */
void runner_sq_free(struct sbx_runner *r);
/* Hands a call over. req: the API request it answers, or NULL. With req, a
 * full queue or a closed gate (a stall known) answers 503 at once. Always
 * runs done exactly once. */
void runner_sq_call(struct sbx_runner *r, struct evhttp_request *req, runner_sq_work work,
                    runner_sq_done done, void *arg);
/* (added) A call that only reads (a record, a page, the box that holds a
 * job or task, the fleet's view): the same, on the read lane (storeq.c), so
 * that it does not wait behind the submits, claims and grants; behind a
 * write nobody waits for that is not back yet, it goes after that write. */
void runner_sq_read(struct sbx_runner *r, struct evhttp_request *req, runner_sq_work work,
                    runner_sq_done done, void *arg);
/* (the same) A write nobody waits for (req NULL): one not begun when the
 * runner stops runs then, on the thread's connection. */
void runner_sq_write(struct sbx_runner *r, runner_sq_work work, runner_sq_done done, void *arg);
/* 1 on a fleet box (calls go to the thread), 0 on one box. */
int runner_sq_threaded(const struct sbx_runner *r);
/* The 503 of a request whose database call failed because the database is
 * unavailable: down is what the work saw (sbx_store_down of its connection). */
int runner_reply_unavailable(struct evhttp_request *req, int down, const sbx_error_t *err);
/* For /metrics: calls handed over, answered 503 by the loop at their
 * deadline, refused at once (queue full, stall known), waiting now. */
void runner_sq_counts(const struct sbx_runner *r, unsigned long long *calls,
                      unsigned long long *late, unsigned long long *refused, unsigned *queued);

#endif
