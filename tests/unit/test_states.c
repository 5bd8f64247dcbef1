/* test_states.c - one state machine per record (core/src/runner/jobstate.c,
 * core/src/store/states.h; docs/architecture.md, "One state machine per
 * record"): every move of a job and of a task the table allows is accepted
 * and every other refused; the store's SQL names the states of its table;
 * and runner_job_move / runner_task_move change the state only after a legal
 * event, with the store write of the transition (SQLite). */
#include "store_fixture.h"

#include "runner/jobs.h"
#include "runner/jobstate.h"
#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/rtask.h"
#include "store/states.h"

/* ---- the tables ---- */

#define B(s) (1u << (unsigned)((s) + 1)) /* bit of a state or of RJOB_NEW / RTASK_NEW */

static void test_job_table(void **state)
{
    /* written by hand from docs/architecture.md: who may take each event */
    const unsigned live = B(SBX_JOB_QUEUED) | B(SBX_JOB_RUNNING);
    const unsigned legal[RJOB_EVENTS] = {
        [RJOB_QUEUED] = B(RJOB_NEW),
        [RJOB_ADOPTED] = B(RJOB_NEW),
        [RJOB_GRANTED] = B(SBX_JOB_QUEUED),
        [RJOB_READY] = B(SBX_JOB_RUNNING),
        [RJOB_FINISHED] = live,
        [RJOB_CANCELLED] = live,
        [RJOB_INTERRUPTED] = live,
    };
    const enum sbx_job_state to[RJOB_EVENTS] = {
        [RJOB_QUEUED] = SBX_JOB_QUEUED,           [RJOB_ADOPTED] = SBX_JOB_RUNNING,
        [RJOB_GRANTED] = SBX_JOB_RUNNING,         [RJOB_READY] = SBX_JOB_RUNNING,
        [RJOB_FINISHED] = SBX_JOB_FINISHED,       [RJOB_CANCELLED] = SBX_JOB_CANCELLED,
        [RJOB_INTERRUPTED] = SBX_JOB_INTERRUPTED,
    };
    int accepted = 0;

    (void)state;
    for (int ev = 0; ev < RJOB_EVENTS; ev++) {
        for (int from = RJOB_NEW; from <= SBX_JOB_INTERRUPTED; from++) {
            int want = (legal[ev] & B(from)) != 0;
            int got = runner_job_event_ok(from, (enum rjob_event)ev);

            if (got != want) {
                fail_msg("job event %s from %s: %s, wanted %s",
                         runner_job_event_name((enum rjob_event)ev),
                         from == RJOB_NEW ? "new" : sbx_job_state_name((enum sbx_job_state)from),
                         got ? "accepted" : "refused", want ? "accepted" : "refused");
            }
            accepted += got;
        }
        assert_int_equal(runner_job_event_to((enum rjob_event)ev), to[ev]);
    }
    assert_int_equal(accepted, 2 + 1 + 1 + 3 * 2);
    /* out of range: refused */
    assert_false(runner_job_event_ok(SBX_JOB_QUEUED, RJOB_EVENTS));
    assert_false(runner_job_event_ok(SBX_JOB_INTERRUPTED + 1, RJOB_FINISHED));
    assert_false(runner_job_event_ok(-2, RJOB_QUEUED));
    /* every move the store's table allows is some event of the runner's */
    for (size_t i = 0; i < SBX_JOB_EDGES; i++) {
        for (int from = SBX_JOB_QUEUED; from <= SBX_JOB_INTERRUPTED; from++) {
            for (int t = SBX_JOB_QUEUED; t <= SBX_JOB_INTERRUPTED; t++) {
                int found = 0;

                if (!sbx_job_step_ok(sbx_job_edges[i].step, from, t)) {
                    continue;
                }
                for (int ev = 0; ev < RJOB_EVENTS; ev++) {
                    found |=
                        runner_job_event_step((enum rjob_event)ev) == (int)sbx_job_edges[i].step &&
                        (int)runner_job_event_to((enum rjob_event)ev) == t &&
                        runner_job_event_ok(from, (enum rjob_event)ev);
                }
                if (!found) {
                    fail_msg("the store's step %s from %s to %s has no event in the runner",
                             sbx_job_edges[i].name, sbx_job_state_name((enum sbx_job_state)from),
                             sbx_job_state_name((enum sbx_job_state)t));
                }
            }
        }
    }
}

