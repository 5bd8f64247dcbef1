/* wtscan.c - the host's check of a worktree after each command (wtscan.h). */
#include "sandbox/wtscan.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/xalloc.h"

const char *const sbx_protect_default[] = {".gitconfig",
                                           ".gitmodules",
                                           ".bashrc",
                                           ".bash_profile",
                                           ".zshrc",
                                           ".zprofile",
                                           ".profile",
                                           ".ripgreprc",
                                           ".mcp.json",
                                           ".vscode",
                                           ".idea",
                                           ".claude/commands",
                                           ".claude/agents",
                                           ".claude/settings.json",
                                           ".claude/settings.local.json",
                                           ".envrc",
                                           ".devcontainer",
                                           NULL};

#define SCAN_MAX_ENTRIES 2000000
#define SCAN_MAX_DEPTH 64

int sbx_protect_glob_ok(const char *g)
{
    size_t n = g ? strlen(g) : 0;

    if (n == 0 || n > 200 || g[0] == '/' || g[n - 1] == '/' || strstr(g, "//") != NULL) {
        return 0;
    }
    for (const char *c = g; *c; c = strchr(c, '/') ? strchr(c, '/') + 1 : c + strlen(c)) {
        if (strncmp(c, "..", 2) == 0 && (c[2] == '/' || c[2] == '\0')) {
            return 0;
        }
        if (strncmp(c, "./", 2) == 0 || strcmp(c, ".") == 0) {
            return 0;
        }
    }
    return 1;
}

int sbx_protect_mounts(const char *worktree, const char *const *globs, struct sbx_mount **v,
                       size_t *n)
{
    size_t wl = strlen(worktree);

    for (size_t i = 0; globs != NULL && globs[i] != NULL; i++) {
        cleanup_free char *pat = xasprintf("%s/%s", worktree, globs[i]);
        glob_t g = {0};

        if (glob(pat, GLOB_NOSORT | GLOB_NOESCAPE, NULL, &g) != 0) {
            globfree(&g);
            continue;
        }
        for (size_t k = 0; k < g.gl_pathc && *n < 64; k++) {
            const char *p = g.gl_pathv[k];
            struct stat st;

            /* a symlink is not followed to wherever it points: the scan watches it */
            if (strncmp(p, worktree, wl) != 0 || p[wl] != '/' || lstat(p, &st) < 0 ||
                !(S_ISREG(st.st_mode) || S_ISDIR(st.st_mode))) {
                continue;
            }
            *v = xrealloc(*v, (*n + 1) * sizeof(**v));
            (*v)[*n].host = xstrdup(p);
            (*v)[*n].path = xasprintf("/workspace%s", p + wl);
            (*v)[*n].read_only = 1;
            (*n)++;
        }
        globfree(&g);
    }
    return 0;
}

int sbx_protect_match(const char *const *globs, const char *rel)
{
    char buf[4096];
    size_t n = strlen(rel);

    if (globs == NULL || n >= sizeof(buf)) {
        return 0;
    }
    memcpy(buf, rel, n + 1);
    /* rel itself, then each parent directory */
    for (;;) {
        for (size_t i = 0; globs[i] != NULL; i++) {
            if (fnmatch(globs[i], buf, FNM_PATHNAME) == 0) {
                return 1;
            }
        }
        char *slash = strrchr(buf, '/');

        if (slash == NULL) {
            return 0;
        }
        *slash = '\0';
    }
}

struct scan {
    struct timespec since;
    int had_git;
    const char *task;
    const char *const *protect;
    sbx_wtscan_note_fn note;
    void *ud;
    dev_t dev;
    long entries;
    int found;
};

static void note(struct scan *s, const char *fmt, const char *rel, const char *more)
{
    char msg[1024];

    snprintf(msg, sizeof(msg), fmt, rel, more ? more : "");
    s->note(s->ud, msg);
    s->found++;
}

static int changed(const struct scan *s, const struct stat *st)
{
    return st->st_ctim.tv_sec > s->since.tv_sec ||
           (st->st_ctim.tv_sec == s->since.tv_sec && st->st_ctim.tv_nsec > s->since.tv_nsec);
}

/* A directory git would take for a repository: HEAD, objects/ and refs/ (or a
 * commondir file). */
