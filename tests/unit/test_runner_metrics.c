/* test_runner_metrics.c - the runner's own metrics module alone
 * (runner/rmetrics.c, docs/runner.md "Metrics"), without a runner: what is
 * recorded (a job's run, a sandbox's start, egress decisions, refusals) as
 * Prometheus text (checked by the strict parser of prom_check.h), only the
 * served pools' series, and the refusal reason of an HTTP status. */
#include "test_common.h"

#include "prom_check.h"
#include "runner/rmetrics.h"

static char *render(struct runner_metrics *m, const int served[SBX_POOL_COUNT])
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);

    assert_non_null(f);
    rm_write(m, f, served);
    fclose(f);
    assert_exposition(text);
    {
        char *dir = test_mkdtemp();

        promtool_check_in(dir, text); /* when CMake found promtool */
        test_rm_rf(dir);
        free(dir);
    }
    return text;
}

static void test_render(void **state)
{
    (void)state;
    struct runner_metrics *m = rm_new();
    const int both[SBX_POOL_COUNT] = {1, 1};
    char *text;

    rm_job_run(m, SBX_POOL_CI, 700);   /* le 1 */
    rm_job_run(m, SBX_POOL_CI, 20000); /* le 30 */
    rm_job_run(m, SBX_POOL_AGENT, -5); /* a clock step: 0 */
    rm_sandbox_start(m, SBX_POOL_AGENT, 300);
    rm_egress(m, SBX_POOL_CI, 3, 1);
    rm_egress(m, SBX_POOL_CI, 2, 0);
    rm_refused(m, RM_REFUSED_UNAUTHORIZED);
    rm_refused(m, rm_refusal_of(422));
    rm_refused(m, rm_refusal_of(422));
    text = render(m, both);
    assert_non_null(strstr(text, "sbx_job_run_seconds_bucket{pool=\"ci\",le=\"0.5\"} 0\n"));
    assert_non_null(strstr(text, "sbx_job_run_seconds_bucket{pool=\"ci\",le=\"1\"} 1\n"));
    assert_non_null(strstr(text, "sbx_job_run_seconds_bucket{pool=\"ci\",le=\"30\"} 2\n"));
    assert_non_null(strstr(text, "sbx_job_run_seconds_bucket{pool=\"ci\",le=\"+Inf\"} 2\n"));
    assert_non_null(strstr(text, "sbx_job_run_seconds_sum{pool=\"ci\"} 20.700\n"));
    assert_non_null(strstr(text, "sbx_job_run_seconds_count{pool=\"ci\"} 2\n"));
    assert_non_null(strstr(text, "sbx_job_run_seconds_bucket{pool=\"agent\",le=\"0.1\"} 1\n"));
    assert_non_null(
        strstr(text, "sbx_sandbox_start_seconds_bucket{pool=\"agent\",le=\"0.25\"} 0\n"));
    assert_non_null(
        strstr(text, "sbx_sandbox_start_seconds_bucket{pool=\"agent\",le=\"0.5\"} 1\n"));
    assert_non_null(
        strstr(text, "sbx_egress_connections_total{pool=\"ci\",decision=\"allowed\"} 5\n"));
    assert_non_null(
        strstr(text, "sbx_egress_connections_total{pool=\"ci\",decision=\"denied\"} 1\n"));
    assert_non_null(strstr(text, "sbx_jobs_refused_total{reason=\"unauthorized\"} 1\n"));
    assert_non_null(strstr(text, "sbx_jobs_refused_total{reason=\"policy\"} 2\n"));
    assert_non_null(strstr(text, "sbx_jobs_refused_total{reason=\"invalid\"} 0\n"));
    assert_non_null(strstr(text, "sbx_build_info{version=\""));
    assert_non_null(strstr(text, "process_start_time_seconds "));
    free(text);
    rm_free(m);
}

static void test_served_only(void **state)
{
    (void)state;
    struct runner_metrics *m = rm_new();
    const int ci[SBX_POOL_COUNT] = {1, 0};
    char *text;

    rm_job_run(m, SBX_POOL_AGENT, 1000);
    text = render(m, ci);
    assert_non_null(strstr(text, "sbx_job_run_seconds_count{pool=\"ci\"} 0\n"));
    assert_null(strstr(text, "pool=\"agent\""));
    free(text);
    rm_free(m);
    rm_free(NULL);
}

static void test_refusal_of(void **state)
{
    (void)state;
    assert_int_equal(rm_refusal_of(400), RM_REFUSED_INVALID);
    assert_int_equal(rm_refusal_of(401), RM_REFUSED_UNAUTHORIZED);
    assert_int_equal(rm_refusal_of(403), RM_REFUSED_FORBIDDEN);
    assert_int_equal(rm_refusal_of(409), RM_REFUSED_CONFLICT);
    assert_int_equal(rm_refusal_of(413), RM_REFUSED_TOO_LARGE);
    assert_int_equal(rm_refusal_of(422), RM_REFUSED_POLICY);
    assert_int_equal(rm_refusal_of(503), RM_REFUSED_ERROR);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_render),
        cmocka_unit_test(test_served_only),
        cmocka_unit_test(test_refusal_of),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
