/* replay_main.c - the replay driver: feeds every file of the given files and
 * directories to LLVMFuzzerTestOneInput once, without libFuzzer, so the
 * normal test suite (plain and sanitizer builds) replays the corpus and the
 * regression inputs of a harness. A missing directory counts as empty (a
 * target may have no regression input yet); no input at all is a failure. */
#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv) __attribute__((weak));

static int replay_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (f == NULL) {
        fprintf(stderr, "replay: %s: %s\n", path, strerror(errno));
        return -1;
    }
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap);
            if (buf == NULL) {
                abort();
            }
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    if (ferror(f)) {
        fprintf(stderr, "replay: %s: read error\n", path);
        fclose(f);
        free(buf);
        return -1;
    }
    fclose(f);
    /* an exact-size copy, as libFuzzer gives: ASan sees any read past the end */
    {
        uint8_t *exact = malloc(len ? len : 1);

        if (exact == NULL) {
            abort();
        }
        memcpy(exact, buf, len);
        free(buf);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
    }
    return 0;
}

static int cmp_names(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* Replays the regular files of dir in name order; returns how many, or -1. */
static long replay_dir(const char *dir)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char **names = NULL;
    size_t n = 0, cap = 0;
    long count = 0;

    if (d == NULL) {
        if (errno == ENOENT) {
            return 0;
        }
        fprintf(stderr, "replay: %s: %s\n", dir, strerror(errno));
        return -1;
    }
    while ((e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.') {
            continue;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 64;
            names = realloc(names, cap * sizeof(*names));
            if (names == NULL) {
                abort();
            }
        }
        names[n] = strdup(e->d_name);
        if (names[n] == NULL) {
            abort();
        }
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof(*names), cmp_names);
    for (size_t i = 0; i < n; i++) {
        size_t plen = strlen(dir) + strlen(names[i]) + 2;
        char *path = malloc(plen);
        struct stat st;

        if (path == NULL) {
            abort();
        }
        snprintf(path, plen, "%s/%s", dir, names[i]);
        if (stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
            if (replay_file(path) < 0) {
                count = -1;
            }
            else if (count >= 0) {
                count++;
            }
        }
        free(path);
        free(names[i]);
    }
    free(names);
    return count;
}

int main(int argc, char **argv)
{
    long total = 0;

    if (argc < 2) {
        fprintf(stderr, "usage: %s DIR|FILE...\n", argv[0]);
        return 2;
    }
    if (LLVMFuzzerInitialize != NULL) {
        LLVMFuzzerInitialize(&argc, &argv);
    }
    for (int i = 1; i < argc; i++) {
        struct stat st;
        long n;

        if (stat(argv[i], &st) == 0 && S_ISREG(st.st_mode)) {
            n = replay_file(argv[i]) < 0 ? -1 : 1;
        }
        else {
            n = replay_dir(argv[i]);
        }
        if (n < 0) {
            return 1;
        }
        printf("replay: %s: %ld inputs\n", argv[i], n);
        total += n;
    }
    if (total == 0) {
        fprintf(stderr, "replay: no input in any of the given paths\n");
        return 1;
    }
    printf("replay: %ld inputs, no crash\n", total);
    return 0;
}
