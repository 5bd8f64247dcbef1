/* test_common.h - include this, not cmocka.h (cmocka 1.1.5 needs these first). */
#ifndef SBX_TEST_COMMON_H
#define SBX_TEST_COMMON_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A fresh directory under $TMPDIR (or /tmp); the caller frees the string. */
static inline char *test_mkdtemp(void)
{
    const char *base = getenv("TMPDIR");
    char *p = NULL;

    if (asprintf(&p, "%s/sbx-test-XXXXXX", base ? base : "/tmp") < 0 || mkdtemp(p) == NULL) {
        abort();
    }
    return p;
}

/* Writes `text` to DIR/NAME; returns the path (caller frees). */
static inline char *test_write_file(const char *dir, const char *name, const char *text)
{
    char *p = NULL;
    FILE *f;

    if (asprintf(&p, "%s/%s", dir, name) < 0) {
        abort();
    }
    f = fopen(p, "w");
    if (f == NULL) {
        abort();
    }
    fputs(text, f);
    fclose(f);
    return p;
}

static inline void test_rm_rf(const char *dir)
{
    char *cmd = NULL;

    if (dir == NULL || strncmp(dir, "/tmp/", 5) != 0 || asprintf(&cmd, "rm -rf '%s'", dir) < 0) {
        return;
    }
    if (system(cmd) != 0) {
        fprintf(stderr, "warning: could not remove %s\n", dir);
    }
    free(cmd);
}

/* A temp directory for a test group: pass test_dir_setup and
 * test_dir_teardown as the group's setup and teardown. */
__attribute__((unused)) static char *test_dir;

static inline int test_dir_setup(void **state)
{
    (void)state;
    test_dir = test_mkdtemp();
    return 0;
}

static inline int test_dir_teardown(void **state)
{
    (void)state;
    test_rm_rf(test_dir);
    free(test_dir);
    test_dir = NULL;
    return 0;
}

#endif
