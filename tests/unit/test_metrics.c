/* test_metrics.c - the Prometheus exposition and the JSON queue view.
 *
 * Every exposition is checked by a strict parser of text format 0.0.4 written
 * here, and also by `promtool check metrics` when CMake found promtool (Debian
 * package `prometheus`; the path comes in $SBX_PROMTOOL). */
#include "test_common.h"

#include <ctype.h>
#include <jansson.h>
#include <math.h>
#include <sys/wait.h>

#include "config/config.h"
#include "sched/sched.h"

#define G (1LL << 30)
#define T0 1793491200000LL

static char *dir;
static int64_t fake_now;
static struct sbx_config *cfg;

static int64_t fake_clock(void *ctx)
{
    (void)ctx;
    return fake_now;
}

static int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    fake_now = T0;
    cfg = NULL;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sbx_config_destroy(cfg);
    test_rm_rf(dir);
    free(dir);
    return 0;
}

/* ---- a strict checker of the text format ---- */

#define MAX_FAMILIES 64
#define MAX_SERIES 1024

struct family {
    char name[128];
    char type[16];
    int help, closed;
};

struct checker {
    struct family fam[MAX_FAMILIES];
    int n_fam;
    struct family *cur;
    char *series[MAX_SERIES];
    int n_series;
    /* histogram state of the current label set */
    char hist_key[256];
    double last_le, last_bucket, inf_bucket;
    int have_inf;
    char err[512];
};

#define BAD(...)                                                                                   \
    do {                                                                                           \
        snprintf(c->err, sizeof(c->err), __VA_ARGS__);                                             \
        return -1;                                                                                 \
    } while (0)

static int valid_name(const char *s, size_t n)
{
    if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':')) {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':')) {
            return 0;
        }
    }
    return 1;
}

static struct family *find_family(struct checker *c, const char *name, size_t n)
{
    for (int i = 0; i < c->n_fam; i++) {
        if (strlen(c->fam[i].name) == n && strncmp(c->fam[i].name, name, n) == 0) {
            return &c->fam[i];
        }
    }
    return NULL;
}

static int ends_with(const char *s, size_t n, const char *suffix)
{
    size_t k = strlen(suffix);

    return n > k && strncmp(s + n - k, suffix, k) == 0;
}

