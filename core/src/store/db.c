/* db.c - one statement API over SQLite and libpq (db.h). */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/xalloc.h"

#define MAX_PARAMS 32

struct sbx_q {
    struct sbx_store *st;
    /* SQLite */
    sqlite3_stmt *s;
    /* PostgreSQL: the text, its parameters as text, the result and the row */
    char *sql;
    int n_params;
    char *params[MAX_PARAMS];
    /* 0: the server infers the type from the text; TEXT for a $i the text
     * skips (PostgreSQL cannot infer a type for it) */
    Oid types[MAX_PARAMS];
    PGresult *res;
    int row, ran;
};

int sbx_store_is_pg(const struct sbx_store *st)
{
    return st->pg != NULL;
}

/* The message of the engine as one line: whitespace runs become one space. */
void sbx_store_one_line(char *msg)
{
    size_t o = 0;

    for (size_t i = 0; msg[i] != '\0'; i++) {
        int space = msg[i] == '\n' || msg[i] == '\t' || msg[i] == ' ';

        if (space && (o == 0 || msg[o - 1] == ' ')) {
            continue;
        }
        msg[o++] = space ? ' ' : msg[i];
    }
    while (o > 0 && msg[o - 1] == ' ') {
        o--;
    }
    msg[o] = '\0';
}

int sbx_store_fail(struct sbx_store *st, sbx_error_t **err, const char *what)
{
    char msg[512];

    snprintf(msg, sizeof(msg), "%s", st->pg ? PQerrorMessage(st->pg) : sqlite3_errmsg(st->db));
    sbx_store_one_line(msg);
    return sbx_error_set(err, SBX_E_GENERIC, "store: %s: %s: %s", st->path, what, msg);
}

#define TEXT_OID 25 /* pg_type.h */

/* The highest $N in sql (the number of parameters PostgreSQL is sent); a $i
 * below it that sql does not use is sent as text. */
static int count_params(const char *sql, Oid *types)
{
    int used[MAX_PARAMS + 1] = {0};
    int max = 0;

    for (const char *p = sql; *p != '\0'; p++) {
        if (*p == '$' && p[1] >= '1' && p[1] <= '9') {
            int n = (int)strtol(p + 1, NULL, 10);

            if (n > max) {
                max = n;
            }
            if (n <= MAX_PARAMS) {
                used[n] = 1;
            }
        }
    }
    for (int i = 1; i <= max && i <= MAX_PARAMS; i++) {
        types[i - 1] = used[i] ? 0 : TEXT_OID;
    }
    return max;
}

struct sbx_q *sbx_q_prepare(struct sbx_store *st, const char *sql, sbx_error_t **err)
{
    struct sbx_q *q = xcalloc(1, sizeof(*q));

    q->st = st;
    if (st->pg != NULL) {
        q->sql = xstrdup(sql);
        q->n_params = count_params(sql, q->types);
        if (q->n_params > MAX_PARAMS) {
            sbx_error_set(err, EINVAL, "store: a statement with %d parameters (at most %d)",
                          q->n_params, MAX_PARAMS);
            sbx_q_free(q);
            return NULL;
        }
        return q;
    }
    if (sqlite3_prepare_v2(st->db, sql, -1, &q->s, NULL) != SQLITE_OK) {
        sbx_store_fail(st, err, "prepare");
        sbx_q_free(q);
        return NULL;
    }
    return q;
}

void sbx_q_free(struct sbx_q *q)
{
    if (q == NULL) {
        return;
    }
    if (q->s != NULL) {
        sqlite3_finalize(q->s);
    }
    for (int i = 0; i < MAX_PARAMS; i++) {
        free(q->params[i]);
    }
    if (q->res != NULL) {
        PQclear(q->res);
    }
    free(q->sql);
    free(q);
}

/* SQLite: the index of $i, 0 when the statement does not use it. */
static int lite_index(struct sbx_q *q, int i)
{
    char name[16];

    snprintf(name, sizeof(name), "$%d", i);
    return sqlite3_bind_parameter_index(q->s, name);
}

