/* fuzz_file.c - see fuzz_file.h. */
#include "fuzz_file.h"

#include <errno.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[256];

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)flag;
    (void)ftw;
    remove(path);
    return 0;
}

static void cleanup(void)
{
    if (dir[0] != '\0') {
        nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS);
    }
}

const char *fuzz_dir(void)
{
    if (dir[0] == '\0') {
        const char *t = getenv("TMPDIR");

        snprintf(dir, sizeof(dir), "%s/sbx-fuzz-XXXXXX", t && *t ? t : "/tmp");
        if (mkdtemp(dir) == NULL) {
            fprintf(stderr, "fuzz: mkdtemp %s: %s\n", dir, strerror(errno));
            abort();
        }
        atexit(cleanup);
    }
    return dir;
}

const char *fuzz_write_file(const char *rel, const uint8_t *data, size_t size)
{
    static char path[512];
    FILE *f;

    snprintf(path, sizeof(path), "%s/%s", fuzz_dir(), rel);
    for (char *p = path + strlen(dir) + 1; (p = strchr(p, '/')) != NULL; p++) {
        *p = '\0';
        if (mkdir(path, 0700) < 0 && errno != EEXIST) {
            abort();
        }
        *p = '/';
    }
    f = fopen(path, "wb");
    if (f == NULL || fwrite(data, 1, size, f) != size || fclose(f) != 0) {
        fprintf(stderr, "fuzz: writing %s: %s\n", path, strerror(errno));
        abort();
    }
    return path;
}

void fuzz_remove_file(const char *rel)
{
    char path[512];

    snprintf(path, sizeof(path), "%s/%s", fuzz_dir(), rel);
    unlink(path);
}
