/* fileio.h - small file helpers shared by the host's side of the worktree's git
 * (sandbox/wtgit*.c): one read/write copy loop, one whole-file write. */
#ifndef SBX_UTIL_FILEIO_H
#define SBX_UTIL_FILEIO_H

#include <sys/types.h>

/* Copies in to out from their current offsets until in's end: at most max bytes
 * (more: -1 with errno EFBIG). Returns the bytes copied, or -1 (errno set). */
long long sbx_fd_copy(int in, int out, long long max);

/* Writes text to path (created or truncated, never through a symlink) with mode,
 * owned by uid:gid. 0, or -1 with errno set. */
int sbx_file_write_text(const char *path, const char *text, unsigned mode, uid_t uid, gid_t gid);

#endif
