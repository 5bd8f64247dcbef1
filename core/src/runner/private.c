/* private.c - a private one-box runner on a thread of this process (private.h). */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "runner/adopt.h"
#include "runner/private.h"
#include "runner/runner.h"
#include "sandbox/owner.h"
#include "util/log.h"
#include "util/xalloc.h"

struct sbx_runner_private {
    struct sbx_runner *r;
    pthread_t th;
    int th_on;
    char dir[256];
};

static void strv_free(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

static void set_str(char **field, const char *value)
{
    free(*field);
    *field = value != NULL ? xstrdup(value) : NULL;
}

/* The private runner's settings in cfg (private.h). */
static void rewrite(struct sbx_config *cfg, const char *dir,
                    const struct sbx_runner_private_opts *o)
{
    char buf[300];

    snprintf(buf, sizeof(buf), "unix:%s/runner.sock", dir);
    set_str(&cfg->runner.listen, buf);
    snprintf(buf, sizeof(buf), "%s/runner.db", dir);
    set_str(&cfg->runner.state, buf);
    set_str(&cfg->runner.database, NULL);
    set_str(&cfg->runner.alert_webhook, NULL);
    set_str(&cfg->runner.alert_command, NULL);
    set_str(&cfg->runner.scale_up_command, NULL);
    set_str(&cfg->box.id, NULL);
    strv_free(cfg->box.pools);
    cfg->box.pools = xcalloc(3, sizeof(char *));
    if (o != NULL && o->pool != NULL) { /* (added) one pool, the whole box */
        cfg->box.pools[0] = xstrdup(o->pool);
    }
    else {
        cfg->box.pools[0] = xstrdup("ci");
        cfg->box.pools[1] = xstrdup("agent");
    }
    if (o != NULL && !o->keep_warm) {
        for (size_t i = 0; i < cfg->n_pools; i++) {
            cfg->pools[i].warm = 0;
        }
    }
    if (o != NULL && o->n_worktree_roots > 0) {
        for (size_t i = 0; i < cfg->runner.n_worktree_roots; i++) {
            free(cfg->runner.worktree_roots[i]);
        }
        free(cfg->runner.worktree_roots);
        free(cfg->runner.worktree_roots_where);
        cfg->runner.worktree_roots_where = NULL;
        cfg->runner.worktree_roots = xcalloc(o->n_worktree_roots + 1, sizeof(char *));
        for (size_t i = 0; i < o->n_worktree_roots; i++) {
            cfg->runner.worktree_roots[i] = xstrdup(o->worktree_roots[i]);
        }
        cfg->runner.n_worktree_roots = o->n_worktree_roots;
    }
}

/* Removes the files the runner leaves in its directory (the store and its
 * journal; the socket is unlinked by the runner), then the directory. */
/* Unlinks every entry of the directory open at d (which it closes), warning
 * about each it cannot remove when shown names the directory (NULL: quiet,
 * another sweep may be at it). 0, or -1 when d cannot be read. */
static int empty_dir(int d, const char *shown)
{
    DIR *dd = fdopendir(d);
    struct dirent *e;

    if (dd == NULL) {
        close(d);
        return -1;
    }
    while ((e = readdir(dd)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        if (unlinkat(dirfd(dd), e->d_name, 0) < 0 && shown != NULL) {
            sbx_warn("runner (private): cannot remove %s/%s: %s", shown, e->d_name,
                     strerror(errno));
        }
    }
    closedir(dd);
    return 0;
}

static void remove_dir(const char *dir)
{
    int d = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    if (d < 0 || empty_dir(d, dir) < 0) {
        return;
    }
    if (rmdir(dir) < 0) {
        sbx_warn("runner (private): cannot remove %s: %s", dir, strerror(errno));
    }
}

static void *loop_main(void *arg)
{
    struct sbx_runner_private *p = arg;
    sbx_error_t *err = NULL;

    if (sbx_runner_run(p->r, &err) < 0) {
        sbx_error_log("runner (private): %s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    return NULL;
}

/* (added, issue 31) The directory DIR/NAME of a private runner whose process is
 * provably gone (killed: it never removed it), removed. Only a real directory of
 * this user, mode 0700, whose `owner` file (a regular file, read without
 * following a link) names a process that is gone (sandbox/owner.h: an owner
 * that does not parse is alive); each file in it is unlinked, nothing followed. */
static void sweep_one(int base, const char *name)
{
    struct stat st;
    char owner[200];
    ssize_t n;
    int d = -1;
    int fd = -1;

    if (fstatat(base, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid() || (st.st_mode & 07777) != 0700 ||
        (d = openat(base, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC)) < 0) {
        goto out;
    }
    fd = openat(d, "owner", O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) ||
        (n = read(fd, owner, sizeof(owner) - 1)) <= 0) {
        goto out; /* no owner yet (a start in progress), or not ours to judge */
    }
    owner[n] = '\0';
    owner[strcspn(owner, "\n")] = '\0';
    if (sbx_owner_alive(owner)) {
        goto out;
    }
    n = empty_dir(d, NULL); /* another sweep may be at it: quiet */
    d = -1;                 /* closed by empty_dir */
    if (n == 0 && unlinkat(base, name, AT_REMOVEDIR) == 0) {
        sbx_debug("runner (private): removed a killed run's directory %s", name);
    }
out:
    if (fd >= 0) {
        close(fd);
    }
    if (d >= 0) {
        close(d);
    }
}

/* (added, issue 31) Every gone private runner's directory in base. */
static void sweep_dead(const char *base)
{
    int b = open(base, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *d = b >= 0 ? fdopendir(b) : NULL;
    struct dirent *e;

    if (d == NULL) {
        if (b >= 0) {
            close(b);
        }
        return;
    }
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "sbx-runner-", 11) == 0 && strlen(e->d_name) == 17) {
            sweep_one(dirfd(d), e->d_name);
        }
    }
    closedir(d);
}

/* (added, issue 31) DIR/owner: this process (sandbox/owner.h), for sweep_dead
 * of a later run when this one is killed. */
static int write_owner(const char *dir, sbx_error_t **err)
{
    char path[300];
    char owner[200];
    int fd;
    size_t len;

    if (sbx_owner_self(owner, sizeof(owner)) < 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "runner (private): cannot name this process");
    }
    len = strlen(owner);
    snprintf(path, sizeof(path), "%s/owner", dir);
    fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0 || write(fd, owner, len) != (ssize_t)len) {
        int e = errno;

        if (fd >= 0) {
            close(fd);
        }
        return sbx_error_set(err, SBX_E_GENERIC, "runner (private): %s: %s", path, strerror(e));
    }
    close(fd);
    return 0;
}

