/* test_runner_probes.c - the runner's probe modules alone (runner/health.h),
 * without a runner: the store probe on a SQLite store (the first answer
 * before start returns, the gate it keeps on the loop's connection, given
 * back at free), the image check with no image configured (ready at once,
 * no thread), each module's answer when it is not running (NULL), and
 * (added, issue 31) the probe thread both probes share (runner/probe.h)
 * driven by a scripted probe. */
#include "test_common.h"

#include <pthread.h>
#include <time.h>

#include "config/config.h"
#include "runner/fleet.h"
#include "runner/health.h"
#include "runner/probe.h"
#include "store/store.h"
#include "sbx/sbx_util.h"

static void test_storeprobe_sqlite(void **state)
{
    (void)state;
    char *dir = test_mkdtemp();
    char *path = NULL;
    struct sbx_config cfg = {0};
    sbx_error_t *err = NULL;
    struct sbx_store *loop;
    struct runner_storeprobe *p;
    char why[200];
    double age = -1;

    assert_true(asprintf(&path, "%s/state.db", dir) > 0);
    loop = sbx_store_open(path, &err);
    assert_non_null(loop);
    p = runner_storeprobe_start(&cfg, path, loop, 50, &err);
    assert_null(err);
    assert_non_null(p);
    /* the first read answered before start returned */
    assert_int_equal(runner_storeprobe_state(p, why, sizeof(why), &age), 0);
    assert_string_equal(why, "");
    assert_true(age >= 0 && age < 60);
    assert_int_equal(runner_store_stalled(p), 0);
    assert_non_null(runner_store_gate(p));
    runner_storeprobe_free(p);
    /* the loop's connection still works without the gate */
    assert_int_equal(sbx_store_ping(loop, &err), 0);
    sbx_store_close(loop);
    test_rm_rf(dir);
    free(path);
    free(dir);
}

static void test_not_running(void **state)
{
    (void)state;
    char why[200];
    double age = -1;

    assert_int_equal(runner_storeprobe_state(NULL, why, sizeof(why), &age), -1);
    assert_string_equal(why, "the store probe is not running");
    assert_true(age == 0);
    assert_int_equal(runner_store_stalled(NULL), 0);
    assert_null(runner_store_gate(NULL));
    assert_int_equal(runner_health_engine(NULL, why, sizeof(why)), -1);
    assert_string_equal(why, "the engine probe is not running");
    assert_int_equal(runner_health_backlog(NULL), -1);
    assert_int_equal(runner_image_ready(NULL, why, sizeof(why)), 1);
    runner_health_free(NULL);
    runner_storeprobe_free(NULL);
    runner_image_free(NULL);
}

/* A scripted probe: each run answers "fail N" from the second run on, and
 * done keeps what it is given and asks for the next run in 10 ms. */
struct fake {
    pthread_mutex_t mu;
    int runs, dones, last_rc;
    char last_msg[RUNNER_PROBE_MSG];
};

static int fake_run(void *arg, char *msg, size_t len)
{
    struct fake *f = arg;
    int n;

    pthread_mutex_lock(&f->mu);
    n = ++f->runs;
    pthread_mutex_unlock(&f->mu);
    if (n == 1) {
        msg[0] = '\0';
    }
    else {
        snprintf(msg, len, "fail %d", n);
    }
    return n;
}

static int fake_done(void *arg, int rc, const char *msg)
{
    struct fake *f = arg;

    pthread_mutex_lock(&f->mu);
    f->dones++;
    f->last_rc = rc;
    snprintf(f->last_msg, sizeof(f->last_msg), "%s", msg);
    pthread_mutex_unlock(&f->mu);
    return 10;
}

static const struct runner_probe_ops fake_ops = {.run = fake_run, .done = fake_done};

