/* test_admit.c - admission (issue 14): the box's budget, the arithmetic, the
 * slot ledger across processes (dead owners count nothing), and the config
 * keys box.memory / box.host_reserve / box.cpu_reserve. */
#include "test_common.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>

#include "config/config.h"
#include "sandbox/admit.h"
#include "sandbox/owner.h"

#define G (1LL << 30)
#define M (1LL << 20)

static char *dir;

static int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    return 0;
}

static struct sbx_config *load(const char *text, sbx_error_t **err)
{
    char *path = test_write_file(dir, "sbx.conf", text);
    struct sbx_config *c = sbx_config_load_file(path, err);

    free(path);
    return c;
}

static void test_admit_arithmetic(void **state)
{
    struct sbx_box_budget b = {.memory = 3 * G, .reserve = 1 * G, .admit = 2 * G};

    (void)state;
    assert_int_equal(sbx_admit_check(&b, 0, 1 * G), SBX_ADMIT_OK);
    assert_int_equal(sbx_admit_check(&b, 1 * G, 1 * G), SBX_ADMIT_OK); /* exactly full */
    assert_int_equal(sbx_admit_check(&b, 2 * G, 1), SBX_ADMIT_WAIT);
    assert_int_equal(sbx_admit_check(&b, 1 * G + 1, 1 * G), SBX_ADMIT_WAIT);
    assert_int_equal(sbx_admit_check(&b, 0, 2 * G), SBX_ADMIT_OK);
    assert_int_equal(sbx_admit_check(&b, 0, 2 * G + 1), SBX_ADMIT_NEVER);
    /* no overflow with absurd values */
    assert_int_equal(sbx_admit_check(&b, INT64_MAX, 1 * G), SBX_ADMIT_WAIT);
    assert_int_equal(sbx_admit_check(&b, 0, INT64_MAX), SBX_ADMIT_NEVER);

    /* the default reserve: max(1G, 10%), never the whole box */
    assert_int_equal(sbx_admit_default_reserve(24 * G), 24 * G / 10);
    assert_int_equal(sbx_admit_default_reserve(4 * G), 1 * G);
    assert_int_equal(sbx_admit_default_reserve(512 * M), 256 * M);
    assert_true(sbx_admit_default_cpu_reserve(2.0) == 0.5);
    assert_true(sbx_admit_default_cpu_reserve(64.0) == 0.5);
    assert_true(sbx_admit_default_cpu_reserve(1.0) == 0.25);
    assert_int_equal(sbx_admit_task_memory(1 * G, 0), 1 * G);
    assert_int_equal(sbx_admit_task_memory(1 * G, 1), 2 * G); /* the sidecar has the same cap */
}

static void test_admit_budget(void **state)
{
    char *meminfo = test_write_file(dir, "meminfo", "MemTotal:       24576000 kB\nMemFree: 1 kB\n");
    struct sbx_config *cfg = sbx_config_defaults();
    struct sbx_box_budget b;
    sbx_error_t *err = NULL;
    char buf[32];

    (void)state;
    /* defaults: MemTotal, 10% reserve; 2 CPUs keep 0.5 for the host */
    assert_int_equal(sbx_box_budget(cfg, meminfo, 2.0, &b, &err), 0);
    assert_int_equal(b.memory, 24576000LL * 1024);
    assert_int_equal(b.reserve, 24576000LL * 1024 / 10);
    assert_int_equal(b.admit, b.memory - b.reserve);
    assert_true(b.cpu_max == 1.5);
    /* three 8G sandboxes do not fit the 24G box at once */
    assert_int_equal(sbx_admit_check(&b, 16 * G, 8 * G), SBX_ADMIT_WAIT);
    sbx_config_destroy(cfg);

    cfg = load("box = { memory = \"3G\"; host_reserve = \"1G\"; cpu_reserve = 1.0; };\n", &err);
    assert_non_null(cfg);
    assert_int_equal(sbx_box_budget(cfg, "/nonexistent/meminfo", 4.0, &b, &err), 0);
    assert_int_equal(b.memory, 3 * G);
    assert_int_equal(b.admit, 2 * G);
    assert_true(b.cpu_max == 3.0);
    sbx_config_destroy(cfg);

    /* a reserve that leaves nothing (box.memory measured) */
    cfg = load("box = { host_reserve = \"100G\"; };\n", &err);
    assert_non_null(cfg);
    assert_int_equal(sbx_box_budget(cfg, meminfo, 2.0, &b, &err), -1);
    assert_non_null(strstr(err->msg, "box.host_reserve (100G) leaves nothing"));
    sbx_error_free(&err);
    sbx_config_destroy(cfg);
    cfg = load("box = { cpu_reserve = 2.0; };\n", &err);
    assert_int_equal(sbx_box_budget(cfg, meminfo, 2.0, &b, &err), -1);
    assert_non_null(strstr(err->msg, "box.cpu_reserve (2) leaves nothing of the box's 2 CPUs"));
    sbx_error_free(&err);
    sbx_config_destroy(cfg);

    sbx_admit_size(3 * G, buf, sizeof(buf));
    assert_string_equal(buf, "3G");
    sbx_admit_size(1536 * M, buf, sizeof(buf));
    assert_string_equal(buf, "1536M");
    sbx_admit_size(24576000LL * 1024 / 10, buf, sizeof(buf));
    assert_string_equal(buf, "2400M");
    sbx_admit_size(3 * G + 12345, buf, sizeof(buf));
    assert_string_equal(buf, "3.0G");
    free(meminfo);
}

