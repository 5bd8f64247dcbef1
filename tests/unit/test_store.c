/* test_store.c - the store: records, transitions, bad input, and
 * durability across a SIGKILL of the writing process, then recovery.
 *
 * One suite, two backends: plain it runs on SQLite (test_store); with
 * SBX_TEST_STORE=pg it runs on the private PostgreSQL cluster that
 * tests/support/pg_harness.sh started (test_store_pg), each test on an empty
 * schema. The tests of opening (a file, a DSN) and of schema versions are
 * each backend's own. */
#include "test_common.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/wait.h>

#include "store/store_internal.h"

static void quiet_notice(void *arg, const char *message)
{
    (void)arg;
    (void)message;
}
#include "util/xalloc.h"

#define G (1LL << 30)

static char *dir;
static char *db;
static int on_pg;

#define PW_ENV "SBX_TEST_PG_PASSWORD"

/* Runs sql on the test database directly (not through the store). */
static void pg_sql(const char *sql)
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

static int setup(void **state)
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

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    free(db);
    return 0;
}

static struct sbx_store *open_ok(void)
{
    sbx_error_t *err = NULL;
    struct sbx_store *st = sbx_store_open_ex(db, on_pg ? PW_ENV : NULL, &err);

    if (st == NULL) {
        fail_msg("open: %s", err->msg);
    }
    return st;
}

/* A valid job; the caller may spoil a field. Free with sbx_job_rec_clear(). */
static void job_init(struct sbx_job_rec *j, const char *id, const char *pool, const char *cls)
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
static void expect_count(const char *sql, long want)
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

static void insert_ok(struct sbx_store *st, const char *id, const char *pool, const char *cls,
                      int64_t at)
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

static void ok(int r, sbx_error_t **err)
{
    if (r < 0) {
        fail_msg("%s", (*err)->msg);
    }
}

static void test_store_record(void **state)
{
    struct sbx_store *st = open_ok();
    struct sbx_job_rec j = {0};
    sbx_error_t *err = NULL;
    const char *leases[] = {"lease-1", "lease-2"};
    json_t *iso;
    json_t *o;
    char *text;

    (void)state;
    insert_ok(st, "job-1", "ci", "heavy", 1000000);
    ok(sbx_store_job_get(st, "job-1", &j, &err), &err);
    assert_int_equal(j.state, SBX_JOB_QUEUED);
    assert_string_equal(j.task, "job-1"); /* a CI job is a one-command task */
    assert_int_equal(j.queued_at, 1000000);
    assert_int_equal(j.limits.memory, 8 * G);
    /* the values are kept for the exec; the record shows the names only */
    assert_string_equal(json_string_value(json_object_get(j.env, "LANG")), "C.UTF-8");
    assert_int_equal(json_object_size(j.env), 2);
    ok(sbx_store_job_granted(st, "job-1", 1005000, &err), &err);
    ok(sbx_store_job_ready(st, "job-1", "task-9", "docker", "sbx-sandbox:abc", 1007000, &err),
       &err);
    ok(sbx_store_job_set_leases(st, "job-1", leases, 2, &err), &err);
    iso = json_pack("{s:s, s:[s]}", "isolation", "partial", "unenforced", "disk");
    ok(sbx_store_job_set_isolation(st, "job-1", iso, &err), &err);
    json_decref(iso);
    ok(sbx_store_job_end(
           st, "job-1", &(struct sbx_job_end){SBX_JOB_FINISHED, 3, "exit status 3", 12, 2, 1090000},
           &err),
       &err);
    ok(sbx_store_job_get(st, "job-1", &j, &err), &err);
    o = sbx_job_rec_to_json(&j);
    text = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    assert_string_equal(
        text,
        "{\"argv\":[\"make\",\"test\"],\"class\":\"heavy\",\"client\":\"\",\"created_at\":1000.0,"
        "\"credential_leases\":[\"lease-1\",\"lease-2\"],\"egress\":{\"allowed\":12,"
        "\"denied\":2},\"ended_at\":1090.0,\"env_names\":[\"CI\",\"LANG\"],\"exec_path\":null,"
        "\"exit_status\":3,"
        "\"id\":\"job-1\","
        "\"image\":\"sbx-sandbox:abc\",\"isolation\":\"partial\","
        "\"labels\":{\"repo\":\"stackra\"},\"limits\":{"
        "\"cpus\":2.0,\"disk\":42949672960,\"idle\":3600,\"max\":28800,\"memory\":"
        "8589934592,\"pids\":4096},\"pool\":\"ci\",\"provider\":\"docker\",\"reason\":"
        "\"exit status 3\",\"started_at\":1005.0,\"state\":\"finished\",\"task\":"
        "\"task-9\",\"timings\":{\"finished_at\":1090.0,\"granted_at\":1005.0,"
        "\"queued_at\":1000.0,\"ready_at\":1007.0},\"unenforced\":[\"disk\"],"
        "\"warm\":null,\"worktree\":\"/srv/wt/1\"}");
    assert_null(strstr(text, "C.UTF-8"));
    free(text);
    json_decref(o);
    sbx_job_rec_clear(&j);
    /* no env: NULL in the record, an empty list of names */
    job_init(&j, "job-2", "ci", "light");
    json_decref(j.env);
    j.env = NULL;
    ok(sbx_store_job_insert(st, &j, &err), &err);
    ok(sbx_store_job_get(st, "job-2", &j, &err), &err);
    assert_null(j.env);
    o = sbx_job_rec_to_json(&j);
    assert_int_equal(json_array_size(json_object_get(o, "env_names")), 0);
    json_decref(o);
    sbx_job_rec_clear(&j);
    sbx_store_close(st);
}

static void expect_err(int r, sbx_error_t **err, int code, const char *fragment)
{
    assert_int_equal(r, -1);
    assert_non_null(*err);
    if ((code != 0 && (*err)->code != code) || strstr((*err)->msg, fragment) == NULL) {
        fail_msg("got %d '%s', wanted %d '%s'", (*err)->code, (*err)->msg, code, fragment);
    }
    sbx_error_free(err);
}

