/* tools_files.c - the MCP tools sandbox_read_file and sandbox_write_file (docs/mcp.md):
 * one regular file of a task's sandbox, at most 1 MiB, the path resolved inside the
 * sandbox. Text is given as UTF-8; other bytes as base64 (encoding "base64"). */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/server.h"
#include "sandbox/files.h"
#include "util/xalloc.h"

#define ID_PATTERN "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

static const char b64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static char *b64_encode(const unsigned char *p, size_t n)
{
    char *out = xmalloc((n + 2) / 3 * 4 + 1);
    size_t o = 0;

    for (size_t i = 0; i < n; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < n ? (unsigned)p[i + 1] << 8 : 0) |
                     (i + 2 < n ? p[i + 2] : 0);

        out[o++] = b64[v >> 18 & 63];
        out[o++] = b64[v >> 12 & 63];
        out[o++] = i + 1 < n ? b64[v >> 6 & 63] : '=';
        out[o++] = i + 2 < n ? b64[v & 63] : '=';
    }
    out[o] = '\0';
    return out;
}

/* -1: not base64 */
static int b64_decode(const char *s, char **out, size_t *len)
{
    size_t n = strlen(s);
    unsigned char *o = xmalloc(n / 4 * 3 + 3);
    size_t k = 0;
    unsigned v = 0;
    int bits = 0;
    size_t pad = 0;

    for (size_t i = 0; i < n; i++) {
        const char *c;

        if (s[i] == '=') {
            pad++;
            continue;
        }
        if (pad > 0 || (c = strchr(b64, s[i])) == NULL || s[i] == '\0') {
            free(o);
            return -1;
        }
        v = v << 6 | (unsigned)(c - b64);
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            o[k++] = (unsigned char)(v >> bits & 0xff);
        }
    }
    if (pad > 2) {
        free(o);
        return -1;
    }
    *out = (char *)o;
    *len = k;
    return 0;
}

static json_t *bad_args(const char *msg)
{
    return sbx_mcp_result(json_pack("{s:s}", "error", msg), 1, "invalid arguments: %s", msg);
}

static json_t *tool(const char *name, const char *title, const char *desc, json_t *props,
                    const char *const *required, int read_only)
{
    json_t *req = json_array();
    json_t *schema;

    for (size_t i = 0; required[i] != NULL; i++) {
        json_array_append_new(req, json_string(required[i]));
    }
    schema = json_pack("{s:s, s:o, s:b, s:o}", "type", "object", "properties", props,
                       "additionalProperties", 0, "required", req);
    return json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name", name, "title",
                     title, "description", desc, "inputSchema", schema, "annotations", "title",
                     title, "readOnlyHint", read_only, "destructiveHint", !read_only,
                     "idempotentHint", 1, "openWorldHint", 0);
}

void sbx_mcp_tools_files_list(json_t *tools)
{
    static const char *const req_read[] = {"task", "path", NULL};
    static const char *const req_write[] = {"task", "path", "content", NULL};
    json_t *enc =
        json_pack("{s:s, s:[s, s], s:s}", "type", "string", "enum", "utf-8", "base64",
                  "description", "How content is given: utf-8 text (default) or base64 bytes.");
    json_t *rp = json_pack(
        "{s:{s:s, s:s, s:s}, s:{s:s, s:s}}", "task", "type", "string", "pattern", ID_PATTERN,
        "description", "The task id a sandbox_run call kept.", "path", "type", "string",
        "description",
        "Absolute path of a regular file in the sandbox (resolved inside it: a symlink there "
        "never leads to a host file).");
    json_t *wp = json_deep_copy(rp);

    json_object_set_new(wp, "content",
                        json_pack("{s:s, s:s}", "type", "string", "description",
                                  "The file's new content, at most 1 MiB once decoded."));
    json_object_set_new(wp, "encoding", enc);
    json_array_append_new(
        tools, tool("sandbox_read_file", "Read a file in a sandbox",
                    "Reads one regular file (at most 1 MiB) of a task's sandbox. Returns its "
                    "content as UTF-8 text, or as base64 (encoding: base64) when it is not text.",
                    rp, req_read, 1));
    json_array_append_new(
        tools, tool("sandbox_write_file", "Write a file in a sandbox",
                    "Writes (creates or replaces) one regular file, mode 0644, in a task's "
                    "sandbox; its directory must exist. At most 1 MiB.",
                    wp, req_write, 0));
}

