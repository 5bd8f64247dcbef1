/* test_egress_share.c - the proxy's fair shares (core/src/egress/share.c): per-sandbox
 * token buckets over egress.bandwidth, on a fake clock (nanoseconds given to each
 * call), so every number here is exact and nothing depends on the machine's speed. */
#include "test_common.h"

#include "egress/share.h"

#define MS (1000LL * 1000)
#define T0 (1000LL * 1000 * MS) /* a clock that does not start at 0 */
#define MIB (1024ULL * 1024)

/* A sandbox that asks for `want` bytes and moves all it is granted. */
static uint64_t take(struct sbx_egress_share *s, struct sbx_egress_bucket *b, int64_t now,
                     uint64_t want)
{
    uint64_t got = sbx_egress_share_grant(s, b, now, want);

    sbx_egress_bucket_spend(b, got);
    return got;
}

/* Alone, a sandbox is never limited, whatever it asks for and however often. */
static void test_alone_is_never_limited(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 10 * MIB};
    struct sbx_egress_bucket b = {0};

    (void)state;
    for (int i = 0; i < 1000; i++) {
        assert_int_equal(take(&s, &b, T0 + i * MS, 64 * MIB), 64 * MIB);
        assert_int_equal(sbx_egress_share_wait_ns(&s, &b, T0 + i * MS), 0);
    }
    assert_true(sbx_egress_share_rate(&s, T0 + 999 * MS) == 0.0);
}

/* egress.bandwidth = 0: no shares, every ask granted, several sandboxes or not. */
static void test_off_grants_everything(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 0};
    struct sbx_egress_bucket b[3] = {{0}};

    (void)state;
    for (int i = 0; i < 100; i++) {
        for (int k = 0; k < 3; k++) {
            assert_int_equal(take(&s, &b[k], T0 + i * MS, 8 * MIB), 8 * MIB);
        }
    }
}

/* Several sandboxes that always want more each get bandwidth / N over a second (plus at
 * most one burst), whatever they ask per call. */
static void test_floods_get_equal_shares(void **state)
{
    enum { N = 6 };
    struct sbx_egress_share s = {.bandwidth = 600 * MIB};
    struct sbx_egress_bucket b[N] = {{0}};
    uint64_t got[N] = {0};
    const uint64_t share = 100 * MIB;
    const uint64_t burst = share / 50; /* 20 ms of its rate */

    (void)state;
    for (int64_t t = 0; t < 1000 * MS; t += MS / 4) {
        for (int k = 0; k < N; k++) {
            /* the first asks for a lot, the others for little: no difference */
            got[k] += take(&s, &b[k], T0 + t, k == 0 ? 4 * MIB : 64 * 1024);
        }
    }
    for (int k = 0; k < N; k++) {
        assert_true(got[k] >= share - burst);
        assert_true(got[k] <= share + 2 * burst);
    }
}

/* A quiet sandbox next to floods: its small asks are granted at once (its bucket is
 * full), while the floods wait for theirs. */
static void test_quiet_next_to_floods(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 70 * MIB};
    struct sbx_egress_bucket flood[6] = {{0}};
    struct sbx_egress_bucket quiet = {0};
    int64_t t = T0;

    (void)state;
    for (int i = 0; i < 400; i++, t += MS / 2) {
        for (int k = 0; k < 6; k++) {
            take(&s, &flood[k], t, 1 * MIB);
        }
        if (i % 50 == 0) { /* a reply's few KiB now and then */
            assert_int_equal(take(&s, &quiet, t, 4096), 4096);
        }
    }
    /* the floods are dry: each waits for a step of its rate (64 KiB at 10 MiB/s: about
     * 6 ms) */
    while (take(&s, &flood[0], t, 1 * MIB) > 0) {
    }
    assert_int_equal(sbx_egress_share_grant(&s, &flood[0], t, 1 * MIB), 0);
    assert_true(sbx_egress_share_wait_ns(&s, &flood[0], t) > 0);
    assert_true(sbx_egress_share_wait_ns(&s, &flood[0], t) <= 7 * MS);
}

/* A dry bucket: wait_ns says when a step (5 ms of its rate, at least 64 KiB) is there,
 * and at that time it is granted. */
static void test_wait_then_grant(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 200 * MIB};
    struct sbx_egress_bucket a = {0};
    struct sbx_egress_bucket b = {0};
    int64_t t = T0;
    int64_t w;

    (void)state;
    take(&s, &a, t, 1); /* two sandboxes active: 100 MiB/s each */
    while (take(&s, &b, t, 1 * MIB) > 0) {
    }
    assert_int_equal(sbx_egress_share_grant(&s, &b, t, 1 * MIB), 0);
    w = sbx_egress_share_wait_ns(&s, &b, t);
    /* 5 ms of 100 MiB/s */
    assert_true(w > 4 * MS && w <= 5 * MS + 1);
    take(&s, &a, t + w - MS, 1); /* a stays active */
    assert_int_equal(sbx_egress_share_grant(&s, &b, t + w - MS, 1 * MIB), 0);
    assert_true(sbx_egress_share_grant(&s, &b, t + w, 1 * MIB) >= 5 * MIB / 10);
}

/* A sandbox that stops asking stops counting after its window and the next (25 to
 * 50 ms): the one left is alone again, unlimited. */
static void test_a_sandbox_that_stops_leaves_the_count(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 100 * MIB};
    struct sbx_egress_bucket a = {0};
    struct sbx_egress_bucket b = {0};
    int64_t t = T0;

    (void)state;
    take(&s, &a, t, 1);
    take(&s, &b, t, 1);
    assert_int_equal(sbx_egress_share_active(&s, t), 2);
    /* only a asks from now on */
    for (int i = 1; i <= 10; i++) {
        take(&s, &a, t + i * 10 * MS, 1);
    }
    assert_int_equal(sbx_egress_share_active(&s, t + 100 * MS), 1);
    assert_int_equal(take(&s, &a, t + 100 * MS, 64 * MIB), 64 * MIB);
}