static void test_store_transitions(void **state)
{
    struct sbx_store *st = open_ok();
    struct sbx_job_rec *list = NULL;
    size_t n = 0;
    sbx_error_t *err = NULL;

    (void)state;
    insert_ok(st, "a", "ci", "light", 0);
    insert_ok(st, "b", "agent", "light", 0);
    insert_ok(st, "c", "ci", "light", 0);
    expect_err(sbx_store_job_ready(st, "a", NULL, NULL, NULL, 0, &err), &err, EINVAL,
               "store: job a is queued, not running");
    ok(sbx_store_job_granted(st, "a", 0, &err), &err);
    expect_err(sbx_store_job_granted(st, "a", 0, &err), &err, EINVAL,
               "job a is running, not queued");
    expect_err(sbx_store_job_granted(st, "zz", 0, &err), &err, SBX_E_NOTFOUND,
               "store: no job 'zz'");
    ok(sbx_store_job_end(st, "b",
                         &(struct sbx_job_end){SBX_JOB_CANCELLED, -1, "cancelled by user", 0, 0, 0},
                         &err),
       &err);
    expect_err(
        sbx_store_job_end(st, "b", &(struct sbx_job_end){SBX_JOB_FINISHED, 0, NULL, 0, 0, 0}, &err),
        &err, EINVAL, "job b is cancelled, not queued or running");
    expect_err(
        sbx_store_job_end(st, "a", &(struct sbx_job_end){SBX_JOB_RUNNING, 0, NULL, 0, 0, 0}, &err),
        &err, EINVAL, "not running");
    expect_err(sbx_store_job_end(st, "a",
                                 &(struct sbx_job_end){SBX_JOB_FINISHED, 300, NULL, 0, 0, 0}, &err),
               &err, EINVAL, "bad reason, egress count or exit status");
    expect_err(sbx_store_job_end(st, "a",
                                 &(struct sbx_job_end){SBX_JOB_FINISHED, 0, "two\nlines", 0, 0, 0},
                                 &err),
               &err, EINVAL, "bad reason");
    ok(sbx_store_job_list(st, SBX_JOB_QUEUED, &list, &n, &err), &err);
    assert_int_equal(n, 1);
    assert_string_equal(list[0].id, "c");
    sbx_job_rec_free_array(list, n);
    ok(sbx_store_job_list(st, -1, &list, &n, &err), &err);
    assert_int_equal(n, 3);
    assert_string_equal(list[0].id, "a");
    assert_string_equal(list[1].id, "b");
    assert_true(list[0].seq < list[1].seq && list[1].seq < list[2].seq);
    sbx_job_rec_free_array(list, n);
    expect_err(sbx_store_job_list(st, 17, &list, &n, &err), &err, EINVAL, "unknown job state");
    sbx_store_close(st);
}

static void test_store_bad_input(void **state)
{
    struct sbx_store *st = open_ok();
    struct sbx_job_rec j;
    struct sbx_task_rec t = {0};
    sbx_error_t *err = NULL;
    const char *bad_leases[] = {"ok", "has\ttab"};

    (void)state;
    expect_err(sbx_store_job_insert(st, NULL, &err), &err, EINVAL, "no job given");
#define SPOIL(stmt, fragment)                                                                      \
    do {                                                                                           \
        job_init(&j, "j1", "ci", "light");                                                         \
        stmt;                                                                                      \
        expect_err(sbx_store_job_insert(st, &j, &err), &err, EINVAL, fragment);                    \
        sbx_job_rec_clear(&j);                                                                     \
    } while (0)
    SPOIL((free(j.id), j.id = xstrdup("x y")), "job id must be 1-63 characters");
    SPOIL((free(j.id), j.id = NULL), "job id must be");
    SPOIL(j.task = xstrdup("../etc"), "task id must be");
    SPOIL((free(j.pool), j.pool = xstrdup("gpu")), "job j1: pool must be 'ci' or 'agent'");
    SPOIL((free(j.cls), j.cls = xstrdup("medium")), "class must be 'light' or 'heavy'");
    SPOIL((json_decref(j.argv), j.argv = json_array()), "argv must be an array of 1-4096");
    SPOIL((json_decref(j.argv), j.argv = json_string("make")), "argv must be an array");
    SPOIL((json_decref(j.argv), j.argv = json_pack("[s, i]", "make", 3)),
          "argv[1] is not a string");
    SPOIL((json_decref(j.labels), j.labels = json_array()), "labels must be an object");
    SPOIL((json_decref(j.labels), j.labels = json_pack("{s:i}", "n", 1)),
          "label 'n' is not a string");
    SPOIL((json_decref(j.env), j.env = json_array()), "job j1: env must be an object");
    SPOIL(json_object_set_new(j.env, "1FOO", json_string("x")), "env.1FOO: invalid variable name");
    SPOIL(json_object_set_new(j.env, "A-B", json_string("x")), "env.A-B: invalid variable name");
    SPOIL(json_object_set_new(j.env, "N", json_integer(1)), "env.N is not a string");
    SPOIL(j.limits.cpus = 0, "limits need cpus > 0");
    SPOIL(j.limits.pids = -1, "no negative value");
    SPOIL((free(j.worktree), j.worktree = xstrdup("")), "worktree, provider, image and reason");
    SPOIL((j.leases = xcalloc(2, sizeof(char *)), j.leases[0] = xstrdup("l1"),
           j.leases[1] = xstrdup("bad\nlease"), j.n_leases = 2),
          "credential lease id 1 must be");
#undef SPOIL
    insert_ok(st, "dup", "ci", "light", 0);
    job_init(&j, "dup", "ci", "light");
    expect_err(sbx_store_job_insert(st, &j, &err), &err, EEXIST, "store: job dup already exists");
    sbx_job_rec_clear(&j);
    expect_err(sbx_store_job_set_leases(st, "dup", bad_leases, 2, &err), &err, EINVAL,
               "credential lease id 1");
    expect_err(sbx_store_job_get(st, NULL, &j, &err), &err, EINVAL, "no job id given");
    expect_err(sbx_store_job_get(st, "nope", &j, &err), &err, SBX_E_NOTFOUND, "no job 'nope'");
    /* tasks */
    t.id = "t/1";
    expect_err(sbx_store_task_put(st, &t, &err), &err, EINVAL, "task id must be");
    t.id = "t1";
    t.pool = "gpu";
    expect_err(sbx_store_task_put(st, &t, &err), &err, EINVAL, "bad sandbox id, provider, pool");
    t.pool = "ci";
    ok(sbx_store_task_put(st, &t, &err), &err);
    expect_err(sbx_store_task_end(st, "t1", SBX_TASK_READY, NULL, 0, &err), &err, EINVAL,
               "a task ends ended or interrupted");
    ok(sbx_store_task_end(st, "t1", SBX_TASK_ENDED, "done", 0, &err), &err);
    expect_err(sbx_store_task_exec(st, "t1", 1, 0, &err), &err, EINVAL, "task t1 is ended");
    expect_err(sbx_store_task_exec(st, "t2", 1, 0, &err), &err, SBX_E_NOTFOUND, "no task 't2'");
    sbx_store_close(st);
}

