/* confine.h - host paths a client names (a job's worktree), confined below
 * roots the operator lists (docs/runner.md, "Worktree roots").
 *
 * A path is resolved from an fd on its root with openat2(RESOLVE_BENEATH |
 * RESOLVE_NO_MAGICLINKS): a symlink or ".." that leads out of the root is
 * refused, never followed. Where the kernel has no openat2 (ENOSYS) the
 * fallback is realpath() and a prefix check on the result. Whatever the roots,
 * a path is never in (or above) the state directory, /proc, /sys, /dev or
 * /run, nor on a kernel filesystem (proc, sysfs, cgroup...) mounted below a
 * root. The resolved path (read back from the fd) is what the caller keeps. */
#ifndef SBX_UTIL_CONFINE_H
#define SBX_UTIL_CONFINE_H

#include <stddef.h>

struct sbx_confine {
    const char *what; /* the rule's name in messages, "runner.worktree_roots" */
    char **roots;     /* as configured */
    char **real;      /* resolved (realpath) */
    size_t n;
    char *state_dir; /* resolved; NULL: none */
    char **deny;     /* resolved paths a worktree may neither be in nor contain */
    const char **deny_what;
    size_t n_deny;
};

/* A root as configured: NULL when fine, else why not (static text):
 * relative, or inside /proc, /sys, /dev, /run or state_dir (may be NULL). */
const char *sbx_confine_root_problem(const char *root, const char *state_dir);

/* Resolves the roots (each must exist and be a directory) and the state dir
 * (may be NULL). -1 with a one-line reason in why. */
int sbx_confine_init(struct sbx_confine *c, const char *what, char *const *roots, size_t n,
                     const char *state_dir, char *why, size_t len);
void sbx_confine_clear(struct sbx_confine *c);

/* Adds a path outside the state directory that a worktree may neither be in
 * nor contain: the runner's store, its unix socket, a client's token file. what
 * (static text, "the runner's store") names it in refusals. A path that does
 * not exist yet is resolved through its directory. */
void sbx_confine_deny(struct sbx_confine *c, const char *path, const char *what);

/* Confines the directory path: 0 and *out (resolved, absolute, caller frees);
 * else an HTTP-like status with a one-line reason naming the rule in why:
 * 400 (not absolute, missing, not a directory) or 403 (outside the roots,
 * leads out through a symlink, in or above a forbidden directory). */
int sbx_confine_dir(const struct sbx_confine *c, const char *path, char **out, char *why,
                    size_t len);

/* A resolved path that is in or above the state directory (may be NULL),
 * /proc, /sys, /dev or /run: -1 with "worktree PATH: inside ..." in why. */
int sbx_confine_forbidden(const char *resolved, const char *state_dir, char *why, size_t len);

#endif
