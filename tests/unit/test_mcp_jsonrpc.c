/* test_mcp_jsonrpc.c - the MCP server's JSON-RPC layer with malformed input,
 * the tools' argument checks, and the output capture, against a fake
 * backend (the same interface the runner client fills, backend_runner.c). */
#include "test_common.h"

#include <fcntl.h>
#include <jansson.h>

#include "config/config.h"
#include "mcp/backend.h"
#include "mcp/jsonrpc.h"
#include "mcp/server.h"
#include "util/xalloc.h"

/* ---- a fake backend and a capturing writer ------------------------------ */

struct capture {
    char *lines[64];
    size_t n;
};

static int cap_write(void *ud, const char *line, size_t len)
{
    struct capture *c = ud;

    assert_true(len > 0 && line[len - 1] == '\n');
    assert_null(memchr(line, '\n', len - 1)); /* one message, one line */
    assert_true(c->n < 64);
    c->lines[c->n++] = xstrndup(line, len - 1);
    return 0;
}

static void cap_reset(struct capture *c)
{
    for (size_t i = 0; i < c->n; i++) {
        free(c->lines[i]);
    }
    c->n = 0;
}

static int runs;
static char fake_from[32]; /* (added, issue 30) the last run's `from` */

static json_t *fake_run(void *ctx, const struct sbx_mcp_run *r, struct sbx_mcp_call *call,
                        sbx_error_t **err)
{
    (void)ctx;
    (void)call;
    runs++;
    if (r->worktree != NULL) {
        char *cwd = getcwd(NULL, 0);

        assert_string_equal(r->worktree, cwd); /* resolved before the backend sees it */
        free(cwd);
    }
    snprintf(fake_from, sizeof(fake_from), "%s", r->from ? r->from : "");
    if (r->from != NULL && strcmp(r->task ? r->task : "", "nofork") == 0) {
        sbx_error_set(err, SBX_E_USAGE, "refused by the fake");
        return NULL;
    }
    if (strcmp(r->argv[0], "refuse") == 0) {
        sbx_error_set(err, SBX_E_USAGE, "refused by the fake");
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s, s:i, s:s, s:s, s:b, s:b, s:b, s:s}", "job", "j-1", "task",
                     r->task ? r->task : "t-1", "state",
                     strcmp(r->argv[0], "fail") == 0 ? "failed" : "finished", "exit_status",
                     strcmp(r->argv[0], "fail") == 0 ? -1 : 7, "stdout", "out\n", "stderr", "",
                     "stdout_truncated", 0, "stderr_truncated", 0, "task_ended", r->task == NULL,
                     "mode", "embedded");
}

static json_t *fake_named(void *ctx, const char *name, sbx_error_t **err)
{
    (void)ctx;
    if (strcmp(name, "missing") == 0) {
        sbx_error_set(err, SBX_E_NOTFOUND, "no such thing '%s'", name);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s}", "job", name, "task", name, "state", "finished");
}

static json_t *fake_queue(void *ctx, sbx_error_t **err)
{
    (void)ctx;
    (void)err;
    return json_pack("{s:s}", "mode", "fake");
}

static void fake_nop(void *ctx)
{
    (void)ctx;
}

/* (added, issue 30) a file store of one file for sandbox_read_file/write_file */
static char fake_file[64];
static size_t fake_len;

static int fake_read_file(void *ctx, const char *task, const char *path, char **data, size_t *len,
                          sbx_error_t **err)
{
    (void)ctx;
    (void)task;
    if (strcmp(path, "/big") == 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "/big: more than 1 MiB: refused (use 'sbx cp')");
    }
    *data = xmalloc(fake_len + 1);
    memcpy(*data, fake_file, fake_len);
    (*data)[fake_len] = '\0';
    *len = fake_len;
    return 0;
}

static int fake_write_file(void *ctx, const char *task, const char *path, const char *data,
                           size_t len, sbx_error_t **err)
{
    (void)ctx;
    (void)task;
    (void)path;
    if (len > sizeof(fake_file)) {
        return sbx_error_set(err, SBX_E_GENERIC, "too big for the fake");
    }
    memcpy(fake_file, data, len);
    fake_len = len;
    return 0;
}

