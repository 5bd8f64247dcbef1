/* wtgit_take.c - what the host takes back from the sandbox's git dir after a
 * command (wtgit.h): the objects of the task's branch, checked by git's fsck
 * as they come in, and that one branch, compare-and-swap. Nothing else of the
 * sandbox's git dir is read: not its config, hooks, alternates, other refs or
 * index; files are opened below it without following a symlink. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sandbox/gitrun.h"
#include "sandbox/statedir.h"
#include "sandbox/wtgit.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/xalloc.h"

#define TAKE_MAX (4LL * 1024 * 1024 * 1024)
#define REFS_MAX (64 * 1024 * 1024)
#define ZERO_OID "0000000000000000000000000000000000000000"

/* Opens rel below dirfd, never through a symlink or out of it. */
static int open_below(int dirfd, const char *rel, int flags)
{
    struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC | O_NOFOLLOW),
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};

    return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
}

/* Up to max bytes of a regular file below dirfd, NUL-terminated; NULL if absent. */
static char *slurp_below(int dirfd, const char *rel, size_t max)
{
    int fd = open_below(dirfd, rel, O_RDONLY);
    struct stat st;
    char *buf;
    size_t len = 0;
    ssize_t r;

    if (fd < 0) {
        return NULL;
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (size_t)st.st_size > max) {
        close(fd);
        return NULL;
    }
    buf = xmalloc((size_t)st.st_size + 1);
    while (len < (size_t)st.st_size && (r = read(fd, buf + len, (size_t)st.st_size - len)) > 0) {
        len += (size_t)r;
    }
    close(fd);
    buf[len] = '\0';
    return buf;
}

