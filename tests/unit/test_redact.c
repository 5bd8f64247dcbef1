/* test_redact.c - the streaming redactor: splits at every boundary,
 * overlapping and nested values, binary data, the hold-back bound. */
#include "test_common.h"

#include "cred/redact.h"
#include "plugin/host.h"

struct capture {
    char *p;
    size_t len;
    int refuse;
};

static int capture_sink(void *ud, const char *data, size_t len)
{
    struct capture *c = ud;

    if (c->refuse) {
        return 1;
    }
    c->p = realloc(c->p, c->len + len + 1);
    assert_non_null(c->p);
    memcpy(c->p + c->len, data, len);
    c->len += len;
    c->p[c->len] = '\0';
    return 0;
}

/* Feeds `in` cut at the given offsets (ascending, `n` of them). */
static char *run_cuts(const struct sbx_redactor *r, const char *in, size_t len, const size_t *cuts,
                      size_t n, size_t *out_len)
{
    struct capture c = {0};
    struct sbx_redact_stream *s = sbx_redact_stream_new(r, capture_sink, &c);
    sbx_error_t *err = NULL;
    size_t prev = 0;

    for (size_t i = 0; i <= n; i++) {
        size_t end = i < n ? cuts[i] : len;

        assert_int_equal(sbx_redact_stream_write(s, in + prev, end - prev, &err), 0);
        prev = end;
    }
    assert_int_equal(sbx_redact_stream_finish(s, &err), 0);
    sbx_redact_stream_free(s);
    if (c.p == NULL) {
        c.p = strdup("");
    }
    *out_len = c.len;
    return c.p;
}

static void expect_all_splits(const struct sbx_redactor *r, const char *in, size_t len,
                              const char *want, size_t want_len)
{
    size_t cuts[2];
    size_t got_len;
    char *got;

    got = run_cuts(r, in, len, NULL, 0, &got_len);
    assert_int_equal(got_len, want_len);
    assert_memory_equal(got, want, want_len);
    free(got);
    /* one cut at every boundary, then two cuts at every pair */
    for (size_t i = 0; i <= len; i++) {
        cuts[0] = i;
        got = run_cuts(r, in, len, cuts, 1, &got_len);
        if (got_len != want_len || memcmp(got, want, want_len) != 0) {
            fail_msg("split at %zu: got '%.*s'", i, (int)got_len, got);
        }
        free(got);
        for (size_t j = i; j <= len; j++) {
            cuts[1] = j;
            got = run_cuts(r, in, len, cuts, 2, &got_len);
            if (got_len != want_len || memcmp(got, want, want_len) != 0) {
                fail_msg("split at %zu,%zu: got '%.*s'", i, j, (int)got_len, got);
            }
            free(got);
        }
    }
}

static void expect_str(const struct sbx_redactor *r, const char *in, const char *want)
{
    expect_all_splits(r, in, strlen(in), want, strlen(want));
}

static void test_redact_basic(void **state)
{
    struct sbx_redactor *r = sbx_redactor_create();

    (void)state;
    assert_int_equal(sbx_redactor_add(r, "API_KEY", "s3cr3t-value"), 0);
    assert_int_equal(sbx_redactor_add(r, "DB_PASS", "hunter22"), 0);
    expect_str(r, "key=s3cr3t-value\n", "key=[redacted:API_KEY]\n");
    expect_str(r, "s3cr3t-values3cr3t-value", "[redacted:API_KEY][redacted:API_KEY]");
    expect_str(r, "a hunter22 b s3cr3t-value c", "a [redacted:DB_PASS] b [redacted:API_KEY] c");
    expect_str(r, "s3cr3t-valu", "s3cr3t-valu"); /* a prefix at the end is released */
    expect_str(r, "hunter2 hunter222", "hunter2 [redacted:DB_PASS]2");
    expect_str(r, "", "");
    assert_int_equal(sbx_redactor_count(r), 2);
    sbx_redactor_destroy(r);
}

static void test_redact_short_values(void **state)
{
    struct sbx_redactor *r = sbx_redactor_create();

    (void)state;
    assert_int_equal(sbx_redactor_add(r, "ONE", "1"), 1);
    assert_int_equal(sbx_redactor_add(r, "THREE", "abc"), 1);
    assert_int_equal(sbx_redactor_add(r, "FOUR", "abcd"), 0);
    assert_int_equal(sbx_redactor_count(r), 1);
    expect_str(r, "1 abc abcd", "1 abc [redacted:FOUR]");
    sbx_redactor_destroy(r);
}

static void test_redact_overlaps(void **state)
{
    struct sbx_redactor *r = sbx_redactor_create();

    (void)state;
    sbx_redactor_add(r, "A", "abcdef");
    sbx_redactor_add(r, "B", "defghi");
    sbx_redactor_add(r, "S", "wxyz");
    sbx_redactor_add(r, "L", "wxyz0123");
    sbx_redactor_add(r, "R", "qqqq");
    /* overlapping values: the whole union is hidden, both named */
    expect_str(r, "xxabcdefghixx", "xx[redacted:A][redacted:B]xx");
    /* nested: B inside nothing, A alone */
    expect_str(r, "abcdefgh", "[redacted:A]gh");
    /* a shorter value that is a prefix of a longer one: the longer wins */
    expect_str(r, "<wxyz0123>", "<[redacted:L]>");
    expect_str(r, "<wxyz012>", "<[redacted:S]012>");
    /* a value overlapping itself is one run */
    expect_str(r, "qqqqqqq.", "[redacted:R].");
    expect_str(r, "qqqq.qqqq", "[redacted:R].[redacted:R]");
    sbx_redactor_destroy(r);
}