static int looks_like_gitdir(int dfd)
{
    struct stat st;

    if (fstatat(dfd, "HEAD", &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode)) {
        return 0;
    }
    if (fstatat(dfd, "commondir", &st, AT_SYMLINK_NOFOLLOW) == 0) {
        return 1;
    }
    return fstatat(dfd, "objects", &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           fstatat(dfd, "refs", &st, AT_SYMLINK_NOFOLLOW) == 0;
}

/* Anything in a git dir (but its object files) changed during the task. */
static int gitdir_touched(const struct scan *s, int dfd, int depth)
{
    DIR *d;
    struct dirent *e;
    struct stat st;
    int t = 0;
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0) {
            close(fd);
        }
        return 1; /* unreadable: treat as touched */
    }
    if (changed(s, &st)) {
        close(fd);
        return 1;
    }
    d = fdopendir(fd);
    if (d == NULL) {
        close(fd);
        return 1;
    }
    while (!t && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0 ||
            (strlen(e->d_name) == 2 && strspn(e->d_name, "0123456789abcdef") == 2) ||
            strcmp(e->d_name, "pack") == 0) {
            continue;
        }
        if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
            continue;
        }
        if (changed(s, &st)) {
            t = 1;
        }
        else if (S_ISDIR(st.st_mode) && depth < 6) {
            int sub = openat(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

            if (sub >= 0) {
                t = gitdir_touched(s, sub, depth + 1);
                close(sub);
            }
        }
    }
    closedir(d);
    return t;
}

/* Renames name (in dfd) to name.sbx-quarantine-TASK; the new name in out. */
static int quarantine(const struct scan *s, int dfd, const char *name, char *out, size_t n)
{
    snprintf(out, n, "%s.sbx-quarantine-%s", name, s->task);
    return renameat(dfd, name, dfd, out);
}

