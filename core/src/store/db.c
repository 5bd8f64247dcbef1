/* db.c - one statement API over SQLite and libpq (db.h). */
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

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

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A connection the server dropped (a restart of the database) is opened again
 * before the next statement; that statement fails if it cannot be. Never
 * inside a transaction: the server ended it with the connection, and a
 * statement on a new session would commit alone, outside what the caller
 * meant as one unit; it fails instead, the caller rolls back, and the
 * statement after the rollback opens the connection again. (added) A
 * connection whose call passed its deadline is opened again the same way:
 * its server may still be running that call, and its answer must not be
 * taken for the next one's. */
static void pg_revive(struct sbx_store *st)
{
    int64_t deadline;

    if ((PQstatus(st->pg) != CONNECTION_BAD && !st->timed_out) || st->tx) {
        return;
    }
    /* (added) the new connection is made within the call's deadline too:
     * a server that does not answer leaves it timed out, tried again by the
     * next call */
    st->timed_out = 0;
    if (!PQresetStart(st->pg)) {
        return;
    }
    deadline = mono_ms() + sbx_store_pg_deadline_ms();
    for (;;) {
        PostgresPollingStatusType ps = PQresetPoll(st->pg);
        struct pollfd p = {PQsocket(st->pg), POLLIN, 0};
        int64_t left = deadline - mono_ms();

        if (ps == PGRES_POLLING_OK) {
            (void)PQsetnonblocking(st->pg, 1); /* (changed, issue 31) as pg.c opened it */
            return;
        }
        if (ps == PGRES_POLLING_FAILED) {
            return;
        }
        if (left <= 0) {
            st->timed_out = 1;
            sbx_store_gate_set(st->gate, 1);
            return;
        }
        p.events = ps == PGRES_POLLING_WRITING ? POLLOUT : POLLIN;
        if (poll(&p, 1, (int)left) < 0 && errno != EINTR) {
            return;
        }
    }
}

void sbx_store_set_gate(struct sbx_store *st, struct sbx_store_gate *g)
{
    st->gate = g;
}

int64_t sbx_store_gate_down(const struct sbx_store_gate *g)
{
    return g == NULL ? 0 : __atomic_load_n(&g->down_since, __ATOMIC_ACQUIRE);
}

void sbx_store_gate_set(struct sbx_store_gate *g, int down)
{
    int64_t zero = 0;

    if (g == NULL) {
        return;
    }
    if (!down) {
        __atomic_store_n(&g->down_since, 0, __ATOMIC_RELEASE);
        return;
    }
    /* the first call past its deadline dates the stall */
    __atomic_compare_exchange_n(&g->down_since, &zero, mono_ms(), 0, __ATOMIC_ACQ_REL,
                                __ATOMIC_ACQUIRE);
}

/* (added) Why a call is refused at once: its gate is closed, or it is inside
 * a transaction whose call passed its deadline. NULL: it may run. */
static const char *pg_refused(struct sbx_store *st, char *buf, size_t len)
{
    int64_t since = sbx_store_gate_down(st->gate);

    if (since != 0) {
        snprintf(buf, len,
                 "the database has not answered within %d ms for %lld ms; calls fail at once "
                 "until it answers again",
                 sbx_store_pg_deadline_ms(), (long long)(mono_ms() - since));
        return buf;
    }
    if (st->timed_out && st->tx) {
        snprintf(buf, len, "an earlier call of this transaction passed its deadline (%d ms)",
                 sbx_store_pg_deadline_ms());
        return buf;
    }
    return NULL;
}

/* (added) One call with a deadline (sbx_store_pg_deadline_ms): sent without
 * blocking (the connection is non-blocking: changed, issue 31), its answer
 * awaited with poll(2). NULL with msg set when it could not be sent, or
 * passed its deadline (then st->timed_out: the connection is opened again
 * before the next statement, and a gate closes). The last result otherwise,
 * as PQexec returns it. */
