/* tools.c - the MCP tools: their input schemas, argument checks and results
 * (text for the model, the same data as structuredContent). Each is a thin
 * wrapper over one backend call (backend.h). Bad argument values and task
 * failures are results with isError (MCP 2025-11-25); only an unknown tool
 * is a protocol error (-32602). */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mcp/jsonrpc.h"
#include "mcp/server.h"
#include "util/confine.h"
#include "util/xalloc.h"

#define ID_PATTERN "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"
#define MAX_ARGV 4096

static json_t *str_prop(const char *desc)
{
    return json_pack("{s:s, s:s}", "type", "string", "description", desc);
}

static json_t *id_prop(const char *desc)
{
    return json_pack("{s:s, s:s, s:s}", "type", "string", "pattern", ID_PATTERN, "description",
                     desc);
}

static json_t *schema(json_t *props, const char *required)
{
    json_t *s = json_pack("{s:s, s:o, s:b}", "type", "object", "properties", props,
                          "additionalProperties", 0);

    if (required != NULL) {
        json_object_set_new(s, "required", json_pack("[s]", required));
    }
    return s;
}

static json_t *tool(const char *name, const char *title, const char *desc, json_t *input,
                    int read_only, int destructive, int idempotent)
{
    return json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name", name, "title",
                     title, "description", desc, "inputSchema", input, "annotations", "title",
                     title, "readOnlyHint", read_only, "destructiveHint", destructive,
                     "idempotentHint", idempotent, "openWorldHint", 0);
}

json_t *sbx_mcp_tools_list(void)
{
    json_t *tools = json_array();
    json_t *run = json_object();

    json_object_set_new(run, "argv",
                        json_pack("{s:s, s:{s:s}, s:i, s:i, s:s}", "type", "array", "items", "type",
                                  "string", "minItems", 1, "maxItems", MAX_ARGV, "description",
                                  "The command and its arguments, run directly "
                                  "(no shell): [\"make\", \"test\"]. For pipes or "
                                  "redirections use [\"sh\", \"-c\", \"...\"]."));
    json_object_set_new(run, "task",
                        id_prop("Keep one sandbox across calls: the first call with a new task "
                                "id starts its sandbox, later calls run in it and see its "
                                "files, sandbox_end removes it. Without a task id the command "
                                "runs in a fresh sandbox that is removed when it ends."));
    json_object_set_new(run, "pool",
                        json_pack("{s:s, s:[s, s], s:s}", "type", "string", "enum", "agent", "ci",
                                  "description",
                                  "Slot pool (default agent; with no runner configured, "
                                  "agent only). Applies when the call starts the task."));
    json_object_set_new(run, "worktree",
                        str_prop("Host directory mounted read-write at /workspace (the only "
                                 "host directory the sandbox sees): the project sbx mcp runs in, "
                                 "or a directory below it. Applies when the call starts the "
                                 "task."));
    json_object_set_new(run, "timeout",
                        json_pack("{s:s, s:i, s:s}", "type", "integer", "minimum", 1, "description",
                                  "Seconds before the command is killed "
                                  "(default 600; at most the configured limits.max)."));
    json_object_set_new(run, "provider",
                        str_prop("Sandbox provider instance (default: the configured provider, "
                                 "docker). Applies when the call starts the task."));
    json_object_set_new(run, "from",
                        json_pack("{s:s, s:s, s:s}", "type", "string", "pattern",
                                  "^s-[0-9a-f]{12}$", "description",
                                  "A snapshot id (sandbox_snapshot): the new task starts from "
                                  "its files. Only when the call starts the task."));
    json_array_append_new(
        tools, tool("sandbox_run", "Run a command in a sandbox",
                    "Runs a command in an isolated, resource-limited sandbox with filtered "
                    "network egress and returns its exit status, stdout and stderr (each capped "
                    "at 64 KiB: the first and last 32 KiB, with a note when cut). Give a task id "
                    "to keep the same sandbox, and its files, across calls; end it with "
                    "sandbox_end. Secret values are redacted from the output.",
                    schema(run, "argv"), 0, 1, 0));
    json_array_append_new(
        tools,
        tool("sandbox_end", "End a task",
             "Ends a task started by sandbox_run: cancels its running commands and "
             "removes its sandbox and files. Returns the task record.",
             schema(json_pack("{s:o}", "task", id_prop("The task id to end.")), "task"), 0, 1, 1));
    json_array_append_new(
        tools,
        tool("sandbox_job", "Show a job",
             "Shows one job (one sandbox_run command): its state (running, finished, "
             "failed, cancelled, timed_out), exit status, output so far and egress "
             "summary.",
             schema(json_pack("{s:o}", "job", str_prop("The job id sandbox_run returned.")), "job"),
             1, 0, 1));
    json_array_append_new(
        tools,
        tool("sandbox_cancel", "Cancel a job",
             "Cancels a running job: its command is killed; its task and sandbox stay.",
             schema(json_pack("{s:o}", "job", str_prop("The job id to cancel.")), "job"), 0, 1, 1));
    json_array_append_new(
        tools, tool("sandbox_queue", "Show tasks, jobs and slots",
                    "Shows the tasks this server holds, the running jobs, the queue and the "
                    "box's sandbox slots, and whether a runner is configured.",
                    schema(json_object(), NULL), 1, 0, 1));
    sbx_mcp_tools_files_list(tools); /* (added, issue 30) tools_files.c */
    sbx_mcp_tools_snap_list(tools);  /* (added, issue 30) tools_snap.c */
    return json_pack("{s:o}", "tools", tools);
}

