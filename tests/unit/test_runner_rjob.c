/* test_runner_rjob.c - (added, issue 31) a job in the runner alone
 * (runner/rjob.c, rjob.h), without a runner or an engine: what a new job
 * holds, its request filled and read back (and freed with it), the image,
 * the scheduler's view, the flags' accessors (cancel atomic, executing,
 * released, granting, token, lost, the warm sandbox taken once, no exec to
 * cancel), its kept output, the worktree events, what its follows wrote out,
 * and the table's links. Its state is written by runner_job_move alone
 * (test_states); here through rjob_fsm as that move does. */
#include "test_common.h"

#include "runner/jobstate.h"
#include "runner/output.h"
#include "runner/rjob.h"
#include "util/xalloc.h"

/* A sandbox's and a task's address: only compared, never called. */
static int sandbox_stub, task_stub;

static struct rjob *job_of(const char *id, const char *task)
{
    struct rjob *j = runner_job_new();
    struct rjob_req *q = rjob_req_fill(j);

    snprintf(q->id, sizeof(q->id), "%s", id);
    snprintf(q->task, sizeof(q->task), "%s", task);
    snprintf(q->owner, sizeof(q->owner), "%s", "alice");
    q->pool = SBX_POOL_AGENT;
    q->cls = SBX_CLASS_HEAVY;
    q->cls_given = 1;
    q->argv = xcalloc(3, sizeof(char *));
    q->argv[0] = xstrdup("make");
    q->argv[1] = xstrdup("test");
    q->worktree = xstrdup("/srv/wt/1");
    q->provider = xstrdup("docker");
    q->credentials = xstrdup("gh");
    q->from = xstrdup("snap-1");
    q->env = json_pack("{s:s}", "CI", "1");
    return j;
}

static void test_new(void **state)
{
    struct rjob *j = runner_job_new();

    (void)state;
    assert_string_equal(rjob_id(j), "");
    assert_null(rjob_req(j)->argv);
    assert_null(rjob_req(j)->env);
    assert_null(rjob_image(j));
    assert_false(rjob_has_state(j));
    assert_int_equal(rjob_state(j), 0); /* as a zeroed job read */
    assert_int_equal(rjob_exit_status(j), 0);
    assert_false(runner_job_cancelled(j));
    assert_false(rjob_executing(j));
    assert_false(rjob_released(j));
    assert_false(rjob_granting(j));
    assert_null(rjob_rtask(j));
    assert_null(rjob_warm(j));
    assert_int_equal(rjob_token(j), 0);
    assert_false(rjob_lost(j));
    assert_null(*rjob_streams(j));
    assert_null(rjob_wt_events(j));
    assert_null(rjob_next(j));
    assert_non_null(rjob_output(j));
    assert_int_equal(runner_output_total(rjob_output(j)), 0);
    assert_int_equal(rjob_output_acked(j), 0);
    runner_job_free(j);
}

static void test_request(void **state)
{
    struct rjob *j = job_of("j-1", "t-1");
    const struct rjob_req *q = rjob_req(j);
    struct sbx_sched_job sj;

    (void)state;
    assert_ptr_equal(q, rjob_req_fill(j)); /* one request, read and filled */
    assert_string_equal(rjob_id(j), "j-1");
    assert_ptr_equal(rjob_id(j), q->id);
    assert_string_equal(q->task, "t-1");
    assert_string_equal(q->owner, "alice");
    assert_int_equal(q->pool, SBX_POOL_AGENT);
    assert_int_equal(q->cls, SBX_CLASS_HEAVY);
    assert_true(q->cls_given);
    assert_string_equal(q->argv[0], "make");
    assert_string_equal(q->argv[1], "test");
    assert_null(q->argv[2]);
    assert_string_equal(q->worktree, "/srv/wt/1");
    assert_string_equal(q->provider, "docker");
    assert_string_equal(q->credentials, "gh");
    assert_string_equal(q->from, "snap-1");
    assert_string_equal(json_string_value(json_object_get(q->env, "CI")), "1");

    /* the image: set later (api_snap.c), replaced with the one before freed */
    rjob_set_image(j, xstrdup("registry/img:1"));
    rjob_set_image(j, xstrdup("registry/img:2"));
    assert_string_equal(rjob_image(j), "registry/img:2");

    sj = runner_sched_job(j, 1.5, 1024, 42);
    assert_string_equal(sj.id, "j-1");
    assert_string_equal(sj.task, "t-1");
    assert_int_equal(sj.pool, SBX_POOL_AGENT);
    assert_int_equal(sj.cls, SBX_CLASS_HEAVY);
    assert_true(sj.cpus == 1.5);
    assert_int_equal(sj.memory, 1024);
    assert_int_equal(sj.enqueued_at, 42);
    runner_job_free(j); /* frees the request's strings, env and image (asan) */
}