/* SQLite: opening a file that is none, or in no directory. */
static void test_store_open_file(void **state)
{
    sbx_error_t *err = NULL;
    char *notdb;

    (void)state;
    assert_null(sbx_store_open(NULL, &err));
    expect_err(-1, &err, EINVAL, "store: no path given (runner.state)");
    assert_null(sbx_store_open("/nonexistent/dir/state.db", &err));
    expect_err(-1, &err, SBX_E_GENERIC, "store: /nonexistent/dir/state.db: cannot open");
    notdb = test_write_file(dir, "notdb", "this is not an SQLite database, not at all......\n");
    assert_null(sbx_store_open(notdb, &err));
    expect_err(-1, &err, SBX_E_GENERIC, "file is not a database");
    free(notdb);
}

/* ---- schema versions ---- */

/* The schema as version 1 wrote it (before jobs.env), verbatim. */
static const char schema_v1[] =
    "CREATE TABLE IF NOT EXISTS jobs ("
    " seq INTEGER PRIMARY KEY AUTOINCREMENT,"
    " id TEXT NOT NULL UNIQUE,"
    " task TEXT NOT NULL,"
    " pool TEXT NOT NULL CHECK (pool IN ('ci', 'agent')),"
    " class TEXT NOT NULL CHECK (class IN ('light', 'heavy')),"
    " argv TEXT NOT NULL,"
    " labels TEXT,"
    " worktree TEXT, provider TEXT, image TEXT,"
    " cpus REAL NOT NULL, memory INTEGER NOT NULL, disk INTEGER NOT NULL,"
    " pids INTEGER NOT NULL, idle INTEGER NOT NULL, max_life INTEGER NOT NULL,"
    " state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'finished', 'cancelled',"
    "  'interrupted')),"
    " queued_at INTEGER NOT NULL, granted_at INTEGER NOT NULL DEFAULT 0,"
    " ready_at INTEGER NOT NULL DEFAULT 0, finished_at INTEGER NOT NULL DEFAULT 0,"
    " exit_status INTEGER, reason TEXT,"
    " egress_allowed INTEGER NOT NULL DEFAULT 0, egress_denied INTEGER NOT NULL DEFAULT 0,"
    " leases TEXT NOT NULL DEFAULT '[]');"
    "CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, seq);"
    "CREATE INDEX IF NOT EXISTS jobs_task ON jobs (task);"
    "CREATE TABLE IF NOT EXISTS tasks ("
    " id TEXT PRIMARY KEY,"
    " sandbox_id TEXT, provider TEXT, pool TEXT,"
    " state TEXT NOT NULL CHECK (state IN ('starting', 'ready', 'ended', 'interrupted')),"
    " in_flight INTEGER NOT NULL DEFAULT 0,"
    " created_at INTEGER NOT NULL, last_activity INTEGER NOT NULL,"
    " ended_at INTEGER NOT NULL DEFAULT 0, reason TEXT);"
    "PRAGMA user_version = 1;"
    "INSERT INTO jobs (id, task, pool, class, argv, labels, cpus, memory, disk, pids, idle,"
    " max_life, state, queued_at) VALUES ('old-q', 'old-q', 'ci', 'light', '[\"make\"]',"
    " '{\"repo\":\"x\"}', 1.0, 1024, 0, 0, 0, 0, 'queued', 1000);"
    "INSERT INTO jobs (id, task, pool, class, argv, cpus, memory, disk, pids, idle, max_life,"
    " state, queued_at, finished_at, exit_status, reason) VALUES ('old-f', 'old-f', 'agent',"
    " 'heavy', '[\"ls\"]', 2.0, 2048, 0, 0, 0, 0, 'finished', 2000, 3000, 4, 'exit 4');"
    "INSERT INTO tasks (id, sandbox_id, provider, pool, state, created_at, last_activity)"
    " VALUES ('old-t', 'sbx-old', 'docker', 'agent', 'ready', 1, 2);";

static int db_version(const char *path)
{
    sqlite3 *h = NULL;
    sqlite3_stmt *s = NULL;
    int v = -1;

    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    assert_int_equal(sqlite3_prepare_v2(h, "PRAGMA user_version", -1, &s, NULL), SQLITE_OK);
    if (sqlite3_step(s) == SQLITE_ROW) {
        v = sqlite3_column_int(s, 0);
    }
    sqlite3_finalize(s);
    sqlite3_close(h);
    return v;
}

static void db_exec(const char *path, const char *sql)
{
    sqlite3 *h = NULL;
    char *msg = NULL;

    assert_int_equal(sqlite3_open(path, &h), SQLITE_OK);
    if (sqlite3_exec(h, sql, NULL, NULL, &msg) != SQLITE_OK) {
        fail_msg("sqlite: %s", msg);
    }
    sqlite3_close(h);
}

/* A version-1 file (no jobs.env, no jobs.client, no jobs.isolation) opens as
 * version 4 with every row kept (their client ""); a file newer than this code
 * is refused. */
