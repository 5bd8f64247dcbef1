/* log.c - leveled logging to stderr, one line per call, text or JSON. When
 * stderr is the journal's stream (systemd sets JOURNAL_STREAM), each line
 * starts with its syslog priority, `<N>` as in sd-daemon(3), so journald
 * files it at that priority (error 3, warn 4, info 6, debug 7). */
#include "util/log.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static enum sbx_log_level log_level = SBX_LOG_WARN;
static enum sbx_log_format log_format = SBX_LOG_TEXT;
static int log_journal; /* stderr is the journal: `<N>` prefixes */

static const char *const level_names[] = {"error", "warn", "info", "debug"};
/* sd-daemon(3): SD_ERR, SD_WARNING, SD_INFO, SD_DEBUG */
static const char *const level_prefix[] = {"<3>", "<4>", "<6>", "<7>"};

int sbx_log_journal_detect(void)
{
    const char *v = getenv("JOURNAL_STREAM");
    unsigned long long dev, ino;
    struct stat st;
    char end;

    /* "DEV:INODE" of the stream systemd connected stdout/stderr to; stderr may
     * since have been redirected elsewhere, so it must still be that stream */
    if (v == NULL || sscanf(v, "%llu:%llu%c", &dev, &ino, &end) != 2 ||
        fstat(STDERR_FILENO, &st) < 0) {
        return 0;
    }
    return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

const char *sbx_log_prefix(enum sbx_log_level level)
{
    return log_journal && (unsigned)level <= SBX_LOG_DEBUG ? level_prefix[level] : "";
}

void sbx_log_setup(enum sbx_log_level level, enum sbx_log_format format)
{
    log_level = level;
    log_format = format;
    log_journal = sbx_log_journal_detect();
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
    const char *pfx;

    if (level > log_level) {
        return;
    }
    pfx = sbx_log_prefix(level);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    for (char *p = msg; *p; p++) {
        if (*p == '\n') {
            *p = ' ';
        }
    }
    clock_gettime(CLOCK_REALTIME, &now);
    gmtime_r(&now.tv_sec, &tm);
    snprintf(ts, sizeof(ts), "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, now.tv_nsec / 1000000);
    if (log_format == SBX_LOG_JSON) {
        json_t *o =
            json_pack("{s:s, s:s, s:s}", "time", ts, "level", level_names[level], "msg", msg);
        char *line;

        if (src != NULL && o != NULL) {
            json_object_set_new(o, "src", json_string(src));
        }
        line = o ? json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER) : NULL;
        if (line != NULL) {
            fprintf(stderr, "%s%s\n", pfx, line);
        }
        free(line);
        json_decref(o);
        return;
    }
    if (src != NULL) {
        fprintf(stderr, "%ssbx: %s: [%s] %s\n", pfx, level_names[level], src, msg);
    }
    else {
        fprintf(stderr, "%ssbx: %s: %s\n", pfx, level_names[level], msg);
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
