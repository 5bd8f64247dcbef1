/* test_fwd_cap.c - (added, issue 31) the caps on what a fleet box sends on to
 * another (runner_fwd_over_cap, forward.h): one check for forwards
 * (forward.c) and relays (fwd_tunnel.c). Under both caps one more starts; at
 * the box's cap 503 (checked first), at the client's 429; the refusal names
 * what, the box, the count, the kind and the limit, and is cut to the
 * caller's buffer. */
#include "test_common.h"

#include <string.h>

#include "runner/forward.h"

static const struct runner_fwd_cap caps = {4, 2, "forwards", "in flight"};

static void test_under_both(void **state)
{
    char msg[200] = "untouched";

    (void)state;
    assert_int_equal(runner_fwd_over_cap(&caps, 0, 0, "job j1", "b2", msg, sizeof(msg)), 0);
    assert_int_equal(runner_fwd_over_cap(&caps, 3, 1, "job j1", "b2", msg, sizeof(msg)), 0);
    assert_string_equal(msg, "untouched");
}

static void test_client_cap(void **state)
{
    char msg[200];

    (void)state;
    assert_int_equal(runner_fwd_over_cap(&caps, 2, 2, "job j1", "b2", msg, sizeof(msg)), 429);
    assert_string_equal(msg, "job j1 is held by box b2: 2 forwards of this client are in flight "
                             "(limit 2); try again");
    assert_int_equal(runner_fwd_over_cap(&caps, 0, 9, "job j1", "b2", msg, sizeof(msg)), 429);
    assert_non_null(strstr(msg, ": 9 forwards of this client"));
}

static void test_box_cap_first(void **state)
{
    const struct runner_fwd_cap tun = {64, 16, "terminals and port connections", "relayed there"};
    char msg[200];

    (void)state;
    assert_int_equal(runner_fwd_over_cap(&caps, 4, 0, "task t1", "b3", msg, sizeof(msg)), 503);
    assert_string_equal(msg, "task t1 is held by box b3: 4 forwards to that box are in flight "
                             "(limit 4); try again");
    /* both reached: the box's cap is the one named */
    assert_int_equal(runner_fwd_over_cap(&caps, 5, 7, "task t1", "b3", msg, sizeof(msg)), 503);
    assert_non_null(strstr(msg, "5 forwards to that box"));
    assert_int_equal(runner_fwd_over_cap(&tun, 64, 0, "task t1", "b3", msg, sizeof(msg)), 503);
    assert_string_equal(msg, "task t1 is held by box b3: 64 terminals and port connections to "
                             "that box are relayed there (limit 64); try again");
    assert_int_equal(runner_fwd_over_cap(&tun, 63, 16, "task t1", "b3", msg, sizeof(msg)), 429);
}

static void test_short_buffer(void **state)
{
    char msg[16];

    (void)state;
    memset(msg, 'x', sizeof(msg));
    assert_int_equal(runner_fwd_over_cap(&caps, 4, 0, "task t1", "b3", msg, sizeof(msg)), 503);
    assert_int_equal(strlen(msg), sizeof(msg) - 1);
    assert_memory_equal(msg, "task t1 is held", sizeof(msg) - 1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_under_both),
        cmocka_unit_test(test_client_cap),
        cmocka_unit_test(test_box_cap_first),
        cmocka_unit_test(test_short_buffer),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