/* Returns -1 with c->err set on any violation. */
static int check_line(struct checker *c, const char *line, int lineno)
{
    const char *p, *q, *labels = NULL, *labels_end = NULL;
    char *end;
    size_t n;
    double v;
    char key[512], le[64] = "";
    struct family *f;

    if (line[0] == '\0') {
        return 0;
    }
    if (line[0] == '#') {
        char kw[8], name[128], rest[256];

        if (sscanf(line, "# %7s %127s %255[^\n]", kw, name, rest) != 3) {
            BAD("line %d: malformed comment '%s'", lineno, line);
        }
        if (!valid_name(name, strlen(name))) {
            BAD("line %d: bad metric name '%s'", lineno, name);
        }
        f = find_family(c, name, strlen(name));
        if (f != NULL && f != c->cur) {
            BAD("line %d: family %s is not contiguous", lineno, name);
        }
        if (f == NULL) {
            if (c->cur != NULL) {
                c->cur->closed = 1;
            }
            assert_true(c->n_fam < MAX_FAMILIES);
            f = &c->fam[c->n_fam++];
            snprintf(f->name, sizeof(f->name), "%s", name);
            c->cur = f;
        }
        if (strcmp(kw, "HELP") == 0) {
            if (f->help++) {
                BAD("line %d: second HELP for %s", lineno, name);
            }
        }
        else if (strcmp(kw, "TYPE") == 0) {
            if (f->type[0] != '\0') {
                BAD("line %d: second TYPE for %s", lineno, name);
            }
            if (strcmp(rest, "counter") && strcmp(rest, "gauge") && strcmp(rest, "histogram") &&
                strcmp(rest, "summary") && strcmp(rest, "untyped")) {
                BAD("line %d: unknown type '%s'", lineno, rest);
            }
            if (strcmp(rest, "counter") == 0 && !ends_with(name, strlen(name), "_total")) {
                BAD("line %d: counter %s does not end in _total", lineno, name);
            }
            snprintf(f->type, sizeof(f->type), "%.15s", rest);
        }
        else {
            BAD("line %d: unknown comment keyword '%s'", lineno, kw);
        }
        return 0;
    }
    /* sample: name[{labels}] value */
    for (p = line; *p && *p != '{' && *p != ' '; p++) {
    }
    n = (size_t)(p - line);
    if (!valid_name(line, n)) {
        BAD("line %d: bad sample name in '%s'", lineno, line);
    }
    f = c->cur;
    if (f == NULL || f->type[0] == '\0') {
        BAD("line %d: sample before its TYPE: '%s'", lineno, line);
    }
    if (strcmp(f->type, "histogram") == 0) {
        if (!(strlen(f->name) + 7 == n && ends_with(line, n, "_bucket")) &&
            !(strlen(f->name) + 4 == n && ends_with(line, n, "_sum")) &&
            !(strlen(f->name) + 6 == n && ends_with(line, n, "_count"))) {
            BAD("line %d: '%.*s' is not a series of histogram %s", lineno, (int)n, line, f->name);
        }
        if (strncmp(line, f->name, strlen(f->name)) != 0) {
            BAD("line %d: '%.*s' outside its family %s", lineno, (int)n, line, f->name);
        }
    }
    else if (strlen(f->name) != n || strncmp(line, f->name, n) != 0) {
        BAD("line %d: '%.*s' outside its family %s", lineno, (int)n, line, f->name);
    }
    if (*p == '{') {
        labels = ++p;
        while (*p != '}') {
            const char *ln = p;
            char val[128];
            size_t k = 0;

            while (*p && *p != '=') {
                p++;
            }
            if (*p != '=' || !valid_name(ln, (size_t)(p - ln)) || p[1] != '"') {
                BAD("line %d: bad label in '%s'", lineno, line);
            }
            q = ln;
            p += 2;
            while (*p && *p != '"') {
                if (*p == '\\') {
                    if (p[1] != '\\' && p[1] != '"' && p[1] != 'n') {
                        BAD("line %d: bad escape in '%s'", lineno, line);
                    }
                    p++;
                }
                if (k + 1 < sizeof(val)) {
                    val[k++] = *p;
                }
                p++;
            }
            val[k] = '\0';
            if (*p != '"') {
                BAD("line %d: unterminated label value in '%s'", lineno, line);
            }
            if (strncmp(q, "le=", 3) == 0) {
                snprintf(le, sizeof(le), "%.63s", val);
            }
            p++;
            if (*p == ',') {
                p++;
            }
            else if (*p != '}') {
                BAD("line %d: expected , or } in '%s'", lineno, line);
            }
        }
        labels_end = p++;
    }
    if (*p != ' ') {
        BAD("line %d: no space before the value in '%s'", lineno, line);
    }
    p++;
    v = strtod(p, &end);
    if (end == p || *end != '\0') {
        BAD("line %d: bad value '%s'", lineno, p);
    }
    /* unique series */
    snprintf(key, sizeof(key), "%.*s", (int)(p - line - 1), line);
    for (int i = 0; i < c->n_series; i++) {
        if (strcmp(c->series[i], key) == 0) {
            BAD("line %d: duplicate series %.400s", lineno, key);
        }
    }
    assert_true(c->n_series < MAX_SERIES);
    c->series[c->n_series++] = strdup(key);
    if (strcmp(f->type, "counter") == 0 && (v < 0 || isnan(v))) {
        BAD("line %d: negative counter", lineno);
    }
    /* histogram rules: le ascending, cumulative, +Inf == _count */
    if (strcmp(f->type, "histogram") == 0) {
        char hk[256] = "";

        if (labels != NULL) {
            /* the label set without le */
            const char *lp = strstr(labels, "le=");

            snprintf(hk, sizeof(hk), "%.*s", (int)((lp ? lp : labels_end) - labels), labels);
        }
        if (ends_with(line, n, "_bucket")) {
            double lev;

            if (le[0] == '\0') {
                BAD("line %d: bucket without le", lineno);
            }
            lev = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, NULL);
            if (strcmp(hk, c->hist_key) != 0) {
                snprintf(c->hist_key, sizeof(c->hist_key), "%s", hk);
                c->last_le = -INFINITY;
                c->last_bucket = 0;
                c->have_inf = 0;
            }
            if (!(lev > c->last_le) || v < c->last_bucket) {
                BAD("line %d: buckets not ascending or not cumulative", lineno);
            }
            c->last_le = lev;
            c->last_bucket = v;
            if (isinf(lev)) {
                c->have_inf = 1;
                c->inf_bucket = v;
            }
        }
        else if (ends_with(line, n, "_count")) {
            if (!c->have_inf || c->inf_bucket != v) {
                BAD("line %d: _count without a matching +Inf bucket", lineno);
            }
        }
    }
    return 0;
}