/* A directory of its own for the socket (at most 108 bytes of path): under
 * $XDG_RUNTIME_DIR when set and short enough, else under $TMPDIR, else
 * (added, issue 31) /dev/shm, else /tmp: a memory filesystem before a disk, so
 * its store's syncs (every run of `sbx run` makes one) cost no disk flush.
 * (added, issue 31) Killed runs' directories there go first (sweep_dead).
 * (added, the keeper) GIVEN: that directory instead (made 0700). */
static int make_dir(char *dir, size_t len, const char *given, sbx_error_t **err)
{
    if (given != NULL) {
        if (strlen(given) > 95 || given[0] != '/') {
            return sbx_error_set(err, SBX_E_GENERIC,
                                 "runner (private): directory '%s': not an absolute path of at "
                                 "most 95 bytes (its socket's path must fit)",
                                 given);
        }
        snprintf(dir, len, "%s", given);
        remove_dir(dir); /* a holder killed with -9 left its socket and store */
        if (mkdir(dir, 0700) < 0) {
            return sbx_error_set(err, SBX_E_GENERIC, "runner (private): mkdir %s: %s", dir,
                                 strerror(errno));
        }
        return 0;
    }
    const char *bases[] = {getenv("XDG_RUNTIME_DIR"), getenv("TMPDIR"), "/dev/shm", "/tmp"};

    for (size_t i = 0; i < sizeof(bases) / sizeof(bases[0]); i++) {
        const char *b = bases[i];

        if (b == NULL || b[0] != '/' || strlen(b) > 60) {
            continue;
        }
        sweep_dead(b);
        snprintf(dir, len, "%s/sbx-runner-XXXXXX", b);
        if (mkdtemp(dir) != NULL) { /* mode 0700 */
            if (write_owner(dir, err) < 0) {
                rmdir(dir);
                return -1;
            }
            return 0;
        }
        if (i == sizeof(bases) / sizeof(bases[0]) - 1) {
            return sbx_error_set(err, SBX_E_GENERIC, "runner (private): mkdtemp %s: %s", dir,
                                 strerror(errno));
        }
    }
    return sbx_error_set(err, SBX_E_GENERIC, "runner (private): no directory for its socket");
}

struct sbx_runner_private *sbx_runner_private_start(struct sbx_config *cfg, const char *plugin_dir,
                                                    const struct sbx_runner_private_opts *opts,
                                                    sbx_error_t **err)
{
    struct sbx_runner_private *p = xcalloc(1, sizeof(*p));
    sigset_t all;
    sigset_t old;
    struct sigaction sa;
    int rc;

    if (make_dir(p->dir, sizeof(p->dir), opts != NULL ? opts->dir : NULL, err) < 0) {
        free(p);
        return NULL;
    }
    rewrite(cfg, p->dir, opts);
    /* a client gone mid-reply must not kill the process (as sbx serve) */
    if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) {
        signal(SIGPIPE, SIG_IGN);
    }
    p->r = sbx_runner_create(
        &(struct sbx_runner_opts){.cfg = cfg,
                                  .plugin_dir = plugin_dir,
                                  .slot_lock = opts != NULL && opts->slot_lock,
                                  .one_shot = opts != NULL && opts->one_shot,
                                  .output_wait = opts != NULL && opts->output_wait},
        err);
    if (p->r == NULL) {
        sbx_error_wrap(err, "runner (private)");
        remove_dir(p->dir);
        free(p);
        return NULL;
    }
    if (opts != NULL && opts->adopt != NULL && sbx_runner_task_adopt(p->r, opts->adopt, err) < 0) {
        sbx_runner_destroy(p->r);
        remove_dir(p->dir);
        free(p);
        return NULL;
    }
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, &old);
    rc = pthread_create(&p->th, NULL, loop_main, p);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        sbx_error_set(err, SBX_E_GENERIC, "runner (private): pthread_create: %s", strerror(rc));
        sbx_runner_destroy(p->r);
        remove_dir(p->dir);
        free(p);
        return NULL;
    }
    p->th_on = 1;
    sbx_debug("runner (private): listening in %s", p->dir);
    return p;
}

void sbx_runner_private_stop(struct sbx_runner_private *p)
{
    if (p == NULL) {
        return;
    }
    if (p->th_on) {
        sbx_runner_stop(p->r);
        pthread_join(p->th, NULL);
    }
    sbx_runner_destroy(p->r);
    remove_dir(p->dir);
    free(p);
}

const char *sbx_runner_private_dir(const struct sbx_runner_private *p)
{
    return p->dir;
}

struct sbx_runner *sbx_runner_private_runner(const struct sbx_runner_private *p)
{
    return p->r;
}
