/* wtwatch.h - a task's worktree watched while the task runs (docs/tasks.md,
 * "Worktrees"): a protected path (worktree.protect) or a .git that appears at
 * the top of the worktree or in a protected path's parent directory (.claude,
 * say) is checked as soon as inotify reports it, with the scan's own rules
 * (wtscan.h), instead of at the next command's scan. So a process a kept task
 * left running cannot plant .mcp.json or .vscode/tasks.json for the host user
 * to run between two commands. The after-command scan stays: it covers the rest
 * of the tree (set-id bits, nested repositories, FIFOs) and a lost event. */
#ifndef SBX_SANDBOX_WTWATCH_H
#define SBX_SANDBOX_WTWATCH_H

#include <time.h>

#include "sandbox/wtscan.h"
#include "sbx/sbx_error.h"

struct sbx_wtwatch;

struct sbx_wtwatch_opts {
    const char *worktree;       /* copied */
    struct timespec since;      /* what counts as made during the task */
    int had_git;                /* the task started with the host's .git at the top */
    const char *task_id;        /* copied */
    const char *const *protect; /* the task's globs: must outlive the watcher */
    sbx_wtscan_note_fn note;    /* each finding (called from the watcher's thread) */
    void *ud;
    /* 1 while a command of the task runs (NULL: never). A .git made then is left
     * to the check at the command's end, so `git init && git commit` in one
     * command works; one made between commands is checked at once. Called with
     * the watcher's lock held. */
    int (*busy)(void *ud);
};

/* Watches the worktree from a thread of its own; NULL with *err when inotify
 * or the thread cannot be had. */
struct sbx_wtwatch *sbx_wtwatch_start(const struct sbx_wtwatch_opts *o, sbx_error_t **err);
/* Held while the watcher checks: the after-command scan takes it too, so the
 * two never rename one path at once. NULL is a no-op. */
void sbx_wtwatch_lock(struct sbx_wtwatch *w);
void sbx_wtwatch_unlock(struct sbx_wtwatch *w);
/* A command ended: a .git seen while it ran and not checked since is checked
 * now, unless another command still runs. NULL is a no-op. */
void sbx_wtwatch_idle(struct sbx_wtwatch *w);
/* Stops the thread and frees everything; NULL is a no-op. */
void sbx_wtwatch_stop(struct sbx_wtwatch *w);

#endif