static int check_exposition(const char *text, char *err, size_t errlen)
{
    struct checker c;
    size_t len = strlen(text);
    char *copy, *line, *save = NULL;
    int lineno = 0;

    int r = 0;

    memset(&c, 0, sizeof(c));
    if (len == 0 || text[len - 1] != '\n') {
        snprintf(err, errlen, "empty, or the last line does not end with a newline");
        return -1;
    }
    copy = strdup(text);
    for (line = strtok_r(copy, "\n", &save); line != NULL && r == 0;
         line = strtok_r(NULL, "\n", &save)) {
        r = check_line(&c, line, ++lineno);
    }
    for (int i = 0; i < c.n_fam && r == 0; i++) {
        if (!c.fam[i].help || c.fam[i].type[0] == '\0') {
            snprintf(c.err, sizeof(c.err), "family %s lacks HELP or TYPE", c.fam[i].name);
            r = -1;
        }
    }
    snprintf(err, errlen, "%s", c.err);
    for (int i = 0; i < c.n_series; i++) {
        free(c.series[i]);
    }
    free(copy);
    return r;
}

static void assert_exposition(const char *text)
{
    char err[512];

    if (check_exposition(text, err, sizeof(err)) < 0) {
        fail_msg("bad exposition: %s\n%s", err, text);
    }
}

/* promtool check metrics, when available; its verdict must be clean. */
static void promtool_check(const char *text)
{
    const char *promtool = getenv("SBX_PROMTOOL");
    char *path, *cmd = NULL, out[4096];
    FILE *f;
    size_t n;
    int st;

    if (promtool == NULL || promtool[0] == '\0') {
        return; /* the strict checker above has run */
    }
    path = test_write_file(dir, "metrics.txt", text);
    assert_true(asprintf(&cmd, "'%s' check metrics < '%s' 2>&1", promtool, path) > 0);
    f = popen(cmd, "r");
    assert_non_null(f);
    n = fread(out, 1, sizeof(out) - 1, f);
    out[n] = '\0';
    st = pclose(f);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0 || n != 0) {
        fail_msg("promtool check metrics failed (status %d): %s", st, out);
    }
    free(cmd);
    free(path);
}

static struct sbx_sched *make(const char *text)
{
    char *path = test_write_file(dir, "sbx.conf", text);
    struct sbx_box_capacity cap = {16, 64 * G};
    struct sbx_sched_opts o = {NULL, &cap, fake_clock, NULL};
    sbx_error_t *err = NULL;
    struct sbx_sched *s;

    cfg = sbx_config_load_file(path, &err);
    free(path);
    assert_non_null(cfg);
    o.cfg = cfg;
    s = sbx_sched_create(&o, &err);
    assert_non_null(s);
    return s;
}

static void submit_ok(struct sbx_sched *s, const char *id, enum sbx_pool pool,
                      enum sbx_job_class cls, double cpus)
{
    struct sbx_sched_job j = {id, NULL, pool, cls, cpus, 1 * G, 0};
    sbx_error_t *err = NULL;

    if (sbx_sched_submit(s, &j, &err) < 0) {
        fail_msg("submit %s: %s", id, err->msg);
    }
}

