/* test_store.c - the store: records, transitions, bad input, and
 * durability across a SIGKILL of the writing process, then recovery.
 *
 * One suite, two backends: plain it runs on SQLite (test_store); with
 * SBX_TEST_STORE=pg it runs on the private PostgreSQL cluster that
 * tests/support/pg_harness.sh started (test_store_pg), each test on an empty
 * schema (store_fixture.h). Opening a file and the SQLite schema versions are
 * SQLite's own here; PostgreSQL's own cases and the fleet's are in
 * test_store_fleet.c. */
#include "store_fixture.h"

#include <signal.h>
#include <sys/wait.h>

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
        "\"exit status 3\",\"resized\":null,\"started_at\":1005.0,\"state\":\"finished\",\"task\":"
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
    assert_int_equal(db_version(db), 7);
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
    {
        /* (added) version 7: the old jobs' task ids are owned by their client */
        char o[64] = "x";

        assert_int_equal(sbx_store_task_owner(st, list[0].task, o, sizeof(o), &err), 1);
        assert_string_equal(o, "");
    }
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
    assert_int_equal(db_version(db), 7);
    ok(sbx_store_job_get(st, "new-1", &j, &err), &err);
    assert_int_equal(json_object_size(j.env), 2);
    sbx_job_rec_clear(&j);
    sbx_store_close(st);
    /* a newer file is refused, not downgraded */
    db_exec(db, "PRAGMA user_version = 8;");
    assert_null(sbx_store_open(db, &err));
    expect_err(-1, &err, SBX_E_CONFIG, "schema version 8 is newer than this sbx knows (7)");
    assert_int_equal(db_version(db), 8);
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

/* (added) Task ids are owned (docs/runner.md, "Task ids"): the first job
 * that names a task makes its client the owner, in the insert's transaction;
 * another client's job naming it is EPERM and stores nothing; the owner's
 * next job goes in; what else holds a task is told (queued, live). */
static void owned_job(struct sbx_store *st, const char *id, const char *task, const char *client,
                      int want)
{
    struct sbx_job_rec j;
    sbx_error_t *err = NULL;

    job_init(&j, id, "agent", "light");
    free(j.task);
    j.task = xstrdup(task);
    free(j.client);
    j.client = xstrdup(client);
    if (want == 0) {
        ok(sbx_store_job_insert(st, &j, &err), &err);
    }
    else {
        expect_err(sbx_store_job_insert(st, &j, &err), &err, want, "belongs to another client");
    }
    sbx_job_rec_clear(&j);
}

static void test_store_task_owner(void **state)
{
    struct sbx_store *st = open_ok();
    struct sbx_task_busy b;
    struct sbx_job_rec j = {0};
    sbx_error_t *err = NULL;
    char o[64];

    (void)state;
    assert_int_equal(sbx_store_task_owner(st, "deploy", o, sizeof(o), &err), 0);
    owned_job(st, "a1", "deploy", "alice", 0);
    assert_int_equal(sbx_store_task_owner(st, "deploy", o, sizeof(o), &err), 1);
    assert_string_equal(o, "alice");
    owned_job(st, "m1", "deploy", "mallory", EPERM);
    assert_int_equal(sbx_store_job_get(st, "m1", &j, &err), -1);
    sbx_error_free(&err);
    /* a job id is its own task unless it names one: owned the same way */
    owned_job(st, "a0", "a0", "alice", 0);
    owned_job(st, "m2", "a0", "mallory", EPERM);
    /* alice's next job: in; busy tells the queued one */
    owned_job(st, "a2", "deploy", "alice", 0);
    ok(sbx_store_task_busy(st, "deploy", "a2", &b, &err), &err);
    assert_string_equal(b.job, "a1");
    assert_true(b.queued);
    assert_false(b.live);
    /* ended jobs leave it free, its owner stays */
    ok(sbx_store_job_end(st, "a1", &(struct sbx_job_end){SBX_JOB_FINISHED, 0, NULL, 0, 0, 0}, &err),
       &err);
    ok(sbx_store_job_end(st, "a2", &(struct sbx_job_end){SBX_JOB_FINISHED, 0, NULL, 0, 0, 0}, &err),
       &err);
    assert_int_equal(sbx_store_task_busy(st, "deploy", "a3", &b, &err), 0);
    owned_job(st, "m3", "deploy", "mallory", EPERM);
    /* a live sandbox of the task holds it */
    task_put(st, "deploy", "sbx-d", SBX_TASK_READY, 0);
    assert_int_equal(sbx_store_task_busy(st, "deploy", "a3", &b, &err), 1);
    assert_true(b.live);
    /* the unix socket's "local" may use a task from before clients (owner "") */
    owned_job(st, "o1", "old", "", 0);
    owned_job(st, "l1", "old", "local", 0);
    owned_job(st, "x1", "old", "alice", EPERM);
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
        cmocka_unit_test_setup_teardown(test_store_task_owner, setup, teardown),
    };
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test_setup_teardown(test_store_open_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_migration, setup, teardown),
    };
    int failed;

    if (store_fixture_backend("test_store") != 0) {
        return 1;
    }
    failed = cmocka_run_group_tests_name(on_pg ? "store on PostgreSQL" : "store on SQLite", both,
                                         NULL, NULL);
    if (!on_pg) {
        failed += cmocka_run_group_tests_name("SQLite", sqlite_only, NULL, NULL);
    }
    return failed;
}