/* The value of ref in the sandbox's git dir (loose, else packed-refs), or -1. */
static int sandbox_ref(int repofd, const char *ref, char oid[65])
{
    cleanup_free char *loose = slurp_below(repofd, ref, 200);
    cleanup_free char *packed = NULL;
    size_t rl = strlen(ref);

    if (loose != NULL) {
        return sbx_git_oid_parse(loose, oid);
    }
    packed = slurp_below(repofd, "packed-refs", REFS_MAX);
    for (char *line = packed; line != NULL && *line != '\0';) {
        char *nl = strchr(line, '\n');

        if (nl != NULL) {
            *nl = '\0';
        }
        if (line[0] != '#' && line[0] != '^') {
            char *sp = strchr(line, ' ');

            if (sp != NULL && strlen(sp + 1) == rl && strcmp(sp + 1, ref) == 0) {
                *sp = '\0';
                return sbx_git_oid_parse(line, oid);
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    return -1;
}

/* Copies one object file (regular, no symlink) into the take dir. */
static int copy_object(int from_dir, const char *rel, const char *to_root, uid_t uid, gid_t gid,
                       long long *budget)
{
    cleanup_free char *to = xasprintf("%s/%s", to_root, rel);
    char buf[65536];
    struct stat st;
    int in = open_below(from_dir, rel, O_RDONLY);
    int out;
    ssize_t r;
    int ok = 1;

    if (in < 0) {
        return 0; /* gone since: not ours to take */
    }
    if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(in);
        return 0;
    }
    if (st.st_size > *budget) {
        close(in);
        *budget = 0;
        return -1;
    }
    *budget -= st.st_size;
    out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (out < 0) {
        close(in);
        return -1;
    }
    while ((r = read(in, buf, sizeof(buf))) > 0) {
        if (write(out, buf, (size_t)r) != r) {
            ok = 0;
            break;
        }
    }
    ok = ok && r == 0 && fchown(out, uid, gid) == 0;
    close(in);
    ok = close(out) == 0 && ok;
    return ok ? 0 : -1;
}

static int mkdir_owned(const char *p, uid_t uid, gid_t gid)
{
    if (mkdir(p, 0700) < 0 && errno != EEXIST) {
        return -1;
    }
    return chown(p, uid, gid);
}

/* The sandbox's loose objects and packs, copied into take/objects. */
static int copy_objects(int repofd, const char *take, uid_t uid, gid_t gid, char *why, size_t n)
{
    int objfd = open_below(repofd, "objects", O_RDONLY | O_DIRECTORY);
    long long budget = TAKE_MAX;
    DIR *d;
    struct dirent *e;
    int rc = 0;

    if (objfd < 0) {
        return 0;
    }
    d = fdopendir(objfd);
    if (d == NULL) {
        close(objfd);
        return 0;
    }
    while (rc == 0 && (e = readdir(d)) != NULL) {
        int sub;
        DIR *sd;
        struct dirent *f;
        int is_pack = strcmp(e->d_name, "pack") == 0;

        if (!is_pack && !(strlen(e->d_name) == 2 && strspn(e->d_name, "0123456789abcdef") == 2)) {
            continue;
        }
        sub = open_below(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY);
        sd = sub >= 0 ? fdopendir(sub) : NULL;
        if (sd == NULL) {
            if (sub >= 0) {
                close(sub);
            }
            continue;
        }
        {
            cleanup_free char *p = xasprintf("%s/%s", take, e->d_name);

            if (mkdir_owned(p, uid, gid) < 0) {
                rc = -1;
            }
        }
        while (rc == 0 && (f = readdir(sd)) != NULL) {
            cleanup_free char *rel = xasprintf("%s/%s", e->d_name, f->d_name);

            if (sbx_git_object_path_ok(rel) &&
                copy_object(objfd, rel, take, uid, gid, &budget) < 0) {
                rc = -1;
            }
        }
        closedir(sd);
    }
    closedir(d);
    if (rc < 0) {
        snprintf(why, n, "copying the sandbox's objects: %s",
                 budget <= 0 ? "over 4 GiB" : strerror(errno));
    }
    return rc;
}

static char *read_ours(const char *path)
{
    char buf[4200];
    int fd = open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t r;

    if (fd < 0) {
        return NULL;
    }
    r = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    if (r < 0) {
        return NULL;
    }
    buf[r] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
    return xstrdup(buf);
}

static int write_ours(const char *path, const char *text, uid_t uid, gid_t gid)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    size_t len = strlen(text);
    int ok;

    if (fd < 0) {
        return -1;
    }
    ok = write(fd, text, len) == (ssize_t)len && fchown(fd, uid, gid) == 0;
    return close(fd) == 0 && ok ? 0 : -1;
}

/* take/: a bare repository of sbx's making with the one ref and the copied objects,
 * its alternate the host's store; the host's git fetches from it. */
static int take_repo(const char *take, const char *host_objects, const char *oid, uid_t uid,
                     gid_t gid, char *why, size_t n)
{
    static const char *const dirs[] = {"",         "/refs",         "/refs/heads",
                                       "/objects", "/objects/info", NULL};
    cleanup_free char *alt = xasprintf("%s\n", host_objects);
    cleanup_free char *val = xasprintf("%s\n", oid);
    cleanup_free char *p_head = xasprintf("%s/HEAD", take);
    cleanup_free char *p_cfg = xasprintf("%s/config", take);
    cleanup_free char *p_ref = xasprintf("%s/refs/heads/take", take);
    cleanup_free char *p_alt = xasprintf("%s/objects/info/alternates", take);
    cleanup_free char *cfg =
        xasprintf("[core]\n\trepositoryformatversion = %d\n\tbare = true\n%s", strlen(oid) == 64,
                  strlen(oid) == 64 ? "[extensions]\n\tobjectformat = sha256\n" : "");

    for (size_t i = 0; dirs[i] != NULL; i++) {
        cleanup_free char *p = xasprintf("%s%s", take, dirs[i]);

        if (mkdir_owned(p, uid, gid) < 0) {
            snprintf(why, n, "%s: %s", p, strerror(errno));
            return -1;
        }
    }
    if (write_ours(p_head, "ref: refs/heads/take\n", uid, gid) < 0 ||
        write_ours(p_cfg, cfg, uid, gid) < 0 || write_ours(p_ref, val, uid, gid) < 0 ||
        write_ours(p_alt, alt, uid, gid) < 0) {
        snprintf(why, n, "%s: %s", take, strerror(errno));
        return -1;
    }
    return 0;
}

static int run(const struct sbx_gitrun *g, const char *const *argv, char *why, size_t n)
{
    struct sbx_gitout o;
    int rc = sbx_gitrun(g, argv, &o);

    if (rc != 0) {
        snprintf(why, n, "git %s: %s", argv[0], o.err[0] ? o.err : "failed");
    }
    free(o.out);
    return rc == 0 ? 0 : -1;
}

/* The objects into the host's store, then the branch, compare-and-swap. */
static int take_back(const struct sbx_gitrun *g, const char *take, const char *branch,
                     const char *base, const char *oid, const char *task_id, char *why, size_t n)
{
    static const char *const sym[] = {"symbolic-ref", "-q", "HEAD", NULL};
    cleanup_free char *msg = xasprintf("sbx: task %s", task_id);
    const char *const fetch[] = {
        "fetch", "--no-write-fetch-head", "--no-tags", "--no-recurse-submodules", "-q",
        take,    "refs/heads/take",       NULL};
    const char *const upd[] = {"update-ref", "-m", msg, branch, oid, base[0] ? base : ZERO_OID,
                               NULL};
    static const char *const reset[] = {"reset", "-q", NULL};
    struct sbx_gitout o;
    int on_head;

    if (run(g, fetch, why, n) < 0 || run(g, upd, why, n) < 0) {
        return -1;
    }
    /* the host's index follows its HEAD when HEAD is that branch */
    sbx_gitrun(g, sym, &o);
    o.out[strcspn(o.out, "\n")] = '\0';
    on_head = o.status == 0 && strcmp(o.out, branch) == 0;
    free(o.out);
    if (on_head && run(g, reset, why, n) < 0) {
        return -1;
    }
    return 0;
}

static void remove_tree(const char *path)
{
    DIR *d = opendir(path);
    struct dirent *e;

    if (d != NULL) {
        while ((e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
                cleanup_free char *p = xasprintf("%s/%s", path, e->d_name);
                struct stat st;

                if (lstat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
                    remove_tree(p);
                }
                else {
                    unlink(p);
                }
            }
        }
        closedir(d);
    }
    rmdir(path);
}

int sbx_wtgit_harvest(const char *worktree, const char *task_dir, const char *task_id, char *msg,
                      size_t len)
{
    cleanup_free char *top = xasprintf("%s/git", task_dir);
    cleanup_free char *p_lock = xasprintf("%s/git/lock", task_dir);
    cleanup_free char *p_branch = xasprintf("%s/git/branch", task_dir);
    cleanup_free char *p_base = xasprintf("%s/git/base", task_dir);
    cleanup_free char *p_obj = xasprintf("%s/git/objects", task_dir);
    cleanup_free char *repo = xasprintf("%s/git/repo", task_dir);
    char take[] = "/tmp/sbx-take.XXXXXX";
    cleanup_free char *branch = read_ours(p_branch);
    cleanup_free char *base = NULL;
    cleanup_free char *host_objects = NULL;
    struct sbx_gitrun g;
    struct stat wst;
    char oid[65];
    int lock;
    int repofd;
    int rc = 0;

    msg[0] = '\0';
    if (branch == NULL || branch[0] == '\0') {
        return 0; /* no repository, or HEAD detached at the start: nothing is taken */
    }
    lock = open(p_lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX) < 0) {
        snprintf(msg, len, "%s: %s", p_lock, strerror(errno));
        if (lock >= 0) {
            close(lock);
        }
        return -1;
    }
    base = read_ours(p_base);
    host_objects = read_ours(p_obj);
    repofd = open(repo, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (base == NULL || host_objects == NULL || repofd < 0 || stat(worktree, &wst) < 0) {
        snprintf(msg, len, "%s: %s", top, strerror(errno));
        rc = -1;
    }
    else if (sandbox_ref(repofd, branch, oid) < 0 || strcmp(oid, base) == 0) {
        rc = 0; /* unchanged, or gone inside: the host's branch stays */
    }
    else {
        char why[512] = "";

        g = (struct sbx_gitrun){.uid = wst.st_uid, .gid = wst.st_gid, .dir = worktree};
        if (mkdtemp(take) == NULL || chown(take, g.uid, g.gid) < 0) {
            snprintf(why, sizeof(why), "%s: %s", take, strerror(errno));
        }
        else if (take_repo(take, host_objects, oid, g.uid, g.gid, why, sizeof(why)) == 0) {
            cleanup_free char *objs = xasprintf("%s/objects", take);

            if (copy_objects(repofd, objs, g.uid, g.gid, why, sizeof(why)) == 0 &&
                take_back(&g, take, branch, base, oid, task_id, why, sizeof(why)) == 0) {
                cleanup_free char *nb = xasprintf("%s\n", oid);

                write_ours(p_base, nb, 0, 0);
                snprintf(msg, len, "took back %s: %.12s -> %.12s", branch,
                         base[0] ? base : "(none)", oid);
                rc = 1;
            }
        }
        if (rc != 1) {
            snprintf(msg, len, "%s not taken back (the sandbox's commit is %s): %s", branch, oid,
                     why);
            rc = -1;
        }
        remove_tree(take);
    }
    if (repofd >= 0) {
        close(repofd);
    }
    close(lock);
    return rc;
}