static void test_task_table(void **state)
{
    const unsigned legal[RTASK_EVENTS] = {
        [RTASK_CREATED] = B(RTASK_NEW),
        [RTASK_ADOPTED] = B(RTASK_NEW),
        [RTASK_READY] = B(RT_STARTING),
        [RTASK_FAILED] = B(RT_STARTING),
        [RTASK_ENDING] = B(RT_STARTING) | B(RT_READY) | B(RT_FAILED),
        [RTASK_KEPT] = B(RT_ENDING),
        [RTASK_GONE] = B(RT_ENDING),
    };
    const int to[RTASK_EVENTS] = {
        [RTASK_CREATED] = RT_STARTING, [RTASK_ADOPTED] = RT_READY, [RTASK_READY] = RT_READY,
        [RTASK_FAILED] = RT_FAILED,    [RTASK_ENDING] = RT_ENDING, [RTASK_KEPT] = RT_READY,
        [RTASK_GONE] = RT_ENDING,
    };
    static const char *const names[] = {"new", "starting", "ready", "failed", "ending"};
    int rows = 0;

    (void)state;
    for (int ev = 0; ev < RTASK_EVENTS; ev++) {
        int row_from = -1;
        int row_to = -1;
        int step;

        for (int from = RTASK_NEW; from <= RT_ENDING; from++) {
            int want = (legal[ev] & B(from)) != 0;
            int got = runner_task_event_ok(from, (enum rtask_event)ev);

            if (got != want) {
                fail_msg("task event %s from %s: %s, wanted %s",
                         runner_task_event_name((enum rtask_event)ev), names[from + 1],
                         got ? "accepted" : "refused", want ? "accepted" : "refused");
            }
        }
        assert_int_equal(runner_task_event_to((enum rtask_event)ev), to[ev]);
        /* an event that stands for a write of the task's row: the store's
         * table allows that write */
        step = runner_task_event_row((enum rtask_event)ev, &row_from, &row_to);
        if (step >= 0) {
            rows++;
            if (!sbx_task_step_ok((enum sbx_task_step)step, row_from, row_to)) {
                fail_msg("task event %s writes %s -> %s, which the store refuses",
                         runner_task_event_name((enum rtask_event)ev),
                         sbx_task_state_name((enum sbx_task_state)row_from),
                         sbx_task_state_name((enum sbx_task_state)row_to));
            }
        }
    }
    assert_int_equal(rows, 3); /* ready, failed, gone */
    assert_false(runner_task_event_ok(RT_READY, RTASK_EVENTS));
    assert_false(runner_task_event_ok(RT_ENDING + 1, RTASK_ENDING));
}

/* The states named in a WHERE fragment of states.h, as bits. */
static unsigned sql_states(const char *sql, int task)
{
    unsigned bits = 0;
    int last = task ? SBX_TASK_INTERRUPTED : SBX_JOB_INTERRUPTED;

    for (int s = 0; s <= last; s++) {
        char quoted[32];

        snprintf(quoted, sizeof(quoted), "'%s'",
                 task ? sbx_task_state_name((enum sbx_task_state)s)
                      : sbx_job_state_name((enum sbx_job_state)s));
        if (strstr(sql, quoted) != NULL) {
            bits |= SBX_STATE_BIT(s);
        }
    }
    return bits;
}

static void test_store_sql_agrees(void **state)
{
    (void)state;
    for (size_t i = 0; i < SBX_JOB_EDGES; i++) {
        const struct sbx_job_edge *e = &sbx_job_edges[i];

        if (sql_states(e->from_sql, 0) != e->from) {
            fail_msg("job step %s: its SQL \"%s\" names other states than its row", e->name,
                     e->from_sql);
        }
        assert_ptr_equal(sbx_job_edge_of(e->step), e);
    }
    for (size_t i = 0; i < SBX_TASK_EDGES; i++) {
        const struct sbx_task_edge *e = &sbx_task_edges[i];

        if (e->from_sql != NULL && sql_states(e->from_sql, 1) != e->from) {
            fail_msg("task step %s: its SQL \"%s\" names other states than its row", e->name,
                     e->from_sql);
        }
    }
    /* the store refuses an end the table does not allow */
    assert_false(sbx_job_step_ok(SBX_JOB_STEP_END, SBX_JOB_RUNNING, SBX_JOB_QUEUED));
    assert_false(sbx_job_step_ok(SBX_JOB_STEP_GRANTED, SBX_JOB_RUNNING, SBX_JOB_RUNNING));
    assert_null(sbx_job_edge_of((enum sbx_job_step)42));
}