static void pg_set(struct sbx_q *q, int i, char *v)
{
    if (i < 1 || i > q->n_params) {
        free(v);
        return;
    }
    free(q->params[i - 1]);
    q->params[i - 1] = v;
}

void sbx_q_text(struct sbx_q *q, int i, const char *v)
{
    if (q->st->pg != NULL) {
        pg_set(q, i, v ? xstrdup(v) : NULL);
    }
    else if (lite_index(q, i) > 0) {
        if (v == NULL) {
            sqlite3_bind_null(q->s, lite_index(q, i));
        }
        else {
            sqlite3_bind_text(q->s, lite_index(q, i), v, -1, SQLITE_TRANSIENT);
        }
    }
}

void sbx_q_int64(struct sbx_q *q, int i, int64_t v)
{
    if (q->st->pg != NULL) {
        char *t = NULL;

        if (asprintf(&t, "%" PRId64, v) < 0) {
            abort();
        }
        pg_set(q, i, t);
    }
    else if (lite_index(q, i) > 0) {
        sqlite3_bind_int64(q->s, lite_index(q, i), v);
    }
}

void sbx_q_double(struct sbx_q *q, int i, double v)
{
    if (q->st->pg != NULL) {
        char *t = NULL;

        if (asprintf(&t, "%.17g", v) < 0) {
            abort();
        }
        pg_set(q, i, t);
    }
    else if (lite_index(q, i) > 0) {
        sqlite3_bind_double(q->s, lite_index(q, i), v);
    }
}

void sbx_q_null(struct sbx_q *q, int i)
{
    sbx_q_text(q, i, NULL);
}

/* A connection the server dropped (a restart of the database) is opened again
 * before the next statement; that statement fails if it cannot be. Never
 * inside a transaction: the server ended it with the connection, and a
 * statement on a new session would commit alone, outside what the caller
 * meant as one unit; it fails instead, the caller rolls back, and the
 * statement after the rollback opens the connection again. */
static void pg_revive(struct sbx_store *st)
{
    if (PQstatus(st->pg) == CONNECTION_BAD && !st->tx) {
        PQreset(st->pg);
    }
}

static int pg_step(struct sbx_q *q, const char *what, sbx_error_t **err)
{
    if (!q->ran) {
        ExecStatusType rs;

        q->ran = 1;
        pg_revive(q->st);
        q->row = -1;
        q->res = PQexecParams(q->st->pg, q->sql, q->n_params, q->types,
                              (const char *const *)q->params, NULL, NULL, 0);
        rs = q->res ? PQresultStatus(q->res) : PGRES_FATAL_ERROR;
        if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
            const char *state = q->res ? PQresultErrorField(q->res, PG_DIAG_SQLSTATE) : NULL;
            char msg[512];

            snprintf(msg, sizeof(msg), "%s",
                     q->res ? PQresultErrorMessage(q->res) : PQerrorMessage(q->st->pg));
            sbx_store_one_line(msg);
            return sbx_error_set(
                err, state != NULL && strcmp(state, "23505") == 0 ? EEXIST : SBX_E_GENERIC,
                "store: %s: %s: %s", q->st->path, what, msg);
        }
    }
    if (q->row + 1 < PQntuples(q->res)) {
        q->row++;
        return 1;
    }
    return 0;
}

int sbx_q_step(struct sbx_q *q, const char *what, sbx_error_t **err)
{
    int rc;

    if (q->st->pg != NULL) {
        return pg_step(q, what, err);
    }
    rc = sqlite3_step(q->s);
    if (rc == SQLITE_ROW) {
        return 1;
    }
    if (rc == SQLITE_DONE) {
        return 0;
    }
    if (rc == SQLITE_CONSTRAINT) {
        sbx_store_fail(q->st, err, what);
        if (err != NULL && *err != NULL) {
            (*err)->code = EEXIST;
        }
        return -1;
    }
    return sbx_store_fail(q->st, err, what);
}

int64_t sbx_q_changes(struct sbx_q *q)
{
    if (q->st->pg != NULL) {
        const char *n = q->res ? PQcmdTuples(q->res) : "";

        return n[0] ? strtoll(n, NULL, 10) : 0;
    }
    return sqlite3_changes(q->st->db);
}

