/* test_runner_rtask.c - (added, issue 31) a task in the runner alone
 * (runner/rtask.c, rtask.h), without a runner or an engine: what it is created
 * with, who is in it (enter/leave), the predicates the runner's threads ask
 * (which job starts its sandbox, whether it takes commands, is ready, is due to
 * end), its holder's result, its sandbox taken once, GET /v1/queue's entry, and
 * the table's list of tasks. Its state is written by runner_task_move alone
 * (test_states); here through rtask_fsm as that move does. */
#include "test_common.h"

#include "runner/rtask.h"

/* A sandbox's address: only compared, never called (rtask_due_to_end asks the
 * sandbox whether it stopped only when nothing else decides). */
static char fake_sandbox;
#define SANDBOX ((struct sbx_task *)(void *)&fake_sandbox)

static struct rtask *task(const char *id, const char *holder, int keep)
{
    return rtask_new(&(struct rtask_init){.id = id,
                                          .holder = holder,
                                          .owner = "alice",
                                          .pool = SBX_POOL_AGENT,
                                          .keep = keep,
                                          .holder_result = SBX_RESULT_FAILED});
}

static void move_to(struct rtask *t, enum rtask_state s)
{
    struct rtask_fsm *f = rtask_fsm(t);

    f->state = s;
    f->has_state = 1;
}

static void test_new(void **state)
{
    (void)state;
    struct rtask *t = task("t1", "j1", 1);
    struct rtask *anon;
    char long_id[200];

    assert_string_equal(rtask_id(t), "t1");
    assert_string_equal(rtask_holder(t), "j1");
    assert_string_equal(rtask_owner(t), "alice");
    assert_true(rtask_owned_by(t, "alice"));
    assert_false(rtask_owned_by(t, "bob"));
    assert_false(rtask_owned_by(t, ""));
    assert_int_equal(rtask_pool(t), SBX_POOL_AGENT);
    assert_true(rtask_keep(t));
    assert_int_equal(rtask_holder_result(t), SBX_RESULT_FAILED);
    /* new: no move yet, nothing in it, no sandbox */
    assert_int_equal(rtask_fsm(t)->has_state, 0);
    assert_int_equal(rtask_state(t), RT_STARTING);
    assert_int_equal(rtask_running(t), 0);
    assert_null(rtask_sandbox(t));
    assert_false(rtask_end_requested(t));
    assert_string_equal(rtask_fail_reason(t), "");
    assert_null(rtask_next(t));
    rtask_free(t);

    /* a re-adopted task: its owner unknown; an id too long is cut */
    memset(long_id, 'x', sizeof(long_id) - 1);
    long_id[sizeof(long_id) - 1] = '\0';
    anon = rtask_new(&(struct rtask_init){.id = long_id, .holder = long_id, .owner = NULL});
    assert_string_equal(rtask_owner(anon), "");
    assert_false(rtask_owned_by(anon, "local"));
    assert_int_equal(strlen(rtask_id(anon)), SBX_SCHED_ID_MAX - 1);
    assert_int_equal(strlen(rtask_holder(anon)), SBX_SCHED_ID_MAX - 1);
    assert_false(rtask_keep(anon));
    rtask_free(anon);
}

static void test_enter_leave(void **state)
{
    (void)state;
    struct rtask *t = task("t1", "j1", 0);

    rtask_enter(t); /* its holder job */
    rtask_enter(t); /* a snapshot */
    assert_int_equal(rtask_running(t), 2);
    rtask_leave(t);
    assert_int_equal(rtask_running(t), 1);
    rtask_leave(t);
    assert_int_equal(rtask_running(t), 0);
    rtask_free(t);
}

static void test_predicates(void **state)
{
    (void)state;
    struct rtask *t = task("t1", "j1", 0);

    /* starting, no sandbox: its holder starts it, others wait */
    move_to(t, RT_STARTING);
    assert_true(rtask_starts_for(t, "j1"));
    assert_false(rtask_starts_for(t, "j2"));
    assert_true(rtask_takes_jobs(t));
    assert_false(rtask_ready(t));
    /* ready without a sandbox yet is not ready for a request */
    move_to(t, RT_READY);
    assert_false(rtask_starts_for(t, "j1"));
    assert_true(rtask_takes_jobs(t));
    assert_false(rtask_ready(t));
    rtask_set_sandbox(t, SANDBOX);
    assert_true(rtask_ready(t));
    assert_ptr_equal(rtask_sandbox(t), SANDBOX);
    /* a starting task that has a sandbox is not started again */
    move_to(t, RT_STARTING);
    assert_false(rtask_starts_for(t, "j1"));
    /* failed and ending tasks take no command */
    move_to(t, RT_FAILED);
    rtask_set_fail_reason(t, "no such image");
    assert_false(rtask_takes_jobs(t));
    assert_false(rtask_ready(t));
    assert_string_equal(rtask_fail_reason(t), "no such image");
    move_to(t, RT_ENDING);
    assert_false(rtask_takes_jobs(t));
    assert_false(rtask_ready(t));
    rtask_free(t);
}

