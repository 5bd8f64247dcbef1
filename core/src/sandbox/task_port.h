/* task_port.h - a connection to a port inside a task's sandbox (task_port.c). */
#ifndef SBX_SANDBOX_TASK_PORT_H
#define SBX_SANDBOX_TASK_PORT_H

#include <stdint.h>

#include "sandbox/task.h"
#include "util/error.h"

/* A forwarded connection whose log line is written when it ends. */
struct sbx_port_conn;

/* Connects to 127.0.0.1:port inside t's sandbox (the provider's port_connect) and
 * counts it as activity (peer: who asked, e.g. "127.0.0.1:51234"; via: "sbx port" or
 * "api client NAME"). *fd: the connected socket; *conn: its log line, written by
 * sbx_port_conn_end when the connection ends (it needs t no more). A failed connection
 * is logged at once ("decision":"failed"; *conn NULL). */
int sbx_task_port_connect(struct sbx_task *t, int port, const char *peer, const char *via, int *fd,
                          struct sbx_port_conn **conn, sbx_error_t **err);
/* (added) Writes the connection's line to <state>/logs/ports.log, one write(2): bytes_in
 * (to the server inside) and bytes_out (from it) as counted by whoever copied them (-1:
 * unknown, null in the line), its duration, and reason (NULL: it ended normally).
 * Frees c (NULL: nothing). */
void sbx_port_conn_end(struct sbx_port_conn *c, int64_t bytes_in, int64_t bytes_out,
                       const char *reason);

#endif
