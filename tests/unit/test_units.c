/* test_units.c - sizes, CPUs, durations (docs/architecture.md, Units). */
#include "test_common.h"

#include "util/units.h"

static void test_units_size_binary(void **state)
{
    int64_t v = 0;
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(sbx_size_parse("8G", &v, &err), 0);
    assert_int_equal(v, 8589934592LL);
    assert_int_equal(sbx_size_parse("40G", &v, &err), 0);
    assert_int_equal(v, 42949672960LL);
    assert_int_equal(sbx_size_parse("512M", &v, &err), 0);
    assert_int_equal(v, 512LL << 20);
    assert_int_equal(sbx_size_parse("1GiB", &v, &err), 0);
    assert_int_equal(v, 1LL << 30);
    assert_int_equal(sbx_size_parse("1024", &v, &err), 0);
    assert_int_equal(v, 1024);
    assert_null(err);
}

static void test_units_size_bad(void **state)
{
    static const char *const bad[] = {"8X", "G", "-1G", "8GB", "", "1.5G", "99999999999T"};
    int64_t v = 0;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cleanup_error sbx_error_t *err = NULL;

        assert_int_equal(sbx_size_parse(bad[i], &v, &err), -1);
        assert_non_null(err);
        assert_non_null(strstr(err->msg, "bad size"));
    }
}

static void test_units_size_gb_is_explained(void **state)
{
    cleanup_error sbx_error_t *err = NULL;
    int64_t v;

    (void)state;
    sbx_size_parse("8GB", &v, &err);
    assert_non_null(strstr(err->msg, "ambiguous"));
}

static void test_units_cpus(void **state)
{
    double d = 0;
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(sbx_cpus_parse("2.0", &d, &err), 0);
    assert_true(d == 2.0);
    assert_int_equal(sbx_cpus_parse("0.5", &d, &err), 0);
    assert_true(d == 0.5);
    assert_int_equal(sbx_cpus_parse("2", &d, &err), 0);
    assert_null(err);
    {
        cleanup_error sbx_error_t *e = NULL;

        assert_int_equal(sbx_cpus_parse("two", &d, &e), -1);
    }
    {
        cleanup_error sbx_error_t *e = NULL;

        assert_int_equal(sbx_cpus_parse("0", &d, &e), -1);
    }
    {
        cleanup_error sbx_error_t *e = NULL;

        assert_int_equal(sbx_cpus_parse("nan", &d, &e), -1);
    }
    {
        cleanup_error sbx_error_t *e = NULL;

        assert_int_equal(sbx_cpus_parse("-2", &d, &e), -1);
    }
}

static void test_units_duration(void **state)
{
    int64_t v = 0;
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(sbx_duration_parse("60m", &v, &err), 0);
    assert_int_equal(v, 3600);
    assert_int_equal(sbx_duration_parse("8h", &v, &err), 0);
    assert_int_equal(v, 28800);
    assert_int_equal(sbx_duration_parse("30s", &v, &err), 0);
    assert_int_equal(v, 30);
    assert_int_equal(sbx_duration_parse("1h30m", &v, &err), 0);
    assert_int_equal(v, 5400);
    assert_int_equal(sbx_duration_parse("90", &v, &err), 0);
    assert_int_equal(v, 90);
    assert_null(err);
}

static void test_units_duration_bad(void **state)
{
    static const char *const bad[] = {"", "m", "10x", "1h30", "-5s", "1.5h"};
    int64_t v;

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        cleanup_error sbx_error_t *err = NULL;

        assert_int_equal(sbx_duration_parse(bad[i], &v, &err), -1);
        assert_non_null(strstr(err->msg, "bad duration"));
    }
}

static void test_units_format(void **state)
{
    char buf[32];

    (void)state;
    sbx_size_format(8LL << 30, buf, sizeof(buf));
    assert_string_equal(buf, "8G");
    sbx_size_format(1536LL << 20, buf, sizeof(buf));
    assert_string_equal(buf, "1536M");
    sbx_duration_format(3600, buf, sizeof(buf));
    assert_string_equal(buf, "1h");
    sbx_duration_format(90, buf, sizeof(buf));
    assert_string_equal(buf, "90s");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_units_size_binary),
        cmocka_unit_test(test_units_size_bad),
        cmocka_unit_test(test_units_size_gb_is_explained),
        cmocka_unit_test(test_units_cpus),
        cmocka_unit_test(test_units_duration),
        cmocka_unit_test(test_units_duration_bad),
        cmocka_unit_test(test_units_format),
    };

    return cmocka_run_group_tests_name("units", tests, NULL, NULL);
}
