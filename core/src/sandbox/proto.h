/* proto.h - frames between `sbx exec`/`sbx task end` and a task's keeper, on
 * the keeper's unix socket (mode 0600): [type u8][length u32 BE][payload].
 *   'R' request JSON   {"op":"exec","argv":[...],"env":[[k,v]...]} | {"op":"end"} | {"op":"ping"}
 *   'O' stdout bytes   'E' stderr bytes
 *   'X' result JSON    {"status":N} or {"error":"...","code":N}
 * Closing the connection during an exec cancels that exec. */
#ifndef SBX_SANDBOX_PROTO_H
#define SBX_SANDBOX_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define SBX_FRAME_MAX (16u << 20)

int sbx_frame_write(int fd, char type, const void *data, size_t len);
/* Reads one frame; *data is malloc'd and NUL-terminated. 0 ok, 1 EOF, -1 error. */
int sbx_frame_read(int fd, char *type, char **data, size_t *len, sbx_error_t **err);
/* Connects to a unix socket; -1 with an error naming the path. */
int sbx_unix_connect(const char *path, sbx_error_t **err);
int sbx_unix_listen(const char *path, unsigned mode, sbx_error_t **err);

#endif