/* (added, issue 30) snapshots: "missing" is unknown */
static json_t *fake_snapshot(void *ctx, const char *task, int for_fork, sbx_error_t **err)
{
    (void)ctx;
    if (strcmp(task, "missing") == 0) {
        sbx_error_set(err, SBX_E_NOTFOUND, "no task '%s' is held", task);
        return NULL;
    }
    return json_pack("{s:s, s:s, s:s, s:b}", "id", "s-0123456789ab", "task", task, "pool", "agent",
                     "fork", for_fork);
}

static const struct sbx_mcp_backend_ops fake_ops = {
    .mode = "embedded",
    .run = fake_run,
    .end = fake_named,
    .job = fake_named,
    .cancel = fake_named,
    .queue = fake_queue,
    .shutdown = fake_nop,
    .destroy = fake_nop,
    .read_file = fake_read_file,
    .write_file = fake_write_file,
    .snapshot = fake_snapshot,
};

static struct capture cap;
static struct sbx_mcp_server *srv;

static int setup(void **state)
{
    struct sbx_mcp_backend b = {.ops = &fake_ops, .ctx = NULL};

    (void)state;
    srv = sbx_mcp_server_new(&b, cap_write, &cap);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    sbx_mcp_server_free(srv);
    cap_reset(&cap);
    return 0;
}

/* Sends one line; returns the one reply parsed (NULL when none was sent). */
static json_t *send1(const char *line)
{
    json_t *j = NULL;

    cap_reset(&cap);
    sbx_mcp_server_line(srv, line, strlen(line), 0);
    assert_true(cap.n <= 1);
    if (cap.n == 1) {
        j = json_loads(cap.lines[0], 0, NULL);
        assert_non_null(j);
        assert_string_equal(json_string_value(json_object_get(j, "jsonrpc")), "2.0");
    }
    return j;
}

static int err_code(json_t *j)
{
    return (int)json_integer_value(json_object_get(json_object_get(j, "error"), "code"));
}

static const char *err_msg(json_t *j)
{
    return json_string_value(json_object_get(json_object_get(j, "error"), "message"));
}

static void expect_error(const char *line, int code, const char *id_json, const char *needle)
{
    json_t *j = send1(line);
    char *id;

    if (j == NULL) {
        fail_msg("no reply to: %s", line);
    }
    assert_int_equal(err_code(j), code);
    id = json_dumps(json_object_get(j, "id"), JSON_ENCODE_ANY | JSON_COMPACT);
    assert_string_equal(id, id_json);
    if (needle != NULL && strstr(err_msg(j), needle) == NULL) {
        fail_msg("'%s' not in '%s'", needle, err_msg(j));
    }
    free(id);
    json_decref(j);
}

/* ---- framing and envelope ---------------------------------------------- */

static void test_invalid_json(void **state)
{
    (void)state;
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":", -32700, "null", "Parse error");
    expect_error("not json at all", -32700, "null", NULL);
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"id\":2,\"method\":\"ping\"}", -32700, "null",
                 "duplicate");
    expect_error("\xff\xfe{}", -32700, "null", NULL);
}

static void test_not_an_object(void **state)
{
    (void)state;
    expect_error("[{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\"}]", -32600, "null", "batch");
    expect_error("[]", -32600, "null", "batch");
    expect_error("42", -32600, "null", "object");
    expect_error("\"ping\"", -32600, "null", "object");
    expect_error("null", -32600, "null", "object");
}

static void test_missing_and_wrong_fields(void **state)
{
    (void)state;
    expect_error("{\"id\":1,\"method\":\"ping\"}", -32600, "1", "jsonrpc");
    expect_error("{\"jsonrpc\":\"1.0\",\"id\":1,\"method\":\"ping\"}", -32600, "1", "2.0");
    expect_error("{\"jsonrpc\":2.0,\"id\":\"a\",\"method\":\"ping\"}", -32600, "\"a\"", "2.0");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1}", -32600, "1", "method");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":7}", -32600, "1", "method");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"\"}", -32600, "1", "method");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":null,\"method\":\"ping\"}", -32600, "null", "id");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1.5,\"method\":\"ping\"}", -32600, "null", "id");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":true,\"method\":\"ping\"}", -32600, "null", "id");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"ping\"}", -32600, "null", "id");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":[1],\"method\":\"ping\"}", -32600, "null", "id");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/list\",\"params\":[]}", -32600,
                 "2", "params");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\",\"params\":\"x\"}", -32600, "2",
                 "params");
}