/* ---- the moves, on a runner with a store and nothing else ---- */

static struct sbx_runner *fake_runner(void)
{
    struct sbx_runner *r = xcalloc(1, sizeof(*r));

    pthread_mutex_init(&r->mu, NULL);
    pthread_cond_init(&r->cond, NULL);
    r->store = open_ok();
    return r;
}

static void fake_runner_free(struct sbx_runner *r)
{
    sbx_store_close(r->store);
    pthread_mutex_destroy(&r->mu);
    pthread_cond_destroy(&r->cond);
    free(r);
}

static struct rjob *new_job(const char *id)
{
    struct rjob *j = runner_job_new();

    snprintf(rjob_req_fill(j)->id, sizeof(rjob_req(j)->id), "%s", id);
    return j;
}

static void test_job_moves(void **state)
{
    struct sbx_runner *r = fake_runner();
    struct rjob *j = new_job("j1");
    struct sbx_job_rec rec = {0};
    sbx_error_t *err = NULL;

    (void)state;
    insert_ok(r->store, "j1", "ci", "light", 0);
    /* a new job is only queued or adopted */
    expect_err(runner_job_move(r, j, RJOB_GRANTED, NULL, &err), &err, EINVAL, "job j1 is new");
    assert_false(rjob_has_state(j));
    assert_int_equal(runner_job_move(r, j, RJOB_QUEUED, NULL, &err), 0);
    assert_int_equal(rjob_state(j), SBX_JOB_QUEUED);
    expect_err(runner_job_move(r, j, RJOB_QUEUED, NULL, &err), &err, EINVAL,
               "job j1 is queued: it cannot be queued");
    /* each move writes its step */
    assert_int_equal(runner_job_move(r, j, RJOB_GRANTED, &(struct rjob_move){.at = 5000}, &err), 0);
    assert_int_equal(rjob_state(j), SBX_JOB_RUNNING);
    ok(sbx_store_job_get(r->store, "j1", &rec, &err), &err);
    assert_int_equal(rec.state, SBX_JOB_RUNNING);
    assert_int_equal(rec.granted_at, 5000);
    assert_int_equal(
        runner_job_move(r, j, RJOB_READY,
                        &(struct rjob_move){.task = "j1", .provider = "docker", .image = "img:1"},
                        &err),
        0);
    ok(sbx_store_job_get(r->store, "j1", &rec, &err), &err);
    assert_string_equal(rec.image, "img:1");
    assert_true(rec.ready_at > 0);
    assert_int_equal(runner_job_move(r, j, RJOB_FINISHED,
                                     &(struct rjob_move){.exit_status = 3, .reason = "exit 3"},
                                     &err),
                     0);
    assert_int_equal(rjob_state(j), SBX_JOB_FINISHED);
    assert_int_equal(rjob_exit_status(j), 3);
    /* an end is final: refused, in memory and in the store alike */
    expect_err(runner_job_move(r, j, RJOB_CANCELLED, NULL, &err), &err, EINVAL,
               "job j1 is finished: it cannot be cancelled");
    assert_int_equal(rjob_state(j), SBX_JOB_FINISHED);
    ok(sbx_store_job_get(r->store, "j1", &rec, &err), &err);
    assert_int_equal(rec.state, SBX_JOB_FINISHED);
    assert_int_equal(rec.exit_status, 3);
    assert_string_equal(rec.reason, "exit 3");
    sbx_job_rec_clear(&rec);
    runner_job_free(j);

    /* a failed write: the job moves (1, the error said), unless strict */
    j = new_job("j2"); /* no record */
    assert_int_equal(runner_job_move(r, j, RJOB_QUEUED, NULL, NULL), 0);
    assert_int_equal(runner_job_move(r, j, RJOB_GRANTED, NULL, &err), 1);
    assert_non_null(err);
    assert_int_equal(err->code, SBX_E_NOTFOUND);
    sbx_error_free(&err);
    assert_int_equal(rjob_state(j), SBX_JOB_RUNNING);
    expect_err(runner_job_move(r, j, RJOB_CANCELLED, &(struct rjob_move){.strict = 1}, &err), &err,
               SBX_E_NOTFOUND, "no job 'j2'");
    assert_int_equal(rjob_state(j), SBX_JOB_RUNNING);
    /* memory only: no write */
    assert_int_equal(
        runner_job_move(r, j, RJOB_INTERRUPTED, &(struct rjob_move){.memory = 1}, &err), 0);
    assert_int_equal(rjob_state(j), SBX_JOB_INTERRUPTED);
    assert_int_equal(rjob_exit_status(j), -1);
    runner_job_free(j);

    /* fenced by the claim's token: another token is ESTALE, the job moves here */
    insert_ok(r->store, "j3", "ci", "light", 0);
    j = new_job("j3");
    rjob_set_token(j, 99);
    pthread_mutex_lock(&r->mu);
    assert_int_equal(runner_job_move_held(r, j, RJOB_QUEUED), 0);
    assert_int_equal(runner_job_move_held(r, j, RJOB_QUEUED), -1);
    pthread_mutex_unlock(&r->mu);
    assert_int_equal(runner_job_move(r, j, RJOB_GRANTED, NULL, &err), 1);
    assert_int_equal(err->code, ESTALE);
    sbx_error_free(&err);
    expect_job(r->store, "j3", SBX_JOB_QUEUED, NULL);
    runner_job_free(j);

    /* the worker's end: the exec's end and the job's in one transaction */
    insert_ok(r->store, "j4", "agent", "light", 0);
    task_put(r->store, "t4", "sb-4", SBX_TASK_READY, 1);
    j = new_job("j4");
    assert_int_equal(runner_job_move(r, j, RJOB_QUEUED, NULL, &err), 0);
    assert_int_equal(runner_job_move(r, j, RJOB_GRANTED, NULL, &err), 0);
    assert_int_equal(runner_job_move(r, j, RJOB_CANCELLED,
                                     &(struct rjob_move){.st = r->store,
                                                         .retry = 1,
                                                         .exec_task = "t4",
                                                         .exec_path = "engine",
                                                         .exit_status = 7, /* none when cancelled */
                                                         .reason = "cancelled by request"},
                                     &err),
                     0);
    expect_job(r->store, "j4", SBX_JOB_CANCELLED, "cancelled by request");
    ok(sbx_store_job_get(r->store, "j4", &rec, &err), &err);
    assert_false(rec.has_exit_status);
    assert_string_equal(rec.exec_path, "engine");
    sbx_job_rec_clear(&rec);
    {
        struct sbx_task_rec tr = {0};

        ok(sbx_store_task_get(r->store, "t4", &tr, &err), &err);
        assert_int_equal(tr.in_flight, 0);
        sbx_task_rec_clear(&tr);
    }
    runner_job_free(j);
    /* (added, issue 31) deferred: checked, moved, then its end written by
     * the store thread (at once here: no thread on one box) */
    insert_ok(r->store, "j6", "ci", "light", 0);
    j = new_job("j6");
    assert_int_equal(runner_job_move(r, j, RJOB_QUEUED, &(struct rjob_move){.memory = 1}, &err), 0);
    assert_int_equal(runner_job_move(r, j, RJOB_CANCELLED,
                                     &(struct rjob_move){.deferred = 1, .reason = "by request"},
                                     &err),
                     0);
    assert_int_equal(rjob_state(j), SBX_JOB_CANCELLED);
    expect_job(r->store, "j6", SBX_JOB_CANCELLED, "by request");
    /* an illegal end is refused before anything is written */
    expect_err(runner_job_move(r, j, RJOB_FINISHED,
                               &(struct rjob_move){.deferred = 1, .reason = "again"}, &err),
               &err, EINVAL, "job j6 is cancelled: it cannot be finished");
    expect_job(r->store, "j6", SBX_JOB_CANCELLED, "by request");
    runner_job_free(j);
    /* deferred is for ends only */
    insert_ok(r->store, "j7", "ci", "light", 0);
    j = new_job("j7");
    assert_int_equal(runner_job_move(r, j, RJOB_QUEUED, &(struct rjob_move){.memory = 1}, &err), 0);
    expect_err(runner_job_move(r, j, RJOB_GRANTED, &(struct rjob_move){.deferred = 1}, &err), &err,
               EINVAL, "cannot defer its write");
    /* ... and an end with what the deferred write would not carry */
    expect_err(runner_job_move(r, j, RJOB_FINISHED,
                               &(struct rjob_move){.deferred = 1, .exit_status = 3}, &err),
               &err, EINVAL, "cannot defer its write");
    expect_err(runner_job_move(r, j, RJOB_CANCELLED,
                               &(struct rjob_move){.deferred = 1, .exec_path = "engine"}, &err),
               &err, EINVAL, "cannot defer its write");
    assert_int_equal(rjob_state(j), SBX_JOB_QUEUED);
    expect_job(r->store, "j7", SBX_JOB_QUEUED, NULL);
    runner_job_free(j);
    /* the flags the threads share */
    j = new_job("j5");
    assert_false(runner_job_cancelled(j));
    runner_job_cancel(j);
    assert_true(runner_job_cancelled(j));
    runner_job_free(j);
    fake_runner_free(r);
}

