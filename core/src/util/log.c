/* log.c - leveled logging to stderr, one line per call, text or JSON. */
#include "util/log.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

static enum sbx_log_level log_level = SBX_LOG_WARN;
static enum sbx_log_format log_format = SBX_LOG_TEXT;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void sbx_log_setup(enum sbx_log_level level, enum sbx_log_format format)
{
    log_level = level;
    log_format = format;
}

enum sbx_log_level sbx_log_get_level(void)
{
    return log_level;
}

int sbx_log_level_parse(const char *s, enum sbx_log_level *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcasecmp(s, level_names[i]) == 0) {
            *out = (enum sbx_log_level)i;
            return 0;
        }
    }
    if (strcasecmp(s, "warning") == 0) {
        *out = SBX_LOG_WARN;
        return 0;
    }
    return -1;
}

void sbx_log_srcv(const char *src, enum sbx_log_level level, const char *fmt, va_list ap)
{
    char msg[4096];
    char ts[96];
    struct timespec now;
    struct tm tm;

    if (level > log_level) {
        return;
    }
    vsnprintf(msg, sizeof(msg), fmt, ap);
    for (char *p = msg; *p; p++) {
        if (*p == '\n') {
            *p = ' ';
        }
    }
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             now.tv_nsec / 1000000);
    if (log_format == SBX_LOG_JSON) {
        json_t *o = json_pack("{s:s, s:s, s:s}", "time", ts, "level", level_names[level], "msg",
                              msg);
        char *line;

        if (src != NULL && o != NULL) {
            json_object_set_new(o, "src", json_string(src));
        }
        line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (line != NULL) {
            fprintf(stderr, "%s\n", line);
        }
        free(line);
        json_decref(o);
        return;
    }
    if (src != NULL) {
        fprintf(stderr, "sbx: %s: [%s] %s\n", level_names[level], src, msg);
    }
    else {
        fprintf(stderr, "sbx: %s: %s\n", level_names[level], msg);
    }
}

void sbx_log_src(const char *src, enum sbx_log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    sbx_log_srcv(src, level, fmt, ap);
    va_end(ap);
}

void sbx_log(enum sbx_log_level level, const char *fmt, ...)
{
    va_list ap;

    va_start(ap, fmt);
    sbx_log_srcv(NULL, level, fmt, ap);
    va_end(ap);
}
