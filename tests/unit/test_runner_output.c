/* test_runner_output.c - a job's kept output alone (runner/output.c), through
 * its API (output.h) only, without a runner or a lock: bytes and their streams
 * as runs, the oldest dropped past SBX_RUNNER_MAX_OUTPUT (a piece larger than
 * that keeps its tail), the stream of any kept byte, an ended job's output
 * settled to its bytes, and **(moved from test_serve_env, issue 31)** the
 * bounds: the runs remembered and the bytes moved stay bounded by what is
 * kept, however many pieces were appended. */
#include "test_common.h"

#include "runner/output.h"
#include "runner/runner.h"

/* The first run from off: its stream, and where it ends (absolute). */
struct first_run {
    int stream;
    size_t len;
};

static int take_first(void *ud, int stream, const char *data, size_t len)
{
    struct first_run *f = ud;

    (void)data;
    f->stream = stream;
    f->len = len;
    return 1;
}

static int stream_at(const struct runner_output *o, size_t off, size_t *run_end)
{
    struct first_run f = {0};

    runner_output_runs(o, off, take_first, &f);
    *run_end = off + f.len;
    return f.stream;
}

/* Every run from an offset, as "<stream>:<bytes>" pieces. */
struct all_runs {
    char text[64];
    size_t n;
};

static int take_all(void *ud, int stream, const char *data, size_t len)
{
    struct all_runs *a = ud;
    int w = snprintf(a->text + a->n, sizeof(a->text) - a->n, "%d:%.*s|", stream, (int)len, data);

    a->n += (size_t)w;
    return 0;
}

static void test_runs(void **state)
{
    (void)state;
    struct runner_output *o = runner_output_new();
    struct runner_output_stats st;
    struct all_runs a = {0};
    size_t end = 0;

    runner_output_runs(o, 0, take_all, &a); /* nothing yet */
    assert_int_equal(a.n, 0);
    assert_int_equal(runner_output_total(o), 0);
    runner_output_add(o, 1, "abc", 3);
    runner_output_add(o, 1, "de", 2);
    runner_output_add(o, 2, "XY", 2);
    runner_output_add(o, 7, "f", 1); /* anything but 2 is stdout */
    runner_output_add(o, 2, "", 0);  /* nothing */
    assert_int_equal(runner_output_total(o), 8);
    assert_int_equal(runner_output_first(o), 0);
    assert_memory_equal(runner_output_at(o, 0), "abcdeXYf", 8);
    assert_memory_equal(runner_output_at(o, 5), "XYf", 3);
    assert_int_equal(stream_at(o, 0, &end), 1);
    assert_int_equal(end, 5);
    assert_int_equal(stream_at(o, 4, &end), 1);
    assert_int_equal(stream_at(o, 5, &end), 2);
    assert_int_equal(end, 7);
    assert_int_equal(stream_at(o, 7, &end), 1);
    assert_int_equal(end, 8);
    runner_output_runs(o, 1, take_all, &a);
    assert_string_equal(a.text, "1:bcde|2:XY|1:f|");
    a.n = 0;
    runner_output_runs(o, 8, take_all, &a); /* at the end: nothing */
    assert_int_equal(a.n, 0);
    runner_output_settle(o);
    runner_output_stats(o, &st);
    assert_int_equal(st.room, 8);
    assert_memory_equal(runner_output_at(o, 0), "abcdeXYf", 8);
    runner_output_free(o);
    runner_output_free(NULL);
}

static void test_bounded(void **state)
{
    (void)state;
    struct runner_output *o = runner_output_new();
    struct runner_output_stats st;
    size_t max = SBX_RUNNER_MAX_OUTPUT, end = 0, total;
    char *big = malloc(max + 10);

    memset(big, 'o', max + 10);
    big[max + 9] = 'Z';
    runner_output_add(o, 2, "early", 5);
    runner_output_add(o, 1, big, max + 10); /* over the maximum: its tail */
    total = runner_output_total(o);
    assert_int_equal(total, 5 + max + 10);
    assert_int_equal(runner_output_first(o), total - max);
    assert_int_equal(runner_output_at(o, total - 1)[0], 'Z');
    /* the first kept byte is stdout's: stderr's run is gone, and a read from
     * before the first kept byte starts there */
    assert_int_equal(stream_at(o, total - max, &end), 1);
    assert_int_equal(end, total);
    assert_int_equal(stream_at(o, 0, &end), 1);
    assert_int_equal(end, max);
    runner_output_add(o, 2, "err", 3);
    total = runner_output_total(o);
    assert_int_equal(runner_output_first(o), total - max);
    assert_memory_equal(runner_output_at(o, total - 4), "Zerr", 4);
    assert_int_equal(stream_at(o, total - 3, &end), 2);
    assert_int_equal(stream_at(o, total - 4, &end), 1);
    assert_int_equal(end, total - 3);
    runner_output_stats(o, &st);
    assert_true(st.room <= 2 * max + 8); /* at most twice the maximum */
    free(big);
    runner_output_free(o);
}