static void test_notification_with_id(void **state)
{
    (void)state;
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":9,\"method\":\"notifications/initialized\"}", -32600,
                 "9", "notification");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":\"notifications/cancelled\","
                 "\"params\":{\"requestId\":1}}",
                 -32600, "\"c\"", "notification");
}

static void test_notifications_get_no_reply(void **state)
{
    (void)state;
    assert_null(send1("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/initialized\"}"));
    assert_null(send1("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/cancelled\","
                      "\"params\":{\"requestId\":123}}"));
    assert_null(send1("{\"jsonrpc\":\"2.0\",\"method\":\"notifications/whatever\"}"));
    /* a request method without an id is a notification: never answered */
    assert_null(send1("{\"jsonrpc\":\"2.0\",\"method\":\"tools/list\"}"));
    /* a response from the client (we send no requests): ignored */
    assert_null(send1("{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{}}"));
    assert_null(send1(""));
    assert_null(send1("   \r"));
}

static void test_ids_echoed_unchanged(void **state)
{
    const char *ids[] = {"0",
                         "1",
                         "-4",
                         "9007199254740993",
                         "\"server-discover-probe-1\"",
                         "\"\"",
                         "\"7\"",
                         "\"\\u00e9t\\u00e9\""};

    (void)state;
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++) {
        char *line = xasprintf("{\"method\":\"ping\",\"id\":%s,\"jsonrpc\":\"2.0\"}", ids[i]);
        json_t *want = json_loads(ids[i], JSON_DECODE_ANY, NULL);
        json_t *j = send1(line);

        assert_non_null(j);
        assert_non_null(json_object_get(j, "result"));
        assert_true(json_equal(json_object_get(j, "id"), want));
        assert_int_equal(json_typeof(json_object_get(j, "id")), json_typeof(want));
        json_decref(want);
        json_decref(j);
        free(line);
    }
}

static void test_unknown_methods(void **state)
{
    (void)state;
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":\"server-discover-probe-1\",\"method\":"
                 "\"server/discover\"}",
                 -32601, "\"server-discover-probe-1\"", "server/discover");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"resources/list\"}", -32601, "3", NULL);
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"logging/setLevel\",\"params\":{}}",
                 -32601, "4", NULL);
}

static void test_initialize(void **state)
{
    json_t *j;
    json_t *r;

    (void)state;
    j = send1("{\"jsonrpc\":\"2.0\",\"id\":0,\"method\":\"initialize\",\"params\":{"
              "\"protocolVersion\":\"2025-11-25\",\"capabilities\":{},\"clientInfo\":{"
              "\"name\":\"t\",\"version\":\"0\"}}}");
    r = json_object_get(j, "result");
    assert_string_equal(json_string_value(json_object_get(r, "protocolVersion")), "2025-11-25");
    assert_non_null(json_object_get(json_object_get(r, "capabilities"), "tools"));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(r, "serverInfo"), "name")), "sbx");
    assert_non_null(strstr(json_string_value(json_object_get(r, "instructions")), "embedded"));
    json_decref(j);
    j = send1("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{"
              "\"protocolVersion\":\"2025-06-18\"}}");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "result"), "protocolVersion")),
        "2025-06-18");
    json_decref(j);
    j = send1("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"initialize\",\"params\":{"
              "\"protocolVersion\":\"1999-01-01\"}}");
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(j, "result"), "protocolVersion")),
        "2025-11-25");
    json_decref(j);
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"initialize\"}", -32602, "3",
                 "protocolVersion");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"initialize\",\"params\":{"
                 "\"protocolVersion\":20251125}}",
                 -32602, "4", "protocolVersion");
}

static void test_tools_list(void **state)
{
    const char *names[] = {"sandbox_run",        "sandbox_end",      "sandbox_job",
                           "sandbox_cancel",     "sandbox_queue",    "sandbox_read_file",
                           "sandbox_write_file", "sandbox_snapshot", "sandbox_fork"};
    json_t *j = send1("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/list\"}");
    json_t *tools = json_object_get(json_object_get(j, "result"), "tools");

    (void)state;
    assert_int_equal(json_array_size(tools), 9);
    for (size_t i = 0; i < 9; i++) {
        json_t *t = json_array_get(tools, i);
        json_t *s = json_object_get(t, "inputSchema");

        assert_string_equal(json_string_value(json_object_get(t, "name")), names[i]);
        assert_string_equal(json_string_value(json_object_get(s, "type")), "object");
        assert_true(json_is_false(json_object_get(s, "additionalProperties")));
        assert_non_null(json_object_get(t, "description"));
    }
    assert_string_equal(
        json_string_value(json_array_get(
            json_object_get(json_object_get(json_array_get(tools, 0), "inputSchema"), "required"),
            0)),
        "argv");
    json_decref(j);
}

