/* wait.h - waiting for a condition with a deadline (docs/testing.md, "No
 * fixed waits"). A test never sleeps for a fixed time to let something
 * happen: it polls the condition (a file, a line in a log, a socket that
 * answers, a state in the API) until a deadline, and when the deadline passes
 * it fails saying what it waited for and showing the last lines of the log it
 * depends on.
 *
 *   wait_until(stat(path, &st) == 0, 10, log, "the runner's socket %s", path);
 *   if (!wait_for(cond, 2)) { ... }     the same without failing: 1 if it came
 *
 * The condition is an expression evaluated again at every poll (every 10 ms
 * at first, backing off to 100 ms). Include after test_common.h. */
#ifndef SBX_TEST_WAIT_H
#define SBX_TEST_WAIT_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* Seconds on the monotonic clock. */
static inline double test_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Sleeps one poll step: 10 ms for the first 100 ms of a wait, 100 ms after. */
static inline void test_poll_step(double started)
{
    usleep(test_now() - started < 0.1 ? 10 * 1000 : 100 * 1000);
}

/* Prints the last LINES lines of the file at PATH on stderr (ctest
 * --output-on-failure shows them), framed with its name; nothing for NULL. */
static inline void test_show_tail(const char *path, int lines)
{
    FILE *f;
    long size;
    long from;
    char *buf;
    size_t n;
    int seen = 0;
    size_t start;

    if (path == NULL) {
        return;
    }
    f = fopen(path, "r");
    if (f == NULL) {
        fprintf(stderr, "--- %s: cannot be read\n", path);
        return;
    }
    fseek(f, 0, SEEK_END);
    size = ftell(f);
    from = size > 65536 ? size - 65536 : 0;
    fseek(f, from, SEEK_SET);
    buf = malloc((size_t)(size - from) + 1);
    n = buf != NULL ? fread(buf, 1, (size_t)(size - from), f) : 0;
    fclose(f);
    if (buf == NULL) {
        return;
    }
    buf[n] = '\0';
    start = n;
    if (start > 0 && buf[start - 1] == '\n') {
        start--;
    }
    while (start > 0) {
        if (buf[start - 1] == '\n' && ++seen == lines) {
            break;
        }
        start--;
    }
    fprintf(stderr, "--- the last %d lines of %s:\n%s%s--- end of %s\n", lines, path, buf + start,
            n > 0 && buf[n - 1] != '\n' ? "\n" : "", path);
    free(buf);
}

/* The failure of a wait: what was waited for (printf-style), for how long,
 * and the tail of LOG (may be NULL). Does not return (cmocka's fail). */
__attribute__((format(printf, 3, 4))) static inline void
test_wait_failed(double secs, const char *log, const char *fmt, ...)
{
    char what[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(what, sizeof(what), fmt, ap);
    va_end(ap);
    fprintf(stderr, "waited %.1f s for %s: it did not come\n", secs, what);
    test_show_tail(log, 30);
    fail_msg("waited %.1f s for %s", secs, what);
}

/* 1 as soon as COND holds, 0 when SECS passed without it. */
#define wait_for(COND, SECS)                                                                       \
    ({                                                                                             \
        double wait_t0_ = test_now();                                                              \
        double wait_end_ = wait_t0_ + (double)(SECS);                                              \
        int wait_ok_;                                                                              \
        while (!(wait_ok_ = !!(COND)) && test_now() < wait_end_) {                                 \
            test_poll_step(wait_t0_);                                                              \
        }                                                                                          \
        wait_ok_;                                                                                  \
    })

/* Waits for COND (at most SECS), else fails the test naming what it waited
 * for (the printf-style rest) and showing the last lines of LOG (or NULL). */
#define wait_until(COND, SECS, LOG, ...)                                                           \
    do {                                                                                           \
        if (!wait_for(COND, SECS)) {                                                               \
            test_wait_failed((double)(SECS), (LOG), __VA_ARGS__);                                  \
        }                                                                                          \
    } while (0)

/* 1 when the file at PATH holds TEXT (a line in a log, a marker). */
static inline int test_file_has(const char *path, const char *text)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t cap = 0;
    int found = 0;

    if (f == NULL) {
        return 0;
    }
    while (!found && getline(&buf, &cap, f) >= 0) {
        found = strstr(buf, text) != NULL;
    }
    free(buf);
    fclose(f);
    return found;
}

#endif
