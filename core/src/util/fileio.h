/* fileio.h - small file helpers shared by the host's side of the worktree's git
 * (sandbox/wtgit*.c): one read/write copy loop, one whole-file write. */
#ifndef SBX_UTIL_FILEIO_H
#define SBX_UTIL_FILEIO_H

#include <stddef.h>
#include <sys/types.h>

/* Copies in to out from their current offsets until in's end: at most max bytes
 * (more: -1 with errno EFBIG). Returns the bytes copied, or -1 (errno set). */
long long sbx_fd_copy(int in, int out, long long max);

/* Writes text to path (created or truncated, never through a symlink) with mode,
 * owned by uid:gid. 0, or -1 with errno set. */
int sbx_file_write_text(const char *path, const char *text, unsigned mode, uid_t uid, gid_t gid);

/* All of buf to fd with write(2), again after EINTR: 0, or -1 (errno set; a
 * write of 0 counts as failed). sbx_send_all is the same with send(2) and
 * MSG_NOSIGNAL, for sockets whose peer may be gone. */
int sbx_write_all(int fd, const void *buf, size_t len);
int sbx_send_all(int fd, const void *buf, size_t len);

#endif
