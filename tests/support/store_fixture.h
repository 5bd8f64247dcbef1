/* store_fixture.h - the store tests' shared fixture (test_store.c,
 * test_store_fleet.c): one backend per run, SQLite in a temporary directory
 * or, with SBX_TEST_STORE=pg, the private PostgreSQL cluster that
 * tests/support/pg_harness.sh started, each test on an empty schema. */
#ifndef SBX_TEST_STORE_FIXTURE_H
#define SBX_TEST_STORE_FIXTURE_H

#include "test_common.h"

#include <errno.h>

#include "store/store_internal.h"
#include "util/xalloc.h"

#define G (1LL << 30)
#define PW_ENV "SBX_TEST_PG_PASSWORD"

static char *dir;
static char *db;
static int on_pg;

static inline void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}

/* Runs sql on the test database directly (not through the store). */
static inline void pg_sql(const char *sql)
{
    const char *keys[] = {"dbname", "password", NULL};
    const char *vals[] = {getenv("SBX_TEST_PG_DSN"), getenv(PW_ENV), NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    PGresult *res;

    if (PQstatus(c) != CONNECTION_OK) {
        fail_msg("pg: %s", PQerrorMessage(c));
    }
    PQsetNoticeProcessor(c, quiet_notice, NULL);
    res = PQexec(c, sql);
    if (PQresultStatus(res) != PGRES_COMMAND_OK && PQresultStatus(res) != PGRES_TUPLES_OK) {
        fail_msg("pg: %s: %s", sql, PQresultErrorMessage(res));
    }
    PQclear(res);
    PQfinish(c);
}

static inline int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    if (on_pg) {
        db = xstrdup(getenv("SBX_TEST_PG_DSN"));
        pg_sql("DROP TABLE IF EXISTS jobs, tasks, boxes, sbx_meta, fleet_scale, fleet_spend, "
               "fleet_leader CASCADE;"
               "DROP SEQUENCE IF EXISTS sbx_fence");
        return 0;
    }
    assert_true(asprintf(&db, "%s/state.db", dir) > 0);
    return 0;
}

static inline int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    free(db);
    return 0;
}

static inline struct sbx_store *open_ok(void)
{
    sbx_error_t *err = NULL;
    struct sbx_store *st = sbx_store_open_ex(db, on_pg ? PW_ENV : NULL, &err);

    if (st == NULL) {
        fail_msg("open: %s", err->msg);
    }
    return st;
}

/* A valid job; the caller may spoil a field. Free with sbx_job_rec_clear(). */
static inline void job_init(struct sbx_job_rec *j, const char *id, const char *pool,
                            const char *cls)
{
    memset(j, 0, sizeof(*j));
    j->id = xstrdup(id);
    j->pool = xstrdup(pool);
    j->cls = xstrdup(cls);
    j->argv = json_pack("[s, s]", "make", "test");
    j->labels = json_pack("{s:s}", "repo", "stackra");
    j->worktree = xstrdup("/srv/wt/1");
    j->env = json_pack("{s:s, s:s}", "CI", "1", "LANG", "C.UTF-8");
    j->limits.cpus = 2.0;
    j->limits.memory = 8 * G;
    j->limits.disk = 40 * G;
    j->limits.pids = 4096;
    j->limits.idle = 3600;
    j->limits.max = 8 * 3600;
}

/* (added) sql's one integer, read through libpq directly, is want. */
static inline void expect_count(const char *sql, long want)
{
    const char *keys[] = {"dbname", "password", NULL};
    const char *vals[] = {getenv("SBX_TEST_PG_DSN"), getenv(PW_ENV), NULL};
    PGconn *c = PQconnectdbParams(keys, vals, 1);
    PGresult *res = PQexec(c, sql);

    if (PQresultStatus(res) != PGRES_TUPLES_OK || PQntuples(res) != 1) {
        fail_msg("pg: %s: %s", sql, PQresultErrorMessage(res));
    }
    assert_int_equal(atol(PQgetvalue(res, 0, 0)), want);
    PQclear(res);
    PQfinish(c);
}

static inline void insert_ok(struct sbx_store *st, const char *id, const char *pool,
                             const char *cls, int64_t at)
{
    struct sbx_job_rec j;
    sbx_error_t *err = NULL;

    job_init(&j, id, pool, cls);
    j.queued_at = at;
    if (sbx_store_job_insert(st, &j, &err) < 0) {
        fail_msg("insert %s: %s", id, err->msg);
    }
    sbx_job_rec_clear(&j);
}

static inline void ok(int r, sbx_error_t **err)
{
    if (r < 0) {
        fail_msg("%s", (*err)->msg);
    }
}

static inline void expect_err(int r, sbx_error_t **err, int code, const char *fragment)
{
    assert_int_equal(r, -1);
    assert_non_null(*err);
    if ((code != 0 && (*err)->code != code) || strstr((*err)->msg, fragment) == NULL) {
        fail_msg("got %d '%s', wanted %d '%s'", (*err)->code, (*err)->msg, code, fragment);
    }
    sbx_error_free(err);
}

static inline void task_put(struct sbx_store *st, const char *id, const char *sandbox,
                            enum sbx_task_state state, int in_flight)
{
    struct sbx_task_rec t = {0};
    sbx_error_t *err = NULL;

    t.id = (char *)id;
    t.sandbox_id = (char *)sandbox;
    t.provider = "docker";
    t.pool = "agent";
    t.state = state;
    ok(sbx_store_task_put(st, &t, &err), &err);
    if (in_flight) {
        ok(sbx_store_task_exec(st, id, 1, 0, &err), &err);
    }
}

static inline void expect_job(struct sbx_store *st, const char *id, enum sbx_job_state state,
                              const char *reason)
{
    struct sbx_job_rec j = {0};
    sbx_error_t *err = NULL;

    ok(sbx_store_job_get(st, id, &j, &err), &err);
    if (j.state != state || (reason && (j.reason == NULL || strcmp(j.reason, reason) != 0))) {
        fail_msg("job %s: %s '%s', wanted %s '%s'", id, sbx_job_state_name(j.state),
                 j.reason ? j.reason : "", sbx_job_state_name(state), reason ? reason : "");
    }
    if (state == SBX_JOB_INTERRUPTED) {
        assert_true(j.finished_at > 0);
    }
    sbx_job_rec_clear(&j);
}

/* Sets on_pg from SBX_TEST_STORE; 0, or 1 (said on stderr) when the
 * PostgreSQL run lacks the harness's cluster. */
static inline int store_fixture_backend(const char *prog)
{
    const char *backend = getenv("SBX_TEST_STORE");

    on_pg = backend != NULL && strcmp(backend, "pg") == 0;
    if (on_pg && (getenv("SBX_TEST_PG_DSN") == NULL || getenv(PW_ENV) == NULL)) {
        fprintf(stderr,
                "%s: SBX_TEST_STORE=pg needs the cluster of tests/support/pg_harness.sh "
                "(SBX_TEST_PG_DSN, " PW_ENV ")\n",
                prog);
        return 1;
    }
    return 0;
}

#endif