static void expect_line(const char *text, const char *line)
{
    char *want = NULL;

    assert_true(asprintf(&want, "\n%s\n", line) > 0);
    if (strstr(text, want) == NULL) {
        fail_msg("no line '%s' in:\n%s", line, text);
    }
    free(want);
}

static void test_metrics_empty(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\", \"agent\"]; };\n");
    struct sbx_sched_snapshot *snap = sbx_sched_snapshot(s);
    char *text = sbx_sched_metrics(snap);

    (void)state;
    assert_exposition(text);
    promtool_check(text);
    /* every served pool, zeros included */
    expect_line(text, "sbx_queue_jobs{pool=\"agent\",class=\"light\"} 0");
    expect_line(text, "sbx_queue_oldest_enqueued_timestamp_seconds{pool=\"ci\"} 0.000");
    expect_line(text, "sbx_slots{pool=\"agent\",state=\"idle\"} 3");
    expect_line(text, "sbx_job_wait_seconds_bucket{pool=\"ci\",le=\"600\"} 0");
    expect_line(text, "sbx_heavy_slot{pool=\"ci\",state=\"idle\"} 1");
    free(text);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);
}

static void test_metrics_busy(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\", \"agent\"]; };\n");
    struct sbx_sched_grant g;
    struct sbx_sched_alert a[4];
    struct sbx_sched_snapshot *snap;
    sbx_error_t *err = NULL;
    char *text;

    (void)state;
    submit_ok(s, "h1", SBX_POOL_CI, SBX_CLASS_HEAVY, 4);
    submit_ok(s, "h2", SBX_POOL_CI, SBX_CLASS_HEAVY, 1);
    submit_ok(s, "l1", SBX_POOL_CI, SBX_CLASS_LIGHT, 1);
    fake_now += 700 * 1000;
    while (sbx_sched_next_grant(s, &g)) {
    }
    submit_ok(s, "a1", SBX_POOL_AGENT, SBX_CLASS_LIGHT, 8);
    submit_ok(s, "a2", SBX_POOL_AGENT, SBX_CLASS_LIGHT, 8);
    assert_int_equal(sbx_sched_next_grant(s, &g), 1);
    fake_now += 30 * 1000;
    assert_int_equal(sbx_sched_release(s, "l1", SBX_RESULT_FAILED, &err), 0);
    assert_int_equal(sbx_sched_due_alerts(s, a, 4), 1); /* h2: 730 s */
    snap = sbx_sched_snapshot(s);
    text = sbx_sched_metrics(snap);
    assert_exposition(text);
    promtool_check(text);
    expect_line(text, "sbx_queue_jobs{pool=\"ci\",class=\"heavy\"} 1");
    expect_line(text, "sbx_queue_jobs{pool=\"agent\",class=\"light\"} 1");
    expect_line(text, "sbx_queue_oldest_enqueued_timestamp_seconds{pool=\"ci\"} 1793491200.000");
    expect_line(text, "sbx_queue_oldest_wait_seconds{pool=\"ci\"} 730.000");
    expect_line(text, "sbx_queue_oldest_wait_seconds{pool=\"agent\"} 30.000");
    expect_line(text, "sbx_slots{pool=\"ci\",state=\"busy\"} 1");
    expect_line(text, "sbx_heavy_slot{pool=\"ci\",state=\"busy\"} 1");
    expect_line(text, "sbx_job_wait_seconds_bucket{pool=\"ci\",le=\"600\"} 0");
    expect_line(text, "sbx_job_wait_seconds_bucket{pool=\"ci\",le=\"900\"} 2");
    expect_line(text, "sbx_job_wait_seconds_bucket{pool=\"ci\",le=\"+Inf\"} 2");
    expect_line(text, "sbx_job_wait_seconds_count{pool=\"ci\"} 2");
    expect_line(text, "sbx_job_wait_seconds_sum{pool=\"ci\"} 1400.000");
    expect_line(text, "sbx_jobs_started_total{pool=\"agent\"} 1");
    expect_line(text, "sbx_jobs_finished_total{pool=\"ci\",result=\"failed\"} 1");
    expect_line(text, "sbx_job_wait_alerts_total{pool=\"ci\"} 1");
    free(text);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);
}

