/* wtgit_alt.c - a host repository that borrows objects from other stores
 * (objects/info/alternates: `git clone --shared` or `--reference`): each store
 * of the chain is mounted read-only inside and named in the sandbox's own
 * alternates, and an empty file of sbx's is mounted over each store's own
 * info/alternates there (their host paths mean nothing inside). A path that
 * cannot be mounted safely refuses the task (wtgit_int.h). */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sandbox/wtgit_int.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

#define ALT_MAX 8
#define ALT_DEPTH 5
#define ALT_FILE_MAX (64 * 1024)
#define INSIDE_ALT "/run/sbx-git/alt"

struct chain {
    char *dir[ALT_MAX];
    size_t n;
    uid_t uid;
    gid_t gid;
};

/* The owner can open dir (so mounting it gives the sandbox nothing the owner
 * could not read): checked in a child that has dropped to uid:gid. */
static int owner_can_open(const char *dir, uid_t uid, gid_t gid)
{
    pid_t pid;
    int st = 0;

    if (uid == 0) {
        return 1;
    }
    pid = fork();
    if (pid == 0) {
        if (setgroups(0, NULL) < 0 || setgid(gid) < 0 || setuid(uid) < 0) {
            _exit(2);
        }
        _exit(open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC) >= 0 ? 0 : 1);
    }
    if (pid < 0) {
        return 0;
    }
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static int collect(struct chain *c, const char *objdir, int depth, sbx_error_t **err)
{
    cleanup_free char *file = xasprintf("%s/info/alternates", objdir);
    char *text;
    char *save = NULL;
    int fd = open(file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    struct stat st;
    ssize_t r;
    int lineno = 0;
    int rc = 0;

    if (fd < 0) {
        return errno == ENOENT
                   ? 0
                   : sbx_error_set(err, SBX_E_USAGE, "%s: %s (refused)", file, strerror(errno));
    }
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_size > ALT_FILE_MAX) {
        close(fd);
        return sbx_error_set(err, SBX_E_USAGE, "%s: not a regular file of at most 64 KiB (refused)",
                             file);
    }
    text = xmalloc((size_t)st.st_size + 1);
    r = read(fd, text, (size_t)st.st_size);
    close(fd);
    text[r > 0 ? r : 0] = '\0';
    for (char *line = strtok_r(text, "\n", &save); rc == 0 && line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        cleanup_free char *path = NULL;
        char real[PATH_MAX];
        struct stat ds;
        int dup = 0;

        lineno++;
        line[strcspn(line, "\r")] = '\0';
        if (line[0] == '\0' || line[0] == '#') {
            continue;
        }
        path = line[0] == '/' ? xstrdup(line) : xasprintf("%s/%s", objdir, line);
        {
            const char *bad = NULL;

            if (line[0] == '"') {
                bad = "a quoted path";
            }
            else if (realpath(path, real) == NULL) {
                bad = strerror(errno);
            }
            else if (stat(real, &ds) < 0 || !S_ISDIR(ds.st_mode)) {
                bad = "not a directory";
            }
            else if (!owner_can_open(real, c->uid, c->gid)) {
                bad = "the worktree's owner cannot open it";
            }
            if (bad != NULL) {
                rc = sbx_error_set(err, SBX_E_USAGE,
                                   "%s line %d: %.200s: %s (an alternate object store the "
                                   "sandbox cannot be given: refused)",
                                   file, lineno, line, bad);
                break;
            }
        }
        for (size_t i = 0; i < c->n; i++) {
            dup |= strcmp(c->dir[i], real) == 0;
        }
        if (dup) {
            continue;
        }
        if (c->n == ALT_MAX || depth >= ALT_DEPTH) {
            rc = sbx_error_set(err, SBX_E_USAGE,
                               "%s line %d: more than %d alternate object stores or a chain "
                               "deeper than %d (refused)",
                               file, lineno, ALT_MAX, ALT_DEPTH);
            break;
        }
        c->dir[c->n++] = xstrdup(real);
        rc = collect(c, real, depth + 1, err);
    }
    free(text);
    return rc;
}

static int has_alternates(const char *objdir)
{
    cleanup_free char *p = xasprintf("%s/info/alternates", objdir);
    struct stat st;

    return lstat(p, &st) == 0 && S_ISREG(st.st_mode);
}

int sbx_wtgit_alternates(const char *objects, const char *empty, uid_t uid, gid_t gid,
                         struct sbx_mount **v, size_t *n, char **alt, sbx_error_t **err)
{
    struct chain c = {.n = 0, .uid = uid, .gid = gid};
    char *text = xstrdup(SBX_WTGIT_INSIDE_OBJECTS "\n");
    int rc = collect(&c, objects, 0, err);

    *v = NULL;
    *n = 0;
    if (rc == 0 && has_alternates(objects)) {
        sbx_wtgit_add_mount(v, n, xstrdup(empty), SBX_WTGIT_INSIDE_OBJECTS "/info/alternates", 1);
    }
    for (size_t i = 0; i < c.n; i++) {
        if (rc == 0) {
            cleanup_free char *in = xasprintf(INSIDE_ALT "/%zu", i);
            char *more = xasprintf("%s%s\n", text, in);

            free(text);
            text = more;
            sbx_wtgit_add_mount(v, n, xstrdup(c.dir[i]), in, 1);
            if (has_alternates(c.dir[i])) {
                cleanup_free char *over = xasprintf("%s/info/alternates", in);

                sbx_wtgit_add_mount(v, n, xstrdup(empty), over, 1);
            }
        }
        free(c.dir[i]);
    }
    if (rc < 0) {
        sbx_wtgit_mounts_free(*v, *n);
        *v = NULL;
        *n = 0;
        free(text);
        return -1;
    }
    *alt = text;
    return 0;
}