static int utf8_ok(const char *s, size_t n)
{
    json_t *j = json_stringn(s, n); /* jansson checks UTF-8 (and refuses NUL) */
    int ok = j != NULL && memchr(s, '\0', n) == NULL;

    json_decref(j);
    return ok;
}

/* Checks the arguments: only the keys allowed, strings. */
static const char *check(json_t *args, const char *const *allowed, const char **task,
                         const char **path)
{
    const char *k;
    json_t *v;

    json_object_foreach(args, k, v)
    {
        size_t i = 0;

        while (allowed[i] != NULL && strcmp(allowed[i], k) != 0) {
            i++;
        }
        if (allowed[i] == NULL) {
            return "unknown argument (allowed: task, path, and for writes content, encoding)";
        }
        if (!json_is_string(v)) {
            return "every argument is a string";
        }
    }
    *task = json_string_value(json_object_get(args, "task"));
    *path = json_string_value(json_object_get(args, "path"));
    if (*task == NULL || *path == NULL) {
        return "'task' and 'path' are required";
    }
    if (!sbx_id_valid(*task, SBX_ID_TASK)) {
        return "'task' is not a valid task id";
    }
    return NULL;
}

json_t *sbx_mcp_tools_files_call(const struct sbx_mcp_backend *b, const char *name, json_t *args)
{
    static const char *const r_keys[] = {"task", "path", NULL};
    static const char *const w_keys[] = {"task", "path", "content", "encoding", NULL};
    int write = strcmp(name, "sandbox_write_file") == 0;
    const char *task = NULL;
    const char *path = NULL;
    const char *bad;
    sbx_error_t *err = NULL;
    json_t *res;

    if (!write && strcmp(name, "sandbox_read_file") != 0) {
        return NULL;
    }
    if ((bad = check(args, write ? w_keys : r_keys, &task, &path)) != NULL) {
        return bad_args(bad);
    }
    if (sbx_files_path_ok(path, "path", &err) < 0) {
        res = bad_args(sbx_error_msg(err));
        sbx_error_free(&err);
        return res;
    }
    if (b->ops->read_file == NULL || b->ops->write_file == NULL) {
        return bad_args("this backend has no file tools");
    }
    if (write) {
        const char *content = json_string_value(json_object_get(args, "content"));
        const char *enc = json_string_value(json_object_get(args, "encoding"));
        char *data = NULL;
        size_t len = 0;

        if (content == NULL) {
            return bad_args("'content' is required");
        }
        if (enc != NULL && strcmp(enc, "base64") == 0) {
            if (b64_decode(content, &data, &len) < 0) {
                return bad_args("'content' is not base64");
            }
        }
        else if (enc != NULL && strcmp(enc, "utf-8") != 0) {
            return bad_args("'encoding' is utf-8 or base64");
        }
        else {
            data = xstrdup(content);
            len = strlen(content);
        }
        if (b->ops->write_file(b->ctx, task, path, data, len, &err) < 0) {
            res = sbx_mcp_result(
                json_pack("{s:s, s:s}", "error", sbx_error_msg(err), "mode", b->ops->mode), 1,
                "error: %s", sbx_error_msg(err));
        }
        else {
            res = sbx_mcp_result(
                json_pack("{s:s, s:s, s:I}", "task", task, "path", path, "bytes", (json_int_t)len),
                0, "wrote %zu bytes to %s in task %s", len, path, task);
        }
        free(data);
        sbx_error_free(&err);
        return res;
    }
    {
        char *data = NULL;
        size_t len = 0;

        if (b->ops->read_file(b->ctx, task, path, &data, &len, &err) < 0) {
            res = sbx_mcp_result(
                json_pack("{s:s, s:s}", "error", sbx_error_msg(err), "mode", b->ops->mode), 1,
                "error: %s", sbx_error_msg(err));
            sbx_error_free(&err);
            return res;
        }
        if (utf8_ok(data, len)) {
            res = sbx_mcp_result(json_pack("{s:s, s:s, s:s, s:s, s:I}", "task", task, "path", path,
                                           "encoding", "utf-8", "content", data, "bytes",
                                           (json_int_t)len),
                                 0, "%s", data);
        }
        else {
            char *e = b64_encode((const unsigned char *)data, len);

            res = sbx_mcp_result(json_pack("{s:s, s:s, s:s, s:s, s:I}", "task", task, "path", path,
                                           "encoding", "base64", "content", e, "bytes",
                                           (json_int_t)len),
                                 0, "(%zu bytes, not UTF-8 text; base64) %s", len, e);
            free(e);
        }
        free(data);
        return res;
    }
}