/* ---- results ------------------------------------------------------------ */

json_t *sbx_mcp_result(json_t *structured, int is_error, const char *fmt, ...)
{
    va_list ap;
    char *text;
    json_t *r;

    va_start(ap, fmt);
    if (vasprintf(&text, fmt, ap) < 0) {
        abort();
    }
    va_end(ap);
    r = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", text);
    free(text);
    if (r == NULL) { /* the text was not UTF-8: never the case for our own texts */
        r = json_pack("{s:[{s:s, s:s}]}", "content", "type", "text", "text", "(unprintable)");
    }
    if (structured != NULL) {
        json_object_set_new(r, "structuredContent", structured);
    }
    if (is_error) {
        json_object_set_new(r, "isError", json_true());
    }
    return r;
}

static json_t *tool_error(const struct sbx_mcp_backend *b, const sbx_error_t *err)
{
    return sbx_mcp_result(
        json_pack("{s:s, s:s}", "error", sbx_error_msg(err), "mode", b->ops->mode), 1, "error: %s",
        sbx_error_msg(err));
}

static const char *jstr(json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));

    return s ? s : "";
}

static json_t *run_result(json_t *job)
{
    const char *state = jstr(job, "state");
    json_t *st = json_object_get(job, "exit_status");
    int finished = strcmp(state, "finished") == 0;
    char head[512];
    char notes[512] = "";
    char *text;
    json_t *r;

    if (finished) {
        snprintf(head, sizeof(head), "exit status %" JSON_INTEGER_FORMAT, json_integer_value(st));
    }
    else {
        snprintf(head, sizeof(head), "%s: %s", state, jstr(job, "error"));
    }
    for (int i = 0; i < 2; i++) {
        const char *name = i ? "stderr" : "stdout";
        char key[32];

        snprintf(key, sizeof(key), "%s_truncated", name);
        if (json_is_true(json_object_get(job, key))) {
            snprintf(key, sizeof(key), "%s_bytes", name);
            snprintf(notes + strlen(notes), sizeof(notes) - strlen(notes),
                     "[%s truncated: %" JSON_INTEGER_FORMAT " bytes in all; shown: the first "
                     "and the last %u KiB]\n",
                     name, json_integer_value(json_object_get(job, key)),
                     SBX_MCP_OUTPUT_CAP / 2048);
        }
    }
    if (asprintf(
            &text,
            "%s\njob %s, task %s%s, mode %s%s\n"
            "--- stdout ---\n%s%s--- stderr ---\n%s%s%s",
            head, jstr(job, "job"), jstr(job, "task"),
            json_is_true(json_object_get(job, "task_ended")) ? " (sandbox removed)" : "",
            jstr(job, "mode"),
            strcmp(jstr(job, "mode"), "embedded") == 0 ? " (no runner configured)" : "",
            jstr(job, "stdout"),
            jstr(job, "stdout")[0] && jstr(job, "stdout")[strlen(jstr(job, "stdout")) - 1] != '\n'
                ? "\n"
                : "",
            jstr(job, "stderr"),
            jstr(job, "stderr")[0] && jstr(job, "stderr")[strlen(jstr(job, "stderr")) - 1] != '\n'
                ? "\n"
                : "",
            notes) < 0) {
        abort();
    }
    r = sbx_mcp_result(job, !finished && strcmp(state, "running") != 0, "%s", text);
    free(text);
    return r;
}

