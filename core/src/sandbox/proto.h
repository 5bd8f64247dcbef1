/* proto.h - unix socket helpers: a task's runner socket (issue 31: the keeper is a
 * private runner, runner/private.h), the exec agent's, the egress proxy's. The
 * frames spoken on some of them after an upgrade (the terminal's, `sbx cp`'s
 * archives) are those of sbx/sbx_frame.h: an 8-byte header {type u8, 0, 0, 0,
 * length u32 BE} then the payload (util/frame.h reads and writes them). */
#ifndef SBX_SANDBOX_PROTO_H
#define SBX_SANDBOX_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "util/frame.h"

/* Connects to a unix socket; -1 with an error naming the path. */
int sbx_unix_connect(const char *path, sbx_error_t **err);
int sbx_unix_listen(const char *path, unsigned mode, sbx_error_t **err);
/* (added, issue 31) An HTTP upgrade on the unix socket at path (a runner's):
 * GET target with Upgrade: proto and headers (each "Name: value\r\n", may be NULL);
 * the connection after the 101, or -1 with the reply's error (404 SBX_E_NOTFOUND,
 * 400 SBX_E_USAGE, else SBX_E_GENERIC). */
/* (added, issue 31) The upgrade on a connected fd: sends head (len bytes, a
 * whole request) and reads the reply's head; fd after a 101 (the bytes that
 * follow are the caller's), else -1 with fd closed and the reply's "error"
 * (or its status line, or "WHERE closed the connection without a reply") in err (404
 * SBX_E_NOTFOUND, 400 SBX_E_USAGE, else SBX_E_GENERIC); where names the peer in a send error and
 * (changed, issue 31) in a reply head the one HTTP/1 parser refuses (bad bytes,
 * not HTTP, larger than 8 KiB: http/h1_reply.h), or a reply cut inside its head. */
int sbx_upgrade_on(int fd, const char *head, size_t len, const char *where, sbx_error_t **err);
int sbx_unix_upgrade(const char *path, const char *target, const char *proto, const char *headers,
                     sbx_error_t **err);

#endif
