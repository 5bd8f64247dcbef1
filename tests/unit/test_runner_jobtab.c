/* test_runner_jobtab.c - the runner's job table alone (runner/jobtab.c,
 * jobs.h): jobs found by id among many (the hash over the list, ids that
 * share a bucket), newest first, tasks found by id, and the trim of ended
 * jobs past the newest `keep` (only those released by their workers and
 * followed by no stream; queued and running ones stay). */
#include "test_common.h"

#include "runner/jobs.h"
#include "runner/rjob.h"
#include "runner/rtask.h"

/* A job in state (set as only a move sets it: a test's shortcut), released
 * by its worker when released is 1. */
static struct rjob *job_in(const char *id, int state, int released)
{
    struct rjob *j = runner_job_new();

    snprintf(rjob_req_fill(j)->id, sizeof(rjob_req(j)->id), "%s", id);
    rjob_fsm(j)->state = state;
    if (released) {
        rjob_release(j);
    }
    return j;
}

static struct rjob *job(const char *id, int state)
{
    return job_in(id, state, state >= SBX_JOB_FINISHED);
}

static void tab_free(struct runner_jobtab *tab)
{
    while (tab->jobs != NULL) {
        struct rjob *j = tab->jobs;

        tab->jobs = rjob_next(j);
        runner_job_free(j);
    }
    rtask_list_free(&tab->tasks);
}

static void test_find(void **state)
{
    (void)state;
    struct runner_jobtab *tab = calloc(1, sizeof(*tab));
    char id[32];

    for (int i = 0; i < 10000; i++) { /* more jobs than buckets: chains */
        snprintf(id, sizeof(id), "job-%d", i);
        runner_jobtab_link(tab, job(id, SBX_JOB_QUEUED));
    }
    assert_int_equal(tab->n_jobs, 10000);
    assert_string_equal(rjob_id(tab->jobs), "job-9999"); /* newest first */
    for (int i = 0; i < 10000; i += 7) {
        struct rjob *j;

        snprintf(id, sizeof(id), "job-%d", i);
        j = runner_jobtab_find(tab, id);
        assert_non_null(j);
        assert_string_equal(rjob_id(j), id);
    }
    assert_null(runner_jobtab_find(tab, "job-10000"));
    assert_null(runner_jobtab_find(tab, ""));
    tab_free(tab);
    free(tab);
}

static void test_tasks(void **state)
{
    (void)state;
    struct runner_jobtab tab = {0};
    struct rtask *a = rtask_new(&(struct rtask_init){.id = "t-a", .holder = "j-a"});
    struct rtask *b = rtask_new(&(struct rtask_init){.id = "t-b", .holder = "j-b"});
    assert_null(runner_jobtab_task(&tab, "t-a"));
    runner_jobtab_add_task(&tab, a);
    runner_jobtab_add_task(&tab, b);
    assert_ptr_equal(tab.tasks, b);
    assert_ptr_equal(runner_jobtab_task(&tab, "t-a"), a);
    assert_ptr_equal(runner_jobtab_task(&tab, "t-b"), b);
    assert_null(runner_jobtab_task(&tab, "t-c"));
    assert_int_equal(runner_jobtab_remove_task(&tab, a), 1); /* (added, issue 31) */
    assert_int_equal(runner_jobtab_remove_task(&tab, a), 0);
    assert_null(runner_jobtab_task(&tab, "t-a"));
    assert_ptr_equal(runner_jobtab_task(&tab, "t-b"), b);
    rtask_free(a);
    tab_free(&tab);
}

static void test_trim(void **state)
{
    (void)state;
    struct runner_jobtab *tab = calloc(1, sizeof(*tab));
    static char follower; /* a follow (opaque, api.c): only its presence counts */
    struct rjob *followed, *held;
    char id[32];

    /* oldest first: 5 ended, one ended but followed, one ended but not
     * released, one running, then 5 ended */
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof(id), "old-%d", i);
        runner_jobtab_link(tab, job(id, SBX_JOB_FINISHED));
    }
    followed = job("followed", SBX_JOB_CANCELLED);
    *rjob_streams(followed) = (struct runner_stream *)(void *)&follower;
    runner_jobtab_link(tab, followed);
    held = job_in("held", SBX_JOB_FINISHED, 0);
    runner_jobtab_link(tab, held);
    runner_jobtab_link(tab, job("running", SBX_JOB_RUNNING));
    for (int i = 0; i < 5; i++) {
        snprintf(id, sizeof(id), "new-%d", i);
        runner_jobtab_link(tab, job(id, SBX_JOB_FINISHED));
    }
    assert_int_equal(tab->n_jobs, 13);

    assert_int_equal(runner_jobtab_trim(tab, 7), 3); /* 10 may go, the newest 7 stay */
    assert_int_equal(tab->n_jobs, 10);
    assert_null(runner_jobtab_find(tab, "old-0"));
    assert_null(runner_jobtab_find(tab, "old-1"));
    assert_null(runner_jobtab_find(tab, "old-2"));
    assert_non_null(runner_jobtab_find(tab, "old-3"));
    assert_int_equal(runner_jobtab_trim(tab, 7), 0); /* nothing more past 7 */

    assert_int_equal(runner_jobtab_trim(tab, 0), 7);
    assert_int_equal(tab->n_jobs, 3);
    assert_ptr_equal(runner_jobtab_find(tab, "followed"), followed);
    assert_ptr_equal(runner_jobtab_find(tab, "held"), held);
    assert_non_null(runner_jobtab_find(tab, "running"));
    *rjob_streams(followed) = NULL;
    tab_free(tab);
    free(tab);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_find),
        cmocka_unit_test(test_tasks),
        cmocka_unit_test(test_trim),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