/* ---- tools/call ----------------------------------------------------------- */

static json_t *call_tool(const char *name, const char *args_json)
{
    char *line = xasprintf("{\"jsonrpc\":\"2.0\",\"id\":\"c\",\"method\":\"tools/call\","
                           "\"params\":{\"name\":\"%s\"%s%s}}",
                           name, args_json ? ",\"arguments\":" : "", args_json ? args_json : "");
    json_t *j = send1(line);

    free(line);
    assert_non_null(j);
    return j;
}

static int is_error(json_t *j)
{
    return json_is_true(json_object_get(json_object_get(j, "result"), "isError"));
}

static const char *text_of(json_t *j)
{
    return json_string_value(json_object_get(
        json_array_get(json_object_get(json_object_get(j, "result"), "content"), 0), "text"));
}

static void expect_tool_error(const char *name, const char *args, const char *needle)
{
    json_t *j = call_tool(name, args);

    if (!is_error(j)) {
        fail_msg("%s %s: not an error", name, args ? args : "");
    }
    if (strstr(text_of(j), needle) == NULL) {
        fail_msg("'%s' not in '%s'", needle, text_of(j));
    }
    assert_non_null(json_object_get(json_object_get(j, "result"), "structuredContent"));
    json_decref(j);
}

static void test_call_protocol_errors(void **state)
{
    (void)state;
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"no_such_tool\",\"arguments\":{}}}",
                 -32602, "1", "Unknown tool");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"tools/call\",\"params\":{}}", -32602,
                 "2", "name");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":3,\"method\":\"tools/call\"}", -32602, "3", "name");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":4,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":5}}",
                 -32602, "4", "name");
    expect_error("{\"jsonrpc\":\"2.0\",\"id\":5,\"method\":\"tools/call\",\"params\":{"
                 "\"name\":\"sandbox_run\",\"arguments\":[\"ls\"]}}",
                 -32602, "5", "arguments");
}

static void test_call_bad_arguments(void **state)
{
    (void)state;
    runs = 0;
    expect_tool_error("sandbox_run", NULL, "argv");
    expect_tool_error("sandbox_run", "{}", "argv");
    expect_tool_error("sandbox_run", "{\"argv\":\"ls -l\"}", "argv");
    expect_tool_error("sandbox_run", "{\"argv\":[]}", "argv");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\",3]}", "argv[1]");
    expect_tool_error("sandbox_run", "{\"argv\":[\"\"]}", "argv[0]");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"timeout\":0}", "timeout");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"timeout\":\"5\"}", "timeout");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"timeout\":1.5}", "timeout");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"task\":7}", "task");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"task\":\"\"}", "task");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"pool\":[]}", "pool");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"shell\":true}", "unknown argument");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"worktree\":\"/etc\"}",
                      "outside the project");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"worktree\":\"..\"}",
                      "outside the project");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"worktree\":\"/no/such/dir\"}",
                      "outside the project");
    expect_tool_error("sandbox_run", "{\"argv\":[\"ls\"],\"worktree\":\"no/such/dir\"}",
                      "No such file");
    expect_tool_error("sandbox_end", "{}", "'task' is required");
    expect_tool_error("sandbox_end", "{\"task\":1}", "task");
    expect_tool_error("sandbox_job", "{\"id\":\"j-1\"}", "unknown argument");
    expect_tool_error("sandbox_cancel", NULL, "'job' is required");
    expect_tool_error("sandbox_queue", "{\"all\":true}", "unknown argument");
    assert_int_equal(runs, 0); /* nothing reached the backend */
}

