/* private.h - a private one-box runner in this process (issue 31, "One task
 * host"): what `sbx mcp` (and, in time, `sbx run` and the keeper) use when no
 * runner is configured, so that a task lives in one place only, the runner's
 * job table and workers, and its clients speak one API to it.
 *
 * Its store (SQLite) and its unix socket are in a new 0700 directory of its
 * own, removed when it stops; it has no TCP listener, no fleet, no alerts, no
 * autoscaler and (unless asked) no warm pool, and it serves both pools
 * whatever box.pools says. */
#ifndef SBX_RUNNER_PRIVATE_H
#define SBX_RUNNER_PRIVATE_H

#include "config/config.h"
#include "sandbox/task.h"
#include "util/error.h"

struct sbx_runner_private;

struct sbx_runner_private_opts {
    /* Directories a job's worktree may come from (runner.worktree_roots of
     * the private runner); NULL or none: the configuration's own. */
    const char *const *worktree_roots;
    size_t n_worktree_roots;
    int keep_warm; /* 0: pools.*.warm is ignored (no sandbox made in advance) */
    /* (added) the one pool it serves, with the whole box ("ci" or "agent"); NULL:
     * both, the box split between them as box.pools says for sbx serve */
    const char *pool;
    /* (added, issue 31) its jobs' tasks take the box's slot lock in the state
     * directory too, as embedded tasks do (sbx_runner_opts.slot_lock): the
     * private runner of `sbx run`, one of many processes sharing the box */
    int slot_lock;
    /* (added, issue 31) started for one run (`sbx run`): sbx_runner_opts.one_shot */
    int one_shot;
    /* (added, issue 31) sbx_runner_opts.output_wait: its client is a terminal */
    int output_wait;
    /* (added, the keeper) the directory to use (made 0700; what a dead holder left
     * in it is removed first; at most 95 bytes: DIR/runner.sock fits in a socket address); NULL: a
     * new one in a temporary place */
    const char *dir;
    /* (added, the keeper) a task this process started, handed to the runner
     * before its loop runs (runner/adopt.h); on failure the caller still has it */
    struct sbx_task *adopt;
};

/* Rewrites cfg's runner settings to those of a new private runner (runner.listen
 * "unix:DIR/runner.sock", runner.state "DIR/runner.db", no database, no hooks)
 * and runs it on a thread of its own (signals blocked there: they stay the
 * caller's). From then on sbx_runner_call(cfg, ...) reaches it. cfg must
 * outlive it. NULL and *err on failure (cfg may then be partly rewritten). */
struct sbx_runner_private *sbx_runner_private_start(struct sbx_config *cfg, const char *plugin_dir,
                                                    const struct sbx_runner_private_opts *opts,
                                                    sbx_error_t **err);
/* Stops it as `sbx serve` stops: running jobs are cancelled ("runner
 * stopped"), every task it holds is ended and its sandbox removed; then the
 * directory goes. Waits for all of that. NULL is a no-op. */
void sbx_runner_private_stop(struct sbx_runner_private *p);
/* Its directory (the socket and the store are in it). */
const char *sbx_runner_private_dir(const struct sbx_runner_private *p);
/* (added) The runner itself (runner/adopt.h asks it about its task). */
struct sbx_runner *sbx_runner_private_runner(const struct sbx_runner_private *p);

#endif
