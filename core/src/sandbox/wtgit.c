/* wtgit.c - the sandbox's own git directory, and what the host takes back from
 * it (wtgit.h; docs/tasks.md, "Worktrees"). */
#include "sandbox/wtgit.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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
#include "sandbox/wtscan.h"
#include "sandbox/wtgit_int.h"
#include "util/cleanup.h"
#include "util/fileio.h"
#include "util/log.h"
#include "util/xalloc.h"

/* Copies a file the host owns (the index, shallow) into the sandbox's dir. */
static int copy_plain(const char *from, const char *to)
{
    int in = open(from, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    int out;
    int ok;

    if (in < 0) {
        return errno == ENOENT ? 0 : -1;
    }
    out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (out < 0) {
        close(in);
        return -1;
    }
    ok = sbx_fd_copy(in, out, LLONG_MAX) >= 0;
    close(in);
    ok = close(out) == 0 && ok;
    return ok ? 0 : -1;
}

/* One line of output, trimmed, or NULL when git failed. */
static char *git_line(const struct sbx_gitrun *g, const char *const *argv, char *why, size_t n)
{
    struct sbx_gitout o;
    char *s = NULL;

    if (sbx_gitrun(g, argv, &o) == 0) {
        o.out[strcspn(o.out, "\n")] = '\0';
        s = xstrdup(o.out);
    }
    else if (why != NULL) {
        snprintf(why, n, "git %s: %s", argv[0], o.err[0] ? o.err : "failed");
    }
    free(o.out);
    return s;
}

struct repo_info {
    char *top;
    char *gitdir;
    char *common;
    char *format;
    char *head_ref; /* refs/heads/X, or NULL (detached) */
    char *head;     /* its value, or NULL (unborn) */
};

static void info_free(struct repo_info *r)
{
    free(r->top);
    free(r->gitdir);
    free(r->common);
    free(r->format);
    free(r->head_ref);
    free(r->head);
}

static int repo_read(const struct sbx_gitrun *g, struct repo_info *r, char *why, size_t n)
{
    static const char *const rp[] = {"rev-parse", "--path-format=absolute", "--show-toplevel",
                                     "--git-dir", "--git-common-dir",       "--show-object-format",
                                     NULL};
    static const char *const sym[] = {"symbolic-ref", "-q", "HEAD", NULL};
    static const char *const head[] = {"rev-parse", "-q", "--verify", "HEAD^{commit}", NULL};
    struct sbx_gitout o;
    char *line[4] = {0};
    char *save = NULL;

    if (sbx_gitrun(g, rp, &o) != 0) {
        snprintf(why, n, "git rev-parse: %s", o.err[0] ? o.err : "failed");
        free(o.out);
        return -1;
    }
    line[0] = strtok_r(o.out, "\n", &save);
    for (int i = 1; i < 4 && line[i - 1] != NULL; i++) {
        line[i] = strtok_r(NULL, "\n", &save);
    }
    if (line[3] == NULL) {
        snprintf(why, n, "git rev-parse: short output");
        free(o.out);
        return -1;
    }
    r->top = xstrdup(line[0]);
    r->gitdir = xstrdup(line[1]);
    r->common = xstrdup(line[2]);
    r->format = xstrdup(line[3]);
    free(o.out);
    r->head_ref = git_line(g, sym, NULL, 0);
    if (r->head_ref != NULL &&
        (strncmp(r->head_ref, "refs/heads/", 11) != 0 || !sbx_git_refname_ok(r->head_ref + 11))) {
        free(r->head_ref);
        r->head_ref = NULL;
    }
    r->head = git_line(g, head, NULL, 0);
    return 0;
}

/* The sandbox's git dir: config by sbx, HEAD, the refs, the index, objects with an
 * alternate to the host's store. */
static int repo_make(const struct sbx_gitrun *g, const struct repo_info *r, const char *dir,
                     const char *alt, const char *extra, char *why, size_t n)
{
    static const char *const refs[] = {"for-each-ref", "--format=%(objectname) %(refname)", NULL};
    static const char *const uname[] = {"config", "user.name", NULL};
    static const char *const umail[] = {"config", "user.email", NULL};
    static const char *const sub[] = {"refs",         "refs/heads",   "refs/tags", "objects",
                                      "objects/info", "objects/pack", "info",      NULL};
    cleanup_free char *name = git_line(g, uname, NULL, 0);
    cleanup_free char *mail = git_line(g, umail, NULL, 0);
    cleanup_free char *config = NULL;
    cleanup_free char *head = NULL;
    struct sbx_gitout o;
    int sha256 = strcmp(r->format, "sha256") == 0;
    int rc = -1;

    for (size_t i = 0; sub[i] != NULL; i++) {
        cleanup_free char *p = xasprintf("%s/%s", dir, sub[i]);

        if (mkdir(p, 0755) < 0 && errno != EEXIST) {
            snprintf(why, n, "%s: %s", p, strerror(errno));
            return -1;
        }
    }
    config =
        xasprintf("[core]\n\trepositoryformatversion = %d\n\tfilemode = true\n"
                  "\tbare = false\n\tlogallrefupdates = true\n%s%s[safe]\n\tdirectory = *\n"
                  "%s%s%s%s%s%s",
                  sha256 ? 1 : 0, extra, sha256 ? "[extensions]\n\tobjectformat = sha256\n" : "",
                  name || mail ? "[user]\n" : "", name ? "\tname = " : "", name ? name : "",
                  name ? "\n" : "", mail ? "\temail = " : "", mail ? mail : "");
    if (mail != NULL) {
        char *more = xasprintf("%s\n", config);

        free(config);
        config = more;
    }
    head = r->head_ref ? xasprintf("ref: %s\n", r->head_ref)
                       : xasprintf("%s\n", r->head ? r->head : SBX_WTGIT_ZERO_OID);
    {
        cleanup_free char *p_cfg = xasprintf("%s/config", dir);
        cleanup_free char *p_head = xasprintf("%s/HEAD", dir);
        cleanup_free char *p_alt = xasprintf("%s/objects/info/alternates", dir);
        cleanup_free char *p_desc = xasprintf("%s/description", dir);

        if (sbx_file_write_text(p_cfg, config, 0644, 0, 0) < 0 ||
            sbx_file_write_text(p_head, head, 0644, 0, 0) < 0 ||
            sbx_file_write_text(p_alt, alt, 0644, 0, 0) < 0 ||
            sbx_file_write_text(p_desc, "the sandbox's git dir (sbx)\n", 0644, 0, 0) < 0) {
            snprintf(why, n, "%s: %s", dir, strerror(errno));
            return -1;
        }
    }
    if (sbx_gitrun(g, refs, &o) != 0) {
        snprintf(why, n, "git for-each-ref: %s", o.err[0] ? o.err : "failed");
        free(o.out);
        return -1;
    }
    {
        cleanup_free char *p = xasprintf("%s/packed-refs", dir);
        cleanup_free char *text = xasprintf("# pack-refs with: peeled \n%s", o.out);

        rc = sbx_file_write_text(p, text, 0644, 0, 0);
    }
    free(o.out);
    {
        cleanup_free char *idx_from = xasprintf("%s/index", r->gitdir);
        cleanup_free char *idx_to = xasprintf("%s/index", dir);
        cleanup_free char *sh_from = xasprintf("%s/shallow", r->common);
        cleanup_free char *sh_to = xasprintf("%s/shallow", dir);

        if (rc < 0 || copy_plain(idx_from, idx_to) < 0 || copy_plain(sh_from, sh_to) < 0) {
            snprintf(why, n, "%s: %s", dir, strerror(errno));
            return -1;
        }
    }
    return 0;
}

/* A take spec (wtgit.h): the ref the task moves and where, and copies of the
 * files sbx wrote in the sandbox's git dir (repo_dir) to notice a change. */
static int spec_write(const char *spec, const struct repo_info *r, const char *objects,
                      const char *rundir, const char *path, const char *repo_dir)
{
    static const char *const names[] = {"target", "base", "objects", "rundir", "path", NULL};
    const char *vals[] = {r->head_ref ? r->head_ref : (r->head ? "HEAD" : ""),
                          r->head ? r->head : "", objects, rundir, path};

    if (sbx_mkdirs(spec, 0700, NULL) < 0) {
        return -1;
    }
    for (size_t i = 0; names[i] != NULL; i++) {
        cleanup_free char *p = xasprintf("%s/%s", spec, names[i]);
        cleanup_free char *text = xasprintf("%s\n", vals[i]);

        if (sbx_file_write_text(p, text, 0600, 0, 0) < 0) {
            return -1;
        }
    }
    for (size_t i = 0; sbx_wtgit_own_files[i] != NULL; i++) {
        cleanup_free char *from = xasprintf("%s/%s", repo_dir, sbx_wtgit_own_files[i]);
        cleanup_free char *name = xstrdup(sbx_wtgit_own_files[i]);
        cleanup_free char *to = NULL;

        for (char *c = name; *c; c++) {
            *c = *c == '/' ? '-' : *c;
        }
        to = xasprintf("%s/orig-%s", spec, name);
        if (copy_plain(from, to) < 0) {
            return -1;
        }
    }
    return 0;
}

/* The host's submodule.NAME.url and .active, so that the submodules count as
 * initialised inside (values quoted; a name with a quote is left out). */
static void submodule_config(const struct sbx_gitrun *g, const char *repo)
{
    static const char *const get[] = {"config", "--get-regexp", "^submodule\\..*\\.(url|active)$",
                                      NULL};
    cleanup_free char *path = xasprintf("%s/config", repo);
    struct sbx_gitout o;
    char *save = NULL;
    FILE *f;

    if (sbx_gitrun(g, get, &o) != 0 || (f = fopen(path, "ae")) == NULL) {
        free(o.out);
        return;
    }
    for (char *line = strtok_r(o.out, "\n", &save); line != NULL;
         line = strtok_r(NULL, "\n", &save)) {
        char *val = strchr(line, ' ');
        char *dot;

        if (val == NULL) {
            continue;
        }
        *val++ = '\0';
        dot = strrchr(line, '.');
        if (dot == NULL || dot <= line + 10 || strpbrk(line, "\"\\") != NULL) {
            continue;
        }
        *dot = '\0';
        fprintf(f, "[submodule \"%s\"]\n\t%s = \"", line + 10, dot + 1);
        for (const char *c = val; *c; c++) {
            if (*c == '"' || *c == '\\') {
                fputc('\\', f);
            }
            fputc(*c, f);
        }
        fputs("\"\n", f);
    }
    fclose(f);
    free(o.out);
}

struct mods {
    const char *worktree;
    const char *inside; /* the sandbox's git dir inside */
    const char *top;    /* <task dir>/git */
    struct sbx_mount **mounts;
    size_t *n;
};

static int modules_make(const struct mods *ms, const char *host_modules, const char *dst,
                        const char *rel, int depth, uid_t uid, gid_t gid, int *count)
{
    cleanup_free char *src = xasprintf("%s%s%s", host_modules, rel[0] ? "/" : "", rel);
    DIR *d = opendir(src);
    struct dirent *e;

    if (d == NULL) {
        return 0;
    }
    while ((e = readdir(d)) != NULL && *count < SBX_WTGIT_SUBS_MAX) {
        cleanup_free char *r2 = xasprintf("%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
        cleanup_free char *m = xasprintf("%s/%s", host_modules, r2);
        cleanup_free char *head = xasprintf("%s/HEAD", m);
        cleanup_free char *sub = xasprintf("%s/modules", m);
        struct stat st;

        if (e->d_name[0] == '.' || lstat(m, &st) < 0 || !S_ISDIR(st.st_mode)) {
            continue;
        }
        if (lstat(head, &st) == 0 && S_ISREG(st.st_mode)) {
            struct sbx_gitrun g = {.uid = uid, .gid = gid, .dir = m};
            cleanup_free char *to = xasprintf("%s/modules/%s", dst, r2);
            cleanup_free char *alt = xasprintf("%s/%s/objects\n", SBX_WTGIT_INSIDE_MODULES, r2);
            cleanup_free char *extra = NULL;
            size_t wl = strlen(ms->worktree);
            struct repo_info r = {0};
            char why[256];

            /* (changed) its working tree inside, absolute: the host's core.worktree is
             * relative to a git dir that is elsewhere inside (a linked worktree's) */
            if (repo_read(&g, &r, why, sizeof(why)) == 0 && strncmp(r.top, ms->worktree, wl) == 0 &&
                r.top[wl] == '/' && strpbrk(r.top, "\"\\\n") == NULL) {
                extra = xasprintf("\tworktree = \"/workspace%s\"\n", r.top + wl);
                free(r.gitdir);
                r.gitdir = xstrdup(m);
                if (sbx_mkdirs(to, 0755, NULL) == 0 &&
                    repo_make(&g, &r, to, alt, extra, why, sizeof(why)) == 0) {
                    cleanup_free char *gf = xasprintf("%s/.git", r.top);
                    cleanup_free char *spec = xasprintf("%s/sub/%d", ms->top, *count + 1);
                    cleanup_free char *objs = xasprintf("%s/objects", m);
                    cleanup_free char *path = xasprintf("modules/%s", r2);
                    struct stat gst;

                    (*count)++;
                    /* (added) its take spec: its HEAD's branch, or its detached HEAD */
                    if (spec_write(spec, &r, objs, m, path, to) < 0) {
                        sbx_warn("worktree %s: submodule %s: %s: %s (nothing is taken back)",
                                 ms->worktree, r2, spec, strerror(errno));
                    }
                    /* its .git file in the working tree, read-only inside: it says
                     * where the host's git finds the submodule's config */
                    if (strncmp(r.top, ms->worktree, wl) == 0 && r.top[wl] == '/' &&
                        lstat(gf, &gst) == 0 && S_ISREG(gst.st_mode)) {
                        cleanup_free char *in = xasprintf("/workspace%s/.git", r.top + wl);
                        char *copy = xasprintf("%s/gitfile-%d", ms->top, *count);
                        cleanup_free char *text =
                            xasprintf("gitdir: %s/modules/%s\n", ms->inside, r2);

                        /* sbx's own copy over it (the sandbox may write that copy;
                         * the host never reads it) */
                        if (sbx_file_write_text(copy, text, 0644, 0, 0) == 0) {
                            sbx_wtgit_add_mount(ms->mounts, ms->n, copy, in, 0);
                        }
                        else {
                            free(copy);
                        }
                    }
                }
            }
            info_free(&r);
            if (depth < 4 && lstat(sub, &st) == 0 && S_ISDIR(st.st_mode)) {
                cleanup_free char *srel = xasprintf("%s/modules", r2);

                modules_make(ms, host_modules, dst, srel, depth + 1, uid, gid, count);
            }
            continue;
        }
        if (depth < 4) {
            modules_make(ms, host_modules, dst, r2, depth + 1, uid, gid, count); /* a/b names */
        }
    }
    closedir(d);
    return 0;
}

void sbx_wtgit_add_mount(struct sbx_mount **v, size_t *n, char *host, const char *path, int ro)
{
    *v = xrealloc(*v, (*n + 1) * sizeof(**v));
    (*v)[*n].host = host;
    (*v)[*n].path = xstrdup(path);
    (*v)[*n].read_only = ro;
    (*n)++;
}

int sbx_wtgit_needs_cold(const char *worktree, const char *const *protect)
{
    cleanup_free char *dotgit = xasprintf("%s/.git", worktree);
    struct sbx_mount *v = NULL;
    size_t n = 0;
    struct stat st;

    if (lstat(dotgit, &st) == 0) {
        return 1;
    }
    sbx_protect_mounts(worktree, protect, &v, &n);
    sbx_wtgit_mounts_free(v, n);
    return n > 0;
}

void sbx_wtgit_mounts_free(struct sbx_mount *mounts, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free((char *)mounts[i].host);
        free((char *)mounts[i].path);
    }
    free(mounts);
}

/* The sandbox's git dir being made for a worktree (sbx_wtgit_prepare). */
struct prep {
    const struct sbx_gitrun *g; /* the worktree's owner, in the worktree */
    const char *worktree;
    const char *top;     /* <task dir>/git */
    const char *repo;    /* <task dir>/git/repo: the sandbox's git dir */
    const char *objects; /* the host's object store */
    const char *p_file;  /* <task dir>/git/gitfile: the .git file inside, for a .git file */
    int dotgit_dir;      /* the worktree's .git is a directory (else a file) */
};

/* Makes the sandbox's git dir from the host's (r): its alternates are the host's
 * objects and, chained, the host's own alternates (their mounts in *av, *an); then
 * its take spec and, for a .git file, the gitfile inside. 1 made; 0 not, why says
 * why (nothing held); -1 with err. */
static int repo_prepare(const struct prep *p, const struct repo_info *r, struct sbx_mount **av,
                        size_t *an, char *why, size_t why_size, sbx_error_t **err)
{
    cleanup_free char *empty = xasprintf("%s/empty", p->top);
    cleanup_free char *alt = NULL;
    int made;

    /* (added) the host's own alternates, chained, read-only inside */
    if (sbx_file_write_text(empty, "", 0644, 0, 0) < 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", empty, strerror(errno));
    }
    if (sbx_wtgit_alternates(p->objects, empty, p->g->uid, p->g->gid, av, an, &alt, err) < 0) {
        return -1;
    }
    made = repo_make(p->g, r, p->repo, alt, "", why, why_size) == 0;
    if (made) {
        submodule_config(p->g, p->repo);
        if (spec_write(p->top, r, p->objects, p->worktree, ".", p->repo) < 0 ||
            (!p->dotgit_dir && sbx_file_write_text(p->p_file, "gitdir: " SBX_WTGIT_INSIDE_REPO "\n",
                                                   0644, 0, 0) < 0)) {
            snprintf(why, why_size, "%s: %s", p->top, strerror(errno));
            made = 0;
        }
    }
    if (!made) {
        sbx_wtgit_mounts_free(*av, *an);
    }
    return made;
}

/* The sandbox's .git from the git dir made: the git dir (under a .git file: at
 * SBX_WTGIT_INSIDE_REPO, the gitfile over the .git), the host's objects and its
 * alternates (av: their strings move into *mounts) read-only, and the submodules'. */
static void repo_mounts(const struct prep *p, const struct repo_info *r, struct sbx_mount *av,
                        size_t an, struct sbx_mount **mounts, size_t *n)
{
    cleanup_free char *hm = xasprintf("%s/modules", r->gitdir);
    int count = 0;
    struct mods ms = {p->worktree, p->dotgit_dir ? "/workspace/.git" : SBX_WTGIT_INSIDE_REPO,
                      p->top, mounts, n};
    struct stat mst;

    if (p->dotgit_dir) {
        sbx_wtgit_add_mount(mounts, n, xstrdup(p->repo), "/workspace/.git", 0);
    }
    else {
        sbx_wtgit_add_mount(mounts, n, xstrdup(p->repo), SBX_WTGIT_INSIDE_REPO, 0);
        /* never read by the host */
        sbx_wtgit_add_mount(mounts, n, xstrdup(p->p_file), "/workspace/.git", 0);
    }
    sbx_wtgit_add_mount(mounts, n, xstrdup(p->objects), SBX_WTGIT_INSIDE_OBJECTS, 1);
    for (size_t i = 0; i < an; i++) {
        sbx_wtgit_add_mount(mounts, n, (char *)av[i].host, av[i].path, 1);
        free((char *)av[i].path);
    }
    free(av);
    /* a linked worktree's submodules are in its own git dir's modules/ */
    if (stat(hm, &mst) < 0) {
        free(hm);
        hm = xasprintf("%s/modules", r->common);
    }
    modules_make(&ms, hm, p->repo, "", 0, p->g->uid, p->g->gid, &count);
    if (count > 0) {
        sbx_wtgit_add_mount(mounts, n, xstrdup(hm), SBX_WTGIT_INSIDE_MODULES, 1);
    }
}

int sbx_wtgit_prepare(const char *worktree, const char *task_dir, struct sbx_mount **mounts,
                      size_t *n, sbx_error_t **err)
{
    cleanup_free char *dotgit = xasprintf("%s/.git", worktree);
    cleanup_free char *top = xasprintf("%s/git", task_dir);
    cleanup_free char *repo = xasprintf("%s/git/repo", task_dir);
    struct repo_info r = {0};
    struct stat wst;
    struct stat gst;
    struct sbx_gitrun g;
    char why[512] = "";

    *mounts = NULL;
    *n = 0;
    if (lstat(dotgit, &gst) < 0) {
        return 0; /* not a repository's top: the scan after each command watches it */
    }
    if (!S_ISDIR(gst.st_mode) && !S_ISREG(gst.st_mode)) {
        return sbx_error_set(err, SBX_E_USAGE,
                             "worktree %s: .git is neither a directory nor a file (a symlink?): "
                             "refused",
                             worktree);
    }
    if (stat(worktree, &wst) < 0) {
        return sbx_error_set(err, SBX_E_USAGE, "worktree %s: %s", worktree, strerror(errno));
    }
    g = (struct sbx_gitrun){.uid = wst.st_uid, .gid = wst.st_gid, .dir = worktree};
    if (mkdir(top, 0700) < 0 && errno != EEXIST) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", top, strerror(errno));
    }
    if (repo_read(&g, &r, why, sizeof(why)) == 0 && strcmp(r.top, worktree) != 0) {
        snprintf(why, sizeof(why), "its repository's top is %s", r.top);
    }
    else if (why[0] == '\0' && mkdir(repo, 0755) < 0) {
        snprintf(why, sizeof(why), "%s: %s", repo, strerror(errno));
    }
    else if (why[0] == '\0') {
        cleanup_free char *objects = xasprintf("%s/objects", r.common);
        cleanup_free char *p_file = xasprintf("%s/gitfile", top);
        struct prep p = {&g, worktree, top, repo, objects, p_file, S_ISDIR(gst.st_mode)};
        struct sbx_mount *av = NULL;
        size_t an = 0;
        int made = repo_prepare(&p, &r, &av, &an, why, sizeof(why), err);

        if (made < 0) {
            info_free(&r);
            return -1;
        }
        if (made) {
            repo_mounts(&p, &r, av, an, mounts, n);
            sbx_debug("worktree %s: the sandbox's git dir is %s (%s at %s)", worktree, repo,
                      r.head_ref ? r.head_ref : "detached HEAD", r.head ? r.head : "(none)");
            info_free(&r);
            return 0;
        }
    }
    info_free(&r);
    /* the host's git cannot read it: the sandbox gets its .git read-only */
    sbx_warn("worktree %s: its .git is read-only inside and nothing is taken back: %s", worktree,
             why);
    sbx_wtgit_add_mount(mounts, n, xstrdup(dotgit), "/workspace/.git", 1);
    return 0;
}