static void test_store_migration(void **state)
{
    struct sbx_store *st;
    struct sbx_job_rec j = {0};
    struct sbx_job_rec *list = NULL;
    struct sbx_task_rec t = {0};
    size_t n = 0;
    sbx_error_t *err = NULL;

    (void)state;
    db_exec(db, schema_v1);
    assert_int_equal(db_version(db), 1);
    st = open_ok();
    assert_int_equal(db_version(db), 6);
    ok(sbx_store_job_list(st, -1, &list, &n, &err), &err);
    assert_int_equal(n, 2);
    assert_string_equal(list[0].id, "old-q");
    assert_int_equal(list[0].state, SBX_JOB_QUEUED);
    assert_string_equal(json_string_value(json_object_get(list[0].labels, "repo")), "x");
    assert_null(list[0].env);
    assert_string_equal(list[0].client, "");
    assert_string_equal(list[1].id, "old-f");
    assert_int_equal(list[1].exit_status, 4);
    assert_string_equal(list[1].reason, "exit 4");
    assert_int_equal(list[1].finished_at, 3000);
    sbx_job_rec_free_array(list, n);
    ok(sbx_store_task_get(st, "old-t", &t, &err), &err);
    assert_string_equal(t.sandbox_id, "sbx-old");
    sbx_task_rec_clear(&t);
    /* the old queued job still moves on; a new one carries env */
    ok(sbx_store_job_granted(st, "old-q", 0, &err), &err);
    insert_ok(st, "new-1", "ci", "light", 0);
    ok(sbx_store_job_get(st, "new-1", &j, &err), &err);
    assert_string_equal(json_string_value(json_object_get(j.env, "CI")), "1");
    sbx_job_rec_clear(&j);
    sbx_store_close(st);
    /* opening again changes nothing */
    st = open_ok();
    assert_int_equal(db_version(db), 6);
    ok(sbx_store_job_get(st, "new-1", &j, &err), &err);
    assert_int_equal(json_object_size(j.env), 2);
    sbx_job_rec_clear(&j);
    sbx_store_close(st);
    /* a newer file is refused, not downgraded */
    db_exec(db, "PRAGMA user_version = 7;");
    assert_null(sbx_store_open(db, &err));
    expect_err(-1, &err, SBX_E_CONFIG, "schema version 7 is newer than this sbx knows (6)");
    assert_int_equal(db_version(db), 7);
}

/* ---- durability ---- */

#define N_QUEUED 200

static int present_cb(void *ctx, const char *provider, const char *sandbox)
{
    (void)ctx;
    assert_string_equal(provider, "docker");
    if (strcmp(sandbox, "sbx-B") == 0) {
        return 1;
    }
    if (strcmp(sandbox, "sbx-E") == 0) {
        return -1; /* the provider cannot tell */
    }
    return 0;
}

static void task_put(struct sbx_store *st, const char *id, const char *sandbox,
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

static void running_in(struct sbx_store *st, const char *job, const char *task)
{
    struct sbx_job_rec j;
    sbx_error_t *err = NULL;

    job_init(&j, job, "agent", "light");
    j.task = xstrdup(task);
    ok(sbx_store_job_insert(st, &j, &err), &err);
    ok(sbx_store_job_granted(st, job, 0, &err), &err);
    sbx_job_rec_clear(&j);
}

/* The child: accepts jobs, starts tasks, leaves a transaction open, and is
 * killed with SIGKILL; it never closes the store. */
static void child_work(int fd)
{
    struct sbx_store *st = open_ok();
    char id[32];

    for (int i = 0; i < N_QUEUED; i++) {
        snprintf(id, sizeof(id), "q%03d", i);
        insert_ok(st, id, i % 2 ? "ci" : "agent", "light", 1000 + i);
    }
    task_put(st, "A", "sbx-A", SBX_TASK_READY, 1); /* exec in flight */
    running_in(st, "ja", "A");
    task_put(st, "B", "sbx-B", SBX_TASK_READY, 0); /* idle, sandbox present */
    running_in(st, "jb", "B");
    task_put(st, "C", "sbx-C", SBX_TASK_READY, 0); /* idle, sandbox gone */
    running_in(st, "jc", "C");
    task_put(st, "D", NULL, SBX_TASK_STARTING, 0); /* sandbox being created */
    running_in(st, "jd", "D");
    task_put(st, "E", "sbx-E", SBX_TASK_READY, 0); /* provider cannot tell */
    running_in(st, "je", "E");
    running_in(st, "jx", "no-task-row"); /* granted, no task yet */
    insert_ok(st, "done", "ci", "light", 0);
    sbx_store_exec(st, "BEGIN", NULL);
    insert_ok(st, "ghost", "ci", "light", 0); /* never committed */
    if (write(fd, "k", 1) != 1) {
        _exit(3);
    }
    pause();
    _exit(4);
}

static const struct sbx_recovered_task *find_rt(const struct sbx_recovered_task *a, size_t n,
                                                const char *task)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(a[i].task_id, task) == 0) {
            return &a[i];
        }
    }
    return NULL;
}

