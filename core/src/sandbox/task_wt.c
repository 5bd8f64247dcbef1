/* task_wt.c - the worktree after each command of a task (docs/tasks.md,
 * "Worktrees"): the host takes back the task's branch (wtgit.h) and quarantines
 * what the sandbox made there that the host would run or that would give a
 * privilege (wtscan.h); each finding is logged and recorded once. */
#include <stdio.h>
#include <string.h>

#include <jansson.h>

#include "sandbox/task_int.h"
#include "sandbox/wtgit.h"
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

void sbx_task_worktree_after(struct sbx_task *t)
{
    char msg[768];
    int r;

    if (t->worktree == NULL || t->dir == NULL) {
        return;
    }
    r = sbx_wtgit_harvest(t->worktree, t->dir, t->id, msg, sizeof(msg));
    if (r > 0) {
        sbx_info("task %s: worktree %s: %s", t->id, t->worktree, msg);
    }
    else if (r < 0) {
        sbx_task_worktree_note(t, msg);
    }
}
