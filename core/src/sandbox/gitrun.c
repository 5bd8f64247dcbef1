/* gitrun.c - the host's git, run as the worktree's owner (gitrun.h). */
#include "sandbox/gitrun.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "util/cleanup.h"
#include "util/xalloc.h"

static int is_hex(char c)
{
    return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
}

int sbx_git_oid_parse(const char *s, char out[65])
{
    size_t n = 0;

    if (s == NULL) {
        return -1;
    }
    while (n < 64 && is_hex(s[n])) {
        n++;
    }
    if ((n != 40 && n != 64) || (s[n] != '\0' && s[n] != '\n')) {
        return -1;
    }
    memcpy(out, s, n);
    out[n] = '\0';
    return 0;
}

int sbx_git_refname_ok(const char *ref)
{
    size_t n = ref ? strlen(ref) : 0;
    const char *comp = ref;

    if (n == 0 || n > 200 || ref[0] == '/' || ref[n - 1] == '/' || ref[n - 1] == '.' ||
        strstr(ref, "..") != NULL || strstr(ref, "//") != NULL || strstr(ref, "@{") != NULL ||
        strcmp(ref, "@") == 0) {
        return 0;
    }
    for (const char *p = ref;; p++) {
        unsigned char c = (unsigned char)*p;

        if (c == '/' || c == '\0') {
            size_t len = (size_t)(p - comp);

            if (len == 0 || comp[0] == '.' || (len >= 5 && strncmp(p - 5, ".lock", 5) == 0)) {
                return 0;
            }
            if (c == '\0') {
                return 1;
            }
            comp = p + 1;
            continue;
        }
        if (c < 0x21 || c == 0x7f || strchr("~^:?*[\\", (int)c) != NULL) {
            return 0;
        }
    }
}

int sbx_git_object_path_ok(const char *rel)
{
    size_t n = rel ? strlen(rel) : 0;

    if (n == 41 || n == 65) { /* xx/ + 38 or 62 */
        for (size_t i = 0; i < n; i++) {
            if (i == 2 ? rel[i] != '/' : !is_hex(rel[i])) {
                return 0;
            }
        }
        return 1;
    }
    if (strncmp(rel, "pack/pack-", 10) == 0) {
        const char *h = rel + 10;
        size_t k = 0;

        while (is_hex(h[k])) {
            k++;
        }
        return (k == 40 || k == 64) && (strcmp(h + k, ".pack") == 0 || strcmp(h + k, ".idx") == 0);
    }
    return 0;
}

/* The owner's home for HOME (their global git configuration is theirs to read). */
static char *home_of(uid_t uid)
{
    struct passwd pw;
    struct passwd *res = NULL;
    char buf[2048];

    if (getpwuid_r(uid, &pw, buf, sizeof(buf), &res) == 0 && res != NULL && pw.pw_dir != NULL &&
        pw.pw_dir[0] == '/') {
        return xasprintf("HOME=%s", pw.pw_dir);
    }
    return xstrdup("HOME=/nonexistent");
}

static const char *const fixed[] = {
    "git",
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "safe.directory=*",
    "-c",
    "core.pager=cat",
    "-c",
    "transfer.fsckObjects=true",
    "-c",
    "protocol.allow=never",
    "-c",
    "protocol.file.allow=always",
    "-c",
    "submodule.recurse=false",
};

/* git's argv: the fixed options, -C the worktree, then the caller's arguments;
 * the caller frees the array (its strings are borrowed). */
static const char **git_argv(const struct sbx_gitrun *g, const char *const *argv)
{
    size_t nf = sizeof(fixed) / sizeof(fixed[0]);
    size_t na = 0;
    const char **av;

    while (argv[na] != NULL) {
        na++;
    }
    av = xcalloc(nf + na + 3, sizeof(char *));
    memcpy(av, fixed, nf * sizeof(char *));
    av[nf] = "-C";
    av[nf + 1] = g->dir;
    memcpy(av + nf + 2, argv, na * sizeof(char *));
    return av;
}

