/* pty_session.h - a task's kept terminal session: `sbx exec -it --keep T -- bash`
 * starts it, `sbx attach T` comes back to it (docs/tasks.md, "Kept sessions:
 * sbx attach").
 *
 * One per task. Its owner (the keeper, or the runner for its tasks) holds the
 * pty master, as for `sbx exec -it` (pty.h), and a thread that reads it all the
 * time: what the terminal writes goes to the attached client, if any, and into
 * a scrollback ring of the last SBX_TTY_SCROLLBACK bytes, which a client that
 * attaches gets first. One client is attached at a time; a new one takes the
 * session over and the previous one is told so ('X' {"detached":"..."}).
 * A client leaves by closing its connection (the session goes on); the session
 * ends with its command, and the client attached then gets its status
 * ('X' {"status":N}). Frames: those of pty.h.
 *
 * Idle: the shell itself does not count as a running command; each attached
 * client does, and typed bytes and output are activity (a detached, quiet
 * session lets the task's idle limit end it). */
#ifndef SBX_SANDBOX_PTY_SESSION_H
#define SBX_SANDBOX_PTY_SESSION_H

#include <jansson.h>

#include "sandbox/pty.h"
#include "sandbox/task.h"
#include "util/error.h"

#define SBX_TTY_SCROLLBACK 65536

struct sbx_tty_session;

/* Starts the task's kept session running rq->argv on a new terminal and attaches
 * client_fd to it. Returns 0 when that client left (detached, taken over, or the
 * session ended: its 'X' frame is written); -1 with err when no session started
 * (one runs already, the task holds credentials, no pty): the caller writes 'X'. */
int sbx_tty_session_run(struct sbx_task *t, const struct sbx_tty_req *rq, int client_fd,
                        sbx_error_t **err);
/* Attaches client_fd to the task's kept session, with its window size (rows and
 * cols 0: the session's stays). Same return as sbx_tty_session_run; -1 when the
 * task has no session that runs. */
int sbx_tty_session_attach(struct sbx_task *t, unsigned rows, unsigned cols, int client_fd,
                           sbx_error_t **err);
/* At the task's end, after sbx_task_stop cancelled its command: waits for the
 * session's threads and clients and frees it. */
void sbx_tty_session_reap(struct sbx_task *t);

#endif