static void expect_config_error(const char *text, const char *want)
{
    sbx_error_t *err = NULL;
    struct sbx_config *c = load(text, &err);

    assert_null(c);
    assert_non_null(err);
    assert_int_equal(err->code, SBX_E_CONFIG);
    if (strstr(err->msg, want) == NULL || strchr(err->msg, '\n') != NULL) {
        fail_msg("got '%s', wanted '%s' on one line", err->msg, want);
    }
    sbx_error_free(&err);
}

static void test_admit_config_errors(void **state)
{
    (void)state;
    expect_config_error("box = {\n memory = \"1M\";\n};\n",
                        "sbx.conf:2: 'box.memory' must be at least 64M");
    expect_config_error("box = {\n memory = \"2G\";\n host_reserve = \"2G\";\n};\n",
                        "sbx.conf:3: 'box.host_reserve' (2G) leaves nothing of 'box.memory' "
                        "(2G) for sandboxes");
    expect_config_error("box = {\n host_reserve = -5;\n};\n",
                        "sbx.conf:2: 'host_reserve' must not be negative");
    expect_config_error("box = {\n cpu_reserve = -1.0;\n};\n",
                        "sbx.conf:2: 'cpu_reserve' must be a CPU count above 0");
    expect_config_error("box = {\n memory = \"lots\";\n};\n", "sbx.conf:2:");
    expect_config_error("box = {\n host_reserve = true;\n};\n", "sbx.conf:2:");
}

/* Writes a slot file and holds its lock through a separate open file
 * description (as another process would); returns the fd holding it. */
static int hold_slot(const char *state, int n, const char *owner, int64_t memory)
{
    char *slots = NULL, *path = NULL, *text = NULL;
    int fd;

    assert_true(asprintf(&slots, "%s/slots", state) > 0);
    mkdir(state, 0700);
    mkdir(slots, 0700);
    assert_true(asprintf(&path, "%s/%d.lock", slots, n) > 0);
    assert_true(asprintf(&text, "owner=%s\nmemory=%lld\ntask=t%d\n", owner, (long long)memory, n) >
                0);
    fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    assert_int_equal(flock(fd, LOCK_EX | LOCK_NB), 0);
    free(slots);
    free(path);
    free(text);
    return fd;
}

/* A dead owner: this boot, this pid, but a start time no process has. */
static void dead_owner(char *buf, size_t len)
{
    char *start;

    sbx_owner_self(buf, len);
    start = strstr(buf, "start=");
    assert_non_null(start);
    snprintf(start, len - (size_t)(start - buf), "start=1");
}

struct waits {
    int n;
    int nulls;
    char last[400];
};

static int give_up(void *ud, const char *line)
{
    struct waits *w = ud;

    assert_non_null(line); /* the first call is always a line */
    w->n++;
    snprintf(w->last, sizeof(w->last), "%s", line);
    return -1;
}

/* Takes the line, then gives up at the third "go on?" between lines. */
static int give_up_later(void *ud, const char *line)
{
    struct waits *w = ud;

    if (line != NULL) {
        w->n++;
        return 0;
    }
    return ++w->nulls == 3 ? -1 : 0;
}

