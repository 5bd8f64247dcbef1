/* wtgit_take.c - what the host takes back from the sandbox's git dirs after a
 * command (wtgit.h): for the superproject and each submodule, the objects of the
 * task's ref, checked by git's fsck as they come in, and that one ref,
 * compare-and-swap. Nothing else of a sandbox's git dir is taken: not its config,
 * hooks, alternates, other refs or index (wtgit_check.c notes what changed);
 * files are opened below it without following a symlink. */
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
#include "sandbox/wtgit.h"
#include "sandbox/wtgit_int.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/xalloc.h"

#define TAKE_MAX (4LL * 1024 * 1024 * 1024)
#define REFS_MAX (64 * 1024 * 1024)

int sbx_wtgit_open_below(int dirfd, const char *rel, int flags)
{
    struct open_how how = {.flags = (unsigned long long)(flags | O_CLOEXEC | O_NOFOLLOW),
                           .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS |
                                      RESOLVE_NO_MAGICLINKS | RESOLVE_NO_XDEV};

    return (int)syscall(SYS_openat2, dirfd, rel, &how, sizeof(how));
}

char *sbx_wtgit_slurp_below(int dirfd, const char *rel, size_t max, size_t *lenp)
{
    int fd = sbx_wtgit_open_below(dirfd, rel, O_RDONLY | O_NONBLOCK);
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
    if (lenp != NULL) {
        *lenp = len;
    }
    return buf;
}

