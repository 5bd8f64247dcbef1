/* test_runner_sessions.c - (added, issue 31) the box's terminal, port and
 * archive sessions (runner/sessions.c): one client stops at its cap (429)
 * while another still gets sessions, the box stops at its own (503, checked
 * first), an ended session frees its place, and every count is back to 0
 * once all are given back. */
#include "test_common.h"

#include <stdio.h>
#include <string.h>

#include "runner/sessions.h"

static void take_ok(const char *client)
{
    char why[200] = "";

    if (runner_session_take(client, why, sizeof(why)) != 0) {
        fail_msg("client %s refused: %s", client, why);
    }
}

static void test_caps(void **state)
{
    char why[200];
    int mine = -1;

    (void)state;
    assert_int_equal(runner_sessions_open("alice", &mine), 0);
    assert_int_equal(mine, 0);
    for (int i = 0; i < RUNNER_SESSIONS_PER_CLIENT; i++) {
        take_ok("alice");
    }
    assert_int_equal(runner_session_take("alice", why, sizeof(why)), 429);
    assert_string_equal(why, "client 'alice' has 32 terminals and port connections open on this "
                             "box (limit 32): close one first");
    /* the others still get theirs, up to the box's cap */
    for (int i = 0; i < RUNNER_SESSIONS_MAX - RUNNER_SESSIONS_PER_CLIENT; i++) {
        char name[16];

        snprintf(name, sizeof(name), "c%d", i % 3);
        take_ok(name);
    }
    assert_int_equal(runner_sessions_open("alice", &mine), RUNNER_SESSIONS_MAX);
    assert_int_equal(mine, RUNNER_SESSIONS_PER_CLIENT);
    assert_int_equal(runner_session_take("bob", why, sizeof(why)), 503);
    assert_string_equal(why, "64 terminals and port connections are open on this box (limit 64): "
                             "try later");
    assert_int_equal(runner_session_take("alice", why, sizeof(why)), 503); /* the box's first */
    /* an end frees a place: for its own client, or another */
    runner_session_give("alice");
    take_ok("bob");
    assert_int_equal(runner_session_take("alice", why, sizeof(why)), 503);
    runner_session_give("bob");
    take_ok("alice");
    /* all given back */
    for (int i = 0; i < RUNNER_SESSIONS_PER_CLIENT; i++) {
        runner_session_give("alice");
    }
    for (int i = 0; i < RUNNER_SESSIONS_MAX - RUNNER_SESSIONS_PER_CLIENT; i++) {
        char name[16];

        snprintf(name, sizeof(name), "c%d", i % 3);
        runner_session_give(name);
    }
    assert_int_equal(runner_sessions_open("c0", &mine), 0);
    assert_int_equal(mine, 0);
    /* a name of the longest a client has (63 bytes) */
    {
        char longname[64];

        memset(longname, 'n', sizeof(longname) - 1);
        longname[63] = '\0';
        take_ok(longname);
        assert_int_equal(runner_sessions_open(longname, &mine), 1);
        assert_int_equal(mine, 1);
        runner_session_give(longname);
        assert_int_equal(runner_sessions_open(NULL, NULL), 0);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
