/* pg.c - the PostgreSQL store: connecting and the schema (docs/runner.md,
 * "Several boxes"). The statements themselves are shared with SQLite (db.h). */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/xalloc.h"

/* The schema's version, kept in sbx_meta. Every box of a fleet must run the
 * same one: a database of another version is refused at start, never
 * migrated behind the back of the boxes that use it. */
/* 3 (added): task_owners (schema.c), who owns each task id, filled from the
 * jobs of an older database once, under the lock. */
#define PG_SCHEMA_VERSION 3
/* pg_advisory_xact_lock key that serialises creating the schema */
#define PG_SCHEMA_LOCK 0x73627801

/* Version 1, besides the tables both engines keep (schema.c, made with every
 * column): the schema's version, the boxes, the fencing tokens. */
static const char pg_schema[] =
    "CREATE TABLE IF NOT EXISTS sbx_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
    "CREATE INDEX IF NOT EXISTS jobs_box ON jobs (box) WHERE state = 'running';"
    "CREATE TABLE IF NOT EXISTS boxes ("
    " id TEXT PRIMARY KEY,"
    " pools TEXT NOT NULL,"    /* JSON array */
    " capacity TEXT NOT NULL," /* JSON object */
    " api TEXT NOT NULL,"      /* its API address */
    " version TEXT NOT NULL,"
    " started_at BIGINT NOT NULL,"
    " heartbeat BIGINT NOT NULL,"   /* ms, the box's last renewal */
    " lease_until BIGINT NOT NULL," /* ms; past it the box is dead to the others */
    " epoch BIGINT NOT NULL DEFAULT 0);"
    "CREATE SEQUENCE IF NOT EXISTS sbx_fence;";

/* Version 2 (added): the fleet autoscaler's shared rows (store/scale.c):
 * the alerts and scale-ups its leader decided, the fleet's spend, and which
 * box leads. */
static const char pg_schema_2[] =
    "CREATE TABLE IF NOT EXISTS fleet_scale ("
    " seq BIGSERIAL PRIMARY KEY,"
    " at BIGINT NOT NULL," /* ms */
    " kind TEXT NOT NULL CHECK (kind IN ('alert', 'scale_up')),"
    " pool TEXT NOT NULL,"
    " job TEXT,"             /* an alert's job */
    " leader TEXT NOT NULL," /* the box that decided */
    " current INTEGER NOT NULL DEFAULT 0, wanted INTEGER NOT NULL DEFAULT 0,"
    " paid INTEGER NOT NULL DEFAULT 0," /* boxes paid for once the scale-up is done */
    " reason TEXT NOT NULL DEFAULT '');"
    "CREATE UNIQUE INDEX IF NOT EXISTS fleet_scale_alert ON fleet_scale (job) WHERE kind = "
    "'alert';"
    "CREATE INDEX IF NOT EXISTS fleet_scale_up ON fleet_scale (pool, seq) WHERE kind = "
    "'scale_up';"
    "CREATE TABLE IF NOT EXISTS fleet_spend ("
    " id INTEGER PRIMARY KEY CHECK (id = 1),"
    " at BIGINT NOT NULL," /* ms, spend accrued up to here */
    " day DOUBLE PRECISION NOT NULL, month DOUBLE PRECISION NOT NULL);"
    "CREATE TABLE IF NOT EXISTS fleet_leader ("
    " id INTEGER PRIMARY KEY CHECK (id = 1),"
    " box TEXT NOT NULL,"    /* the box that took the leader lock last */
    " pid INTEGER NOT NULL," /* its backend, which holds the lock */
    " since BIGINT NOT NULL);";

/* (added) sbx_store_pg_limits: set once at start, read by every open */
static int pg_timeout_ms = 5000;
static int pg_keepalive_s = 10;

void sbx_store_pg_limits(int timeout_ms, int keepalive_s)
{
    if (timeout_ms > 0) {
        pg_timeout_ms = timeout_ms;
    }
    if (keepalive_s > 0) {
        pg_keepalive_s = keepalive_s;
    }
}

int sbx_store_pg_deadline_ms(void)
{
    /* the server's statement_timeout answers first when the server runs;
     * this one covers a server or network that says nothing */
    return pg_timeout_ms + 1000;
}