static void strip_file(struct scan *s, int dfd, const char *name, const char *rel,
                       const struct stat *st)
{
    static const char *const attrs[] = {"security.capability", "system.posix_acl_access",
                                        "system.posix_acl_default"};
    int fd = openat(dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
    struct stat now;

    if (fd < 0 || fstat(fd, &now) < 0 || now.st_ino != st->st_ino) {
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    if ((now.st_mode & 06000) != 0 && S_ISREG(now.st_mode)) {
        if (fchmod(fd, now.st_mode & 01777) == 0) {
            note(s, "set-id bit on %s: removed%s", rel, NULL);
        }
    }
    for (size_t i = 0; i < sizeof(attrs) / sizeof(attrs[0]); i++) {
        if (fgetxattr(fd, attrs[i], NULL, 0) > 0 && fremovexattr(fd, attrs[i]) == 0) {
            note(s, "extended attribute on %s: %s removed", rel, attrs[i]);
        }
    }
    close(fd);
}

static void walk(struct scan *s, int dfd, const char *prefix, int depth);

static void entry(struct scan *s, int dfd, const char *name, const char *rel, int depth)
{
    struct stat st;
    char q[512];

    if (++s->entries > SCAN_MAX_ENTRIES || fstatat(dfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 ||
        st.st_dev != s->dev) {
        return;
    }
    if (strcmp(name, ".git") == 0) {
        int sub;
        int touched = changed(s, &st);

        if (depth == 0 && s->had_git) {
            return; /* the host's own: the sandbox saw its own git dir there */
        }
        if (!touched && S_ISDIR(st.st_mode)) {
            sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            touched = sub < 0 || gitdir_touched(s, sub, 0);
            if (sub >= 0) {
                close(sub);
            }
        }
        if (touched && quarantine(s, dfd, name, q, sizeof(q)) == 0) {
            if (S_ISDIR(st.st_mode)) {
                sub = openat(dfd, q, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (sub >= 0) {
                    char h[512];

                    quarantine(s, sub, "HEAD", h, sizeof(h));
                    close(sub);
                }
            }
            note(s, "repository %s made or changed inside: quarantined as %s", rel, q);
        }
        return;
    }
    if (changed(s, &st) && sbx_protect_match(s->protect, rel)) {
        if (quarantine(s, dfd, name, q, sizeof(q)) == 0) {
            note(s, "protected path %s: written inside, quarantined as %s", rel, q);
        }
        return;
    }
    if (S_ISFIFO(st.st_mode) || S_ISCHR(st.st_mode) || S_ISBLK(st.st_mode)) {
        if (changed(s, &st) && unlinkat(dfd, name, 0) == 0) {
            note(s, "%s: a FIFO or device node made inside: removed%s", rel, NULL);
        }
        return;
    }
    if (S_ISREG(st.st_mode) && changed(s, &st)) {
        strip_file(s, dfd, name, rel, &st);
        return;
    }
    if (S_ISDIR(st.st_mode) && depth < SCAN_MAX_DEPTH) {
        int sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (sub < 0) {
            return;
        }
        if (looks_like_gitdir(sub) && gitdir_touched(s, sub, 0)) {
            if (quarantine(s, sub, "HEAD", q, sizeof(q)) == 0) {
                note(s, "repository %s made or changed inside: its HEAD quarantined as %s", rel, q);
            }
        }
        if (changed(s, &st)) {
            strip_file(s, dfd, name, rel, &st); /* a default ACL */
        }
        walk(s, sub, rel, depth + 1);
        close(sub);
    }
}

static void walk(struct scan *s, int dfd, const char *prefix, int depth)
{
    int fd = openat(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = fd >= 0 ? fdopendir(fd) : NULL;
    struct dirent *e;

    if (d == NULL) {
        if (fd >= 0) {
            close(fd);
        }
        return;
    }
    while ((e = readdir(d)) != NULL) {
        cleanup_free char *rel = NULL;

        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        rel = prefix[0] ? xasprintf("%s/%s", prefix, e->d_name) : xstrdup(e->d_name);
        entry(s, dirfd(d), e->d_name, rel, depth);
    }
    closedir(d);
}

/* The worktree opened (no symlink followed) and s set up for it; -1: gone. */
static int scan_open(struct scan *s, const char *worktree, const struct timespec *since,
                     int had_git, const char *task_id, const char *const *protect,
                     sbx_wtscan_note_fn fn, void *ud)
{
    struct stat st;
    int fd = open(worktree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    *s = (struct scan){.since = *since,
                       .had_git = had_git,
                       .task = task_id,
                       .protect = protect,
                       .note = fn,
                       .ud = ud};
    if (fd < 0 || fstat(fd, &st) < 0) {
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    s->dev = st.st_dev;
    return fd;
}

int sbx_wtscan(const char *worktree, const struct timespec *since, int had_git, const char *task_id,
               const char *const *protect, sbx_wtscan_note_fn fn, void *ud)
{
    struct scan s;
    int fd = scan_open(&s, worktree, since, had_git, task_id, protect, fn, ud);

    if (fd < 0) {
        return 0;
    }
    walk(&s, fd, "", 0);
    close(fd);
    if (s.entries > SCAN_MAX_ENTRIES) {
        fn(ud, "over 2000000 entries: the check stopped there");
    }
    return s.found;
}

int sbx_wtscan_paths(const char *worktree, const struct timespec *since, int had_git,
                     const char *task_id, const char *const *protect, const char *const *rels,
                     size_t n_rels, sbx_wtscan_note_fn fn, void *ud)
{
    struct scan s;
    int root = scan_open(&s, worktree, since, had_git, task_id, protect, fn, ud);

    if (root < 0) {
        return 0;
    }
    for (size_t i = 0; i < n_rels; i++) {
        cleanup_free char *buf = xstrdup(rels[i]);
        char *name = buf;
        char *slash;
        int dfd = dup(root);
        int depth = 0;

        /* each parent opened below the last, no symlink followed */
        while (dfd >= 0 && (slash = strchr(name, '/')) != NULL) {
            int sub;

            *slash = '\0';
            sub = openat(dfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            close(dfd);
            dfd = sub;
            name = slash + 1;
            depth++;
        }
        if (dfd >= 0) {
            if (name[0] != '\0' && strcmp(name, ".") != 0 && strcmp(name, "..") != 0) {
                entry(&s, dfd, name, rels[i], depth);
            }
            close(dfd);
        }
    }
    close(root);
    return s.found;
}
