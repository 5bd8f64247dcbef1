/* log.h - leveled logging to stderr, as text or JSON lines. */
#ifndef SBX_UTIL_LOG_H
#define SBX_UTIL_LOG_H

#include <stdarg.h>

#include "sbx/sbx_host.h"

enum sbx_log_format {
    SBX_LOG_TEXT = 0,
    SBX_LOG_JSON = 1,
};

/* Also detects the journal (sbx_log_journal_detect) for `<N>` priority prefixes. */
void sbx_log_setup(enum sbx_log_level level, enum sbx_log_format format);
/* 1 when stderr is the stream $JOURNAL_STREAM names (run by systemd, stderr
 * to the journal). */
int sbx_log_journal_detect(void);
/* "<N>" of level when logging to the journal, else "": for a line printed
 * to stderr without sbx_log (e.g. "sbx serve: ready"). */
const char *sbx_log_prefix(enum sbx_log_level level);
int sbx_log_level_parse(const char *s, enum sbx_log_level *out);
enum sbx_log_level sbx_log_get_level(void);
void sbx_log(enum sbx_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* With a source prefix such as "provider_docker:docker". */
void sbx_log_src(const char *src, enum sbx_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
void sbx_log_srcv(const char *src, enum sbx_log_level level, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

#define sbx_error_log(...) sbx_log(SBX_LOG_ERROR, __VA_ARGS__)
#define sbx_warn(...) sbx_log(SBX_LOG_WARN, __VA_ARGS__)
#define sbx_info(...) sbx_log(SBX_LOG_INFO, __VA_ARGS__)
#define sbx_debug(...) sbx_log(SBX_LOG_DEBUG, __VA_ARGS__)

#endif