static void test_admit_ledger(void **state)
{
    char *st = NULL;
    char live[160], dead[160];
    struct sbx_box_budget b = {.memory = 3 * G, .reserve = 1 * G, .admit = 2 * G};
    struct waits w = {0};
    struct sbx_admit_req req = {.task = "t-new",
                                .max_slots = 4,
                                .memory = 1 * G,
                                .budget = &b,
                                .on_wait = give_up,
                                .wait_ud = &w,
                                .poll_ms = 10};
    sbx_error_t *err = NULL;
    int held = -1, a, d, f, got;
    char text[512];
    ssize_t n;

    (void)state;
    assert_true(asprintf(&st, "%s/state", dir) > 0);
    assert_int_equal(sbx_ledger_used(st, &held), 0); /* no slots directory yet */
    assert_int_equal(held, 0);
    sbx_owner_self(live, sizeof(live));
    dead_owner(dead, sizeof(dead));
    a = hold_slot(st, 0, live, 1 * G);
    d = hold_slot(st, 1, dead, 1 * G); /* held, but its owner is gone: counts nothing */
    f = hold_slot(st, 2, live, 1 * G);
    close(f); /* a free lock: whatever the file says is a past holder's */
    assert_int_equal(sbx_ledger_used(st, &held), 1 * G);
    assert_int_equal(held, 1);

    /* 1G admitted of 2G: 1G more fits, in the first free slot (2) */
    got = sbx_slot_acquire(st, &req, &err);
    assert_true(got >= 0);
    assert_int_equal(w.n, 0);
    n = pread(got, text, sizeof(text) - 1, 0);
    assert_true(n > 0);
    text[n] = '\0';
    assert_non_null(strstr(text, "memory=1073741824\ntask=t-new\n"));
    assert_non_null(strstr(text, live));
    assert_int_equal(sbx_ledger_used(st, &held), 2 * G);
    assert_int_equal(held, 2);

    /* full: the next waits, saying what for with the numbers */
    req.task = "t-wait";
    assert_int_equal(sbx_slot_acquire(st, &req, &err), -1);
    assert_int_equal(err->code, SBX_E_CANCELLED);
    assert_string_equal(err->msg, "cancelled while waiting for memory");
    sbx_error_free(&err);
    assert_int_equal(w.n, 1);
    if (strstr(w.last, "task t-wait waits for memory: it needs 1G; 2G of 2G are admitted to 2 "
                       "sandboxes (box.memory 3G - box.host_reserve 1G)") == NULL) {
        fail_msg("wait line: %s", w.last);
    }

    /* between lines the waiter is asked whether to go on (a keeper whose
     * starter went away stops waiting) */
    w.n = 0;
    req.on_wait = give_up_later;
    assert_int_equal(sbx_slot_acquire(st, &req, &err), -1);
    assert_int_equal(err->code, SBX_E_CANCELLED);
    sbx_error_free(&err);
    assert_int_equal(w.n, 1);
    assert_int_equal(w.nulls, 3);
    req.on_wait = give_up;

    /* one ends: the waiter proceeds */
    close(got);
    got = sbx_slot_acquire(st, &req, &err);
    assert_true(got >= 0);
    close(got);

    /* all slots taken: waits for a slot */
    req.max_slots = 2;
    req.memory = 1 * M;
    assert_int_equal(sbx_slot_acquire(st, &req, &err), -1);
    assert_non_null(strstr(w.last, "all 2 sandbox slots on this box are taken"));
    sbx_error_free(&err);

    /* never fits: refused at once with the numbers, nothing waited */
    w.n = 0;
    req.max_slots = 4;
    req.memory = 3 * G;
    assert_int_equal(sbx_slot_acquire(st, &req, &err), -1);
    assert_int_equal(err->code, SBX_E_POLICY);
    assert_string_equal(err->msg, "refused: task t-wait needs 3G of memory but this box admits "
                                  "at most 2G (box.memory 3G - box.host_reserve 1G); lower "
                                  "limits.memory");
    sbx_error_free(&err);
    assert_int_equal(w.n, 0);

    /* a hostile or broken slot file counts nothing and breaks nothing */
    close(a);
    a = hold_slot(st, 0, "garbage", -5);
    assert_int_equal(sbx_ledger_used(st, &held), 0);
    close(a);
    close(d);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_admit_arithmetic),
        cmocka_unit_test_setup_teardown(test_admit_budget, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_config_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_admit_ledger, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