static PGresult *pg_call(struct sbx_store *st, const char *sql, int n_params, const Oid *types,
                         const char *const *params, char *msg, size_t len)
{
    int64_t deadline = mono_ms() + sbx_store_pg_deadline_ms();
    PGresult *last = NULL, *res;
    int sent = n_params >= 0
                   ? PQsendQueryParams(st->pg, sql, n_params, types, params, NULL, NULL, 0)
                   : PQsendQuery(st->pg, sql);

    if (!sent) {
        snprintf(msg, len, "%s", PQerrorMessage(st->pg));
        return NULL;
    }
    for (;;) {
        int flushed = PQflush(st->pg); /* 0 all sent, 1 more to send, -1 error */

        /* (changed, issue 31) the connection is non-blocking (pg.c): while a
         * part is still unsent, what the server sent is read too (PQflush's
         * contract), so neither side waits for the other */
        if (flushed >= 0 && !PQconsumeInput(st->pg)) {
            flushed = -1;
        }
        while (flushed == 0 && !PQisBusy(st->pg)) {
            res = PQgetResult(st->pg);
            if (res == NULL) {
                return last;
            }
            PQclear(last);
            last = res;
        }
        if (flushed < 0 || PQstatus(st->pg) == CONNECTION_BAD) {
            PQclear(last);
            snprintf(msg, len, "%s", PQerrorMessage(st->pg));
            return NULL;
        }
        {
            int64_t left = deadline - mono_ms();
            struct pollfd p = {PQsocket(st->pg), (short)(POLLIN | (flushed ? POLLOUT : 0)), 0};

            if (left <= 0) {
                PQclear(last);
                st->timed_out = 1;
                sbx_store_gate_set(st->gate, 1);
                snprintf(msg, len, "the database did not answer within %d ms",
                         sbx_store_pg_deadline_ms());
                return NULL;
            }
            if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR) {
                PQclear(last);
                snprintf(msg, len, "poll: %s", strerror(errno));
                return NULL;
            }
        }
    }
}

static int pg_step(struct sbx_q *q, const char *what, sbx_error_t **err)
{
    if (!q->ran) {
        ExecStatusType rs;

        char msg[512] = "";
        const char *why;

        q->ran = 1;
        q->row = -1;
        why = pg_refused(q->st, msg, sizeof(msg));
        if (why != NULL) {
            return sbx_error_set(err, SBX_E_GENERIC, "store: %s: %s: %s", q->st->path, what, why);
        }
        pg_revive(q->st);
        q->res = pg_call(q->st, q->sql, q->n_params, q->types, (const char *const *)q->params, msg,
                         sizeof(msg));
        rs = q->res ? PQresultStatus(q->res) : PGRES_FATAL_ERROR;
        if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
            const char *state = q->res ? PQresultErrorField(q->res, PG_DIAG_SQLSTATE) : NULL;

            if (q->res != NULL) {
                snprintf(msg, sizeof(msg), "%s", PQresultErrorMessage(q->res));
            }
            if (state != NULL && strcmp(state, "57014") == 0) {
                /* statement_timeout: the database is as good as stalled */
                q->st->timed_out = 1;
                sbx_store_gate_set(q->st->gate, 1);
            }
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
        ExecStatusType rs;
        char msg[512] = "";
        int r = 0;

        if (pg_refused(st, msg, sizeof(msg)) != NULL) {
            return sbx_error_set(err, SBX_E_GENERIC, "store: %s: %s: %s", st->path, sql, msg);
        }
        pg_revive(st);
        res = pg_call(st, sql, -1, NULL, NULL, msg, sizeof(msg));
        rs = res ? PQresultStatus(res) : PGRES_FATAL_ERROR;
        if (res == NULL) {
            sbx_store_one_line(msg);
            r = sbx_error_set(err, SBX_E_GENERIC, "store: %s: %s: %s", st->path, sql, msg);
        }
        else if (rs != PGRES_COMMAND_OK && rs != PGRES_TUPLES_OK) {
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
    if (st->pg != NULL && st->timed_out) {
        st->tx = 0; /* the reset before the next statement ends it on the server */
        return;
    }
    sbx_store_exec(st, "ROLLBACK", NULL);
    st->tx = 0;
}
