/* prom_check.h - a strict checker of the Prometheus text format 0.0.4 and
 * `promtool check metrics` when $SBX_PROMTOOL is set (shared by the sched
 * and runner tests). Include after test_common.h. */
#ifndef SBX_TEST_PROM_CHECK_H
#define SBX_TEST_PROM_CHECK_H

#include <ctype.h>
#include <math.h>
#include <sys/wait.h>

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
            /* the family and the label set without le (two families' series
             * of one label set one after the other are two histograms) */
            const char *lp = strstr(labels, "le=");

            snprintf(hk, sizeof(hk), "%.100s%.*s", f->name, (int)((lp ? lp : labels_end) - labels),
                     labels);
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
static void promtool_check_in(const char *tmpdir, const char *text)
{
    const char *promtool = getenv("SBX_PROMTOOL");
    char *path, *cmd = NULL, out[4096];
    FILE *f;
    size_t n;
    int st;

    if (promtool == NULL || promtool[0] == '\0') {
        return; /* the strict checker above has run */
    }
    path = test_write_file(tmpdir, "metrics.txt", text);
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

#endif
