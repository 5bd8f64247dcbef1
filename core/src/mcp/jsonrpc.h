/* jsonrpc.h - JSON-RPC 2.0 messages as MCP's stdio transport carries them:
 * one compact JSON object per line (2025-11-25; batches are not allowed).
 * Parsing and validation only: no I/O, no MCP semantics (see server.h). */
#ifndef SBX_MCP_JSONRPC_H
#define SBX_MCP_JSONRPC_H

#include <jansson.h>
#include <stddef.h>

/* The longest line the server reads (longer ones get -32600 and are skipped). */
#define SBX_JSONRPC_MAX_LINE (4u << 20)

enum sbx_jsonrpc_code {
    SBX_JSONRPC_PARSE_ERROR = -32700,
    SBX_JSONRPC_INVALID_REQUEST = -32600,
    SBX_JSONRPC_METHOD_NOT_FOUND = -32601,
    SBX_JSONRPC_INVALID_PARAMS = -32602,
    SBX_JSONRPC_INTERNAL_ERROR = -32603,
};

enum sbx_jsonrpc_kind {
    SBX_JSONRPC_REQUEST,      /* method + id: must be answered */
    SBX_JSONRPC_NOTIFICATION, /* method, no id: never answered */
    SBX_JSONRPC_RESPONSE,     /* result or error + id (we send no requests: ignored) */
};

struct sbx_jsonrpc_msg {
    json_t *root; /* owned */
    enum sbx_jsonrpc_kind kind;
    json_t *id;         /* borrowed from root; NULL for a notification */
    const char *method; /* borrowed; NULL for a response */
    json_t *params;     /* borrowed; an object, or NULL when absent */
};

/* Parses and validates one line (without its newline). On success returns 0
 * and fills msg (free with sbx_jsonrpc_msg_free). On failure returns -1 and
 * *reply is the error response to send (-32700 or -32600; its id is the
 * request's when it could be read, else null). */
int sbx_jsonrpc_parse(const char *line, size_t len, struct sbx_jsonrpc_msg *msg, json_t **reply);
void sbx_jsonrpc_msg_free(struct sbx_jsonrpc_msg *msg);

/* True when name is a notification method ("notifications/..."). */
int sbx_jsonrpc_is_notification_method(const char *name);

/* {"jsonrpc":"2.0","id":ID,"result":RESULT}; steals result; id NULL means null. */
json_t *sbx_jsonrpc_result(json_t *id, json_t *result);
/* {"jsonrpc":"2.0","id":ID,"error":{"code":C,"message":M}}. */
json_t *sbx_jsonrpc_error(json_t *id, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* The message as one line of compact JSON with a trailing newline (strings
 * keep their newlines escaped, so there is no other). Never NULL. */
char *sbx_jsonrpc_dump(const json_t *msg, size_t *len);

#endif