int sbx_wtgit_sandbox_ref(int repofd, const char *ref, char oid[65])
{
    cleanup_free char *loose = sbx_wtgit_slurp_below(repofd, ref, 200, NULL);
    cleanup_free char *packed = NULL;
    size_t rl = strlen(ref);

    if (loose != NULL) {
        return sbx_git_oid_parse(loose, oid);
    }
    packed = sbx_wtgit_slurp_below(repofd, "packed-refs", REFS_MAX, NULL);
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

/* The sandbox's value of the task's ref: the branch; for HEAD (detached at the
 * start), what HEAD is now (a branch made inside: that branch's value). */
static int sandbox_value(int repofd, const char *target, char oid[65])
{
    cleanup_free char *head = NULL;

    if (strcmp(target, "HEAD") != 0) {
        return sbx_wtgit_sandbox_ref(repofd, target, oid);
    }
    head = sbx_wtgit_slurp_below(repofd, "HEAD", 300, NULL);
    if (head == NULL) {
        return -1;
    }
    if (strncmp(head, "ref: refs/heads/", 16) == 0) {
        head[strcspn(head, "\n")] = '\0';
        return sbx_git_refname_ok(head + 16) ? sbx_wtgit_sandbox_ref(repofd, head + 5, oid) : -1;
    }
    return sbx_git_oid_parse(head, oid);
}

/* Copies one object file (regular, no symlink) into the take dir. */
static int copy_object(int from_dir, const char *rel, const char *to_root, long long *budget)
{
    cleanup_free char *to = xasprintf("%s/%s", to_root, rel);
    struct stat st;
    int in = sbx_wtgit_open_below(from_dir, rel, O_RDONLY | O_NONBLOCK);
    int out;
    long long got;
    int ok;

    if (in < 0) {
        return 0; /* gone since: not ours to take */
    }
    if (fstat(in, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(in);
        return 0;
    }
    out = open(to, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444);
    if (out < 0) {
        close(in);
        return -1;
    }
    got = sbx_fd_copy(in, out, *budget);
    *budget = got < 0 ? 0 : *budget - got;
    ok = got >= 0;
    close(in);
    ok = close(out) == 0 && ok;
    return ok ? 0 : -1;
}

/* The take dir is root's and only root writes in it: the owner's git reads it
 * (dirs 0755, files 0444/0644), nobody can plant a symlink there for root to
 * follow while it copies or removes. */
static int mkdir_ro(const char *p)
{
    return mkdir(p, 0755) < 0 && errno != EEXIST ? -1 : 0;
}

/* The sandbox's loose objects and packs, copied into take/objects. */
static int copy_objects(int repofd, const char *take, char *why, size_t n)
{
    int objfd = sbx_wtgit_open_below(repofd, "objects", O_RDONLY | O_DIRECTORY);
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
        sub = sbx_wtgit_open_below(dirfd(d), e->d_name, O_RDONLY | O_DIRECTORY);
        sd = sub >= 0 ? fdopendir(sub) : NULL;
        if (sd == NULL) {
            if (sub >= 0) {
                close(sub);
            }
            continue;
        }
        {
            cleanup_free char *p = xasprintf("%s/%s", take, e->d_name);

            if (mkdir_ro(p) < 0) {
                rc = -1;
            }
        }
        while (rc == 0 && (f = readdir(sd)) != NULL) {
            cleanup_free char *rel = xasprintf("%s/%s", e->d_name, f->d_name);

            if (sbx_git_object_path_ok(rel) && copy_object(objfd, rel, take, &budget) < 0) {
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

static char *read_ours(const char *dir, const char *name)
{
    cleanup_free char *path = xasprintf("%s/%s", dir, name);
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

/* take/: a bare repository of sbx's making with the one ref and the copied objects,
 * its alternate the host's store; the host's git fetches from it. */
static int take_repo(const char *take, const char *host_objects, const char *oid, char *why,
                     size_t n)
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

        if (mkdir_ro(p) < 0) {
            snprintf(why, n, "%s: %s", p, strerror(errno));
            return -1;
        }
    }
    if (sbx_file_write_text(p_head, "ref: refs/heads/take\n", 0644, 0, 0) < 0 ||
        sbx_file_write_text(p_cfg, cfg, 0644, 0, 0) < 0 ||
        sbx_file_write_text(p_ref, val, 0644, 0, 0) < 0 ||
        sbx_file_write_text(p_alt, alt, 0644, 0, 0) < 0) {
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

/* The objects into the host's store, then the ref, compare-and-swap (HEAD: its
 * own value, --no-deref), then the host's index when its HEAD is that ref. */
static int take_back(const struct sbx_gitrun *g, const char *take, const char *target,
                     const char *base, const char *oid, const char *task_id, char *why, size_t n)
{
    static const char *const sym[] = {"symbolic-ref", "-q", "HEAD", NULL};
    cleanup_free char *msg = xasprintf("sbx: task %s", task_id);
    const char *const fetch[] = {
        "fetch", "--no-write-fetch-head", "--no-tags", "--no-recurse-submodules", "-q",
        take,    "refs/heads/take",       NULL};
    const char *const upd[] = {
        "update-ref", "-m", msg, target, oid, base[0] ? base : SBX_WTGIT_ZERO_OID, NULL};
    const char *const upd_head[] = {"update-ref", "--no-deref", "-m", msg, "HEAD", oid, base, NULL};
    static const char *const reset[] = {"reset", "-q", NULL};
    int detached = strcmp(target, "HEAD") == 0;
    int on_head = detached;

    cleanup_free char *global = xasprintf("%s/safe.gitconfig", take);
    struct sbx_gitrun gf = *g;

    /* the take repository is root's: the owner's git reads it, and its upload-pack
     * side checks ownership with its own configuration (the -c ones are dropped) */
    gf.global = global;
    if (sbx_file_write_text(global, "[safe]\n\tdirectory = *\n", 0644, 0, 0) < 0) {
        snprintf(why, n, "%s: %s", global, strerror(errno));
        return -1;
    }
    if (run(&gf, fetch, why, n) < 0 || run(g, detached ? upd_head : upd, why, n) < 0) {
        return -1;
    }
    if (!detached) {
        struct sbx_gitout o;

        sbx_gitrun(g, sym, &o);
        o.out[strcspn(o.out, "\n")] = '\0';
        on_head = o.status == 0 && strcmp(o.out, target) == 0;
        free(o.out);
    }
    return on_head ? run(g, reset, why, n) : 0;
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

/* One take spec (wtgit.h): 1 moved, 0 nothing to do, -1 not taken (noted). */
static int take_one(const char *spec, int rootfd, const char *task_id, sbx_wtgit_note_fn note,
                    void *ud)
{
    cleanup_free char *target = read_ours(spec, "target");
    cleanup_free char *base = read_ours(spec, "base");
    cleanup_free char *objects = read_ours(spec, "objects");
    cleanup_free char *rundir = read_ours(spec, "rundir");
    cleanup_free char *path = read_ours(spec, "path");
    cleanup_free char *label = NULL;
    char take[] = "/tmp/sbx-take.XXXXXX";
    char why[512] = "";
    char oid[65];
    struct stat st;
    int repofd;
    int rc = -1;

    if (target == NULL || target[0] == '\0' || base == NULL || objects == NULL || rundir == NULL ||
        path == NULL) {
        return 0; /* no ref to take (an older task's spec) */
    }
    label = strcmp(path, ".") == 0 ? xstrdup(".git") : xasprintf(".git/%s", path);
    repofd = strcmp(path, ".") == 0 ? dup(rootfd)
                                    : sbx_wtgit_open_below(rootfd, path, O_RDONLY | O_DIRECTORY);
    if (repofd < 0) {
        return 0; /* gone inside: nothing to take */
    }
    if (sandbox_value(repofd, target, oid) < 0 || strcmp(oid, base) == 0 || stat(rundir, &st) < 0) {
        sbx_wtgit_check(repofd, spec, label, target, note, ud);
        close(repofd);
        return 0; /* unchanged, or gone inside: the host's ref stays */
    }
    {
        struct sbx_gitrun g = {.uid = st.st_uid, .gid = st.st_gid, .dir = rundir};

        /* 0711: the owner's git enters it by its (random) name, nobody lists it */
        if (mkdtemp(take) == NULL || chmod(take, 0711) < 0) {
            snprintf(why, sizeof(why), "%s: %s", take, strerror(errno));
        }
        else if (take_repo(take, objects, oid, why, sizeof(why)) == 0) {
            cleanup_free char *objs = xasprintf("%s/objects", take);

            if (copy_objects(repofd, objs, why, sizeof(why)) == 0 &&
                take_back(&g, take, target, base, oid, task_id, why, sizeof(why)) == 0) {
                cleanup_free char *p_base = xasprintf("%s/base", spec);
                cleanup_free char *nb = xasprintf("%s\n", oid);

                sbx_file_write_text(p_base, nb, 0600, 0, 0);
                sbx_info("task %s: took back %s %s: %.12s -> %.12s", task_id, label, target,
                         base[0] ? base : "(none)", oid);
                rc = 1;
            }
        }
        remove_tree(take);
    }
    if (rc != 1) {
        cleanup_free char *m = xasprintf("%s %s not taken back (the sandbox's commit is %s): %s",
                                         label, target, oid, why);

        note(ud, m);
    }
    sbx_wtgit_check(repofd, spec, label, target, note, ud);
    close(repofd);
    return rc;
}

int sbx_wtgit_harvest(const char *worktree, const char *task_dir, const char *task_id,
                      sbx_wtgit_note_fn note, void *ud)
{
    cleanup_free char *top = xasprintf("%s/git", task_dir);
    cleanup_free char *p_lock = xasprintf("%s/git/lock", task_dir);
    cleanup_free char *repo = xasprintf("%s/git/repo", task_dir);
    int lock;
    int rootfd;
    int moved = 0;

    (void)worktree;
    if (access(repo, F_OK) < 0) {
        return 0; /* no repository */
    }
    lock = open(p_lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (lock < 0 || flock(lock, LOCK_EX) < 0) {
        cleanup_free char *m = xasprintf("%s: %s", p_lock, strerror(errno));

        note(ud, m);
        if (lock >= 0) {
            close(lock);
        }
        return -1;
    }
    rootfd = open(repo, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (rootfd >= 0) {
        moved += take_one(top, rootfd, task_id, note, ud) > 0;
        for (int i = 1; i <= SBX_WTGIT_SUBS_MAX; i++) {
            cleanup_free char *spec = xasprintf("%s/sub/%d", top, i);

            if (access(spec, F_OK) < 0) {
                break;
            }
            moved += take_one(spec, rootfd, task_id, note, ud) > 0;
        }
        close(rootfd);
    }
    close(lock);
    return moved;
}
