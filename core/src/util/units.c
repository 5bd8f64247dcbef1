/* units.c - parsing of sizes, CPUs and durations. */
#include "util/units.h"

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

int sbx_size_parse(const char *s, int64_t *out, sbx_error_t **err)
{
    static const struct {
        const char *suffix;
        int shift;
    } units[] = {
        {"", 0},    {"B", 0},    {"K", 10}, {"Ki", 10}, {"KiB", 10}, {"M", 20},
        {"Mi", 20}, {"MiB", 20}, {"G", 30}, {"Gi", 30}, {"GiB", 30}, {"T", 40},
        {"Ti", 40}, {"TiB", 40}, {"k", 10}, {"m", 20},  {"g", 30},   {"t", 40},
    };
    char *end = NULL;
    long long v;

    if (s == NULL || !isdigit((unsigned char)s[0])) {
        return sbx_error_set(err, EINVAL,
                             "bad size '%s': expected a number with an optional "
                             "binary suffix K, M, G or T (e.g. 8G)",
                             s ? s : "");
    }
    errno = 0;
    v = strtoll(s, &end, 10);
    if (errno != 0 || v < 0) {
        return sbx_error_set(err, ERANGE, "bad size '%s': out of range", s);
    }
    while (*end == ' ') {
        end++;
    }
    for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++) {
        if (strcmp(end, units[i].suffix) == 0) {
            if (units[i].shift > 0 && v > (INT64_MAX >> units[i].shift)) {
                return sbx_error_set(err, ERANGE, "bad size '%s': out of range", s);
            }
            *out = (int64_t)v << units[i].shift;
            return 0;
        }
    }
    if (strcasecmp(end, "GB") == 0 || strcasecmp(end, "MB") == 0 || strcasecmp(end, "KB") == 0 ||
        strcasecmp(end, "TB") == 0) {
        return sbx_error_set(err, EINVAL,
                             "bad size '%s': decimal unit '%s' is ambiguous; use a "
                             "binary suffix (%.1s = %.1siB)",
                             s, end, end, end);
    }
    return sbx_error_set(err, EINVAL, "bad size '%s': unknown unit '%s' (use K, M, G or T)", s,
                         end);
}

int sbx_cpus_parse(const char *s, double *out, sbx_error_t **err)
{
    char *end = NULL;
    double v;

    if (s == NULL || *s == '\0') {
        return sbx_error_set(err, EINVAL, "bad CPU count '': expected a decimal such as 2.0");
    }
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v <= 0.0 || end == s ||
        !(isdigit((unsigned char)s[0]) || s[0] == '.')) {
        return sbx_error_set(err, EINVAL,
                             "bad CPU count '%s': expected a positive decimal "
                             "such as 2.0",
                             s);
    }
    if (v > 4096.0) {
        return sbx_error_set(err, ERANGE, "bad CPU count '%s': more than 4096", s);
    }
    *out = v;
    return 0;
}

int sbx_duration_parse(const char *s, int64_t *out, sbx_error_t **err)
{
    const char *p = s;
    int64_t total = 0;
    int parts = 0;

    if (s == NULL || *s == '\0') {
        return sbx_error_set(err, EINVAL, "bad duration '': expected e.g. 30s, 60m, 8h");
    }
    while (*p) {
        char *end = NULL;
        long long v;
        int64_t mul;

        if (!isdigit((unsigned char)*p)) {
            return sbx_error_set(err, EINVAL, "bad duration '%s': expected e.g. 30s, 60m, 8h", s);
        }
        errno = 0;
        v = strtoll(p, &end, 10);
        if (errno != 0) {
            return sbx_error_set(err, ERANGE, "bad duration '%s': out of range", s);
        }
        switch (*end) {
        case '\0':
            mul = parts == 0 ? 1 : -1;
            break;
        case 's':
            mul = 1;
            end++;
            break;
        case 'm':
            mul = 60;
            end++;
            break;
        case 'h':
            mul = 3600;
            end++;
            break;
        case 'd':
            mul = 86400;
            end++;
            break;
        default:
            return sbx_error_set(err, EINVAL,
                                 "bad duration '%s': unknown unit '%c' (use s, m, "
                                 "h or d)",
                                 s, *end);
        }
        if (mul < 0) {
            return sbx_error_set(err, EINVAL,
                                 "bad duration '%s': a number without a unit "
                                 "after another part",
                                 s);
        }
        if (v > (INT64_MAX - total) / mul) {
            return sbx_error_set(err, ERANGE, "bad duration '%s': out of range", s);
        }
        total += v * mul;
        parts++;
        p = end;
    }
    *out = total;
    return 0;
}

void sbx_size_format(int64_t bytes, char *buf, unsigned long len)
{
    static const char units[] = {'T', 'G', 'M', 'K'};
    static const int shifts[] = {40, 30, 20, 10};

    for (int i = 0; i < 4; i++) {
        int64_t unit = (int64_t)1 << shifts[i];

        if (bytes >= unit && bytes % unit == 0) {
            snprintf(buf, len, "%" PRId64 "%c", bytes / unit, units[i]);
            return;
        }
    }
    snprintf(buf, len, "%" PRId64, bytes);
}

void sbx_duration_format(int64_t secs, char *buf, unsigned long len)
{
    if (secs > 0 && secs % 3600 == 0) {
        snprintf(buf, len, "%" PRId64 "h", secs / 3600);
    }
    else if (secs > 0 && secs % 60 == 0) {
        snprintf(buf, len, "%" PRId64 "m", secs / 60);
    }
    else {
        snprintf(buf, len, "%" PRId64 "s", secs);
    }
}