static void quiet(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* The DSN must not carry a password: it lives in the environment. */
static int dsn_check(const char *dsn, sbx_error_t **err)
{
    char *msg = NULL;
    PQconninfoOption *opts = PQconninfoParse(dsn, &msg);
    int r = 0;

    if (opts == NULL) {
        char line[256];

        snprintf(line, sizeof(line), "%s", msg ? msg : "out of memory");
        sbx_store_one_line(line);
        PQfreemem(msg);
        /* the DSN is not echoed: it did not parse, so it may hold anything */
        return sbx_error_set(err, SBX_E_CONFIG, "store: runner.database is not a valid DSN: %s",
                             line);
    }
    for (PQconninfoOption *o = opts; o->keyword != NULL; o++) {
        if (strcmp(o->keyword, "password") == 0 && o->val != NULL && o->val[0] != '\0') {
            r = sbx_error_set(err, SBX_E_CONFIG,
                              "store: runner.database holds a password; put it in the "
                              "environment variable named by runner.database_password_env");
        }
    }
    PQconninfoFree(opts);
    return r;
}

/* The version an existing schema carries, or -1 (none yet, or unreadable:
 * the locked path below creates or reports it). Every connection of a box
 * (one per job) checks it, without a lock. (changed, issue 31) Through
 * sbx_q_step, within the deadline of every call (db.c), not a bare PQexec
 * that waited for as long as the server said nothing. */
static int pg_version_fast(struct sbx_store *st)
{
    cleanup_q struct sbx_q *q = NULL;
    sbx_error_t *e = NULL;
    int v = -1;

    q = sbx_q_prepare(st, "SELECT value FROM sbx_meta WHERE key = 'schema_version'", &e);
    if (q != NULL && sbx_q_step(q, "read the schema version", &e) == 1) {
        v = (int)sbx_q_col_int64(q, 0);
    }
    sbx_error_free(&e);
    return v;
}

/* Creates the schema once, or checks the version an existing one carries. */
static int pg_schema_check(struct sbx_store *st, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    cleanup_free char *shared = NULL;
    char lock[64];
    int have = -1;
    int rc;

    if (pg_version_fast(st) == PG_SCHEMA_VERSION) {
        return 0;
    }
    snprintf(lock, sizeof(lock), "SELECT pg_advisory_xact_lock(%d)", PG_SCHEMA_LOCK);
    if (sbx_store_begin(st, err) < 0 || sbx_store_exec(st, lock, err) < 0) {
        goto fail;
    }
    shared = sbx_store_schema_create(SBX_DIALECT_PG, INT_MAX);
    if (sbx_store_exec(st, shared, err) < 0 || sbx_store_exec(st, pg_schema, err) < 0) {
        sbx_error_wrap(err, "store: %s: creating the schema", st->path);
        goto fail;
    }
    q = sbx_q_prepare(st, "SELECT value FROM sbx_meta WHERE key = 'schema_version'", err);
    if (q == NULL) {
        goto fail;
    }
    rc = sbx_q_step(q, "read the schema version", err);
    if (rc < 0) {
        goto fail;
    }
    if (rc == 1) {
        have = (int)sbx_q_col_int64(q, 0);
    }
    /* a new database gets every version's tables; one of version 1 (an older
     * sbx made it) gets those of version 2 once, under the lock */
    if ((rc == 0 || have == 1) && sbx_store_exec(st, pg_schema_2, err) < 0) {
        sbx_error_wrap(err, "store: %s: creating the schema (version 2)", st->path);
        goto fail;
    }
    if (rc == 1 && (have == 1 || have == 2) &&
        sbx_store_exec(st, SBX_STORE_OWNERS_BACKFILL, err) < 0) {
        sbx_error_wrap(err, "store: %s: filling task_owners (version 3)", st->path);
        goto fail;
    }
    if (rc == 0) {
        if (sbx_store_exec(st, "INSERT INTO sbx_meta (key, value) VALUES ('schema_version', '3')",
                           err) < 0) {
            goto fail;
        }
        have = PG_SCHEMA_VERSION;
    }
    else if (have == 1 || have == 2) {
        if (sbx_store_exec(st, "UPDATE sbx_meta SET value = '3' WHERE key = 'schema_version'",
                           err) < 0) {
            goto fail;
        }
        have = PG_SCHEMA_VERSION;
    }
    if (have != PG_SCHEMA_VERSION) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "store: %s: the database's schema version is %d, this sbx uses %d: every "
                      "box of a fleet must run the same sbx",
                      st->path, have, PG_SCHEMA_VERSION);
        goto fail;
    }
    return sbx_store_commit(st, err);