static void expect_job(struct sbx_store *st, const char *id, enum sbx_job_state state,
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

static void test_store_sigkill_recover(void **state)
{
    int fds[2];
    pid_t pid;
    char c;
    int st_;
    struct sbx_store *st;
    struct sbx_recovery r;
    struct sbx_task_rec t = {0};
    struct sbx_job_rec *all = NULL;
    size_t n_all = 0;
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(pipe(fds), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(fds[0]);
        child_work(fds[1]);
    }
    close(fds[1]);
    assert_int_equal(read(fds[0], &c, 1), 1);
    close(fds[0]);
    assert_int_equal(kill(pid, SIGKILL), 0);
    assert_int_equal(waitpid(pid, &st_, 0), pid);
    assert_true(WIFSIGNALED(st_) && WTERMSIG(st_) == SIGKILL);

    st = open_ok();
    ok(sbx_store_recover(st, present_cb, NULL, &r, &err), &err);
    /* every accepted queued job is still queued, in order, with its time */
    assert_int_equal(r.n_queued, N_QUEUED + 1);
    for (int i = 0; i < N_QUEUED; i++) {
        char id[32];

        snprintf(id, sizeof(id), "q%03d", i);
        assert_string_equal(r.queued[i].id, id);
        assert_int_equal(r.queued[i].queued_at, 1000 + i);
        assert_int_equal(r.queued[i].state, SBX_JOB_QUEUED);
    }
    assert_string_equal(r.queued[N_QUEUED].id, "done");
    /* B is re-adopted with its job */
    assert_int_equal(r.n_adopt, 1);
    assert_string_equal(r.adopt[0].task_id, "B");
    assert_string_equal(r.adopt[0].sandbox_id, "sbx-B");
    assert_string_equal(r.adopt[0].job_id, "jb");
    assert_int_equal(r.n_adopt_jobs, 1);
    assert_string_equal(r.adopt_jobs[0].id, "jb");
    /* A (exec in flight), D (creating), E (unknown) and jx's task are cleaned up */
    assert_int_equal(r.n_cleanup, 4);
    assert_non_null(find_rt(r.cleanup, r.n_cleanup, "A"));
    assert_string_equal(find_rt(r.cleanup, r.n_cleanup, "A")->sandbox_id, "sbx-A");
    assert_non_null(find_rt(r.cleanup, r.n_cleanup, "D"));
    assert_non_null(find_rt(r.cleanup, r.n_cleanup, "E"));
    assert_string_equal(find_rt(r.cleanup, r.n_cleanup, "no-task-row")->job_id, "jx");
    assert_null(find_rt(r.cleanup, r.n_cleanup, "C")); /* gone: nothing to clean */
    assert_int_equal(r.n_interrupted, 5);
    sbx_recovery_clear(&r);

    expect_job(st, "ja", SBX_JOB_INTERRUPTED, "runner restarted");
    expect_job(st, "jb", SBX_JOB_RUNNING, NULL);
    expect_job(st, "jc", SBX_JOB_INTERRUPTED, "runner restarted; sandbox gone");
    expect_job(st, "jd", SBX_JOB_INTERRUPTED, "runner restarted");
    expect_job(st, "je", SBX_JOB_INTERRUPTED, "runner restarted; sandbox gone");
    expect_job(st, "jx", SBX_JOB_INTERRUPTED, "runner restarted");
    ok(sbx_store_task_get(st, "A", &t, &err), &err);
    assert_int_equal(t.state, SBX_TASK_INTERRUPTED);
    assert_string_equal(t.reason, "runner restarted during an exec");
    ok(sbx_store_task_get(st, "B", &t, &err), &err);
    assert_int_equal(t.state, SBX_TASK_READY);
    sbx_task_rec_clear(&t);
    /* nothing lost, nothing half-written */
    ok(sbx_store_job_list(st, -1, &all, &n_all, &err), &err);
    assert_int_equal(n_all, N_QUEUED + 7);
    sbx_job_rec_free_array(all, n_all);
    expect_err(sbx_store_job_get(st, "ghost", &(struct sbx_job_rec){0}, &err), &err, SBX_E_NOTFOUND,
               "no job 'ghost'");
    /* recovery is idempotent: a second restart changes nothing */
    ok(sbx_store_recover(st, present_cb, NULL, &r, &err), &err);
    assert_int_equal(r.n_queued, N_QUEUED + 1);
    assert_int_equal(r.n_adopt, 1);
    assert_int_equal(r.n_cleanup, 0);
    assert_int_equal(r.n_interrupted, 0);
    sbx_recovery_clear(&r);
    sbx_store_close(st);
}

/* A writer that exits without closing (no cleanup at all) loses nothing. */
static void test_store_exit_without_close(void **state)
{
    pid_t pid;
    int st_;
    struct sbx_store *st;
    struct sbx_job_rec *q = NULL;
    size_t n = 0;
    sbx_error_t *err = NULL;

    (void)state;
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sbx_store *cs = open_ok();

        for (int i = 0; i < 50; i++) {
            char id[16];

            snprintf(id, sizeof(id), "x%d", i);
            insert_ok(cs, id, "ci", "heavy", 0);
        }
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st_, 0), pid);
    assert_true(WIFEXITED(st_) && WEXITSTATUS(st_) == 0);
    st = open_ok();
    ok(sbx_store_job_list(st, SBX_JOB_QUEUED, &q, &n, &err), &err);
    assert_int_equal(n, 50);
    assert_string_equal(q[49].id, "x49");
    sbx_job_rec_free_array(q, n);
    sbx_store_close(st);
}

/* PostgreSQL: a database whose schema version differs from this sbx's is
 * refused (every box of a fleet runs the same sbx), and left as it is. */
static void test_store_pg_version(void **state)
{
    struct sbx_store *st = open_ok();
    sbx_error_t *err = NULL;

    (void)state;
    insert_ok(st, "keep", "ci", "light", 0);
    sbx_store_close(st);
    st = open_ok(); /* the same version opens again */
    sbx_store_close(st);
    pg_sql("UPDATE sbx_meta SET value = '3' WHERE key = 'schema_version'");
    assert_null(sbx_store_open_ex(db, PW_ENV, &err));
    expect_err(-1, &err, SBX_E_CONFIG,
               "the database's schema version is 3, this sbx uses 2: every box of a fleet must "
               "run the same sbx");
    pg_sql("UPDATE sbx_meta SET value = '2' WHERE key = 'schema_version'");
    st = open_ok();
    expect_job(st, "keep", SBX_JOB_QUEUED, NULL);
    sbx_store_close(st);
}

/* PostgreSQL: a DSN that cannot work is one clear line (SBX_E_CONFIG: exit 2
 * at start), and the password never appears in it. */
/* (added) A database of schema version 1 (an older sbx) gets version 2's
 * tables once, its rows kept. */
static void test_store_pg_migrate_1(void **state)
{
    struct sbx_store *st = open_ok();

    (void)state;
    insert_ok(st, "old", "ci", "light", 0);
    sbx_store_close(st);
    pg_sql("DROP TABLE fleet_scale, fleet_spend, fleet_leader;"
           "UPDATE sbx_meta SET value = '1' WHERE key = 'schema_version'");
    st = open_ok();
    expect_job(st, "old", SBX_JOB_QUEUED, NULL);
    sbx_store_close(st);
    expect_count("SELECT count(*) FROM sbx_meta WHERE key = 'schema_version' AND value = '2'", 1);
    expect_count("SELECT count(*) FROM fleet_scale", 0);
    expect_count("SELECT count(*) FROM fleet_spend", 0);
    expect_count("SELECT count(*) FROM fleet_leader", 0);
}

