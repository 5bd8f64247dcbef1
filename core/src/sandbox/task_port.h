/* task_port.h - a connection to a port inside a task's sandbox (task_port.c). */
#ifndef SBX_SANDBOX_TASK_PORT_H
#define SBX_SANDBOX_TASK_PORT_H

#include "sandbox/task.h"
#include "util/error.h"

/* Connects to 127.0.0.1:port inside t's sandbox (the provider's port_connect),
 * logs the connection (peer: who asked, e.g. "127.0.0.1:51234"; via: "sbx port" or
 * "api client NAME") and counts it as activity. *fd: the connected socket. */
int sbx_task_port_connect(struct sbx_task *t, int port, const char *peer, const char *via, int *fd,
                          sbx_error_t **err);

/* keeper_port.c: the keeper's "port" request (the connection passed back to the
 * client by SCM_RIGHTS), and its client: *out the connected socket. */
struct json_t;
void sbx_keeper_port(struct sbx_task *t, int fd, struct json_t *req);
int sbx_keeper_port_open(const char *state, const char *task, int port, const char *peer, int *out,
                         sbx_error_t **err);

#endif
