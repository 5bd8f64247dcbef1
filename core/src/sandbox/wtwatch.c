/* wtwatch.c - a task's worktree watched while the task runs (wtwatch.h). */
#include "sandbox/wtwatch.h"

#include <errno.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <unistd.h>

#include "util/error.h"
#include "util/xalloc.h"

#define WATCH_MAX 64   /* directories watched: the top and the protected paths' parents */
#define BATCH_MAX 64   /* names checked at once; more, and the whole tree is scanned */
#define PENDING_MAX 16 /* .git names seen while a command ran */
#define WATCH_MASK                                                                                 \
    (IN_CREATE | IN_MOVED_TO | IN_MOVE_SELF | IN_DELETE_SELF | IN_ONLYDIR | IN_EXCL_UNLINK)

struct watch {
    int wd;
    char *rel; /* "" for the top */
};

struct sbx_wtwatch {
    char *worktree;
    char *task_id;
    struct timespec since;
    int had_git;
    const char *const *protect;
    sbx_wtscan_note_fn note;
    void *ud;
    int (*busy)(void *ud);
    char *pending[PENDING_MAX]; /* under mu */
    size_t n_pending;
    int pending_whole; /* a lost event while a command ran: the whole tree after it */
    int ifd;
    int stop[2];
    pthread_t th;
    int running;
    pthread_mutex_t mu; /* held while checking (sbx_wtwatch_lock) */
    struct watch w[WATCH_MAX];
    size_t n;
};

static size_t components(const char *rel)
{
    size_t k = rel[0] != '\0';

    for (const char *p = rel; *p; p++) {
        k += *p == '/';
    }
    return k;
}

/* rel is a directory some protected glob lies below (".claude" for
 * ".claude/settings.json"): its first components match rel. */
