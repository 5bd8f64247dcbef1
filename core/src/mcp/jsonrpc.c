/* jsonrpc.c - parsing, validating and building JSON-RPC 2.0 messages. */
#include "mcp/jsonrpc.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

int sbx_jsonrpc_is_notification_method(const char *name)
{
    return strncmp(name, "notifications/", 14) == 0;
}

json_t *sbx_jsonrpc_result(json_t *id, json_t *result)
{
    return json_pack("{s:s, s:O, s:o}", "jsonrpc", "2.0", "id", id ? id : json_null(), "result",
                     result ? result : json_object());
}

json_t *sbx_jsonrpc_error(json_t *id, int code, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return json_pack("{s:s, s:O, s:{s:i, s:s}}", "jsonrpc", "2.0", "id", id ? id : json_null(),
                     "error", "code", code, "message", msg);
}

char *sbx_jsonrpc_dump(const json_t *msg, size_t *len)
{
    char *s = json_dumps(msg, JSON_COMPACT | JSON_PRESERVE_ORDER);
    size_t n;

    if (s == NULL) {
        /* only on OOM or invalid UTF-8 slipped into a string: never send garbage */
        s = xstrdup("{\"jsonrpc\":\"2.0\",\"id\":null,\"error\":{\"code\":-32603,"
                    "\"message\":\"internal error: could not encode the reply\"}}");
    }
    n = strlen(s);
    s = xrealloc(s, n + 2);
    s[n] = '\n';
    s[n + 1] = '\0';
    if (len != NULL) {
        *len = n + 1;
    }
    return s;
}

static int valid_id(const json_t *id)
{
    return json_is_string(id) || json_is_integer(id);
}

static int invalid(struct sbx_jsonrpc_msg *msg, json_t **reply, json_t *id, const char *what)
{
    *reply = sbx_jsonrpc_error(id && valid_id(id) ? id : NULL, SBX_JSONRPC_INVALID_REQUEST,
                               "Invalid Request: %s", what);
    sbx_jsonrpc_msg_free(msg);
    return -1;
}

int sbx_jsonrpc_parse(const char *line, size_t len, struct sbx_jsonrpc_msg *msg, json_t **reply)
{
    json_error_t je;
    json_t *jv;
    json_t *method;
    json_t *id;
    json_t *params;
    char what[256];

    memset(msg, 0, sizeof(*msg));
    *reply = NULL;
    msg->root = json_loadb(line, len, JSON_REJECT_DUPLICATES | JSON_DECODE_ANY, &je);
    if (msg->root == NULL) {
        *reply = sbx_jsonrpc_error(NULL, SBX_JSONRPC_PARSE_ERROR, "Parse error: %s (at byte %d)",
                                   je.text, je.position);
        return -1;
    }
    if (json_is_array(msg->root)) {
        return invalid(msg, reply, NULL,
                       "batch arrays are not supported (MCP 2025-11-25 "
                       "sends one message per line)");
    }
    if (!json_is_object(msg->root)) {
        return invalid(msg, reply, NULL, "a message must be a JSON object");
    }
    id = json_object_get(msg->root, "id");
    jv = json_object_get(msg->root, "jsonrpc");
    if (!json_is_string(jv) || strcmp(json_string_value(jv), "2.0") != 0) {
        return invalid(msg, reply, id, "\"jsonrpc\" must be the string \"2.0\"");
    }
    if (id != NULL && !valid_id(id)) {
        return invalid(msg, reply, NULL,
                       "\"id\" must be a string or an integer (not null, "
                       "a fraction, a boolean, an array or an object)");
    }
    method = json_object_get(msg->root, "method");
    if (method == NULL) {
        if (id != NULL && (json_object_get(msg->root, "result") != NULL ||
                           json_object_get(msg->root, "error") != NULL)) {
            msg->kind = SBX_JSONRPC_RESPONSE;
            msg->id = id;
            return 0;
        }
        return invalid(msg, reply, id, "\"method\" is missing");
    }
    if (!json_is_string(method) || json_string_length(method) == 0) {
        return invalid(msg, reply, id, "\"method\" must be a non-empty string");
    }
    params = json_object_get(msg->root, "params");
    if (params != NULL && !json_is_object(params)) {
        snprintf(what, sizeof(what), "\"params\" of %.64s must be an object",
                 json_string_value(method));
        return invalid(msg, reply, id, what);
    }
    if (id != NULL && sbx_jsonrpc_is_notification_method(json_string_value(method))) {
        snprintf(what, sizeof(what), "%.64s is a notification and must not carry an \"id\"",
                 json_string_value(method));
        return invalid(msg, reply, id, what);
    }
    msg->kind = id != NULL ? SBX_JSONRPC_REQUEST : SBX_JSONRPC_NOTIFICATION;
    msg->id = id;
    msg->method = json_string_value(method);
    msg->params = params;
    return 0;
}

void sbx_jsonrpc_msg_free(struct sbx_jsonrpc_msg *msg)
{
    json_decref(msg->root);
    memset(msg, 0, sizeof(*msg));
}