static void test_call_results(void **state)
{
    json_t *j;
    json_t *sc;

    (void)state;
    j = call_tool("sandbox_run", "{\"argv\":[\"ok\"],\"task\":\"t9\"}");
    assert_false(is_error(j));
    sc = json_object_get(json_object_get(j, "result"), "structuredContent");
    assert_int_equal(json_integer_value(json_object_get(sc, "exit_status")), 7);
    assert_string_equal(json_string_value(json_object_get(sc, "task")), "t9");
    assert_non_null(strstr(text_of(j), "exit status 7"));
    assert_non_null(strstr(text_of(j), "out\n"));
    assert_non_null(strstr(text_of(j), "no runner configured"));
    json_decref(j);
    j = call_tool("sandbox_run", "{\"argv\":[\"ok\"],\"worktree\":\".\"}");
    assert_false(is_error(j));
    json_decref(j);
    j = call_tool("sandbox_run", "{\"argv\":[\"fail\"]}");
    assert_true(is_error(j)); /* a task failure: a result with isError */
    json_decref(j);
    expect_tool_error("sandbox_run", "{\"argv\":[\"refuse\"]}", "refused by the fake");
    expect_tool_error("sandbox_end", "{\"task\":\"missing\"}", "no such thing");
    j = call_tool("sandbox_job", "{\"job\":\"j-1\"}");
    assert_false(is_error(j));
    json_decref(j);
    j = call_tool("sandbox_queue", NULL);
    assert_false(is_error(j));
    assert_string_equal(
        json_string_value(json_object_get(
            json_object_get(json_object_get(j, "result"), "structuredContent"), "mode")),
        "fake");
    json_decref(j);
}

/* ---- the stdio loop: a 10 MB line, then more requests ------------------- */

static void test_serve_long_line(void **state)
{
    char *dir = test_mkdtemp();
    char *path = xasprintf("%s/in", dir);
    FILE *f = fopen(path, "w");
    size_t big = 10u << 20;
    char *junk = xmalloc(big);
    int fd;
    json_t *j;

    (void)state;
    memset(junk, 'a', big);
    memcpy(junk, "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"ping\",\"params\":{\"x\":\"", 56);
    fwrite(junk, 1, big, f);
    fputs("\"}}\n", f);
    fputs("{\"jsonrpc\":\"2.0\",\"id\":2,\"method\":\"ping\"}\n", f);
    fwrite(junk, 1, SBX_JSONRPC_MAX_LINE - 100, f); /* long but allowed: a parse error */
    fputs("\n{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"method\":\"ping\"}", f); /* no newline */
    fclose(f);
    free(junk);
    fd = open(path, O_RDONLY);
    cap_reset(&cap);
    sbx_mcp_server_serve(srv, fd, NULL);
    close(fd);
    assert_int_equal(cap.n, 4);
    j = json_loads(cap.lines[0], 0, NULL);
    assert_int_equal(err_code(j), -32600);
    assert_non_null(strstr(err_msg(j), "longer than"));
    assert_true(json_is_null(json_object_get(j, "id")));
    json_decref(j);
    assert_string_equal(cap.lines[1], "{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}");
    j = json_loads(cap.lines[2], 0, NULL);
    assert_int_equal(err_code(j), -32700);
    json_decref(j);
    assert_string_equal(cap.lines[3], "{\"jsonrpc\":\"2.0\",\"id\":\"last\",\"result\":{}}");
    unlink(path);
    rmdir(dir);
    free(path);
    free(dir);
}

/* ---- runner configured: no fallback ------------------------------------- */

static void test_runner_mode_fails_clearly(void **state)
{
    char *dir = test_mkdtemp();
    char *conf =
        test_write_file(dir, "sbx.conf", "runner = { listen = \"unix:/tmp/none.sock\"; };\n");
    sbx_error_t *err = NULL;
    struct sbx_config *cfg = sbx_config_load_file(conf, &err);
    struct sbx_mcp_backend b;
    struct sbx_mcp_server *s;
    struct capture c = {0};
    const char *line = "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{"
                       "\"name\":\"sandbox_run\",\"arguments\":{\"argv\":[\"true\"]}}}";
    json_t *j;

    (void)state;
    assert_non_null(cfg);
    assert_int_equal(sbx_mcp_backend_open(cfg, "/nonexistent", &b, &err), 0);
    assert_string_equal(b.ops->mode, "runner");
    s = sbx_mcp_server_new(&b, cap_write, &c);
    sbx_mcp_server_line(s, line, strlen(line), 0);
    assert_int_equal(c.n, 1);
    j = json_loads(c.lines[0], 0, NULL);
    assert_true(json_is_true(json_object_get(json_object_get(j, "result"), "isError")));
    /* the runner is down: the call fails with the reason, nothing runs here */
    assert_non_null(strstr(c.lines[0], "runner not reachable at /tmp/none.sock"));
    json_decref(j);
    sbx_mcp_server_free(s);
    cap_reset(&c);
    sbx_config_destroy(cfg);
    test_rm_rf(dir);
    free(conf);
    free(dir);
}

