/* proto.h - frames between `sbx exec`/`sbx task end` and a task's keeper, on
 * the keeper's unix socket (mode 0600): the frames of sbx/sbx_frame.h, an
 * 8-byte header {type u8, 0, 0, 0, length u32 BE} then the payload
 * (util/frame.h reads and writes them; keeper frames v2: a v1 peer of an
 * older sbx, with 5-byte headers, is refused with an error saying so).
 *   'R' request JSON   {"op":"exec","argv":[...],"env":[[k,v]...]} | {"op":"end"} | {"op":"ping"}
 *   'O' stdout bytes   'E' stderr bytes
 *   'X' result JSON    {"status":N} or {"error":"...","code":N}
 * Closing the connection during an exec cancels that exec. */
#ifndef SBX_SANDBOX_PROTO_H
#define SBX_SANDBOX_PROTO_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"
#include "util/frame.h"

/* Connects to a unix socket; -1 with an error naming the path. */
int sbx_unix_connect(const char *path, sbx_error_t **err);
int sbx_unix_listen(const char *path, unsigned mode, sbx_error_t **err);

#endif
