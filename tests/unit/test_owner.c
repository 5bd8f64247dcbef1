/* test_owner.c - the sbx.owner label and the test scope (core/src/sandbox/owner.c):
 * this process is alive by its own label, a label of another boot or of a gone
 * start time is not, one that does not parse is never judged gone; and
 * SBX_TEST_LABEL (docs/testing.md): unset or empty is no scope, a valid value is
 * the scope, a bad one (a character outside A-Z a-z 0-9 _ . -, or over 63) is
 * refused. */
#include "test_common.h"

#include "sandbox/owner.h"

static void test_owner_alive(void **state)
{
    char self[160];
    char other[160];

    (void)state;
    assert_int_equal(sbx_owner_self(self, sizeof(self)), 0);
    assert_int_equal(sbx_owner_alive(self), 1);
    /* the same pid with another start time: gone */
    snprintf(other, sizeof(other), "%.*s;start=1", (int)(strstr(self, ";start=") - self), self);
    assert_int_equal(sbx_owner_alive(other), 0);
    /* another boot: gone */
    assert_int_equal(sbx_owner_alive("boot=not-this-boot;pid=1;start=5"), 0);
    /* what does not parse is never judged */
    assert_int_equal(sbx_owner_alive("garbage"), 1);
    assert_int_equal(sbx_owner_alive(NULL), 1);
}

static void test_scope(void **state)
{
    char big[80];
    int bad = -1;

    (void)state;
    unsetenv("SBX_TEST_LABEL");
    assert_null(sbx_owner_test_scope(&bad));
    assert_int_equal(bad, 0);
    setenv("SBX_TEST_LABEL", "", 1);
    assert_null(sbx_owner_test_scope(&bad));
    assert_int_equal(bad, 0);
    setenv("SBX_TEST_LABEL", "runtime_test_docker-run.2", 1);
    assert_string_equal(sbx_owner_test_scope(&bad), "runtime_test_docker-run.2");
    assert_int_equal(bad, 0);
    assert_non_null(sbx_owner_test_scope(NULL));
    setenv("SBX_TEST_LABEL", "a b", 1);
    assert_null(sbx_owner_test_scope(&bad));
    assert_int_equal(bad, 1);
    setenv("SBX_TEST_LABEL", "x=y", 1);
    assert_null(sbx_owner_test_scope(&bad));
    assert_int_equal(bad, 1);
    memset(big, 'a', 63);
    big[63] = '\0';
    setenv("SBX_TEST_LABEL", big, 1);
    assert_non_null(sbx_owner_test_scope(&bad));
    big[63] = 'a';
    big[64] = '\0';
    setenv("SBX_TEST_LABEL", big, 1);
    assert_null(sbx_owner_test_scope(&bad));
    assert_int_equal(bad, 1);
    unsetenv("SBX_TEST_LABEL");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_owner_alive),
        cmocka_unit_test(test_scope),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