/* ---- output capture ------------------------------------------------------ */

static void test_utf8_clean(void **state)
{
    char *s;
    json_t *js;

    (void)state;
    s = sbx_mcp_utf8_clean("ok \xc3\xa9 \xff\xfe \xe2\x82 \xed\xa0\x80 x\0y", 19);
    js = json_string(s); /* jansson accepts only valid UTF-8 */
    assert_non_null(js);
    json_decref(js);
    assert_non_null(strstr(s, "\xc3\xa9"));
    assert_null(strchr(s, '\xff'));
    assert_non_null(strstr(s, "\xef\xbf\xbd"));
    assert_non_null(strstr(s, "x\xef\xbf\xbdy"));
    free(s);
}

static void test_outbuf_head_and_tail(void **state)
{
    struct sbx_mcp_outbuf b = {0};
    char chunk[1000];
    char *text;
    int trunc;

    (void)state;
    sbx_mcp_outbuf_add(&b, "first\n", 6);
    text = sbx_mcp_outbuf_text(&b, &trunc);
    assert_string_equal(text, "first\n");
    assert_false(trunc);
    free(text);
    memset(chunk, 'm', sizeof(chunk));
    for (int i = 0; i < 300; i++) {
        sbx_mcp_outbuf_add(&b, chunk, sizeof(chunk));
    }
    sbx_mcp_outbuf_add(&b, "\xc3", 1); /* a character cut in two at the end... */
    sbx_mcp_outbuf_add(&b, "\xa9last\n", 6);
    text = sbx_mcp_outbuf_text(&b, &trunc);
    assert_true(trunc);
    assert_int_equal(b.total, 6 + 300000 + 7);
    assert_true(strncmp(text, "first\n", 6) == 0);
    assert_non_null(strstr(text, "bytes omitted"));
    assert_non_null(strstr(text, "\xc3\xa9last\n")); /* ...is whole again */
    assert_true(strlen(text) < SBX_MCP_OUTPUT_CAP + 100);
    free(text);
    sbx_mcp_outbuf_free(&b);
}

/* (added, issue 30) sandbox_write_file then sandbox_read_file: text, base64, bad arguments */
static void test_file_tools(void **state)
{
    json_t *j;
    json_t *sc;

    (void)state;
    j = call_tool("sandbox_write_file",
                  "{\"task\":\"t1\",\"path\":\"/tmp/a\",\"content\":\"hi\\n\"}");
    assert_false(is_error(j));
    json_decref(j);
    j = call_tool("sandbox_read_file", "{\"task\":\"t1\",\"path\":\"/tmp/a\"}");
    assert_false(is_error(j));
    sc = json_object_get(json_object_get(j, "result"), "structuredContent");
    assert_string_equal(json_string_value(json_object_get(sc, "content")), "hi\n");
    assert_string_equal(json_string_value(json_object_get(sc, "encoding")), "utf-8");
    json_decref(j);
    /* bytes that are not UTF-8 (0xff 0x00 0x41) go both ways as base64 */
    j = call_tool("sandbox_write_file", "{\"task\":\"t1\",\"path\":\"/tmp/b\",\"content\":\"/wBB\","
                                        "\"encoding\":\"base64\"}");
    assert_false(is_error(j));
    json_decref(j);
    assert_int_equal(fake_len, 3);
    assert_memory_equal(fake_file, "\xff\0A", 3);
    j = call_tool("sandbox_read_file", "{\"task\":\"t1\",\"path\":\"/tmp/b\"}");
    sc = json_object_get(json_object_get(j, "result"), "structuredContent");
    assert_string_equal(json_string_value(json_object_get(sc, "encoding")), "base64");
    assert_string_equal(json_string_value(json_object_get(sc, "content")), "/wBB");
    json_decref(j);
    expect_tool_error("sandbox_read_file", "{\"task\":\"t1\",\"path\":\"relative\"}", "absolute");
    expect_tool_error("sandbox_read_file", "{\"task\":\"t1\"}", "required");
    expect_tool_error("sandbox_read_file", "{\"task\":\"../x\",\"path\":\"/a\"}", "task id");
    expect_tool_error("sandbox_read_file", "{\"task\":\"t1\",\"path\":\"/a\",\"x\":\"1\"}",
                      "unknown argument");
    expect_tool_error(
        "sandbox_write_file",
        "{\"task\":\"t1\",\"path\":\"/a\",\"content\":\"!!\",\"encoding\":\"base64\"}", "base64");
    expect_tool_error("sandbox_read_file", "{\"task\":\"t1\",\"path\":\"/big\"}", "1 MiB");
}