/* The forked child: stdin /dev/null, stdout the pipe, stderr efd, the owner's
 * ids, then git. Async-signal-safe calls only: the parent may have threads. */
static _Noreturn void exec_git(const struct sbx_gitrun *g, int out, int efd, const char **av,
                               char **env)
{
    int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);

    if (devnull < 0 || dup2(devnull, 0) < 0 || dup2(out, 1) < 0 || dup2(efd, 2) < 0) {
        _exit(127);
    }
    if (g->uid != 0 || g->gid != 0) {
        if (setgroups(0, NULL) < 0 || setgid(g->gid) < 0 || setuid(g->uid) < 0) {
            _exit(126);
        }
    }
    execve("/usr/bin/git", (char *const *)av, env);
    execve("/usr/local/bin/git", (char *const *)av, env);
    _exit(127);
}

/* git's stdout into o->out (NUL-terminated), up to SBX_GITRUN_MAX; what is over
 * the bound is read and dropped, so git never blocks on a full pipe. */
static void read_out(int fd, struct sbx_gitout *o)
{
    size_t cap = 4096;

    o->out = xmalloc(cap);
    for (;;) {
        ssize_t r;

        if (o->len + 1 >= cap && cap < SBX_GITRUN_MAX) {
            cap *= 2;
            o->out = xrealloc(o->out, cap);
        }
        if (o->len + 1 >= cap) {
            char sink[4096];

            r = read(fd, sink, sizeof(sink)); /* over the bound: drained, dropped */
        }
        else {
            r = read(fd, o->out + o->len, cap - o->len - 1);
            if (r > 0) {
                o->len += (size_t)r;
            }
        }
        if (r == 0 || (r < 0 && errno != EINTR)) {
            break;
        }
    }
    o->out[o->len] = '\0';
}

int sbx_gitrun(const struct sbx_gitrun *g, const char *const *argv, struct sbx_gitout *o)
{
    const char **av;
    char *home = home_of(g->uid);
    char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
                   home,
                   "LANG=C",
                   "LC_ALL=C",
                   "GIT_TERMINAL_PROMPT=0",
                   "GIT_CONFIG_NOSYSTEM=1",
                   NULL,
                   NULL};
    int outp[2];
    int efd;
    pid_t pid;
    int wst = 0;

    cleanup_free char *global = g->global ? xasprintf("GIT_CONFIG_GLOBAL=%s", g->global) : NULL;

    env[6] = global;
    memset(o, 0, sizeof(*o));
    o->status = -1;
    av = git_argv(g, argv);
    efd = memfd_create("sbx-git-err", MFD_CLOEXEC);
    if (efd < 0 || pipe2(outp, O_CLOEXEC) < 0) {
        snprintf(o->err, sizeof(o->err), "git: %s", strerror(errno));
        if (efd >= 0) {
            close(efd);
        }
        free(av);
        free(home);
        return -1;
    }
    pid = fork();
    if (pid == 0) {
        exec_git(g, outp[1], efd, av, env);
    }
    close(outp[1]);
    free(av);
    free(home);
    if (pid < 0) {
        snprintf(o->err, sizeof(o->err), "git: fork: %s", strerror(errno));
        close(outp[0]);
        close(efd);
        return -1;
    }
    read_out(outp[0], o);
    close(outp[0]);
    while (waitpid(pid, &wst, 0) < 0 && errno == EINTR) {
    }
    {
        ssize_t r = pread(efd, o->err, sizeof(o->err) - 1, 0);

        o->err[r > 0 ? r : 0] = '\0';
        o->err[strcspn(o->err, "\n")] = '\0';
    }
    close(efd);
    o->status = WIFEXITED(wst) ? WEXITSTATUS(wst) : 128 + WTERMSIG(wst);
    if (o->status == 127 && o->err[0] == '\0') {
        snprintf(o->err, sizeof(o->err), "git: not found in /usr/bin or /usr/local/bin");
    }
    return o->status;
}