static void test_store_pg_bad_dsn(void **state)
{
    sbx_error_t *err = NULL;
    char *dsn = NULL;
    const char *pw = getenv(PW_ENV);

    (void)state;
    /* nothing listens there */
    assert_true(asprintf(&dsn, "postgresql://sbx@/sbx?host=%s/nosuchdir", dir) > 0);
    assert_null(sbx_store_open_ex(dsn, PW_ENV, &err));
    assert_null(strchr(err->msg, '\n'));
    expect_err(-1, &err, SBX_E_CONFIG, "cannot connect: connection to server on socket");
    free(dsn);
    /* no such database */
    dsn = xstrdup(db);
    memcpy(strstr(dsn, "/sbx?") + 1, "xyz", 3);
    assert_null(sbx_store_open_ex(dsn, PW_ENV, &err));
    expect_err(-1, &err, SBX_E_CONFIG, "database \"xyz\" does not exist");
    free(dsn);
    /* a wrong password */
    setenv("SBX_TEST_WRONG_PW", "not-the-password", 1);
    assert_null(sbx_store_open_ex(db, "SBX_TEST_WRONG_PW", &err));
    assert_null(strstr(err->msg, "not-the-password"));
    expect_err(-1, &err, SBX_E_CONFIG, "password authentication failed for user \"sbx\"");
    /* the variable is not set */
    unsetenv("SBX_TEST_NO_SUCH_PW");
    assert_null(sbx_store_open_ex(db, "SBX_TEST_NO_SUCH_PW", &err));
    expect_err(-1, &err, SBX_E_CONFIG,
               "runner.database_password_env names SBX_TEST_NO_SUCH_PW, which is not set");
    /* a password in the DSN is refused, and not echoed */
    assert_true(asprintf(&dsn, "postgresql://sbx:%s@/sbx?host=/tmp", pw) > 0);
    assert_null(sbx_store_open_ex(dsn, NULL, &err));
    assert_null(strstr(err->msg, pw));
    expect_err(-1, &err, SBX_E_CONFIG,
               "runner.database holds a password; put it in the "
               "environment variable named by "
               "runner.database_password_env");
    free(dsn);
    /* not a DSN at all */
    assert_null(sbx_store_open_ex("postgresql://[::1", NULL, &err));
    expect_err(-1, &err, SBX_E_CONFIG, "runner.database is not a valid DSN");
}

/* ---- fleet (PostgreSQL) ---- */

static int fit_all(void *ctx, const struct sbx_job_rec *job)
{
    (void)ctx;
    (void)job;
    return 1;
}

static int fit_none(void *ctx, const struct sbx_job_rec *job)
{
    (void)ctx;
    (void)job;
    return -1;
}

/* the box's heavy slot is busy: a heavy job is passed over, light ones fit */
static int fit_light(void *ctx, const struct sbx_job_rec *job)
{
    (void)ctx;
    return strcmp(job->cls, "heavy") == 0 ? 0 : 1;
}

static void box_register(struct sbx_store *st, const char *id, const char *pools, int64_t *epoch)
{
    struct sbx_box_rec b = {0};
    sbx_error_t *err = NULL;

    b.id = (char *)id;
    b.pools = json_loads(pools, 0, NULL);
    b.capacity = json_pack("{s:f, s:I}", "cpus", 2.0, "memory", (json_int_t)(4 * G));
    b.api = "unix:/run/sbx.sock";
    b.version = "test";
    ok(sbx_store_box_register(st, &b, 60000, epoch, &err), &err);
    json_decref(b.pools);
    json_decref(b.capacity);
}

static int64_t claim(struct sbx_store *st, const char *box, const char *pool, sbx_claim_fit_fn fit,
                     const char *want)
{
    struct sbx_job_rec j = {0};
    sbx_error_t *err = NULL;
    int rc = sbx_store_claim(st, box, pool, fit, NULL, &j, &err);
    int64_t token;

    ok(rc, &err);
    if (want == NULL) {
        assert_int_equal(rc, 0);
        return 0;
    }
    assert_int_equal(rc, 1);
    assert_string_equal(j.id, want);
    assert_string_equal(j.box, box);
    assert_true(j.token > 0);
    token = j.token;
    sbx_job_rec_clear(&j);
    return token;
}

