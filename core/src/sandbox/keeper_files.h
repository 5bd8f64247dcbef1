/* keeper_files.h - the keeper's files requests (docs/tasks.md, "The keeper
 * protocol"): `sbx cp` of a kept task, the archive streamed both ways.
 *
 *   {"op":"files_get","path":P}   -> 'O' frames: a tar archive of P, then 'X'
 *   {"op":"files_put","dir":D}    <- 'I' frames: a tar archive, an empty 'I' ends it; 'X'
 *   {"op":"files_stat","path":P}  -> 'X' {"status":0,"dir":true|false}
 * An error is 'X' {"error":"...","code":125,"kind":"notfound|toobig|paused|notfile|..."}. */
#ifndef SBX_SANDBOX_KEEPER_FILES_H
#define SBX_SANDBOX_KEEPER_FILES_H

#include <jansson.h>

#include "sandbox/task.h"

/* The keeper's side: 1 when op is one of these (answered on fd), 0 otherwise. */
int sbx_keeper_files_op(struct sbx_task *t, int fd, const char *op, json_t *req);

/* The client's side: one request to the keeper of `task`. in (len bytes) is sent as
 * 'I' frames after it, when not NULL; 'O' frames go to sink; *result (may be NULL)
 * receives the 'X' reply. -1 with err when the keeper refused or failed (its
 * message, the code mapped back from "kind"). */
int sbx_keeper_files_call(const char *state, const char *task, json_t *req, const char *in,
                          size_t len, int (*sink)(void *ud, const char *data, size_t len), void *ud,
                          json_t **result, sbx_error_t **err);

/* (added) files_put with the archive streamed as it is made: begin connects and sends
 * the request (the connection, or -1 with err); data sends pieces as 'I' frames (-1:
 * the keeper stopped reading: end says why); end sends the empty frame and reads the
 * reply (failed: the caller's own failure, the copy is abandoned), closing fd. */
int sbx_keeper_files_put_begin(const char *state, const char *task, const char *dir,
                               sbx_error_t **err);
int sbx_keeper_files_put_data(int fd, const char *data, size_t len);
int sbx_keeper_files_put_end(int fd, const char *task, int failed, sbx_error_t **err);

#endif