static void test_redact_binary(void **state)
{
    static const char secret[] = {'\x01', '\xff', '\x00' + 'z', '\x80', '\x7f', 0};
    static const char in[] = {'\0', '\x01', '\xff', 'z', '\x80', '\x7f', '\0', '\x01', '\xff'};
    static const char want[] = "\0[redacted:BIN]\0\x01\xff";
    struct sbx_redactor *r = sbx_redactor_create();

    (void)state;
    assert_int_equal(sbx_redactor_add(r, "BIN", secret), 0);
    expect_all_splits(r, in, sizeof(in), want, sizeof(want) - 1);
    sbx_redactor_destroy(r);
}

static void test_redact_hold_back_bound(void **state)
{
    struct sbx_redactor *r = sbx_redactor_create();
    struct capture c = {0};
    struct sbx_redact_stream *s;
    sbx_error_t *err = NULL;
    size_t written = 0;

    (void)state;
    sbx_redactor_add(r, "K", "aaaaaaab"); /* max length 8: at most 7 bytes held */
    s = sbx_redact_stream_new(r, capture_sink, &c);
    for (int i = 0; i < 100; i++) {
        assert_int_equal(sbx_redact_stream_write(s, "a", 1, &err), 0);
        written++;
        assert_true(c.len + 7 >= written);
    }
    /* the held bytes are exactly a prefix, and the next byte completes it */
    assert_int_equal(sbx_redact_stream_write(s, "b", 1, &err), 0);
    assert_int_equal(sbx_redact_stream_finish(s, &err), 0);
    assert_int_equal(c.len, 93 + strlen("[redacted:K]"));
    assert_string_equal(c.p + 93, "[redacted:K]");
    sbx_redact_stream_free(s);
    free(c.p);
    sbx_redactor_destroy(r);
}

static void test_redact_sink_refuses(void **state)
{
    struct sbx_redactor *r = sbx_redactor_create();
    struct capture c = {.refuse = 1};
    struct sbx_redact_stream *s;
    sbx_error_t *err = NULL;

    (void)state;
    sbx_redactor_add(r, "K", "secret");
    s = sbx_redact_stream_new(r, capture_sink, &c);
    assert_int_equal(sbx_redact_stream_write(s, "hello", 5, &err), -1);
    assert_non_null(strstr(err->msg, "sink stopped"));
    sbx_error_free(&err);
    sbx_redact_stream_free(s);
    sbx_redactor_destroy(r);
}

/* Random text over a small alphabet: chunked output equals one-shot output
 * and never contains a value. */
static void test_redact_random(void **state)
{
    struct sbx_redactor *r = sbx_redactor_create();
    const char *values[] = {"abab", "babba", "aabbaab", "abba"};
    unsigned seed = 12345;
    char in[200];

    (void)state;
    for (size_t k = 0; k < 4; k++) {
        char name[8];

        snprintf(name, sizeof(name), "V%zu", k);
        sbx_redactor_add(r, name, values[k]);
    }
    for (int round = 0; round < 300; round++) {
        size_t len = (size_t)(rand_r(&seed) % sizeof(in));
        size_t cuts[6];
        size_t one_len;
        size_t got_len;
        char *one;
        char *got;

        for (size_t i = 0; i < len; i++) {
            in[i] = (char)("ab"[rand_r(&seed) % 2]);
        }
        for (size_t i = 0; i < 6; i++) {
            cuts[i] = len ? (size_t)(rand_r(&seed) % (len + 1)) : 0;
        }
        for (size_t i = 1; i < 6; i++) { /* insertion sort */
            for (size_t j = i; j > 0 && cuts[j - 1] > cuts[j]; j--) {
                size_t t = cuts[j];

                cuts[j] = cuts[j - 1];
                cuts[j - 1] = t;
            }
        }
        one = sbx_redact_buffer(r, in, len, &one_len);
        got = run_cuts(r, in, len, cuts, 6, &got_len);
        assert_int_equal(one_len, got_len);
        assert_memory_equal(one, got, got_len);
        for (size_t k = 0; k < 4; k++) {
            if (memmem(got, got_len, values[k], strlen(values[k])) != NULL) {
                fail_msg("value %zu survived in '%s'", k, got);
            }
        }
        free(one);
        free(got);
    }
    sbx_redactor_destroy(r);
}

static void test_redact_from_lease(void **state)
{
    const struct sbx_host_api *host = sbx_host_api_get();
    struct sbx_lease lease = {0};
    struct sbx_redactor *r;
    sbx_error_t *err = NULL;
    char *out;

    (void)state;
    snprintf(lease.id, sizeof(lease.id), "lease-1");
    assert_int_equal(host->lease_add_secret(&lease, "API_KEY", "sk-live-123456", &err), 0);
    assert_int_equal(host->lease_add_secret(&lease, "PIN", "42", &err), 0);
    r = sbx_redactor_from_lease(&lease);
    assert_int_equal(sbx_redactor_count(r), 1);
    sbx_lease_clear(&lease); /* the redactor keeps its own copies */
    out = sbx_redact_buffer(r, "key sk-live-123456 pin 42", 25, NULL);
    assert_string_equal(out, "key [redacted:API_KEY] pin 42");
    free(out);
    sbx_redactor_destroy(r);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_redact_basic),           cmocka_unit_test(test_redact_short_values),
        cmocka_unit_test(test_redact_overlaps),        cmocka_unit_test(test_redact_binary),
        cmocka_unit_test(test_redact_hold_back_bound), cmocka_unit_test(test_redact_sink_refuses),
        cmocka_unit_test(test_redact_random),          cmocka_unit_test(test_redact_from_lease),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