static void test_task_moves(void **state)
{
    struct sbx_runner *r = fake_runner();
    struct rtask *t = rtask_new(&(struct rtask_init){.id = "t1", .holder = "t1"});
    struct sbx_task_rec tr = {0};
    sbx_error_t *err = NULL;

    (void)state;
    task_put(r->store, "t1", "sb-1", SBX_TASK_READY, 0);
    expect_err(runner_task_move(r, t, RTASK_READY, NULL, &err), &err, EINVAL, "task t1 is new");
    assert_int_equal(runner_task_move(r, t, RTASK_CREATED, NULL, &err), 0);
    assert_int_equal(rtask_state(t), RT_STARTING);
    assert_int_equal(runner_task_move(r, t, RTASK_READY, NULL, &err), 0);
    assert_int_equal(rtask_state(t), RT_READY);
    expect_err(runner_task_move(r, t, RTASK_FAILED, NULL, &err), &err, EINVAL,
               "task t1 is ready: it cannot be failed");
    pthread_mutex_lock(&r->mu);
    assert_int_equal(runner_task_move_held(r, t, RTASK_ENDING), 0);
    assert_int_equal(runner_task_move_held(r, t, RTASK_KEPT), 0); /* no thread: later */
    assert_int_equal(rtask_state(t), RT_READY);
    assert_int_equal(runner_task_move_held(r, t, RTASK_ENDING), 0);
    pthread_mutex_unlock(&r->mu);
    assert_int_equal(runner_task_move(r, t, RTASK_GONE,
                                      &(struct rtask_move){.st = r->store, .reason = "idle"}, &err),
                     0);
    ok(sbx_store_task_get(r->store, "t1", &tr, &err), &err);
    assert_int_equal(tr.state, SBX_TASK_ENDED);
    assert_string_equal(tr.reason, "idle");
    sbx_task_rec_clear(&tr);
    /* its row ended already: the write fails, said */
    assert_int_equal(runner_task_move(r, t, RTASK_GONE, &(struct rtask_move){.st = r->store}, &err),
                     1);
    assert_non_null(strstr(err->msg, "task t1 is ended"));
    sbx_error_free(&err);
    rtask_free(t);

    /* a start that failed: its row ends with the reason */
    t = rtask_new(&(struct rtask_init){.id = "t2", .holder = "t2"});
    task_put(r->store, "t2", NULL, SBX_TASK_STARTING, 0);
    assert_int_equal(runner_task_move(r, t, RTASK_CREATED, NULL, &err), 0);
    assert_int_equal(
        runner_task_move(r, t, RTASK_FAILED,
                         &(struct rtask_move){.st = r->store, .reason = "no such image"}, &err),
        0);
    assert_int_equal(rtask_state(t), RT_FAILED);
    assert_string_equal(rtask_fail_reason(t), "no such image");
    ok(sbx_store_task_get(r->store, "t2", &tr, &err), &err);
    assert_int_equal(tr.state, SBX_TASK_ENDED);
    assert_string_equal(tr.reason, "no such image");
    sbx_task_rec_clear(&tr);
    expect_err(runner_task_move(r, t, RTASK_GONE, NULL, &err), &err, EINVAL,
               "task t2 is failed: it cannot be gone");
    assert_int_equal(runner_task_move(r, t, RTASK_ENDING, NULL, &err), 0);
    rtask_free(t);
    fake_runner_free(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_job_table),
        cmocka_unit_test(test_task_table),
        cmocka_unit_test(test_store_sql_agrees),
        cmocka_unit_test_setup_teardown(test_job_moves, setup, teardown),
        cmocka_unit_test_setup_teardown(test_task_moves, setup, teardown),
    };

    return cmocka_run_group_tests_name("states", tests, NULL, NULL);
}