fail:
    sbx_store_rollback(st);
    return -1;
}

int sbx_store_pg_open(struct sbx_store *st, const char *dsn, const char *password_env,
                      sbx_error_t **err)
{
    const char *password = NULL;
    const char *keys[12];
    const char *vals[12];
    int n = 0;
    char msg[512];
    char options[128], idle[16], interval[16], user_timeout[24];

    if (dsn_check(dsn, err) < 0) {
        return -1;
    }
    if (password_env != NULL) {
        password = getenv(password_env);
        if (password == NULL || password[0] == '\0') {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "store: %s: runner.database_password_env names %s, which is "
                                 "not set",
                                 dsn, password_env);
        }
    }
    /* the DSN's own settings win over these defaults; the password comes last */
    keys[n] = "connect_timeout";
    vals[n++] = "5";
    keys[n] = "application_name";
    vals[n++] = "sbx";
    /* (added) a slow or silent database (docs/runner.md): every statement
     * ends within statement_timeout (lock waits included), and a peer that
     * vanished is found by TCP keepalives, not by the kernel's 2 hours. A
     * unix socket ignores the TCP ones. */
    /* (added) and a transaction left idle (its box stopped or hung mid-way, a
     * SIGSTOP) is ended by the server after the same time, so the row locks it
     * holds do not stall every other box's reap and claims (test_fleet_stop) */
    snprintf(options, sizeof(options),
             "-c statement_timeout=%d -c idle_in_transaction_session_timeout=%d", pg_timeout_ms,
             pg_timeout_ms);
    snprintf(idle, sizeof(idle), "%d", pg_keepalive_s);
    snprintf(interval, sizeof(interval), "%d", pg_keepalive_s / 3 > 0 ? pg_keepalive_s / 3 : 1);
    snprintf(user_timeout, sizeof(user_timeout), "%d", pg_keepalive_s * 2 * 1000);
    keys[n] = "options";
    vals[n++] = options;
    keys[n] = "keepalives";
    vals[n++] = "1";
    keys[n] = "keepalives_idle";
    vals[n++] = idle;
    keys[n] = "keepalives_interval";
    vals[n++] = interval;
    keys[n] = "keepalives_count";
    vals[n++] = "3";
    keys[n] = "tcp_user_timeout";
    vals[n++] = user_timeout;
    keys[n] = "dbname";
    vals[n++] = dsn;
    if (password != NULL) {
        keys[n] = "password";
        vals[n++] = password;
    }
    keys[n] = NULL;
    vals[n] = NULL;
    st->pg = PQconnectdbParams(keys, vals, 1);
    if (st->pg == NULL) {
        return sbx_error_set(err, SBX_E_CONFIG, "store: %s: cannot connect: out of memory", dsn);
    }
    if (PQstatus(st->pg) != CONNECTION_OK) {
        snprintf(msg, sizeof(msg), "%s", PQerrorMessage(st->pg));
        sbx_store_one_line(msg);
        return sbx_error_set(err, SBX_E_CONFIG, "store: %s: cannot connect: %s", dsn, msg);
    }
    PQsetNoticeProcessor(st->pg, quiet, NULL);
    /* (changed, issue 31) each call is sent without blocking (db.c, pg_call):
     * a server that stops reading cannot hold the send past the deadline */
    if (PQsetnonblocking(st->pg, 1) != 0) {
        snprintf(msg, sizeof(msg), "%s", PQerrorMessage(st->pg));
        sbx_store_one_line(msg);
        return sbx_error_set(err, SBX_E_CONFIG, "store: %s: non-blocking mode: %s", dsn, msg);
    }
    if (sbx_store_exec(st, "SET client_min_messages = warning", err) < 0) {
        return -1;
    }
    if (pg_schema_check(st, err) < 0) {
        if (err != NULL && *err != NULL && (*err)->code == SBX_E_GENERIC) {
            (*err)->code = SBX_E_CONFIG;
        }
        return -1;
    }
    return 0;
}
