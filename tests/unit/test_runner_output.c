/* test_runner_output.c - a job's kept output alone (runner/output.c), without
 * a runner or a lock: bytes and their streams as runs, the oldest dropped past
 * SBX_RUNNER_MAX_OUTPUT (a piece larger than that keeps its tail), the
 * stream of any kept byte, and an ended job's output settled to its bytes. */
#include "test_common.h"

#include "runner/output.h"
#include "runner/records.h"

static void test_runs(void **state)
{
    (void)state;
    struct rjob *j = calloc(1, sizeof(*j));
    size_t end = 0;

    runner_output_add(j, 1, "abc", 3);
    runner_output_add(j, 1, "de", 2);
    runner_output_add(j, 2, "XY", 2);
    runner_output_add(j, 7, "f", 1); /* anything but 2 is stdout */
    runner_output_add(j, 2, "", 0);  /* nothing */
    assert_int_equal(j->out_total, 8);
    assert_int_equal(j->out_len, 8);
    assert_memory_equal(runner_output_bytes(j), "abcdeXYf", 8);
    assert_int_equal(runner_output_stream_at(j, 0, &end), 1);
    assert_int_equal(end, 5);
    assert_int_equal(runner_output_stream_at(j, 4, &end), 1);
    assert_int_equal(runner_output_stream_at(j, 5, &end), 2);
    assert_int_equal(end, 7);
    assert_int_equal(runner_output_stream_at(j, 7, &end), 1);
    assert_int_equal(end, 8);
    runner_output_settle(j);
    assert_int_equal(j->out_cap, 8);
    assert_memory_equal(runner_output_bytes(j), "abcdeXYf", 8);
    free(j->out);
    free(j->seg);
    free(j);
}

static void test_bounded(void **state)
{
    (void)state;
    struct rjob *j = calloc(1, sizeof(*j));
    size_t max = SBX_RUNNER_MAX_OUTPUT, end = 0;
    char *big = malloc(max + 10);

    memset(big, 'o', max + 10);
    big[max + 9] = 'Z';
    runner_output_add(j, 2, "early", 5);
    runner_output_add(j, 1, big, max + 10); /* over the maximum: its tail */
    assert_int_equal(j->out_total, 5 + max + 10);
    assert_int_equal(j->out_len, max);
    assert_int_equal(runner_output_bytes(j)[max - 1], 'Z');
    /* the first kept byte is stdout's: stderr's run is gone */
    assert_int_equal(runner_output_stream_at(j, j->out_total - max, &end), 1);
    assert_int_equal(end, j->out_total);
    runner_output_add(j, 2, "err", 3);
    assert_int_equal(j->out_len, max);
    assert_memory_equal(runner_output_bytes(j) + max - 4, "Zerr", 4);
    assert_int_equal(runner_output_stream_at(j, j->out_total - 3, &end), 2);
    assert_int_equal(runner_output_stream_at(j, j->out_total - 4, &end), 1);
    assert_int_equal(end, j->out_total - 3);
    assert_true(j->out_cap <= 2 * max + 8); /* at most twice the maximum */
    free(big);
    free(j->out);
    free(j->seg);
    free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs),
        cmocka_unit_test(test_bounded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