static void test_flags(void **state)
{
    struct rjob *j = job_of("j-2", "j-2");
    json_t *ev = json_array();

    (void)state;
    runner_job_cancel(j);
    assert_true(runner_job_cancelled(j));
    assert_int_equal(*rjob_cancel_flag(j), 1);

    rjob_set_executing(j, 1);
    assert_true(rjob_executing(j));
    rjob_set_executing(j, 0);
    assert_false(rjob_executing(j));
    assert_non_null(rjob_slot(j));
    assert_ptr_equal(rjob_slot(j), rjob_slot(j));

    rjob_release(j);
    assert_true(rjob_released(j));
    rjob_set_granting(j, 1);
    assert_true(rjob_granting(j));
    rjob_set_granting(j, 0);
    assert_false(rjob_granting(j));

    rjob_set_rtask(j, (struct rtask *)(void *)&task_stub);
    assert_ptr_equal(rjob_rtask(j), &task_stub);
    rjob_cancel_exec(j); /* no exec in flight: nothing to cancel (the stub is not read) */

    rjob_set_warm(j, (struct sbx_task *)(void *)&sandbox_stub);
    assert_ptr_equal(rjob_warm(j), &sandbox_stub);
    assert_ptr_equal(rjob_take_warm(j), &sandbox_stub); /* taken once */
    assert_null(rjob_warm(j));
    assert_null(rjob_take_warm(j));

    rjob_set_token(j, 77);
    assert_int_equal(rjob_token(j), 77);
    rjob_mark_lost(j);
    assert_true(rjob_lost(j));

    json_array_append_new(ev, json_string("worktree changed"));
    rjob_set_wt_events(j, ev); /* the job's reference now */
    assert_ptr_equal(rjob_wt_events(j), ev);

    rjob_set_exit_status(j, 3);
    assert_int_equal(rjob_exit_status(j), 3);
    runner_job_free(j);
}

/* What its follows wrote out: acked while followed, all once every follow
 * went, 0 before one came (sbx_runner_opts.output_wait). */
static void test_follows(void **state)
{
    struct rjob *j = job_of("j-3", "j-3");

    (void)state;
    runner_output_add(rjob_output(j), 1, "hello world", 11);
    assert_int_equal(rjob_output_acked(j), 0);
    rjob_set_follows(j, 5, 2);
    assert_int_equal(rjob_output_acked(j), 5);
    rjob_set_follows(j, 11, 0);
    assert_int_equal(rjob_output_acked(j), 11);
    runner_output_add(rjob_output(j), 1, "!", 1);
    assert_int_equal(rjob_output_acked(j), 12); /* followed once, by none now */
    runner_job_free(j);
}

/* The state's place, as runner_job_move writes it, and the table's links. */
static void test_fsm_links(void **state)
{
    struct rjob *a = job_of("a", "a"), *b = job_of("b", "b");

    (void)state;
    rjob_fsm(a)->state = SBX_JOB_RUNNING;
    rjob_fsm(a)->has_state = 1;
    assert_true(rjob_has_state(a));
    assert_int_equal(rjob_state(a), SBX_JOB_RUNNING);

    *rjob_list_link(b) = a; /* b, then a: newest first */
    assert_ptr_equal(rjob_next(b), a);
    assert_null(rjob_next(a));
    assert_null(*rjob_hash_link(a));
    *rjob_hash_link(a) = b;
    assert_ptr_equal(*rjob_hash_link(a), b);
    runner_job_free(a);
    runner_job_free(b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new),       cmocka_unit_test(test_request),
        cmocka_unit_test(test_flags),     cmocka_unit_test(test_follows),
        cmocka_unit_test(test_fsm_links),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
