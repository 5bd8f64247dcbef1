/* pty.h - a command of a task on a terminal (`sbx exec -it`, the API's
 * terminal; docs/tasks.md, "Terminals").
 *
 * The host allocates the pseudo-terminal (its own /dev/ptmx): the master stays
 * with the task's owner (the keeper or the runner), the slave goes to the
 * sandbox's exec agent as the command's stdin, stdout and stderr, and the
 * agent makes it the controlling terminal of the command's new session. No
 * descriptor comes back from the sandbox.
 *
 * After the request, the client's connection carries frames: an 8-byte
 * header {type u8, 0, 0, 0, length u32 BE} then the payload (the keeper
 * protocol, proto.h; sbx/sbx_frame.h):
 *   client -> host  'I' bytes typed (at most SBX_TTY_IN_MAX a frame)
 *                   'W' window size: rows u16 BE, cols u16 BE (1..SBX_TTY_DIM_MAX)
 *   host -> client  'O' bytes the terminal wrote; then the caller's 'X' result.
 * The client closing the connection cancels the command (its process group
 * gets SIGKILL). Everything read from the master is the sandbox's data. */
#ifndef SBX_SANDBOX_PTY_H
#define SBX_SANDBOX_PTY_H

#include <stddef.h>

#include <sbx/sbx_host.h>

#include "sandbox/task.h"
#include "util/error.h"

#define SBX_TTY_IN_MAX 65536
#define SBX_TTY_DIM_MAX 4096

struct sbx_tty_req {
    const char *const *argv;
    const struct sbx_kv *env;
    size_t n_env;
    unsigned rows, cols; /* the first window size; 0: 24 x 80 */
};

/* Runs rq->argv on a new terminal, relaying client_fd's frames until the command
 * ends; *status is its exit status. -1 with err: sbx failed (no agent, the task
 * holds credentials, cancelled). Writes no 'X' frame: the caller does. */
int sbx_task_exec_tty(struct sbx_task *t, const struct sbx_tty_req *rq, int client_fd, int *status,
                      sbx_error_t **err);

/* Parses a request's "tty" member ({"rows":R,"cols":C}, or true) into rq;
 * 0 when absent, 1 present, -1 with err when malformed. */
struct json_t;
int sbx_tty_parse(struct json_t *jtty, struct sbx_tty_req *rq, sbx_error_t **err);

/* (added, pty_session.c shares them) A new pty: the master non-blocking, both
 * close-on-exec; -1 with err. A size (TIOCSWINSZ on the master). 1 when rows and
 * cols are both 1..SBX_TTY_DIM_MAX. */
int sbx_pty_open(int *master, int *slave, sbx_error_t **err);
void sbx_pty_set_size(int master, unsigned rows, unsigned cols);
int sbx_tty_dims_ok(unsigned rows, unsigned cols);

#endif