const char *sbx_q_col_text(struct sbx_q *q, int i)
{
    if (q->st->pg != NULL) {
        if (q->res == NULL || q->row < 0 || PQgetisnull(q->res, q->row, i)) {
            return NULL;
        }
        return PQgetvalue(q->res, q->row, i);
    }
    return (const char *)sqlite3_column_text(q->s, i);
}

char *sbx_q_col_strdup(struct sbx_q *q, int i)
{
    const char *t = sbx_q_col_text(q, i);

    return t ? xstrdup(t) : NULL;
}

int64_t sbx_q_col_int64(struct sbx_q *q, int i)
{
    if (q->st->pg != NULL) {
        const char *t = sbx_q_col_text(q, i);

        return t ? strtoll(t, NULL, 10) : 0;
    }
    return sqlite3_column_int64(q->s, i);
}

double sbx_q_col_double(struct sbx_q *q, int i)
{
    if (q->st->pg != NULL) {
        const char *t = sbx_q_col_text(q, i);

        return t ? strtod(t, NULL) : 0.0;
    }
    return sqlite3_column_double(q->s, i);
}

int sbx_q_col_null(struct sbx_q *q, int i)
{
    if (q->st->pg != NULL) {
        return q->res == NULL || q->row < 0 || PQgetisnull(q->res, q->row, i);
    }
    return sqlite3_column_type(q->s, i) == SQLITE_NULL;
}

int sbx_store_exec(struct sbx_store *st, const char *sql, sbx_error_t **err)
{
    if (st->pg != NULL) {
        PGresult *res;

        pg_revive(st);
        res = PQexec(st->pg, sql);
        ExecStatusType rs = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        int r = 0;

        if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
            r = sbx_store_fail(st, err, sql);
        }
        PQclear(res);
        return r;
    }
    if (sqlite3_exec(st->db, sql, NULL, NULL, NULL) != SQLITE_OK) {
        return sbx_store_fail(st, err, sql);
    }
    return 0;
}

int sbx_store_begin(struct sbx_store *st, sbx_error_t **err)
{
    if (sbx_store_exec(st, st->pg ? "BEGIN" : "BEGIN IMMEDIATE", err) < 0) {
        return -1;
    }
    st->tx = 1;
    return 0;
}

int sbx_store_commit(struct sbx_store *st, sbx_error_t **err)
{
    int r = sbx_store_exec(st, "COMMIT", err);

    st->tx = 0; /* a COMMIT that failed ended the transaction too */
    return r;
}

int sbx_store_batch_begin(struct sbx_store *st, int relaxed, sbx_error_t **err)
{
    if (relaxed && st->pg == NULL && sbx_store_exec(st, "PRAGMA synchronous = NORMAL", err) < 0) {
        return -1;
    }
    if (sbx_store_begin(st, err) < 0) {
        if (relaxed && st->pg == NULL) {
            sbx_store_exec(st, "PRAGMA synchronous = FULL", NULL);
        }
        return -1;
    }
    if (relaxed && st->pg != NULL &&
        sbx_store_exec(st, "SET LOCAL synchronous_commit = off", err) < 0) {
        sbx_store_rollback(st);
        return -1;
    }
    return 0;
}

int sbx_store_batch_end(struct sbx_store *st, int relaxed, sbx_error_t **err)
{
    int r = sbx_store_commit(st, err);

    if (r < 0) {
        sbx_store_rollback(st);
    }
    if (relaxed && st->pg == NULL &&
        sbx_store_exec(st, "PRAGMA synchronous = FULL", r < 0 ? NULL : err) < 0) {
        r = -1;
    }
    return r;
}

void sbx_store_batch_abort(struct sbx_store *st, int relaxed)
{
    sbx_store_rollback(st);
    if (relaxed && st->pg == NULL) {
        sbx_store_exec(st, "PRAGMA synchronous = FULL", NULL);
    }
}

void sbx_store_rollback(struct sbx_store *st)
{
    sbx_store_exec(st, "ROLLBACK", NULL);
    st->tx = 0;
}