static int fake_dones(struct fake *f)
{
    int n;

    pthread_mutex_lock(&f->mu);
    n = f->dones;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static void test_probe_thread(void **state)
{
    (void)state;
    struct fake f = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sbx_error_t *err = NULL;
    struct runner_probe_view v;
    struct runner_probe *p = runner_probe_start(&fake_ops, &f, 1, "the fake probe", &err);
    int64_t t0 = sbx_mono_ms();

    assert_null(err);
    assert_non_null(p);
    /* the first run answered on the caller's thread, and done saw it */
    runner_probe_read(p, &v);
    assert_true(v.done_at > 0);
    assert_true(f.runs >= 1);
    assert_true(f.dones >= 1);
    /* the thread runs again and again, each answer kept and given to done */
    while (fake_dones(&f) < 3 && sbx_mono_ms() - t0 < 10000) {
        struct timespec ts = {0, 5 * 1000 * 1000};

        nanosleep(&ts, NULL);
    }
    runner_probe_stop(p);
    assert_true(f.dones >= 3);
    assert_int_equal(f.runs, f.dones);
    assert_int_equal(f.last_rc, f.runs);
    assert_true(strncmp(f.last_msg, "fail ", 5) == 0);
    runner_probe_stop(NULL);
}

static void test_probe_read_fails(void **state)
{
    (void)state;
    struct fake f = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sbx_error_t *err = NULL;
    struct runner_probe_view v;
    struct runner_probe *p = runner_probe_start(&fake_ops, &f, 0, "the fake probe", &err);
    int64_t t0 = sbx_mono_ms();

    assert_non_null(p);
    /* without a first run the thread runs at once; the second answer is a failure */
    do {
        struct timespec ts = {0, 5 * 1000 * 1000};

        nanosleep(&ts, NULL);
        runner_probe_read(p, &v);
    } while (strncmp(v.msg, "fail ", 5) != 0 && sbx_mono_ms() - t0 < 10000);
    assert_true(strncmp(v.msg, "fail ", 5) == 0);
    assert_true(v.done_at >= t0);
    runner_probe_stop(p);
}

/* (added, issue 31) The fleet's autoscaler asks the store probe at each
 * beat: with the database known stalled it does not reach it at all; else it
 * tries (here a PostgreSQL socket that is not there: it does not lead). */
static void test_lead_stalled(void **state)
{
    (void)state;
    char *dir = test_mkdtemp();
    char *path = NULL;
    char *dsn = NULL;
    struct sbx_config cfg = {0};
    sbx_error_t *err = NULL;
    struct sbx_store *loop;
    struct runner_storeprobe *p;
    struct runner_lead *l;

    assert_true(asprintf(&path, "%s/state.db", dir) > 0);
    assert_true(asprintf(&dsn, "postgresql://sbx@/sbx?host=%s/nosuchdir", dir) > 0);
    loop = sbx_store_open(path, &err);
    assert_non_null(loop);
    p = runner_storeprobe_start(&cfg, path, loop, 60000, &err);
    assert_non_null(p);
    l = runner_lead_new(&cfg, dsn, "box-a");
    sbx_store_gate_set(runner_store_gate(p), 1); /* a call passed its deadline */
    assert_int_equal(runner_store_stalled(p), 1);
    assert_int_equal(runner_lead_beat(l, p), -1);
    sbx_store_gate_set(runner_store_gate(p), 0);
    assert_int_equal(runner_lead_beat(l, p), 0);
    assert_int_equal(runner_lead_beat(l, NULL), 0); /* no probe: never stalled */
    runner_lead_free(l);
    runner_storeprobe_free(p);
    sbx_store_close(loop);
    test_rm_rf(dir);
    free(dsn);
    free(path);
    free(dir);
}

static int ready_calls;

static void on_ready(void *arg)
{
    (void)arg;
    ready_calls++;
}

static void test_image_none(void **state)
{
    (void)state;
    struct sbx_config cfg = {0}; /* no provider instance: no image to check */
    sbx_error_t *err = NULL;
    struct runner_image *im = runner_image_start(&cfg, "/nonexistent", on_ready, NULL, &err);
    char why[100] = "x";

    assert_null(err);
    assert_non_null(im);
    assert_int_equal(runner_image_ready(im, why, sizeof(why)), 1);
    assert_string_equal(why, "");
    assert_int_equal(ready_calls, 0); /* no thread: nothing to tell the loop */
    runner_image_free(im);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_storeprobe_sqlite), cmocka_unit_test(test_not_running),
        cmocka_unit_test(test_image_none),        cmocka_unit_test(test_probe_thread),
        cmocka_unit_test(test_probe_read_fails),  cmocka_unit_test(test_lead_stalled),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
