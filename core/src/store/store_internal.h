/* store_internal.h - shared by the files of store/ only. */
#ifndef SBX_STORE_STORE_INTERNAL_H
#define SBX_STORE_STORE_INTERNAL_H

#include <libpq-fe.h>
#include <sqlite3.h>

#include "store/db.h"
#include "store/store.h"

struct sbx_store {
    sqlite3 *db; /* SQLite, or NULL */
    PGconn *pg;  /* PostgreSQL, or NULL */
    char *path;  /* the file, or the DSN (which never holds a password) */
    char *box;   /* sbx_store_set_box, or NULL */
    int tx;      /* a transaction is open (sbx_store_begin .. commit or rollback) */
    /* (added) PostgreSQL: a call passed its deadline; the connection is reset
     * before the next statement outside a transaction (db.c) */
    int timed_out;
    struct sbx_store_gate *gate; /* (added) sbx_store_set_gate, or NULL */
};

/* -1 with "store: PATH: WHAT: engine message" */
int sbx_store_fail(struct sbx_store *st, sbx_error_t **err, const char *what);
int64_t sbx_store_now(void);
int sbx_store_id_ok(const char *id);
int sbx_store_text_ok(const char *s);
/* An engine's message made one line, in place. */
void sbx_store_one_line(char *msg);

/* (added) 0 on PostgreSQL; else -1 with "store: PATH: WHAT needs the shared
 * PostgreSQL store (runner.database)" (fleet.c). */
int sbx_store_need_pg(struct sbx_store *st, const char *what, sbx_error_t **err);

/* PostgreSQL (pg.c): connects to dsn with the password from the variable
 * named password_env (may be NULL) and checks or creates the schema. */
int sbx_store_pg_open(struct sbx_store *st, const char *dsn, const char *password_env,
                      sbx_error_t **err);

/* (added) The tables both engines keep, written once (schema.c). */
enum sbx_dialect { SBX_DIALECT_SQLITE, SBX_DIALECT_PG };
/* The SQLite schema's version (PRAGMA user_version) this sbx writes; each
 * column of schema.c names the version that added it. */
#define SBX_STORE_SQLITE_VERSION 7
/* (added) Version 7 / PostgreSQL 3: every task id named by a job before
 * task_owners existed gets the client of its jobs as its owner (the first
 * row wins); run once, with the table's creation. */
#define SBX_STORE_OWNERS_BACKFILL                                                                  \
    "INSERT INTO task_owners (id, client, created_at) SELECT task, MIN(client), MIN(queued_at) "   \
    "FROM jobs WHERE 1 = 1 GROUP BY task ON CONFLICT (id) DO NOTHING"
/* (added) The claim's check of a task (owner.c, inside the claim's
 * transaction on PostgreSQL): 1 the job may start its task now, 0 another
 * job or a live task holds the id (pass over it), 2 the task belongs to
 * another client (the job was ended cancelled in the transaction), -1 error. */
int sbx_store_claim_task_check(struct sbx_store *st, const struct sbx_job_rec *job,
                               sbx_error_t **err);
/* (added) The owner check of a job insert, in its transaction (owner.c). */
int sbx_store_owner_take(struct sbx_store *st, const char *task, const char *client, int64_t at,
                         sbx_error_t **err);

/* CREATE TABLE / CREATE INDEX statements of the shared tables with the
 * columns of SQLite versions <= version (PostgreSQL: pass INT_MAX).
 * Caller frees. */
char *sbx_store_schema_create(enum sbx_dialect d, int version);
/* ALTER TABLE ... ADD COLUMN statements for the columns that SQLite version
 * `version` (> 1) added; "" for none. Caller frees. */
char *sbx_store_schema_add(enum sbx_dialect d, int version);

/* the job columns in the order record.c reads them */
#define SBX_JOB_COLUMNS                                                                            \
    "seq, id, task, pool, class, argv, labels, worktree, provider, image, cpus, memory, "          \
    "disk, pids, idle, max_life, state, queued_at, granted_at, ready_at, finished_at, "            \
    "exit_status, reason, egress_allowed, egress_denied, leases, env, client, isolation, "         \
    "exec_path, box, token"
/* An UPDATE of one job: $1 id, $2 at (0: now), $3..$5 t1..t3, $6 token
 * (fenced when > 0); no row changed is the clear error of move.c. */
int sbx_store_update_job(struct sbx_store *st, const char *id, int64_t token, const char *sql,
                         const char *want, const char *t1, const char *t2, const char *t3,
                         int64_t at, sbx_error_t **err);
int sbx_store_row_to_job(struct sbx_q *q, struct sbx_job_rec *out);

#endif