static void test_store_pg_fleet(void **state)
{
    struct sbx_store *st = open_ok();
    struct sbx_box_rec *boxes = NULL;
    struct sbx_task_rec t = {0};
    struct sbx_reap reap;
    size_t n = 0;
    int64_t ea, eb, t1, t2, t3, t4;
    sbx_error_t *err = NULL;

    (void)state;
    box_register(st, "box-a", "[\"ci\"]", &ea);
    box_register(st, "box-b", "[\"ci\", \"agent\"]", &eb);
    ok(sbx_store_box_list(st, &boxes, &n, &err), &err);
    assert_int_equal(n, 2);
    assert_string_equal(boxes[1].id, "box-b");
    assert_int_equal(json_array_size(boxes[1].pools), 2);
    assert_true(boxes[0].lease_until >= boxes[0].heartbeat + 60000);
    sbx_box_rec_free_array(boxes, n);
    insert_ok(st, "c1", "ci", "light", 1000);
    insert_ok(st, "c2", "ci", "heavy", 1001);
    insert_ok(st, "c3", "ci", "light", 1002);
    insert_ok(st, "c4", "ci", "light", 1003);
    insert_ok(st, "a1", "agent", "light", 1004);
    /* oldest first across boxes; tokens only grow */
    t1 = claim(st, "box-a", "ci", fit_all, "c1");
    claim(st, "box-b", "ci", fit_none, NULL);       /* c2 does not fit yet: nothing passes it */
    t3 = claim(st, "box-b", "ci", fit_light, "c3"); /* a parked heavy is passed */
    t2 = claim(st, "box-b", "ci", fit_all, "c2");
    assert_true(t1 < t3 && t3 < t2);
    claim(st, "box-a", "agent", fit_all, "a1");
    /* fenced writes: the claim's token passes, another is refused */
    ok(sbx_store_job_move(
           st, &(struct sbx_job_move){.id = "c1", .token = t1, .step = SBX_JOB_STEP_GRANTED}, &err),
       &err);
    expect_err(
        sbx_store_job_move(
            st, &(struct sbx_job_move){.id = "c1", .token = t1 + 1000, .step = SBX_JOB_STEP_READY},
            &err),
        &err, ESTALE, "store: job c1 was taken over");
    expect_err(sbx_store_job_move(st, &(struct sbx_job_move){.id = "c1", .token = -1}, &err), &err,
               EINVAL, "negative claim token");
    /* box-a claims c4 (not started) and holds a task; then its lease lapses */
    t4 = claim(st, "box-a", "ci", fit_all, "c4");
    sbx_store_set_box(st, "box-a");
    task_put(st, "ta", "sbx-ta", SBX_TASK_READY, 1);
    sbx_store_set_box(st, NULL);
    ok(sbx_store_box_renew(st, "box-a", ea, 60000, &err), &err);
    ok(sbx_store_reap(st, 0, &reap, &err), &err);
    assert_int_equal(reap.boxes, 0); /* alive: nothing happens */
    pg_sql("UPDATE boxes SET lease_until = 5 WHERE id = 'box-a'");
    ok(sbx_store_reap(st, 0, &reap, &err), &err);
    assert_int_equal(reap.boxes, 1);
    assert_int_equal(reap.requeued, 2); /* c4, and a1 (claimed, never granted) */
    assert_int_equal(reap.interrupted, 1);
    assert_int_equal(reap.tasks, 1);
    expect_job(st, "c1", SBX_JOB_INTERRUPTED, "box lost");
    ok(sbx_store_task_get(st, "ta", &t, &err), &err);
    assert_int_equal(t.state, SBX_TASK_INTERRUPTED);
    assert_string_equal(t.reason, "box lost");
    sbx_task_rec_clear(&t);
    /* the lost box learns it: its renewal and its writes are refused */
    expect_err(sbx_store_box_renew(st, "box-a", ea, 60000, &err), &err, ESTALE,
               "box box-a lost its lease");
    expect_err(sbx_store_job_end(st, "c1",
                                 &(struct sbx_job_end){.state = SBX_JOB_FINISHED, .exit_status = 0},
                                 &err),
               &err, EINVAL, "job c1 is interrupted, not queued or running");
    expect_err(sbx_store_job_move(
                   st,
                   &(struct sbx_job_move){.id = "c4", .token = t4, .step = SBX_JOB_STEP_GRANTED},
                   &err),
               &err, ESTALE, "job c4 was taken over");
    /* a second reap finds nothing; c4 goes to a live box */
    ok(sbx_store_reap(st, 0, &reap, &err), &err);
    assert_int_equal(reap.boxes, 0);
    assert_true(claim(st, "box-b", "ci", fit_all, "c4") > t4);
    /* the lost box comes back: registering again gives it a new epoch */
    box_register(st, "box-a", "[\"ci\"]", &ea);
    ok(sbx_store_box_renew(st, "box-a", ea, 60000, &err), &err);
    /* bad input */
    expect_err(sbx_store_claim(st, "box b", "ci", fit_all, NULL, &(struct sbx_job_rec){0}, &err),
               &err, EINVAL, "a claim needs a box id and a pool");
    expect_err(sbx_store_claim(st, "box-b", "gpu", fit_all, NULL, &(struct sbx_job_rec){0}, &err),
               &err, EINVAL, "a claim needs a box id and a pool");
    {
        struct sbx_box_rec b = {.id = "x/y"};

        expect_err(sbx_store_box_register(st, &b, 1000, &ea, &err), &err, EINVAL,
                   "a box needs an id, pools");
    }
    sbx_store_close(st);
}

/* SQLite holds one box: the fleet calls say what they need. */
/* (added) The fleet autoscaler's shared rows (store/scale.c): one holder of
 * the leader lock, each job alerted once, and two connections deciding at the
 * same moment record one scale-up: the second sees the first's row. */
struct race {
    struct sbx_store *st;
    int rc;
    int saw_scaled;
};

static void decide_once(void *ctx, struct sbx_fleet_scale *fs)
{
    struct race *r = ctx;

    r->saw_scaled = fs->scaled;
    usleep(200 * 1000); /* both deciders are in here at once, unless locked out */
    fs->up = !fs->scaled && fs->queued > 0;
    fs->current = fs->pool_live;
    fs->wanted = fs->pool_live + 1;
    fs->paid = fs->live + 1;
    fs->spend_day += 1.0;
    fs->spend_month += 1.0;
    snprintf(fs->reason, sizeof(fs->reason), "test");
}

static void *race_main(void *arg)
{
    struct race *r = arg;
    struct sbx_fleet_scale fs;
    sbx_error_t *err = NULL;

    r->rc = sbx_store_fleet_scale(r->st, "ci", "box-a", 600000, decide_once, r, &fs, &err);
    sbx_error_free(&err);
    return NULL;
}

