/* test_store_fleet.c - the PostgreSQL store's own cases (its schema
 * version, a DSN that cannot work, an older schema) and the fleet's (boxes,
 * claims and fencing, reaping a lost box, the autoscaler's leader and shared
 * rows; docs/runner.md, "Several boxes").
 *
 * With SBX_TEST_STORE=pg (test_store_fleet_pg) they run on the private
 * PostgreSQL cluster of tests/support/pg_harness.sh, each on an empty schema;
 * plain (test_store_fleet) the SQLite store refuses the fleet calls. */
#include "store_fixture.h"
#include "wait.h"

#include <pthread.h>

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
    pg_sql("UPDATE sbx_meta SET value = '4' WHERE key = 'schema_version'");
    assert_null(sbx_store_open_ex(db, PW_ENV, &err));
    expect_err(-1, &err, SBX_E_CONFIG,
               "the database's schema version is 4, this sbx uses 3: every box of a fleet must "
               "run the same sbx");
    pg_sql("UPDATE sbx_meta SET value = '3' WHERE key = 'schema_version'");
    st = open_ok();
    expect_job(st, "keep", SBX_JOB_QUEUED, NULL);
    sbx_store_close(st);
}

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
    expect_count("SELECT count(*) FROM sbx_meta WHERE key = 'schema_version' AND value = '3'", 1);
    expect_count("SELECT count(*) FROM fleet_scale", 0);
    expect_count("SELECT count(*) FROM fleet_spend", 0);
    expect_count("SELECT count(*) FROM fleet_leader", 0);
}

/* (added) The connection dropped inside a batch (a database restart): the
 * writes after it fail rather than commit alone on a new session, the batch
 * ends in an error with none of its writes, and the next write opens the
 * connection again. */
static void test_store_pg_drop_in_batch(void **state)
{
    struct sbx_store *st = open_ok();
    sbx_error_t *err = NULL;

    (void)state;
    insert_ok(st, "a", "ci", "light", 0);
    insert_ok(st, "b", "ci", "light", 0);
    ok(sbx_store_batch_begin(st, 0, &err), &err);
    ok(sbx_store_job_granted(st, "a", 1, &err), &err);
    pg_sql("SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
           "WHERE pid <> pg_backend_pid() AND datname = current_database()");
    assert_int_equal(sbx_store_job_granted(st, "b", 1, &err), -1);
    sbx_error_free(&err);
    assert_int_equal(sbx_store_batch_end(st, 0, &err), -1);
    sbx_error_free(&err);
    expect_job(st, "a", SBX_JOB_QUEUED, NULL);
    expect_job(st, "b", SBX_JOB_QUEUED, NULL);
    ok(sbx_store_job_granted(st, "b", 2, &err), &err);
    expect_job(st, "b", SBX_JOB_RUNNING, NULL);
    sbx_store_close(st);
}

/* PostgreSQL: a DSN that cannot work is one clear line (SBX_E_CONFIG: exit 2
 * at start), and the password never appears in it. */
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
    /* (the harness names the database: postgresql://sbx@/<db>?host=...) */
    assert_non_null(strchr(db, '?'));
    assert_true(asprintf(&dsn, "postgresql://sbx@/xyz%s", strchr(db, '?')) > 0);
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
    wait_until(sbx_store_leader_hold(a, "box-a", &err) == 1, 30, NULL,
               "box-a to take the leader lock once the dead box-b's session ended");
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

/* SQLite holds one box: the fleet calls say what they need. */
/* (added) Task ids across boxes (docs/runner.md, "Task ids"): the claim
 * passes over a job whose task another job holds (claimed or running, in any
 * pool) or whose task is live, and takes it once the task is free; a job of
 * another client in a task (a row written behind the API's back) ends
 * cancelled in the claim's transaction, never claimed. */
static void task_job(struct sbx_store *st, const char *id, const char *pool, const char *task,
                     const char *client, int64_t at)
{
    struct sbx_job_rec j;
    sbx_error_t *err = NULL;

    job_init(&j, id, pool, "light");
    j.task = xstrdup(task);
    j.client = xstrdup(client);
    j.queued_at = at;
    ok(sbx_store_job_insert(st, &j, &err), &err);
    sbx_job_rec_clear(&j);
}