/* The runs of one stream stay right while the buffer drops its oldest bytes,
 * and their bookkeeping stays bounded by what is kept. */
static void test_runs_bounded(void **state)
{
    struct runner_output *o = runner_output_new();
    struct runner_output_stats st;
    char *chunk = malloc(600 * 1024);
    size_t end = 0;
    size_t start, total;

    (void)state;
    assert_non_null(chunk);
    memset(chunk, 'o', 600 * 1024);
    runner_output_add(o, 1, chunk, 600 * 1024);
    memset(chunk, 'e', 600 * 1024);
    runner_output_add(o, 2, chunk, 600 * 1024);
    runner_output_add(o, 2, "ee", 2);
    runner_output_add(o, 1, "0123456789", 10);
    assert_int_equal(runner_output_total(o), 1228812);
    start = runner_output_first(o);
    assert_int_equal(runner_output_total(o) - start, SBX_RUNNER_MAX_OUTPUT);
    assert_int_equal(stream_at(o, start, &end), 1);
    assert_int_equal(end, 614400);
    assert_int_equal(stream_at(o, 614400, &end), 2);
    assert_int_equal(end, 1228802);
    assert_int_equal(stream_at(o, 1228801, &end), 2);
    assert_int_equal(stream_at(o, 1228802, &end), 1);
    assert_int_equal(end, 1228812);
    assert_memory_equal(runner_output_at(o, 1228802), "0123456789", 10);
    /* a larger piece than the buffer keeps its last bytes only */
    memset(chunk, 'x', 600 * 1024);
    runner_output_add(o, 2, chunk, 600 * 1024);
    runner_output_add(o, 2, chunk, 600 * 1024);
    start = runner_output_first(o);
    assert_int_equal(stream_at(o, start, &end), 2);
    assert_int_equal(end, runner_output_total(o));
    /* 2000 alternating pieces of 4 KiB (8 MiB): every kept byte's stream is
     * right, and only the runs of the kept bytes are remembered */
    memset(chunk, 'a', 4096);
    for (int i = 0; i < 2000; i++) {
        runner_output_add(o, i % 2 ? 2 : 1, chunk, 4096);
    }
    start = runner_output_first(o);
    total = runner_output_total(o);
    for (size_t off = start; off < total; off = end) {
        size_t piece = (off - (total - 2000 * 4096)) / 4096;
        int want = piece % 2 ? 2 : 1;

        if (stream_at(o, off, &end) != want) {
            fail_msg("offset %zu: wrong stream", off);
        }
        assert_int_equal(end - off, 4096);
    }
    runner_output_stats(o, &st);
    assert_true(st.runs <= SBX_RUNNER_MAX_OUTPUT / 4096 + 2);
    assert_true(st.run_room <= 4 * (SBX_RUNNER_MAX_OUTPUT / 4096 + 2));
    /* 1 million pieces of 1 to 16 bytes, each a run of a counter: the kept bytes are
     * the last ones of the sequence, and keeping them moved fewer bytes than were
     * appended (it moved about a MiB per piece when the buffer slid by memmove) */
    {
        size_t moved0 = st.moved;
        size_t total0 = runner_output_total(o);
        unsigned char k = 0;
        const char *kept;

        for (int i = 0; i < 1000000; i++) {
            char piece[16];
            size_t n = (size_t)(i % 16) + 1;

            for (size_t b = 0; b < n; b++) {
                piece[b] = (char)k++;
            }
            runner_output_add(o, 1, piece, n);
        }
        start = runner_output_first(o);
        total = runner_output_total(o);
        assert_int_equal(total - start, SBX_RUNNER_MAX_OUTPUT);
        k--; /* the last byte appended */
        kept = runner_output_at(o, start);
        for (size_t b = 0; b < total - start; b++) {
            unsigned char want = (unsigned char)(k - (total - start - 1 - b));

            if ((unsigned char)kept[b] != want) {
                fail_msg("kept byte %zu is %u, not %u", b, (unsigned char)kept[b], want);
            }
        }
        runner_output_stats(o, &st);
        assert_true(st.moved - moved0 <= total - total0);
        assert_true(st.room <= 2 * SBX_RUNNER_MAX_OUTPUT);
        /* a job that ended gives the room back and keeps its bytes */
        runner_output_settle(o);
        runner_output_stats(o, &st);
        assert_int_equal(st.room, SBX_RUNNER_MAX_OUTPUT);
        assert_int_equal(runner_output_first(o), start);
        assert_int_equal((unsigned char)runner_output_at(o, total - 1)[0], (unsigned char)k);
    }
    free(chunk);
    runner_output_free(o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_runs),
        cmocka_unit_test(test_bounded),
        cmocka_unit_test(test_runs_bounded),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
