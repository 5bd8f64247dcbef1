/* test_sdk_util.c - the SDK helper library (sbx/sbx_util.h): the one id
 * validator, URL escaping and checks through libcurl, the clock. */
#include "test_common.h"

#include "sbx/sbx_util.h"

static void test_sdk_id_rules(void **state)
{
    char long_id[80];

    (void)state;
    assert_true(sbx_id_valid("t-0123456789ab", SBX_ID_TASK));
    assert_true(sbx_id_valid("a.b_c-d", SBX_ID_TASK));
    assert_false(sbx_id_valid(NULL, SBX_ID_TASK));
    assert_false(sbx_id_valid("", SBX_ID_TASK));
    assert_false(sbx_id_valid("-x", SBX_ID_TASK)); /* first a letter or digit */
    assert_false(sbx_id_valid(".", SBX_ID_TASK));
    assert_false(sbx_id_valid("..", SBX_ID_TASK));
    assert_false(sbx_id_valid("a/b", SBX_ID_TASK));
    assert_false(sbx_id_valid("a:b", SBX_ID_TASK)); /* ':' only in names */
    assert_true(sbx_id_valid("job:1", SBX_ID_NAME));
    assert_false(sbx_id_valid("a b", SBX_ID_NAME));
    assert_false(sbx_id_valid("a/b", SBX_ID_NAME));
    memset(long_id, 'a', 64);
    long_id[64] = '\0';
    assert_true(sbx_id_valid(long_id, SBX_ID_TASK));
    assert_false(sbx_id_valid(long_id, SBX_ID_NAME)); /* names: at most 63 */
    long_id[63] = '\0';
    assert_true(sbx_id_valid(long_id, SBX_ID_NAME));
    memset(long_id, 'a', 65);
    long_id[65] = '\0';
    assert_false(sbx_id_valid(long_id, SBX_ID_TASK));
}

static void test_sdk_url_escape(void **state)
{
    char *e;

    (void)state;
    e = sbx_url_escape("/tasks/t 1?&=%");
    assert_string_equal(e, "%2Ftasks%2Ft%201%3F%26%3D%25");
    free(e);
    e = sbx_url_escape("AZaz09-._~");
    assert_string_equal(e, "AZaz09-._~");
    free(e);
}

static void test_sdk_url_loopback(void **state)
{
    (void)state;
    assert_true(sbx_url_is_loopback("http://127.0.0.1"));
    assert_true(sbx_url_is_loopback("http://127.0.0.1:8080/x"));
    assert_true(sbx_url_is_loopback("https://localhost"));
    assert_true(sbx_url_is_loopback("http://[::1]:1"));
    assert_true(sbx_url_is_loopback("http://127.9.9.9"));
    assert_false(sbx_url_is_loopback("http://127.0.0.1.evil.example"));
    assert_false(sbx_url_is_loopback("http://localhost.evil.example"));
    assert_false(sbx_url_is_loopback("http://evil.example/127.0.0.1"));
    assert_false(sbx_url_is_loopback("http://127.0.0.1@evil.example"));
    assert_false(sbx_url_is_loopback("ftp://127.0.0.1"));
    assert_false(sbx_url_is_loopback("not a url"));
    assert_false(sbx_url_is_loopback(NULL));
}

static void test_sdk_url_http_base(void **state)
{
    (void)state;
    assert_true(sbx_url_is_http_base("http://10.0.0.5:8080"));
    assert_true(sbx_url_is_http_base("https://vault.example/base/"));
    assert_false(sbx_url_is_http_base("http://h/x?q=1"));
    assert_false(sbx_url_is_http_base("http://h/#f"));
    assert_false(sbx_url_is_http_base("http://user@h"));
    assert_false(sbx_url_is_http_base("ftp://h"));
    assert_false(sbx_url_is_http_base("http://"));
}

static void test_sdk_clock(void **state)
{
    int64_t a = sbx_mono_ms();
    int64_t b;

    (void)state;
    usleep(20 * 1000);
    b = sbx_mono_ms();
    assert_true(b - a >= 19);
    assert_true(sbx_mono_ns() / 1000000 >= b);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sdk_id_rules),     cmocka_unit_test(test_sdk_url_escape),
        cmocka_unit_test(test_sdk_url_loopback), cmocka_unit_test(test_sdk_url_http_base),
        cmocka_unit_test(test_sdk_clock),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
