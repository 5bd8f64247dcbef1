/* tools_snap.c - (added, issue 30) the MCP tools sandbox_snapshot and sandbox_fork
 * (docs/mcp.md): a snapshot of a kept task's files, and a new kept task started from
 * one (a snapshot with "fork": true, then a first command, `true`, in the new task with
 * `from`). The same rules as `sbx task snapshot|fork` and the API: no leased value in a
 * snapshot, the pool's quota, and in runner mode the scope `snapshot` (and `submit`). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mcp/server.h"
#include "sandbox/statedir.h"
#include "sandbox/task.h"
#include "util/xalloc.h"

#define ID_PATTERN "^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"

static json_t *bad_args(const char *msg)
{
    return sbx_mcp_result(json_pack("{s:s}", "error", msg), 1, "invalid arguments: %s", msg);
}

static json_t *failed(const struct sbx_mcp_backend *b, const char *msg)
{
    return sbx_mcp_result(json_pack("{s:s, s:s}", "error", msg, "mode", b->ops->mode), 1,
                          "error: %s", msg);
}

static json_t *id_prop(const char *desc)
{
    return json_pack("{s:s, s:s, s:s}", "type", "string", "pattern", ID_PATTERN, "description",
                     desc);
}

static json_t *tool(const char *name, const char *title, const char *desc, json_t *props,
                    int idempotent)
{
    json_t *schema = json_pack("{s:s, s:o, s:b, s:[s]}", "type", "object", "properties", props,
                               "additionalProperties", 0, "required", "task");

    return json_pack("{s:s, s:s, s:s, s:o, s:{s:s, s:b, s:b, s:b, s:b}}", "name", name, "title",
                     title, "description", desc, "inputSchema", schema, "annotations", "title",
                     title, "readOnlyHint", 0, "destructiveHint", 0, "idempotentHint", idempotent,
                     "openWorldHint", 0);
}

void sbx_mcp_tools_snap_list(json_t *tools)
{
    json_array_append_new(
        tools,
        tool("sandbox_snapshot", "Snapshot a sandbox's files",
             "Makes a snapshot of a kept task's files (never of its credentials: a snapshot "
             "that would hold a leased secret is refused). Returns its record; its id (s-...) "
             "is what sandbox_run's 'from' takes to start a new task from these files.",
             json_pack("{s:o}", "task", id_prop("The task id a sandbox_run call kept.")), 0));
    json_array_append_new(
        tools,
        tool("sandbox_fork", "Fork a sandbox",
             "Starts a new kept task from a kept task's current files (a snapshot, then a new "
             "sandbox from it). The fork has its own id, limits, egress rules and no "
             "credentials; parent and fork change independently afterwards. Returns the new "
             "task id and the snapshot; run commands in it with sandbox_run and its task id.",
             json_pack("{s:o, s:o}", "task", id_prop("The task to fork."), "new_task",
                       id_prop("The fork's task id (default: a new t-... id).")),
             0));
}

/* Only the allowed keys, strings, task required and valid. */
static const char *check(json_t *args, int fork, const char **task, const char **new_task)
{
    const char *k;
    json_t *v;

    json_object_foreach(args, k, v)
    {
        if (strcmp(k, "task") != 0 && !(fork && strcmp(k, "new_task") == 0)) {
            return fork ? "unknown argument (allowed: task, new_task)"
                        : "unknown argument (allowed: task)";
        }
        if (!json_is_string(v)) {
            return "every argument is a string";
        }
    }
    *task = json_string_value(json_object_get(args, "task"));
    *new_task = json_string_value(json_object_get(args, "new_task"));
    if (*task == NULL) {
        return "'task' is required";
    }
    if (!sbx_id_valid(*task, SBX_ID_TASK)) {
        return "'task' is not a valid task id";
    }
    if (*new_task != NULL && !sbx_id_valid(*new_task, SBX_ID_TASK)) {
        return "'new_task' is not a valid task id";
    }
    return NULL;
}

static json_t *fork_task(const struct sbx_mcp_backend *b, const char *task, const char *new_task,
                         struct sbx_mcp_call *call)
{
    static const char *const argv[] = {"true", NULL};
    sbx_error_t *err = NULL;
    json_t *rec = b->ops->snapshot(b->ctx, task, 1, &err);
    json_t *job;
    json_t *res;
    const char *snap;
    const char *state;
    char id[80];

    if (rec == NULL) {
        res = failed(b, sbx_error_msg(err));
        sbx_error_free(&err);
        return res;
    }
    snap = json_string_value(json_object_get(rec, "id"));
    if (new_task == NULL) {
        sbx_task_id_new(id, sizeof(id));
        new_task = id;
    }
    job = b->ops->run(b->ctx,
                      &(struct sbx_mcp_run){.argv = argv,
                                            .task = new_task,
                                            .pool = json_string_value(json_object_get(rec, "pool")),
                                            .from = snap},
                      call, &err);
    state = json_string_value(json_object_get(job, "state"));
    if (job == NULL || state == NULL || strcmp(state, "finished") != 0) {
        const char *why = job ? json_string_value(json_object_get(job, "error")) : NULL;
        char *msg = xasprintf("fork of %s: snapshot %s made (kept), but the new task %s did not "
                              "start: %s",
                              task, snap ? snap : "?", new_task,
                              job == NULL ? sbx_error_msg(err)
                              : why       ? why
                              : state     ? state
                                          : "?");

        res = failed(b, msg);
        free(msg);
    }
    else {
        res = sbx_mcp_result(json_pack("{s:s, s:s, s:s?, s:O}", "task", new_task, "fork_of", task,
                                       "job", json_string_value(json_object_get(job, "job")),
                                       "snapshot", rec),
                             0,
                             "forked task %s into task %s (snapshot %s); run commands in it with "
                             "sandbox_run and task \"%s\"",
                             task, new_task, snap ? snap : "?", new_task);
    }
    sbx_error_free(&err);
    json_decref(job);
    json_decref(rec);
    return res;
}

json_t *sbx_mcp_tools_snap_call(const struct sbx_mcp_backend *b, const char *name, json_t *args,
                                struct sbx_mcp_call *call)
{
    int fork = strcmp(name, "sandbox_fork") == 0;
    const char *task = NULL;
    const char *new_task = NULL;
    const char *bad;
    sbx_error_t *err = NULL;
    json_t *rec;
    json_t *res;
    char *text;

    if (!fork && strcmp(name, "sandbox_snapshot") != 0) {
        return NULL;
    }
    if ((bad = check(args, fork, &task, &new_task)) != NULL) {
        return bad_args(bad);
    }
    if (b->ops->snapshot == NULL) {
        return bad_args("this backend has no snapshots");
    }
    if (fork) {
        return fork_task(b, task, new_task, call);
    }
    rec = b->ops->snapshot(b->ctx, task, 0, &err);
    if (rec == NULL) {
        res = failed(b, sbx_error_msg(err));
        sbx_error_free(&err);
        return res;
    }
    text = json_dumps(rec, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    res = sbx_mcp_result(rec, 0,
                         "snapshot %s of task %s; start a task from it with sandbox_run and "
                         "from \"%s\"\n%s",
                         json_string_value(json_object_get(rec, "id")) ?: "?", task,
                         json_string_value(json_object_get(rec, "id")) ?: "?", text ? text : "");
    free(text);
    return res;
}