/* Windows in which nobody asked (the proxy's thread did not run): up to
 * SBX_EGRESS_SHARE_GAP of them count as one, so a starved loop does not reset the
 * count (and hand out unlimited grants); after a longer quiet nobody is active. */
static void test_gaps(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 100 * MIB};
    struct sbx_egress_bucket a = {0};
    struct sbx_egress_bucket b = {0};
    int64_t w = SBX_EGRESS_SHARE_WINDOW_NS;
    int64_t t = T0 - T0 % w; /* the start of a window */

    (void)state;
    take(&s, &a, t, 1);
    take(&s, &b, t, 1);
    /* three windows later: still two (the gap counts as one window) */
    assert_int_equal(sbx_egress_share_active(&s, t + 3 * w), 2);
    assert_true(sbx_egress_share_rate(&s, t + 3 * w) == 50.0 * MIB);
    /* a long quiet: nobody */
    take(&s, &a, t + 3 * w, 1);
    take(&s, &b, t + 3 * w, 1);
    assert_int_equal(sbx_egress_share_active(&s, t + 3 * w + (SBX_EGRESS_SHARE_GAP + 1) * w), 0);
}

/* The clock never goes back, but if a caller's did, the bucket does not go negative on
 * it or hand out credit for it. */
static void test_clock_backwards(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 100 * MIB};
    struct sbx_egress_bucket a = {0};
    struct sbx_egress_bucket b = {0};
    uint64_t got;

    (void)state;
    take(&s, &a, T0, 1);
    while (take(&s, &b, T0, 1 * MIB) > 0) {
    }
    take(&s, &a, T0 - MS, 1);
    got = take(&s, &b, T0 - MS, 64 * MIB);
    /* at most a full bucket (20 ms of 50 MiB/s) */
    assert_true(got <= MIB + MIB / 1000);
}

/* A limited bucket never holds more than 20 ms of its rate (at least 64 KiB), however
 * long its sandbox was idle. */
static void test_burst_is_bounded(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 2 * MIB};
    struct sbx_egress_bucket a = {0};
    struct sbx_egress_bucket b = {0};
    int64_t t = T0;

    (void)state;
    take(&s, &a, t, 1);
    take(&s, &b, t, 1);
    for (int i = 1; i < 100; i++) { /* both stay active for 1 s, asking for nothing */
        take(&s, &a, t + i * 10 * MS, 0);
        take(&s, &b, t + i * 10 * MS, 0);
    }
    /* 1 MiB/s each: 20 ms is 20 KiB, so the floor, 64 KiB */
    assert_int_equal(take(&s, &b, t + 1000 * MS, 64 * MIB), 64 * 1024);
}

/* What a sandbox moved while it was alone is no debt once another comes: it starts
 * from an empty bucket and has a step within a step's time. (With the debt it waited so
 * long that it dropped out of the count, and the other ran unlimited.) */
static void test_alone_leaves_no_debt(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 4 * MIB};
    struct sbx_egress_bucket a = {0};
    struct sbx_egress_bucket b = {0};
    uint64_t got;

    (void)state;
    assert_int_equal(take(&s, &a, T0, 512 * 1024), 512 * 1024); /* alone */
    take(&s, &b, T0, 1);                                        /* now two: 2 MiB/s each */
    assert_int_equal(take(&s, &a, T0, 512 * 1024), 0);
    take(&s, &b, T0 + 20 * MS, 1);
    /* 32 ms of 2 MiB/s: just over a step (64 KiB); with a debt of 512 KiB, nothing */
    got = take(&s, &a, T0 + 32 * MS, 512 * 1024);
    assert_true(got >= 64 * 1024 && got <= 68 * 1024);
}

/* A dry bucket at a low rate waits at most half a window before it asks again, so its
 * sandbox never drops out of the count while it waits. */
static void test_wait_is_at_most_half_a_window(void **state)
{
    struct sbx_egress_share s = {.bandwidth = 2 * MIB};
    struct sbx_egress_bucket a = {0};
    struct sbx_egress_bucket b = {0};
    int64_t t = T0;

    (void)state;
    take(&s, &a, t, 1);
    while (take(&s, &b, t, 1 * MIB) > 0) {
    }
    /* 64 KiB at 1 MiB/s is 62.5 ms */
    assert_int_equal(sbx_egress_share_wait_ns(&s, &b, t), SBX_EGRESS_SHARE_WINDOW_NS / 2);
    for (int i = 1; i <= 8; i++) { /* both keep asking every half window */
        t += SBX_EGRESS_SHARE_WINDOW_NS / 2;
        take(&s, &a, t, 1);
        take(&s, &b, t, 1 * MIB);
        assert_int_equal(sbx_egress_share_active(&s, t), 2);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone_is_never_limited),
        cmocka_unit_test(test_off_grants_everything),
        cmocka_unit_test(test_floods_get_equal_shares),
        cmocka_unit_test(test_quiet_next_to_floods),
        cmocka_unit_test(test_wait_then_grant),
        cmocka_unit_test(test_a_sandbox_that_stops_leaves_the_count),
        cmocka_unit_test(test_gaps),
        cmocka_unit_test(test_clock_backwards),
        cmocka_unit_test(test_burst_is_bounded),
        cmocka_unit_test(test_alone_leaves_no_debt),
        cmocka_unit_test(test_wait_is_at_most_half_a_window),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