static void test_store_pg_fleet_scale(void **state)
{
    struct sbx_store *a = open_ok();
    struct sbx_store *b = open_ok();
    struct sbx_fleet_alert al[4];
    struct race ra = {.st = a}, rb = {.st = b};
    struct sbx_fleet_scale fs;
    pthread_t ta, tb;
    size_t n = 0;
    int64_t ea;
    sbx_error_t *err = NULL;

    (void)state;
    box_register(a, "box-a", "[\"ci\"]", &ea);
    /* the leader lock: one holder; the holder asks again; it goes with the connection */
    assert_int_equal(sbx_store_leader_hold(a, "box-a", &err), 1);
    assert_int_equal(sbx_store_leader_hold(b, "box-b", &err), 0);
    assert_int_equal(sbx_store_leader_hold(a, "box-a", &err), 1);
    sbx_store_close(a);
    a = open_ok();
    ra.st = a;
    assert_int_equal(sbx_store_leader_hold(b, "box-b", &err), 1);
    /* b's box has no live row: it is a dead leader. a's try finds the lock
     * held and deposes b (its session ends, the lock is free); a takes it */
    assert_int_equal(sbx_store_leader_hold(a, "box-a", &err), 0);
    for (int i = 0; i < 50 && sbx_store_leader_hold(a, "box-a", &err) != 1; i++) {
        usleep(100 * 1000);
    }
    assert_int_equal(sbx_store_leader_hold(a, "box-a", &err), 1);
    sbx_store_close(b); /* its backend was terminated */
    b = open_ok();
    rb.st = b;
    /* box-a is alive: nobody deposes it */
    assert_int_equal(sbx_store_leader_hold(b, "box-b", &err), 0);
    usleep(300 * 1000);
    assert_int_equal(sbx_store_leader_hold(a, "box-a", &err), 1);
    assert_int_equal(sbx_store_leader_hold(b, "box-b", &err), 0);
    /* each waiting job is alerted once, whoever asks */
    insert_ok(a, "w1", "ci", "light", 1000);
    ok(sbx_store_fleet_alerts(a, INT64_MAX / 2, "box-a", al, 4, &n, &err), &err);
    assert_int_equal(n, 1);
    assert_string_equal(al[0].id, "w1");
    assert_string_equal(al[0].pool, "ci");
    ok(sbx_store_fleet_alerts(b, INT64_MAX / 2, "box-b", al, 4, &n, &err), &err);
    assert_int_equal(n, 0);
    /* an ended job's alert row goes; a new waiting job is alerted */
    insert_ok(a, "w2", "ci", "light", 1001);
    pg_sql("UPDATE jobs SET state = 'cancelled' WHERE id = 'w2'");
    insert_ok(a, "w3", "ci", "light", 1002);
    ok(sbx_store_fleet_alerts(b, INT64_MAX / 2, "box-b", al, 4, &n, &err), &err);
    assert_int_equal(n, 1);
    assert_string_equal(al[0].id, "w3");
    pg_sql("UPDATE jobs SET state = 'cancelled' WHERE id = 'w3'");
    ok(sbx_store_fleet_alerts(b, INT64_MAX / 2, "box-b", al, 4, &n, &err), &err);
    assert_int_equal(n, 0);
    expect_count("SELECT count(*) FROM fleet_scale WHERE kind = 'alert'", 1); /* w1's */
    /* two deciders at once: one scale-up row */
    assert_int_equal(pthread_create(&ta, NULL, race_main, &ra), 0);
    assert_int_equal(pthread_create(&tb, NULL, race_main, &rb), 0);
    pthread_join(ta, NULL);
    pthread_join(tb, NULL);
    assert_int_equal(ra.rc + rb.rc, 1);
    assert_true(ra.rc >= 0 && rb.rc >= 0);
    assert_int_equal(ra.saw_scaled + rb.saw_scaled, 1); /* the second saw the first's row */
    /* the rows a new leader continues from: the scale-up, the spend of both */
    ra.saw_scaled = 0;
    assert_int_equal(sbx_store_fleet_scale(a, "ci", "box-a", 600000, decide_once, &ra, &fs, &err),
                     0);
    assert_int_equal(ra.saw_scaled, 1);
    assert_int_equal(fs.scale_ups, 1);
    assert_int_equal(fs.live, 1);
    assert_int_equal(fs.pool_live, 1);
    assert_int_equal(fs.promised, 2);
    assert_int_equal(fs.queued, 1);
    assert_int_equal(fs.oldest, 1000);
    assert_true(fs.spend_day > 2.5 && fs.spend_day < 3.5); /* 2 before, +1 here */
    expect_err(sbx_store_fleet_scale(a, "gpu", "box-a", 0, decide_once, &ra, &fs, &err), &err,
               EINVAL, "a scale decision needs a pool");
    sbx_store_close(a);
    sbx_store_close(b);
}

static void test_store_fleet_needs_pg(void **state)
{
    struct sbx_store *st = open_ok();
    struct sbx_reap reap;
    sbx_error_t *err = NULL;

    (void)state;
    expect_err(sbx_store_claim(st, "b", "ci", fit_all, NULL, &(struct sbx_job_rec){0}, &err), &err,
               EINVAL, "claiming a job needs the shared PostgreSQL store (runner.database)");
    expect_err(sbx_store_reap(st, 0, &reap, &err), &err, EINVAL, "needs the shared PostgreSQL");
    sbx_store_close(st);
}

int main(void)
{
    const struct CMUnitTest both[] = {
        cmocka_unit_test_setup_teardown(test_store_record, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_transitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_bad_input, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_sigkill_recover, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_exit_without_close, setup, teardown),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test_setup_teardown(test_store_open_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_migration, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_fleet_needs_pg, setup, teardown),
    };
    const struct CMUnitTest pg_only[] = {
        cmocka_unit_test_setup_teardown(test_store_pg_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_bad_dsn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_migrate_1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_fleet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_fleet_scale, setup, teardown),
    };
    const char *backend = getenv("SBX_TEST_STORE");
    int failed;

    on_pg = backend != NULL && strcmp(backend, "pg") == 0;
    if (on_pg && (getenv("SBX_TEST_PG_DSN") == NULL || getenv(PW_ENV) == NULL)) {
        fprintf(stderr, "test_store: SBX_TEST_STORE=pg needs the cluster of "
                        "tests/support/pg_harness.sh (SBX_TEST_PG_DSN, " PW_ENV ")\n");
        return 1;
    }
    failed = cmocka_run_group_tests_name(on_pg ? "store on PostgreSQL" : "store on SQLite", both,
                                         NULL, NULL);
    if (on_pg) {
        failed += cmocka_run_group_tests_name("PostgreSQL", pg_only, NULL, NULL);
    }
    else {
        failed += cmocka_run_group_tests_name("SQLite", sqlite_only, NULL, NULL);
    }
    return failed;
}
