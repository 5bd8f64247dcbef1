/* wtgit_int.h - shared by wtgit.c, wtgit_take.c, wtgit_check.c and wtgit_alt.c
 * (not an interface: wtgit.h is). */
#ifndef SBX_SANDBOX_WTGIT_INT_H
#define SBX_SANDBOX_WTGIT_INT_H

#include <stddef.h>
#include <sys/types.h>

#include "sandbox/wtgit.h"

#define SBX_WTGIT_ZERO_OID "0000000000000000000000000000000000000000"
#define SBX_WTGIT_SUBS_MAX 64

/* The files sbx wrote in a git dir it made and keeps a copy of in the take spec's
 * dir as orig-<n> (n: the name with '/' as '-'): a change inside is recorded. */
extern const char *const sbx_wtgit_own_files[];

/* Opens rel below dirfd, never through a symlink or out of it. */
int sbx_wtgit_open_below(int dirfd, const char *rel, int flags);
/* Up to max bytes of a regular file below dirfd, NUL-terminated (*len its length
 * when not NULL); NULL if absent, not regular or larger. */
char *sbx_wtgit_slurp_below(int dirfd, const char *rel, size_t max, size_t *len);
/* The value of ref in a sandbox's git dir (loose, else packed-refs), or -1. */
int sbx_wtgit_sandbox_ref(int repofd, const char *ref, char oid[65]);

/* After a take: what the sandbox changed in one git dir sbx made (spec: its take
 * spec's dir; label: ".git" or ".git/modules/NAME"; target: the task's ref) and
 * the host does not take: its configuration, hooks, other branches. One note each. */
void sbx_wtgit_check(int repofd, const char *spec, const char *label, const char *target,
                     sbx_wtgit_note_fn note, void *ud);

/* The alternates of the host's object store (objects/info/alternates, chained):
 * each mounted read-only at /run/sbx-git/alt/N, an empty file of sbx's (empty)
 * over every info/alternates among them, and *alt the text of the sandbox's own
 * alternates file (caller frees). -1 with err for a path that cannot be mounted
 * (absent, not a directory, not one the owner uid:gid can open, too many). */
int sbx_wtgit_alternates(const char *objects, const char *empty, uid_t uid, gid_t gid,
                         struct sbx_mount **v, size_t *n, char **alt, sbx_error_t **err);

void sbx_wtgit_add_mount(struct sbx_mount **v, size_t *n, char *host, const char *path, int ro);

#endif
