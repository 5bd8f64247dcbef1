/* task_wt.c - the worktree after each command of a task (docs/tasks.md,
 * "Worktrees"): the host takes back the task's branch (wtgit.h) and quarantines
 * what the sandbox made there that the host would run or that would give a
 * privilege (wtscan.h); each finding is logged and recorded once. */
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

#include "sandbox/task_int.h"
#include "sandbox/wtgit.h"
#include "sandbox/wtscan.h"
#include "sandbox/wtwatch.h"
#include "util/cleanup.h"
#include "util/xalloc.h"
#include "util/log.h"

void sbx_task_worktree_note(struct sbx_task *t, const char *what)
{
    size_t i;
    json_t *v;

    pthread_mutex_lock(&t->mu);
    if (t->wt_events == NULL) {
        t->wt_events = json_array();
    }
    json_array_foreach(t->wt_events, i, v)
    {
        if (strcmp(json_string_value(v), what) == 0) {
            pthread_mutex_unlock(&t->mu);
            return; /* once */
        }
    }
    if (json_array_size(t->wt_events) < 200) {
        json_array_append_new(t->wt_events, json_string(what));
    }
    pthread_mutex_unlock(&t->mu);
    sbx_warn("task %s: worktree %s: %s", t->id, t->worktree, what);
}

json_t *sbx_task_worktree_events(struct sbx_task *t)
{
    json_t *copy;

    pthread_mutex_lock(&t->mu);
    copy = t->wt_events != NULL ? json_deep_copy(t->wt_events) : NULL;
    pthread_mutex_unlock(&t->mu);
    return copy;
}

static void note_cb(void *ud, const char *what)
{
    sbx_task_worktree_note(ud, what);
}

/* A command of the task runs (the watcher's busy callback). */
static int busy_cb(void *ud)
{
    struct sbx_task *t = ud;
    int busy;

    pthread_mutex_lock(&t->mu);
    busy = t->running > 0;
    pthread_mutex_unlock(&t->mu);
    return busy;
}

const char *const *sbx_task_protect(const struct sbx_task *t)
{
    const char *const *g = sbx_config_protect(t->cfg, t->pool);

    return g != NULL ? g : sbx_protect_default;
}

int sbx_task_since_write(const char *dir)
{
    cleanup_free char *path = xasprintf("%s/since", dir);
    struct timespec now;
    char text[64];
    FILE *f;

    clock_gettime(CLOCK_REALTIME, &now);
    snprintf(text, sizeof(text), "%lld.%09ld\n", (long long)now.tv_sec, now.tv_nsec);
    f = fopen(path, "we");
    if (f == NULL) {
        return -1;
    }
    fputs(text, f);
    return fclose(f) == 0 ? 0 : -1;
}

int sbx_task_since_read(const char *dir, struct timespec *ts)
{
    cleanup_free char *path = xasprintf("%s/since", dir);
    FILE *f = fopen(path, "re");
    long long sec = 0;
    long nsec = 0;
    int ok;

    if (f == NULL) {
        return -1;
    }
    ok = fscanf(f, "%lld.%ld", &sec, &nsec) == 2 && nsec >= 0 && nsec < 1000000000L;
    fclose(f);
    if (!ok) {
        return -1;
    }
    ts->tv_sec = (time_t)sec;
    ts->tv_nsec = nsec;
    return 0;
}

void sbx_task_worktree_after(struct sbx_task *t)
{
    cleanup_free char *gitdir = NULL;
    struct timespec since;
    if (t->worktree == NULL || t->dir == NULL) {
        return;
    }
    sbx_wtgit_harvest(t->worktree, t->dir, t->id, note_cb, t); /* each finding noted */
    gitdir = xasprintf("%s/git", t->dir);
    if (sbx_task_since_read(t->dir, &since) < 0) {
        since.tv_sec = (time_t)t->created_at - 1; /* no file: the record's second */
        since.tv_nsec = 0;
    }
    sbx_wtwatch_lock(t->wtwatch); /* never both renaming one path */
    sbx_wtscan(t->worktree, &since, access(gitdir, F_OK) == 0, t->id, sbx_task_protect(t), note_cb,
               t);
    sbx_wtwatch_unlock(t->wtwatch);
}

void sbx_task_wtwatch_start(struct sbx_task *t)
{
    cleanup_free char *gitdir = NULL;
    sbx_error_t *e = NULL;
    struct sbx_wtwatch_opts o = {0};
    char what[512];

    if (t->worktree == NULL || t->dir == NULL || t->wtwatch != NULL) {
        return;
    }
    gitdir = xasprintf("%s/git", t->dir);
    if (sbx_task_since_read(t->dir, &o.since) < 0) {
        o.since.tv_sec = (time_t)t->created_at - 1;
    }
    o.worktree = t->worktree;
    o.had_git = access(gitdir, F_OK) == 0;
    o.task_id = t->id;
    o.protect = sbx_task_protect(t);
    o.note = note_cb;
    o.busy = busy_cb;
    o.ud = t;
    t->wtwatch = sbx_wtwatch_start(&o, &e);
    if (t->wtwatch == NULL) {
        snprintf(what, sizeof(what),
                 "not watched while the task runs (%s): checked after each "
                 "command only",
                 sbx_error_msg(e));
        sbx_task_worktree_note(t, what);
        sbx_error_free(&e);
    }
}

void sbx_task_wtwatch_stop(struct sbx_task *t)
{
    sbx_wtwatch_stop(t->wtwatch);
    t->wtwatch = NULL;
}
