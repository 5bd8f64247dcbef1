/* server.h - the MCP server of `sbx mcp`: JSON-RPC over stdio (one message
 * per line, protocol 2025-11-25), initialize, ping, tools/list, tools/call.
 * stdout carries only protocol messages; logs go to stderr. */
#ifndef SBX_MCP_SERVER_H
#define SBX_MCP_SERVER_H

#include <stddef.h>

#include "mcp/backend.h"

#define SBX_MCP_PROTOCOL_VERSION "2025-11-25"
/* tools/call requests running at once; more get a tool error. */
#define SBX_MCP_MAX_INFLIGHT 64
/* notifications/progress interval for a call that sent a progressToken. */
#define SBX_MCP_PROGRESS_MS 10000

struct sbx_mcp_server;

/* Writes one protocol line (with its newline); returns -1 when the peer is gone. */
typedef int (*sbx_mcp_write_fn)(void *ud, const char *line, size_t len);

/* Takes over backend (destroyed by sbx_mcp_server_free). write NULL: fd 1. */
struct sbx_mcp_server *sbx_mcp_server_new(const struct sbx_mcp_backend *backend,
                                          sbx_mcp_write_fn write, void *ud);
/* Handles one line (without its newline). tools/call runs on its own thread
 * when async, else before this returns. */
void sbx_mcp_server_line(struct sbx_mcp_server *s, const char *line, size_t len, int async);
/* Reads in_fd until end of file or *stop; lines longer than
 * SBX_JSONRPC_MAX_LINE get -32600 and are skipped. */
int sbx_mcp_server_serve(struct sbx_mcp_server *s, int in_fd, const volatile int *stop);
/* Sets the progress interval (tests; <= 0: the default). */
void sbx_mcp_server_set_progress_interval(struct sbx_mcp_server *s, int64_t ms);
/* Cancels running calls, waits for them, ends every task, frees. */
void sbx_mcp_server_free(struct sbx_mcp_server *s);

/* tools.c: the tool list, and one tools/call. On a protocol error (unknown
 * tool, no name) returns NULL and sets *code and *msg (caller frees). */
json_t *sbx_mcp_tools_list(void);
/* tools.c: a tools/call result: fmt's text as its content, structured (taken,
 * may be NULL) as structuredContent, isError when is_error. */
json_t *sbx_mcp_result(json_t *structured, int is_error, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* (added, issue 30) tools_files.c: sandbox_read_file, sandbox_write_file. list appends
 * their definitions; call returns NULL when name is neither. */
void sbx_mcp_tools_files_list(json_t *tools);
json_t *sbx_mcp_tools_files_call(const struct sbx_mcp_backend *b, const char *name, json_t *args);
/* (added, issue 30) tools_snap.c: sandbox_snapshot, sandbox_fork (NULL: neither). */
void sbx_mcp_tools_snap_list(json_t *tools);
json_t *sbx_mcp_tools_snap_call(const struct sbx_mcp_backend *b, const char *name, json_t *args,
                                struct sbx_mcp_call *call);
json_t *sbx_mcp_tools_call(const struct sbx_mcp_backend *b, json_t *params,
                           struct sbx_mcp_call *call, int *code, char **msg);

#endif