static void test_due_to_end(void **state)
{
    (void)state;
    struct rtask *once = task("j1", "j1", 0);
    struct rtask *kept = task("t1", "j1", 1);

    /* a one-command task never ends by the tick */
    move_to(once, RT_READY);
    rtask_request_end(once);
    assert_false(rtask_due_to_end(once, 1));
    rtask_free(once);

    move_to(kept, RT_READY);
    assert_false(rtask_due_to_end(kept, 0)); /* idle, not asked, no sandbox */
    assert_true(rtask_due_to_end(kept, 1));  /* the runner stops */
    rtask_set_sandbox(kept, SANDBOX);
    rtask_enter(kept);
    rtask_request_end(kept);
    assert_true(rtask_end_requested(kept));
    assert_false(rtask_due_to_end(kept, 1)); /* something runs in it */
    rtask_leave(kept);
    assert_true(rtask_due_to_end(kept, 0)); /* asked, and idle */
    move_to(kept, RT_STARTING);
    assert_false(rtask_due_to_end(kept, 1));
    move_to(kept, RT_ENDING);
    assert_false(rtask_due_to_end(kept, 1)); /* ending already */
    rtask_free(kept);
}

static void test_holder_and_sandbox(void **state)
{
    (void)state;
    struct rtask *t = task("t1", "j1", 1);

    rtask_job_ended(t, "j2", SBX_RESULT_OK); /* not the holder: no change */
    assert_int_equal(rtask_holder_result(t), SBX_RESULT_FAILED);
    rtask_job_ended(t, "j1", SBX_RESULT_OK);
    assert_int_equal(rtask_holder_result(t), SBX_RESULT_OK);
    rtask_job_ended(t, "j1", SBX_RESULT_CANCELLED);
    assert_int_equal(rtask_holder_result(t), SBX_RESULT_CANCELLED);

    assert_null(rtask_take_sandbox(t));
    rtask_set_sandbox(t, SANDBOX);
    assert_ptr_equal(rtask_take_sandbox(t), SANDBOX);
    assert_null(rtask_sandbox(t)); /* taken once: its ender's alone */
    assert_null(rtask_take_sandbox(t));
    rtask_free(t);
}

static void test_json(void **state)
{
    (void)state;
    static const char *const names[] = {"starting", "ready", "failed", "ending"};
    struct rtask *t = task("t1", "j1", 1);
    json_t *o;

    rtask_enter(t);
    for (int s = RT_STARTING; s <= RT_ENDING; s++) {
        move_to(t, (enum rtask_state)s);
        o = rtask_json(t);
        assert_non_null(o);
        assert_int_equal(json_object_size(o), 7);
        assert_string_equal(json_string_value(json_object_get(o, "id")), "t1");
        assert_string_equal(json_string_value(json_object_get(o, "holder")), "j1");
        assert_string_equal(json_string_value(json_object_get(o, "pool")), "agent");
        assert_string_equal(json_string_value(json_object_get(o, "state")), names[s]);
        assert_true(json_is_true(json_object_get(o, "kept")));
        assert_int_equal(json_integer_value(json_object_get(o, "running")), 1);
        assert_string_equal(json_string_value(json_object_get(o, "client")), "alice");
        json_decref(o);
    }
    rtask_free(t);
}

static void test_list(void **state)
{
    (void)state;
    struct rtask *head = NULL;
    struct rtask *a = task("t-a", "j-a", 1);
    struct rtask *b = task("t-b", "j-b", 1);
    struct rtask *c = task("t-c", "j-c", 1);
    struct rtask *stray = task("t-a", "j-x", 1); /* same id, never listed */
    int n = 0;

    assert_null(rtask_list_find(head, "t-a"));
    rtask_list_push(&head, a);
    rtask_list_push(&head, b);
    rtask_list_push(&head, c);
    assert_ptr_equal(head, c); /* newest first */
    for (struct rtask *t = head; t != NULL; t = rtask_next(t)) {
        n++;
    }
    assert_int_equal(n, 3);
    assert_ptr_equal(rtask_list_find(head, "t-a"), a);
    assert_ptr_equal(rtask_list_find(head, "t-b"), b);
    assert_null(rtask_list_find(head, "t-d"));
    /* by address: another task of the same id is not the one taken out */
    assert_int_equal(rtask_list_unlink(&head, stray), 0);
    assert_ptr_equal(rtask_list_find(head, "t-a"), a);
    assert_int_equal(rtask_list_unlink(&head, b), 1); /* the middle one */
    assert_null(rtask_list_find(head, "t-b"));
    assert_ptr_equal(rtask_next(c), a);
    assert_int_equal(rtask_list_unlink(&head, c), 1); /* the head */
    assert_ptr_equal(head, a);
    assert_int_equal(rtask_list_unlink(&head, a), 1); /* the last */
    assert_null(head);
    assert_int_equal(rtask_list_unlink(&head, a), 0);
    rtask_free(b);
    rtask_free(stray);

    rtask_list_push(&head, a);
    rtask_list_push(&head, c);
    rtask_list_free(&head);
    assert_null(head);
    rtask_list_free(&head); /* an empty list */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new),
        cmocka_unit_test(test_enter_leave),
        cmocka_unit_test(test_predicates),
        cmocka_unit_test(test_due_to_end),
        cmocka_unit_test(test_holder_and_sandbox),
        cmocka_unit_test(test_json),
        cmocka_unit_test(test_list),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