/* The checker itself must reject broken expositions. */
static void test_metrics_checker_rejects(void **state)
{
    (void)state;
    static const char *const bad[] = {
        "x 1\n",                                        /* no TYPE */
        "# HELP x h\n# TYPE x gauge\nx{a=\"1\"} one\n", /* bad value */
        "# HELP x h\n# TYPE x gauge\nx 1\nx 2\n",       /* duplicate */
        "# HELP x h\n# TYPE x counter\nx 1\n",          /* counter name */
        "# HELP x h\n# TYPE x histogram\nx_bucket{le=\"5\"} 2\nx_bucket{le=\"1\"} 3\n",
        "# HELP x h\n# TYPE x histogram\nx_bucket{le=\"1\"} 2\nx_bucket{le=\"+Inf\"} 1\n",
        "# HELP x h\n# TYPE x histogram\nx_bucket{le=\"+Inf\"} 2\nx_count 3\n",
        "# HELP x h\n# TYPE x gauge\nx 1\n# HELP y h\n# TYPE y gauge\ny 1\n# TYPE x gauge\n",
        "# HELP x h\n# TYPE x gauge\nx{a=1} 1\n",
        "# HELP x h\n# TYPE x gauge\nx 1", /* no final newline */
    };

    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char err[512];

        if (check_exposition(bad[i], err, sizeof(err)) == 0) {
            fail_msg("the checker accepted bad exposition %zu", i);
        }
    }
    assert_int_equal(check_exposition("# HELP x h\n# TYPE x gauge\nx{a=\"1\"} 1\n", NULL, 0), 0);
}

static void test_metrics_json(void **state)
{
    struct sbx_sched *s = make("box = { pools = [\"ci\"]; };\n");
    struct sbx_sched_grant g;
    struct sbx_sched_snapshot *snap;
    json_error_t jerr;
    json_t *root, *pool, *slot;
    char *text;

    (void)state;
    submit_ok(s, "run", SBX_POOL_CI, SBX_CLASS_HEAVY, 16);
    assert_int_equal(sbx_sched_next_grant(s, &g), 1);
    submit_ok(s, "wait", SBX_POOL_CI, SBX_CLASS_LIGHT, 1);
    fake_now += 42 * 1000;
    snap = sbx_sched_snapshot(s);
    text = sbx_sched_snapshot_json(snap);
    root = json_loads(text, 0, &jerr);
    assert_non_null(root);
    assert_true(json_is_true(json_object_get(json_object_get(root, "box"), "heavy_allowed")));
    pool = json_array_get(json_object_get(root, "pools"), 0);
    assert_string_equal(json_string_value(json_object_get(pool, "pool")), "ci");
    assert_int_equal(json_integer_value(json_object_get(pool, "queue_length")), 1);
    assert_true(json_real_value(json_object_get(pool, "oldest_wait")) == 42.0);
    assert_string_equal(json_string_value(json_object_get(pool, "heavy_slot")), "busy");
    assert_true(json_real_value(json_object_get(json_array_get(json_object_get(pool, "queued"), 0),
                                                "wait")) == 42.0);
    slot = json_array_get(json_object_get(pool, "slots"), 0);
    assert_string_equal(json_string_value(json_object_get(slot, "job")), "run");
    assert_string_equal(json_string_value(json_object_get(slot, "class")), "heavy");
    assert_true(json_real_value(json_object_get(slot, "held_for")) == 42.0);
    assert_string_equal(json_string_value(json_object_get(
                            json_array_get(json_object_get(pool, "slots"), 1), "state")),
                        "idle");
    json_decref(root);
    free(text);
    sbx_sched_snapshot_free(snap);
    sbx_sched_destroy(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_metrics_empty, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_busy, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_checker_rejects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_metrics_json, setup, teardown),
    };

    if (getenv("SBX_PROMTOOL") == NULL || getenv("SBX_PROMTOOL")[0] == '\0') {
        fprintf(stderr, "note: promtool not found at configure time; the strict checker "
                        "alone checks the format\n");
    }
    return cmocka_run_group_tests(tests, NULL, NULL);
}
