/* confine.c - client-named host paths confined below the operator's roots
 * (confine.h). */
#include "util/confine.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "util/xalloc.h"

/* Never mounted, whatever the roots say: the kernel's views of the host and
 * the runtime directory (other services' sockets). */
static const char *const forbidden[] = {"/proc", "/sys", "/dev", "/run", NULL};

/* path is dir or below it (both absolute, no trailing slash but "/"). */
static int below(const char *path, const char *dir)
{
    size_t n = strlen(dir);

    if (strcmp(dir, "/") == 0) {
        return 1;
    }
    return strncmp(path, dir, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

/* Why a resolved path may not be mounted, or NULL. */
static const char *forbidden_problem(const char *path, const char *state_dir, char *buf, size_t len)
{
    for (size_t i = 0; forbidden[i] != NULL; i++) {
        if (below(path, forbidden[i])) {
            snprintf(buf, len, "inside %s", forbidden[i]);
            return buf;
        }
        if (below(forbidden[i], path)) {
            snprintf(buf, len, "contains %s", forbidden[i]);
            return buf;
        }
    }
    if (state_dir != NULL && below(path, state_dir)) {
        return "inside the state directory";
    }
    if (state_dir != NULL && below(state_dir, path)) {
        return "contains the state directory";
    }
    return NULL;
}

int sbx_confine_forbidden(const char *resolved, const char *state_dir, char *why, size_t len)
{
    char buf[64];
    char *real = state_dir ? realpath(state_dir, NULL) : NULL;
    const char *p = forbidden_problem(resolved, real ? real : state_dir, buf, sizeof(buf));

    free(real);
    if (p == NULL) {
        return 0;
    }
    snprintf(why, len, "worktree \"%.200s\": %s", resolved, p);
    return -1;
}

const char *sbx_confine_root_problem(const char *root, const char *state_dir)
{
    if (root[0] != '/') {
        return "not an absolute path";
    }
    for (size_t i = 0; forbidden[i] != NULL; i++) {
        if (below(root, forbidden[i])) {
            return "inside /proc, /sys, /dev or /run";
        }
    }
    if (state_dir != NULL && below(root, state_dir)) {
        return "inside the state directory";
    }
    return NULL;
}

int sbx_confine_init(struct sbx_confine *c, const char *what, char *const *roots, size_t n,
                     const char *state_dir, char *why, size_t len)
{
    memset(c, 0, sizeof(*c));
    c->what = what;
    c->roots = xcalloc(n + 1, sizeof(char *));
    c->real = xcalloc(n + 1, sizeof(char *));
    if (state_dir != NULL) {
        c->state_dir = realpath(state_dir, NULL);
        if (c->state_dir == NULL) {
            snprintf(why, len, "state directory %s: %s", state_dir, strerror(errno));
            return -1;
        }
    }
    for (size_t i = 0; i < n; i++) {
        const char *p = sbx_confine_root_problem(roots[i], c->state_dir);
        char *real;

        c->roots[i] = xstrdup(roots[i]);
        c->n = i + 1;
        real = p == NULL ? realpath(roots[i], NULL) : NULL;
        if (p == NULL && real == NULL) {
            snprintf(why, len, "%s: root \"%s\": %s", what, roots[i], strerror(errno));
            return -1;
        }
        if (p == NULL) {
            p = sbx_confine_root_problem(real, c->state_dir);
        }
        c->real[i] = real;
        if (p != NULL) {
            snprintf(why, len, "%s: root \"%s\"%s%s: %s", what, roots[i],
                     real && strcmp(real, roots[i]) != 0 ? " resolves to " : "",
                     real && strcmp(real, roots[i]) != 0 ? real : "", p);
            return -1;
        }
    }
    return 0;
}

void sbx_confine_deny(struct sbx_confine *c, const char *path, const char *what)
{
    char *real = realpath(path, NULL);
    const char *slash = strrchr(path, '/');

    if (real == NULL && slash != NULL) {
        char *dir = slash == path ? xstrdup("/") : xstrndup(path, (size_t)(slash - path));
        char *rdir = realpath(dir, NULL);

        if (rdir != NULL) {
            real = xasprintf("%s/%s", strcmp(rdir, "/") == 0 ? "" : rdir, slash + 1);
        }
        free(rdir);
        free(dir);
    }
    c->deny = xrealloc(c->deny, (c->n_deny + 1) * sizeof(*c->deny));
    c->deny_what = xrealloc(c->deny_what, (c->n_deny + 1) * sizeof(*c->deny_what));
    c->deny[c->n_deny] = real != NULL ? real : xstrdup(path);
    c->deny_what[c->n_deny] = what;
    c->n_deny++;
}

/* Why a resolved path may not be mounted for one of c's denied paths, or NULL. */
static const char *deny_problem(const struct sbx_confine *c, const char *path, char *buf,
                                size_t len)
{
    for (size_t i = 0; i < c->n_deny; i++) {
        if (below(path, c->deny[i]) || below(c->deny[i], path)) {
            snprintf(buf, len, "%s %s", below(path, c->deny[i]) ? "inside" : "contains",
                     c->deny_what[i]);
            return buf;
        }
    }
    return NULL;
}

void sbx_confine_clear(struct sbx_confine *c)
{
    for (size_t i = 0; i < c->n_deny; i++) {
        free(c->deny[i]);
    }
    free(c->deny);
    free(c->deny_what);
    for (size_t i = 0; i < c->n; i++) {
        free(c->roots[i]);
        free(c->real[i]);
    }
    free(c->roots);
    free(c->real);
    free(c->state_dir);
    memset(c, 0, sizeof(*c));
}

/* A kernel filesystem mounted somewhere below a root (a bind of /proc, a
 * cgroup tree...) is refused like /proc itself: NULL or its name. */
static const char *kernel_fs(const struct statfs *st)
{
    static const struct {
        long type;
        const char *name;
    } fs[] = {
        {PROC_SUPER_MAGIC, "proc"},
        {SYSFS_MAGIC, "sysfs"},
        {CGROUP_SUPER_MAGIC, "cgroup"},
        {CGROUP2_SUPER_MAGIC, "cgroup2"},
        {DEVPTS_SUPER_MAGIC, "devpts"},
        {DEBUGFS_MAGIC, "debugfs"},
        {SECURITYFS_MAGIC, "securityfs"},
        {TRACEFS_MAGIC, "tracefs"},
        {BPF_FS_MAGIC, "bpf"},
    };

    for (size_t i = 0; i < sizeof(fs) / sizeof(fs[0]); i++) {
        if ((long)st->f_type == fs[i].type) {
            return fs[i].name;
        }
    }
    return NULL;
}

/* The path an fd refers to, as the kernel names it. */
static char *fd_path(int fd)
{
    char link[64];
    char buf[PATH_MAX];
    ssize_t n;

    snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
    n = readlink(link, buf, sizeof(buf) - 1);
    if (n <= 0) {
        return NULL;
    }
    buf[n] = '\0';
    return buf[0] == '/' ? xstrdup(buf) : NULL;
}

/* Resolves rel beneath root (the configured or the resolved form of root i):
 * 0 and *out, or -1 with errno (EXDEV: it leads out; ENOSYS: no openat2).
 * *fs: the name of a kernel filesystem it is on, or NULL. */
static int resolve_beneath(const char *root, const char *rel, char **out, const char **fs)
{
    struct statfs sfs;
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS,
    };
    int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    int fd;
    int e;

    if (rfd < 0) {
        return -1;
    }
    fd = (int)syscall(SYS_openat2, rfd, rel[0] ? rel : ".", &how, sizeof(how));
    e = errno;
    close(rfd);
    if (fd < 0) {
        errno = e;
        return -1;
    }
    *out = fd_path(fd);
    *fs = fstatfs(fd, &sfs) == 0 ? kernel_fs(&sfs) : NULL;
    close(fd);
    if (*out == NULL) {
        errno = ENOENT;
        return -1;
    }
    return 0;
}

/* The fallback without openat2: realpath, then the prefix check. */
static int resolve_realpath(const char *path, const char *real_root, char **out, const char **fs)
{
    char *r = realpath(path, NULL);
    struct statfs sfs;

    if (r == NULL) {
        return -1;
    }
    if (!below(r, real_root)) {
        free(r);
        errno = EXDEV;
        return -1;
    }
    *out = r;
    *fs = statfs(r, &sfs) == 0 ? kernel_fs(&sfs) : NULL;
    return 0;
}

int sbx_confine_dir(const struct sbx_confine *c, const char *path, char **out, char *why,
                    size_t len)
{
    const char *rule = c->what ? c->what : "worktree roots";
    const char *fs = NULL;
    char buf[128];
    const char *p;
    size_t i;
    int rc = -1;

    *out = NULL;
    if (path[0] != '/' || strlen(path) >= PATH_MAX) {
        snprintf(why, len, "worktree \"%.200s\": not an absolute path", path);
        return 400;
    }
    for (i = 0; i < c->n; i++) {
        const char *root = below(path, c->roots[i])  ? c->roots[i]
                           : below(path, c->real[i]) ? c->real[i]
                                                     : NULL;
        const char *rel;

        if (root == NULL) {
            continue;
        }
        rel = path + (strcmp(root, "/") == 0 ? 1 : strlen(root));
        rel += strspn(rel, "/");
        rc = resolve_beneath(root, rel, out, &fs);
        if (rc < 0 && errno == ENOSYS) {
            rc = resolve_realpath(path, c->real[i], out, &fs);
        }
        break;
    }
    if (i == c->n) {
        snprintf(why, len, "worktree \"%.200s\": outside %s", path, rule);
        return 403;
    }
    if (rc < 0 && (errno == EXDEV || errno == ELOOP)) {
        snprintf(why, len,
                 "worktree \"%.200s\": leads outside %s (a symlink, a magic link or '..' "
                 "points out)",
                 path, rule);
        return 403;
    }
    if (rc < 0) {
        snprintf(why, len, "worktree \"%.200s\": %s", path,
                 errno == ENOTDIR ? "not a directory" : strerror(errno));
        return errno == EACCES ? 403 : 400;
    }
    /* the resolved path must still be below the root it was resolved from */
    if (!below(*out, c->real[i])) {
        snprintf(why, len, "worktree \"%.200s\": resolves to %.200s, outside %s", path, *out, rule);
        free(*out);
        *out = NULL;
        return 403;
    }
    p = forbidden_problem(*out, c->state_dir, buf, sizeof(buf));
    if (p == NULL) {
        p = deny_problem(c, *out, buf, sizeof(buf));
    }
    if (p == NULL && fs != NULL) {
        snprintf(buf, sizeof(buf), "on a kernel filesystem (%s)", fs);
        p = buf;
    }
    if (p != NULL) {
        snprintf(why, len, "worktree \"%.200s\": %s", path, p);
        free(*out);
        *out = NULL;
        return 403;
    }
    return 0;
}
