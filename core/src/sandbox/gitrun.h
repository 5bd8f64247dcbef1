/* gitrun.h - runs the host's git on a worktree as the worktree's owner, never
 * as root on a user's repository, with the configuration that makes git run
 * nothing it finds (docs/tasks.md, "Worktrees"). */
#ifndef SBX_SANDBOX_GITRUN_H
#define SBX_SANDBOX_GITRUN_H

#include <stddef.h>
#include <sys/types.h>

/* Who runs git, and where. */
struct sbx_gitrun {
    uid_t uid;
    gid_t gid;
    const char *dir;    /* git -C DIR */
    const char *global; /* (added) GIT_CONFIG_GLOBAL for this run, or NULL: the
                         * owner's (a local fetch drops -c settings for the
                         * other side, so its safe.directory comes from here) */
};

/* Output of one run: stdout (NUL-terminated, up to SBX_GITRUN_MAX bytes) and the
 * first line of stderr for messages. */
struct sbx_gitout {
    char *out;
    size_t len;
    char err[256];
    int status; /* the exit status, or 128 + the signal, or -1: not run */
};

#define SBX_GITRUN_MAX (64u * 1024 * 1024)

/* Runs `git -c core.hooksPath=/dev/null -c core.fsmonitor=false -c safe.directory=*
 * -c core.pager=cat -c transfer.fsckObjects=true -C DIR ARGV...` as uid/gid, with a
 * clean environment (PATH, HOME of the owner, LANG=C, GIT_TERMINAL_PROMPT=0).
 * Returns the exit status (0 success), -1 when it could not run (o->err says why).
 * The caller frees o->out. */
int sbx_gitrun(const struct sbx_gitrun *g, const char *const *argv, struct sbx_gitout *o);

/* A git object name: 40 (SHA-1) or 64 (SHA-256) lower-case hex digits, then
 * the end or a newline. Copies it to out (65 bytes). */
int sbx_git_oid_parse(const char *s, char out[65]);

/* A branch name git would accept for refs/heads/NAME and that is safe to open as a
 * path below refs/heads: no "..", no leading '/' or '.', no control characters,
 * spaces, ~^:?*[\, no "//", no "@{", no component ending in ".lock". */
int sbx_git_refname_ok(const char *ref);

/* A name in an objects directory the host takes back: "xx/38 hex" (or 62 hex),
 * "pack/pack-HEX.pack" or "pack/pack-HEX.idx". */
int sbx_git_object_path_ok(const char *rel);

#endif