/* (added, issue 30) sandbox_snapshot, sandbox_fork and sandbox_run's `from` */
static void test_snapshot_tools(void **state)
{
    json_t *j;
    json_t *sc;

    (void)state;
    j = call_tool("sandbox_snapshot", "{\"task\":\"t1\"}");
    assert_false(is_error(j));
    sc = json_object_get(json_object_get(j, "result"), "structuredContent");
    assert_string_equal(json_string_value(json_object_get(sc, "id")), "s-0123456789ab");
    assert_true(json_is_false(json_object_get(sc, "fork")));
    json_decref(j);
    j = call_tool("sandbox_fork", "{\"task\":\"t1\",\"new_task\":\"t2\"}");
    assert_false(is_error(j));
    sc = json_object_get(json_object_get(j, "result"), "structuredContent");
    assert_string_equal(json_string_value(json_object_get(sc, "task")), "t2");
    assert_string_equal(json_string_value(json_object_get(sc, "fork_of")), "t1");
    assert_true(json_is_true(json_object_get(json_object_get(sc, "snapshot"), "fork")));
    assert_string_equal(fake_from, "s-0123456789ab"); /* the fork's run starts from it */
    json_decref(j);
    j = call_tool("sandbox_fork", "{\"task\":\"t1\"}"); /* a generated id */
    assert_false(is_error(j));
    sc = json_object_get(json_object_get(j, "result"), "structuredContent");
    assert_true(strncmp(json_string_value(json_object_get(sc, "task")), "t-", 2) == 0);
    json_decref(j);
    j = call_tool("sandbox_run", "{\"argv\":[\"x\"],\"task\":\"t3\",\"from\":\"s-0123456789ab\"}");
    assert_false(is_error(j));
    assert_string_equal(fake_from, "s-0123456789ab");
    json_decref(j);
    expect_tool_error("sandbox_fork", "{\"task\":\"t1\",\"new_task\":\"nofork\"}",
                      "snapshot s-0123456789ab made (kept), but the new task nofork did not start");
    expect_tool_error("sandbox_snapshot", "{\"task\":\"missing\"}", "no task 'missing'");
    expect_tool_error("sandbox_fork", "{\"task\":\"missing\"}", "no task 'missing'");
    expect_tool_error("sandbox_snapshot", "{}", "'task' is required");
    expect_tool_error("sandbox_snapshot", "{\"task\":\"t1\",\"new_task\":\"x\"}",
                      "unknown argument");
    expect_tool_error("sandbox_fork", "{\"task\":\"t1\",\"new_task\":\"../x\"}",
                      "'new_task' is not a valid task id");
    expect_tool_error("sandbox_fork", "{\"task\":7}", "string");
    expect_tool_error("sandbox_run", "{\"argv\":[\"x\"],\"from\":7}", "from");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_invalid_json, setup, teardown),
        cmocka_unit_test_setup_teardown(test_not_an_object, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_and_wrong_fields, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notification_with_id, setup, teardown),
        cmocka_unit_test_setup_teardown(test_notifications_get_no_reply, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ids_echoed_unchanged, setup, teardown),
        cmocka_unit_test_setup_teardown(test_unknown_methods, setup, teardown),
        cmocka_unit_test_setup_teardown(test_initialize, setup, teardown),
        cmocka_unit_test_setup_teardown(test_tools_list, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_protocol_errors, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_bad_arguments, setup, teardown),
        cmocka_unit_test_setup_teardown(test_call_results, setup, teardown),
        cmocka_unit_test_setup_teardown(test_serve_long_line, setup, teardown),
        cmocka_unit_test(test_runner_mode_fails_clearly),
        cmocka_unit_test_setup_teardown(test_file_tools, setup, teardown),
        cmocka_unit_test_setup_teardown(test_snapshot_tools, setup, teardown),
        cmocka_unit_test(test_utf8_clean),
        cmocka_unit_test(test_outbuf_head_and_tail),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
