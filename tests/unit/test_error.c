/* test_error.c - the error contract. */
#include "test_common.h"

#include <errno.h>

#include "util/error.h"

static int fails(int code, sbx_error_t **err)
{
    return sbx_error_set(err, code, "open `%s`", "/nope");
}

static void test_error_set_returns_negative(void **state)
{
    cleanup_error sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(fails(ENOENT, &err), -1);
    assert_non_null(err);
    assert_int_equal(err->code, ENOENT);
    assert_string_equal(err->msg, "open `/nope`");
}

static void test_error_wrap_prefixes_context(void **state)
{
    cleanup_error sbx_error_t *err = NULL;

    (void)state;
    fails(EACCES, &err);
    assert_int_equal(sbx_error_wrap(&err, "loading plugin `%s`", "x"), -1);
    assert_string_equal(err->msg, "loading plugin `x`: open `/nope`");
    assert_int_equal(err->code, EACCES);
}

static void test_error_first_error_wins(void **state)
{
    cleanup_error sbx_error_t *err = NULL;

    (void)state;
    sbx_error_set(&err, 1, "first");
    sbx_error_set(&err, 2, "second");
    assert_string_equal(err->msg, "first");
}

static void test_error_one_line(void **state)
{
    cleanup_error sbx_error_t *err = NULL;

    (void)state;
    sbx_error_set(&err, 1, "a\nb\rc");
    assert_string_equal(err->msg, "a b c");
}

static void test_error_null_safe(void **state)
{
    sbx_error_t *err = NULL;

    (void)state;
    assert_int_equal(sbx_error_set(NULL, 1, "ignored"), -1);
    assert_int_equal(sbx_error_wrap(&err, "nothing to wrap"), -1);
    assert_null(err);
    sbx_error_free(&err);
    sbx_error_free(NULL);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_error_set_returns_negative),
        cmocka_unit_test(test_error_wrap_prefixes_context),
        cmocka_unit_test(test_error_first_error_wins),
        cmocka_unit_test(test_error_one_line),
        cmocka_unit_test(test_error_null_safe),
    };

    return cmocka_run_group_tests_name("error", tests, NULL, NULL);
}
