/* wtgit_check.c - what the sandbox changed in a git dir sbx made for it and the
 * host does not take (wtgit_int.h): the files sbx wrote there (config, ...),
 * files git reads as configuration or code that sbx never writes (hooks/ entries,
 * info/attributes, config.worktree, commondir), and branches other than the
 * task's. Each is read as data below the git dir (no symlink followed, at most
 * CHECK_MAX bytes), never run, and noted once per path per task. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/gitrun.h"
#include "sandbox/wtgit_int.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

#define CHECK_MAX (1024 * 1024)
#define NAMES_MAX 32

const char *const sbx_wtgit_own_files[] = {"config", "description", "objects/info/alternates",
                                           NULL};

static const char *const never[] = {"config.worktree", "commondir", "info/attributes", NULL};

/* A name from the sandbox, printable for a log line (at most 64 characters). */
static char *printable(const char *s)
{
    size_t n = strnlen(s, 64);
    char *out = xmalloc(n + 1);

    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        out[i] = c > 0x20 && c < 0x7f ? (char)c : '?';
    }
    out[n] = '\0';
    return out;
}

static void changed(const char *label, const char *rel, sbx_wtgit_note_fn note, void *ud)
{
    cleanup_free char *safe = printable(rel);
    cleanup_free char *m =
        xasprintf("protected path %s/%s: changed inside, not taken back", label, safe);

    note(ud, m);
}

/* The copy sbx kept of a file it wrote (orig-NAME, '/' as '-'). */
static char *orig(const char *spec, const char *rel, size_t *len)
{
    cleanup_free char *name = xstrdup(rel);
    cleanup_free char *path = NULL;
    int dfd;
    char *text;

    for (char *p = name; *p; p++) {
        *p = *p == '/' ? '-' : *p;
    }
    path = xasprintf("orig-%s", name);
    dfd = open(spec, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) {
        return NULL;
    }
    text = sbx_wtgit_slurp_below(dfd, path, CHECK_MAX, len);
    close(dfd);
    return text;
}

static void check_files(int repofd, const char *spec, const char *label, sbx_wtgit_note_fn note,
                        void *ud)
{
    for (size_t i = 0; sbx_wtgit_own_files[i] != NULL; i++) {
        const char *rel = sbx_wtgit_own_files[i];
        size_t la = 0;
        size_t lb = 0;
        cleanup_free char *was = orig(spec, rel, &la);
        cleanup_free char *now = NULL;

        if (was == NULL) {
            continue; /* sbx kept no copy (an older task) */
        }
        now = sbx_wtgit_slurp_below(repofd, rel, CHECK_MAX, &lb);
        if (now == NULL || la != lb || memcmp(was, now, la) != 0) {
            changed(label, rel, note, ud); /* changed, replaced, removed or over the bound */
        }
    }
    for (size_t i = 0; never[i] != NULL; i++) {
        int fd = sbx_wtgit_open_below(repofd, never[i], O_PATH);

        if (fd >= 0 || errno == ELOOP) {
            changed(label, never[i], note, ud); /* a file, or a symlink in its place */
        }
        if (fd >= 0) {
            close(fd);
        }
    }
}

/* Every entry of hooks/ (sbx makes none). */
static void check_hooks(int repofd, const char *label, sbx_wtgit_note_fn note, void *ud)
{
    int fd = sbx_wtgit_open_below(repofd, "hooks", O_RDONLY | O_DIRECTORY);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;
    int count = 0;

    if (d == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    while ((e = readdir(d)) != NULL && count < NAMES_MAX) {
        cleanup_free char *rel = NULL;

        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        rel = xasprintf("hooks/%s", e->d_name);
        changed(label, rel, note, ud);
        count++;
    }
    closedir(d);
}

/* A loose branch other than the task's: made or moved inside, stays there. */
static void check_branches(int fd, const char *prefix, const char *target, int depth,
                           const char *label, sbx_wtgit_note_fn note, void *ud, int *count)
{
    DIR *d = fdopendir(fd);
    struct dirent *e;

    if (d == NULL) {
        close(fd);
        return;
    }
    while ((e = readdir(d)) != NULL && *count < NAMES_MAX) {
        cleanup_free char *ref = xasprintf("%s/%s", prefix, e->d_name);
        struct stat st;

        if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            continue;
        }
        if (S_ISDIR(st.st_mode) && depth < 4) {
            int sub = sbx_wtgit_open_below(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY);

            if (sub >= 0) {
                check_branches(sub, ref, target, depth + 1, label, note, ud, count);
            }
        }
        else if (S_ISREG(st.st_mode) && strcmp(ref, target) != 0 && sbx_git_refname_ok(ref + 11)) {
            cleanup_free char *m = xasprintf(
                "branch %s made or moved inside %s: stays inside, not taken back", ref, label);

            note(ud, m);
            (*count)++;
        }
    }
    closedir(d);
}

void sbx_wtgit_check(int repofd, const char *spec, const char *label, const char *target,
                     sbx_wtgit_note_fn note, void *ud)
{
    int heads = sbx_wtgit_open_below(repofd, "refs/heads", O_RDONLY | O_DIRECTORY);
    int count = 0;

    check_files(repofd, spec, label, note, ud);
    check_hooks(repofd, label, note, ud);
    if (heads >= 0) {
        check_branches(heads, "refs/heads", target, 0, label, note, ud, &count);
    }
}