static json_t *json_result(json_t *o, const char *what)
{
    char *s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    json_t *r = sbx_mcp_result(o, 0, "%s\n%s", what, s ? s : "{}");

    free(s);
    return r;
}

/* ---- arguments ---------------------------------------------------------- */

/* Checks that args has only the allowed keys; an error text or NULL. */
static char *check_keys(json_t *args, const char *const *allowed)
{
    const char *key;
    json_t *v;

    json_object_foreach(args, key, v)
    {
        int ok = 0;

        for (size_t i = 0; allowed[i] != NULL; i++) {
            ok |= strcmp(key, allowed[i]) == 0;
        }
        if (!ok) {
            return xasprintf("unknown argument '%.64s'", key);
        }
    }
    return NULL;
}

/* An optional string argument: 0 ok (out NULL when absent), -1 wrong type. */
static int opt_str(json_t *args, const char *key, const char **out, char **bad)
{
    json_t *v = json_object_get(args, key);

    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_string(v) || json_string_length(v) == 0 ||
        strlen(json_string_value(v)) != json_string_length(v)) {
        *bad = xasprintf("'%s' must be a non-empty string", key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

/* The worktree a model may mount: the directory `sbx mcp` runs in (the
 * project the agent works on) or one below it, never anything else of the
 * host: the runner's rule (util/confine.h) with the project as the one root,
 * so a symlink that leads out is refused, and so are /proc, /sys, /dev and
 * /run and any directory holding one of them (the state directory is the
 * runner's check, with this directory as its worktree root when it is sbx
 * mcp's own). An error
 * text, or NULL and *out (absolute, resolved). */
static char *project_path(const char *w, char **out)
{
    char *cwd = realpath(".", NULL);
    char *abs;
    char why[768];
    struct sbx_confine c;
    int rc;

    if (cwd == NULL) {
        return xasprintf("'worktree' %.200s: the current directory: %s", w, strerror(errno));
    }
    abs = w[0] == '/' ? xstrdup(w) : xasprintf("%s/%s", strcmp(cwd, "/") == 0 ? "" : cwd, w);
    rc = sbx_confine_init(&c, "the project (the directory sbx mcp was started in)",
                          (char *const[]){cwd, NULL}, 1, NULL, why, sizeof(why));
    if (rc == 0) {
        rc = sbx_confine_dir(&c, abs, out, why, sizeof(why));
    }
    sbx_confine_clear(&c);
    free(abs);
    free(cwd);
    return rc == 0 ? NULL : xasprintf("'worktree' %.200s: %s", w, why);
}

static json_t *call_run(const struct sbx_mcp_backend *b, json_t *args, struct sbx_mcp_call *call)
{
    static const char *const keys[] = {"argv",    "task",     "pool", "worktree",
                                       "timeout", "provider", "from", NULL};
    struct sbx_mcp_run r = {0};
    json_t *jargv = json_object_get(args, "argv");
    json_t *jt = json_object_get(args, "timeout");
    const char **argv = NULL;
    char *worktree = NULL;
    char *bad = check_keys(args, keys);
    sbx_error_t *err = NULL;
    json_t *job;
    json_t *res;

    if (bad == NULL && (!json_is_array(jargv) || json_array_size(jargv) == 0 ||
                        json_array_size(jargv) > MAX_ARGV)) {
        bad = xasprintf("'argv' must be a non-empty array of strings (at most %d), e.g. "
                        "[\"make\", \"test\"]",
                        MAX_ARGV);
    }
    if (bad == NULL) {
        argv = xcalloc(json_array_size(jargv) + 1, sizeof(char *));
        for (size_t i = 0; i < json_array_size(jargv) && bad == NULL; i++) {
            json_t *a = json_array_get(jargv, i);

            if (!json_is_string(a)) {
                bad = xasprintf("'argv[%zu]' must be a string", i);
            }
            else {
                argv[i] = json_string_value(a);
            }
        }
    }
    if (bad == NULL && argv[0][0] == '\0') {
        bad = xstrdup("'argv[0]' (the program) must not be empty");
    }
    if (bad == NULL && jt != NULL && !json_is_null(jt) &&
        (!json_is_integer(jt) || json_integer_value(jt) < 1)) {
        bad = xstrdup("'timeout' must be a whole number of seconds, at least 1");
    }
    if (bad == NULL) {
        r.timeout = jt && json_is_integer(jt) ? json_integer_value(jt) : 0;
    }
    if (bad == NULL && opt_str(args, "task", &r.task, &bad) == 0 &&
        opt_str(args, "pool", &r.pool, &bad) == 0 &&
        opt_str(args, "worktree", &r.worktree, &bad) == 0 &&
        opt_str(args, "provider", &r.provider, &bad) == 0) {
        opt_str(args, "from", &r.from, &bad); /* (added) checked by the backend */
    }
    if (bad == NULL && r.worktree != NULL) {
        bad = project_path(r.worktree, &worktree);
        r.worktree = worktree;
    }
    if (bad != NULL) {
        res = sbx_mcp_result(json_pack("{s:s}", "error", bad), 1, "invalid arguments: %s", bad);
        free(bad);
        free(argv);
        free(worktree);
        return res;
    }
    r.argv = argv;
    job = b->ops->run(b->ctx, &r, call, &err);
    free(argv);
    free(worktree);
    if (job == NULL) {
        res = tool_error(b, err);
        sbx_error_free(&err);
        return res;
    }
    return run_result(job);
}

/* sandbox_end, sandbox_job, sandbox_cancel: one id argument. */
static json_t *call_named(const struct sbx_mcp_backend *b, json_t *args, const char *key,
                          json_t *(*fn)(void *, const char *, sbx_error_t **), const char *what)
{
    const char *keys[] = {key, NULL};
    char *bad = check_keys(args, keys);
    const char *id = NULL;
    sbx_error_t *err = NULL;
    json_t *o;
    json_t *res;

    if (bad == NULL && opt_str(args, key, &id, &bad) == 0 && id == NULL) {
        bad = xasprintf("'%s' is required", key);
    }
    if (bad != NULL) {
        res = sbx_mcp_result(json_pack("{s:s}", "error", bad), 1, "invalid arguments: %s", bad);
        free(bad);
        return res;
    }
    o = fn(b->ctx, id, &err);
    if (o == NULL) {
        res = tool_error(b, err);
        sbx_error_free(&err);
        return res;
    }
    if (fn == b->ops->job) {
        json_t *r = run_result(o);

        /* a running job is not an error; the others as sandbox_run */
        return r;
    }
    return json_result(o, what);
}

json_t *sbx_mcp_tools_call(const struct sbx_mcp_backend *b, json_t *params,
                           struct sbx_mcp_call *call, int *code, char **msg)
{
    json_t *jname = json_object_get(params, "name");
    json_t *args = json_object_get(params, "arguments");
    const char *name = json_string_value(jname);
    json_t *empty = NULL;
    json_t *res;

    if (name == NULL) {
        *code = SBX_JSONRPC_INVALID_PARAMS;
        *msg = xstrdup("tools/call: \"name\" must be a string");
        return NULL;
    }
    if (args != NULL && !json_is_object(args) && !json_is_null(args)) {
        *code = SBX_JSONRPC_INVALID_PARAMS;
        *msg = xstrdup("tools/call: \"arguments\" must be an object");
        return NULL;
    }
    if (args == NULL || json_is_null(args)) {
        args = empty = json_object();
    }
    if (strcmp(name, "sandbox_run") == 0) {
        res = call_run(b, args, call);
    }
    else if (strcmp(name, "sandbox_end") == 0) {
        res = call_named(b, args, "task", b->ops->end, "task ended");
    }
    else if (strcmp(name, "sandbox_job") == 0) {
        res = call_named(b, args, "job", b->ops->job, "job");
    }
    else if (strcmp(name, "sandbox_cancel") == 0) {
        res = call_named(b, args, "job", b->ops->cancel, "cancel requested");
    }
    else if (strcmp(name, "sandbox_queue") == 0) {
        static const char *const none[] = {NULL};
        char *bad = check_keys(args, none);
        sbx_error_t *err = NULL;
        json_t *o = bad ? NULL : b->ops->queue(b->ctx, &err);

        if (bad != NULL) {
            res = sbx_mcp_result(json_pack("{s:s}", "error", bad), 1, "invalid arguments: %s", bad);
            free(bad);
        }
        else if (o == NULL) {
            res = tool_error(b, err);
            sbx_error_free(&err);
        }
        else {
            res = json_result(o, "sandbox queue");
        }
    }
    else if ((res = sbx_mcp_tools_files_call(b, name, args)) != NULL) { /* (added, issue 30) */
    }
    else if ((res = sbx_mcp_tools_snap_call(b, name, args, call)) != NULL) { /* (added) */
    }
    else {
        *code = SBX_JSONRPC_INVALID_PARAMS;
        *msg = xasprintf("Unknown tool: %.128s", name);
        res = NULL;
    }
    json_decref(empty);
    return res;
}