static void test_store_pg_claim_task(void **state)
{
    struct sbx_store *st = open_ok();
    int64_t e;
    sbx_error_t *err = NULL;

    (void)state;
    box_register(st, "box-a", "[\"ci\", \"agent\"]", &e);
    box_register(st, "box-b", "[\"ci\", \"agent\"]", &e);
    task_job(st, "alice-1", "ci", "T", "alice", 1000);
    task_job(st, "alice-2", "agent", "T", "alice", 1001); /* a race of two submits */
    task_job(st, "other", "agent", "U", "alice", 1002);
    claim(st, "box-a", "agent", fit_all, "alice-2");
    claim(st, "box-b", "ci", fit_all, NULL); /* alice-1's task is held by alice-2 */
    claim(st, "box-b", "agent", fit_all, "other");
    ok(sbx_store_job_granted(st, "alice-2", 0, &err), &err);
    sbx_store_set_box(st, "box-a");
    task_put(st, "T", "sbx-T", SBX_TASK_READY, 1);
    sbx_store_set_box(st, NULL);
    ok(sbx_store_job_end(st, "alice-2", &(struct sbx_job_end){SBX_JOB_FINISHED, 0, NULL, 0, 0, 0},
                         &err),
       &err);
    claim(st, "box-b", "ci", fit_all, NULL); /* its sandbox still lives */
    ok(sbx_store_task_end(st, "T", SBX_TASK_ENDED, NULL, 0, &err), &err);
    claim(st, "box-b", "ci", fit_all, "alice-1");
    /* mallory's row in alice's task, written behind the API: refused at the claim */
    pg_sql("INSERT INTO jobs (id, task, pool, class, argv, cpus, memory, disk, pids, idle, "
           "max_life, state, queued_at, client) VALUES ('mal-1', 'T', 'agent', 'light', "
           "'[\"x\"]', 1, 1, 1, 1, 1, 1, 'queued', 2000, 'mallory')");
    claim(st, "box-a", "agent", fit_all, NULL);
    expect_count("SELECT count(*) FROM jobs WHERE id = 'mal-1' AND state = 'cancelled' AND box IS "
                 "NULL",
                 1);
    sbx_store_close(st);
}

/* (added) The fleet's view lists what each box holds (claimed and running
 * jobs): "holds" and sbx_fleet_box_jobs come from it; and a page of jobs
 * with and without each filter reads on PostgreSQL as on SQLite. */
static void test_store_pg_view_and_page(void **state)
{
    struct sbx_store *st = open_ok();
    struct sbx_job_rec *page = NULL;
    size_t n = 0;
    int64_t e;
    sbx_error_t *err = NULL;
    json_t *v;
    json_t *holds;

    (void)state;
    box_register(st, "box-a", "[\"ci\"]", &e);
    insert_ok(st, "v1", "ci", "light", 1000);
    insert_ok(st, "v2", "ci", "light", 1001);
    insert_ok(st, "v3", "ci", "light", 1002);
    claim(st, "box-a", "ci", fit_all, "v1");
    claim(st, "box-a", "ci", fit_all, "v2");
    ok(sbx_store_job_granted(st, "v1", 0, &err), &err);
    v = sbx_store_fleet_json(st, &err);
    ok(v != NULL ? 0 : -1, &err);
    holds = json_object_get(json_array_get(json_object_get(v, "boxes"), 0), "holds");
    assert_int_equal(json_array_size(holds), 2);
    assert_string_equal(json_string_value(json_object_get(json_array_get(holds, 0), "job")), "v1");
    assert_string_equal(json_string_value(json_object_get(json_array_get(holds, 0), "state")),
                        "running");
    assert_string_equal(json_string_value(json_object_get(json_array_get(holds, 1), "state")),
                        "claimed");
    assert_int_equal(json_integer_value(json_object_get(
                         json_object_get(json_object_get(v, "queue"), "ci"), "queued")),
                     1);
    json_decref(v);
    /* (added, issue 31) a heartbeat newer than the reader's clock (a box
     * that renewed its lease while the view was read, or another box's
     * clock ahead): its age is 0, never negative */
    ok(sbx_store_exec(st, "UPDATE boxes SET heartbeat = heartbeat + 60000", &err), &err);
    v = sbx_store_fleet_json(st, &err);
    ok(v != NULL ? 0 : -1, &err);
    assert_true(json_number_value(json_object_get(json_array_get(json_object_get(v, "boxes"), 0),
                                                  "heartbeat_age")) == 0.0);
    json_decref(v);
    ok(sbx_store_job_page(st, &(struct sbx_job_filter){.state = -1, .limit = 10}, &page, &n, &err),
       &err);
    assert_int_equal(n, 3);
    assert_string_equal(page[0].id, "v3");
    sbx_job_rec_free_array(page, n);
    ok(sbx_store_job_page(
           st,
           &(struct sbx_job_filter){
               .state = SBX_JOB_QUEUED, .pool = "ci", .client = "", .since = 1001, .limit = 10},
           &page, &n, &err),
       &err);
    assert_int_equal(n, 2);
    assert_string_equal(page[0].id, "v3");
    assert_string_equal(page[1].id, "v2");
    sbx_job_rec_free_array(page, n);
    sbx_store_close(st);
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
    const struct CMUnitTest sqlite_only[] = {
        cmocka_unit_test_setup_teardown(test_store_fleet_needs_pg, setup, teardown),
    };
    const struct CMUnitTest pg_only[] = {
        cmocka_unit_test_setup_teardown(test_store_pg_version, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_bad_dsn, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_migrate_1, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_drop_in_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_fleet, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_fleet_scale, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_claim_task, setup, teardown),
        cmocka_unit_test_setup_teardown(test_store_pg_view_and_page, setup, teardown),
    };

    if (store_fixture_backend("test_store_fleet") != 0) {
        return 1;
    }
    if (on_pg) {
        return cmocka_run_group_tests_name("PostgreSQL and the fleet", pg_only, NULL, NULL);
    }
    return cmocka_run_group_tests_name("fleet on SQLite", sqlite_only, NULL, NULL);
}