static int protect_parent(const struct sbx_wtwatch *w, const char *rel)
{
    size_t k = components(rel);

    for (size_t i = 0; w->protect[i] != NULL; i++) {
        const char *g = w->protect[i];
        const char *p = g;
        size_t seen = 0;
        char prefix[256];

        while (seen < k && (p = strchr(p, '/')) != NULL) {
            seen++;
            if (seen == k) {
                break;
            }
            p++;
        }
        if (p == NULL || seen != k || (size_t)(p - g) >= sizeof(prefix)) {
            continue; /* the glob is not deeper than rel */
        }
        memcpy(prefix, g, (size_t)(p - g));
        prefix[p - g] = '\0';
        if (fnmatch(prefix, rel, FNM_PATHNAME) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Opens rel below the worktree, no symlink followed at any step. */
static int open_below(const struct sbx_wtwatch *w, const char *rel)
{
    char *buf = xstrdup(rel);
    char *name = buf;
    char *slash;
    int fd = open(w->worktree, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

    while (fd >= 0 && name[0] != '\0') {
        int sub;

        slash = strchr(name, '/');
        if (slash != NULL) {
            *slash = '\0';
        }
        sub = openat(fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        close(fd);
        fd = sub;
        name = slash != NULL ? slash + 1 : name + strlen(name);
    }
    free(buf);
    return fd;
}

/* Watches the directory rel (through the descriptor, so a name swapped for a
 * symlink is never followed). */
static void watch_dir(struct sbx_wtwatch *w, const char *rel)
{
    char proc[64];
    int fd;
    int wd;

    if (w->n >= WATCH_MAX) {
        return;
    }
    fd = open_below(w, rel);
    if (fd < 0) {
        return;
    }
    snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
    wd = inotify_add_watch(w->ifd, proc, WATCH_MASK);
    close(fd);
    if (wd < 0) {
        return;
    }
    for (size_t i = 0; i < w->n; i++) {
        if (w->w[i].wd == wd) { /* the same directory again: its newest name */
            free(w->w[i].rel);
            w->w[i].rel = xstrdup(rel);
            return;
        }
    }
    w->w[w->n].wd = wd;
    w->w[w->n].rel = xstrdup(rel);
    w->n++;
}

static void unwatch(struct sbx_wtwatch *w, int wd, int ignored)
{
    for (size_t i = 0; i < w->n; i++) {
        if (w->w[i].wd == wd) {
            if (!ignored) {
                inotify_rm_watch(w->ifd, wd);
            }
            free(w->w[i].rel);
            w->w[i] = w->w[--w->n];
            return;
        }
    }
}

static const char *rel_of(const struct sbx_wtwatch *w, int wd)
{
    for (size_t i = 0; i < w->n; i++) {
        if (w->w[i].wd == wd) {
            return w->w[i].rel;
        }
    }
    return NULL;
}

/* The protected paths' parents that exist at start (globs' literal prefixes). */
static void watch_parents(struct sbx_wtwatch *w)
{
    for (size_t i = 0; w->protect[i] != NULL; i++) {
        const char *g = w->protect[i];

        for (const char *p = strchr(g, '/'); p != NULL; p = strchr(p + 1, '/')) {
            char *prefix = xasprintf("%.*s", (int)(p - g), g);

            if (strpbrk(prefix, "*?[") == NULL) {
                watch_dir(w, prefix);
            }
            free(prefix);
        }
    }
}

/* Under mu: a .git seen while a command runs waits for its end (kept once). */
static int defer_git(struct sbx_wtwatch *w, const char *rel)
{
    const char *base = strrchr(rel, '/');

    base = base != NULL ? base + 1 : rel;
    if (strcmp(base, ".git") != 0 || sbx_protect_match(w->protect, rel) || w->busy == NULL ||
        !w->busy(w->ud)) {
        return 0;
    }
    for (size_t i = 0; i < w->n_pending; i++) {
        if (strcmp(w->pending[i], rel) == 0) {
            return 1;
        }
    }
    if (w->n_pending < PENDING_MAX) {
        w->pending[w->n_pending++] = xstrdup(rel);
    }
    return 1; /* past PENDING_MAX: the command's end scans the whole tree anyway */
}

static void check(struct sbx_wtwatch *w, char **batch, size_t n, int whole)
{
    size_t kept = 0;

    pthread_mutex_lock(&w->mu);
    for (size_t i = 0; i < n; i++) {
        if (!defer_git(w, batch[i])) {
            batch[kept++] = batch[i];
        }
        else {
            free(batch[i]);
        }
    }
    n = kept;
    if (whole && w->busy != NULL && w->busy(w->ud)) {
        w->pending_whole = 1; /* the command's end scans it; idle() if it does not */
        whole = 0;
    }
    if (whole) {
        sbx_wtscan(w->worktree, &w->since, w->had_git, w->task_id, w->protect, w->note, w->ud);
    }
    else if (n > 0) {
        sbx_wtscan_paths(w->worktree, &w->since, w->had_git, w->task_id, w->protect,
                         (const char *const *)batch, n, w->note, w->ud);
    }
    pthread_mutex_unlock(&w->mu);
    for (size_t i = 0; i < n; i++) {
        free(batch[i]);
    }
}

/* One read's events: new names that matter are checked together. */
static void handle(struct sbx_wtwatch *w, const char *buf, ssize_t len)
{
    char *batch[BATCH_MAX];
    size_t n = 0;
    int whole = 0;

    for (const char *p = buf; p < buf + len;) {
        const struct inotify_event *ev = (const struct inotify_event *)(const void *)p;
        const char *dir = rel_of(w, ev->wd);
        char *rel;

        p += sizeof(*ev) + ev->len;
        if (ev->mask & IN_Q_OVERFLOW) {
            whole = 1;
            continue;
        }
        if (dir == NULL) {
            continue;
        }
        if (ev->mask & (IN_IGNORED | IN_MOVE_SELF | IN_DELETE_SELF)) {
            if (dir[0] != '\0') { /* a parent moved or removed: watched again if remade */
                unwatch(w, ev->wd, (ev->mask & IN_IGNORED) != 0);
            }
            continue;
        }
        if (ev->len == 0 || ev->name[0] == '\0') {
            continue;
        }
        rel = dir[0] != '\0' ? xasprintf("%s/%s", dir, ev->name) : xstrdup(ev->name);
        if ((ev->mask & IN_ISDIR) && protect_parent(w, rel)) {
            watch_dir(w, rel); /* before the check: what is made in it later is seen */
        }
        if (strcmp(ev->name, ".git") == 0 || sbx_protect_match(w->protect, rel) ||
            ((ev->mask & IN_ISDIR) && protect_parent(w, rel))) {
            if (n < BATCH_MAX) {
                batch[n++] = rel;
                rel = NULL;
            }
            else {
                whole = 1;
            }
        }
        free(rel);
    }
    check(w, batch, n, whole);
}

static void *watch_main(void *arg)
{
    struct sbx_wtwatch *w = arg;
    /* aligned for struct inotify_event; room for many events per read */
    char buf[16384] __attribute__((aligned(__alignof__(struct inotify_event))));

    for (;;) {
        struct pollfd pf[2] = {{.fd = w->ifd, .events = POLLIN},
                               {.fd = w->stop[0], .events = POLLIN}};
        ssize_t len;

        if (poll(pf, 2, -1) < 0) {
            if (errno == EINTR) {
                continue;
            }
            break;
        }
        if (pf[1].revents != 0) {
            break;
        }
        len = read(w->ifd, buf, sizeof(buf));
        if (len < 0) {
            if (errno == EINTR || errno == EAGAIN) {
                continue;
            }
            break;
        }
        handle(w, buf, len);
    }
    return NULL;
}

struct sbx_wtwatch *sbx_wtwatch_start(const struct sbx_wtwatch_opts *o, sbx_error_t **err)
{
    struct sbx_wtwatch *w = xcalloc(1, sizeof(*w));

    w->worktree = xstrdup(o->worktree);
    w->task_id = xstrdup(o->task_id);
    w->since = o->since;
    w->had_git = o->had_git;
    w->protect = o->protect;
    w->note = o->note;
    w->ud = o->ud;
    w->busy = o->busy;
    w->stop[0] = w->stop[1] = -1;
    pthread_mutex_init(&w->mu, NULL);
    w->ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (w->ifd < 0 || pipe2(w->stop, O_CLOEXEC) < 0) {
        sbx_error_set(err, SBX_E_GENERIC, "worktree %s: watching it: %s", o->worktree,
                      strerror(errno));
        goto fail;
    }
    watch_dir(w, "");
    if (w->n == 0) {
        sbx_error_set(err, SBX_E_GENERIC, "worktree %s: watching it: %s", o->worktree,
                      strerror(errno));
        goto fail;
    }
    watch_parents(w);
    if (pthread_create(&w->th, NULL, watch_main, w) != 0) {
        sbx_error_set(err, SBX_E_GENERIC, "worktree %s: cannot start its watcher thread",
                      o->worktree);
        goto fail;
    }
    w->running = 1;
    /* made between the task's start and the first watch (a postStartCommand,
     * say): the top's .git and the literal protected paths, checked once now */
    {
        char *batch[BATCH_MAX];
        size_t n = 0;

        batch[n++] = xstrdup(".git");
        for (size_t i = 0; w->protect[i] != NULL && n < BATCH_MAX; i++) {
            if (strpbrk(w->protect[i], "*?[") == NULL) {
                batch[n++] = xstrdup(w->protect[i]);
            }
        }
        check(w, batch, n, 0);
    }
    return w;
fail:
    sbx_wtwatch_stop(w);
    return NULL;
}

void sbx_wtwatch_lock(struct sbx_wtwatch *w)
{
    if (w != NULL) {
        pthread_mutex_lock(&w->mu);
    }
}

void sbx_wtwatch_unlock(struct sbx_wtwatch *w)
{
    if (w != NULL) {
        pthread_mutex_unlock(&w->mu);
    }
}

void sbx_wtwatch_idle(struct sbx_wtwatch *w)
{
    char *batch[PENDING_MAX];
    size_t n;
    int whole;

    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->mu);
    if ((w->n_pending == 0 && !w->pending_whole) || (w->busy != NULL && w->busy(w->ud))) {
        pthread_mutex_unlock(&w->mu);
        return;
    }
    n = w->n_pending;
    memcpy(batch, w->pending, n * sizeof(batch[0]));
    w->n_pending = 0;
    whole = w->pending_whole;
    w->pending_whole = 0;
    pthread_mutex_unlock(&w->mu);
    check(w, batch, n, whole); /* not busy now (or deferred again if a command began) */
}

void sbx_wtwatch_stop(struct sbx_wtwatch *w)
{
    if (w == NULL) {
        return;
    }
    if (w->running) {
        (void)!write(w->stop[1], "x", 1);
        pthread_join(w->th, NULL);
    }
    for (size_t i = 0; i < w->n; i++) {
        free(w->w[i].rel);
    }
    for (size_t i = 0; i < w->n_pending; i++) {
        free(w->pending[i]);
    }
    if (w->ifd >= 0) {
        close(w->ifd);
    }
    if (w->stop[0] >= 0) {
        close(w->stop[0]);
        close(w->stop[1]);
    }
    pthread_mutex_destroy(&w->mu);
    free(w->worktree);
    free(w->task_id);
    free(w);
}
