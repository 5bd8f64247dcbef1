/* boxinfo.c - what sandbox_queue shows (docs/mcp.md): the runner's queue
 * (GET /v1/queue) and its running and queued jobs, in the tool's shape, the
 * same whether the runner is `sbx serve` or this process's private one. */
#include <string.h>

#include "mcp/backend.h"

static const char *jstr(json_t *o, const char *k)
{
    return json_string_value(json_object_get(o, k));
}

/* The runner's tasks as the tool shows them. */
static json_t *tasks_view(json_t *tasks)
{
    json_t *out = json_array();
    json_t *t;
    size_t i;

    json_array_foreach(tasks, i, t)
    {
        const char *st = jstr(t, "state");
        int kept = json_is_true(json_object_get(t, "kept"));

        json_array_append_new(
            out, json_pack("{s:s?, s:s, s:s?, s:I, s:b, s:b, s:s?}", "task", jstr(t, "id"), "state",
                           st != NULL && strcmp(st, "ready") == 0 ? "running"
                           : st                                   ? st
                                                                  : "?",
                           "pool", jstr(t, "pool"), "running_jobs",
                           json_integer_value(json_object_get(t, "running")), "kept", kept,
                           "ends_with_command", !kept, "client", jstr(t, "client")));
    }
    return out;
}

/* Every pool's busy slots: {max, used, holders}. */
static json_t *slots_view(json_t *queue)
{
    json_t *holders = json_array();
    json_t *p;
    json_t *sl;
    size_t i;
    size_t k;

    json_array_foreach(json_object_get(queue, "pools"), i, p)
    {
        json_array_foreach(json_object_get(p, "slots"), k, sl)
        {
            const char *st = jstr(sl, "state");

            if (st != NULL && strcmp(st, "busy") == 0) {
                json_array_append_new(holders, json_pack("{s:O?, s:O?, s:O?, s:O?, s:O?}", "task",
                                                         json_object_get(sl, "task"), "job",
                                                         json_object_get(sl, "job"), "pool",
                                                         json_object_get(p, "pool"), "since",
                                                         json_object_get(sl, "since"), "held_for",
                                                         json_object_get(sl, "held_for")));
            }
        }
    }
    return json_pack("{s:O?, s:I, s:o}", "max",
                     json_object_get(json_object_get(queue, "box"), "max_sandboxes"), "used",
                     (json_int_t)json_array_size(holders), "holders", holders);
}

json_t *sbx_mcp_queue_view(json_t *queue, json_t *jobs, const char *mode, const char *runner)
{
    json_t *running = json_array();
    json_t *queued = json_array();
    json_t *j;
    size_t i;
    json_t *out;

    json_array_foreach(jobs, i, j)
    {
        const char *st = jstr(j, "state");
        json_t *e = json_pack("{s:s?, s:s?, s:s?, s:s?, s:O?}", "job", jstr(j, "id"), "task",
                              jstr(j, "task"), "state", st, "pool", jstr(j, "pool"), "command",
                              json_object_get(j, "argv"));

        json_array_append_new(st != NULL && strcmp(st, "queued") == 0 ? queued : running, e);
    }
    out = json_pack("{s:s, s:s, s:o, s:o, s:o, s:o, s:O?, s:O?}", "mode", mode, "runner", runner,
                    "tasks", tasks_view(json_object_get(queue, "tasks")), "running_jobs", running,
                    "queued", queued, "slots", slots_view(queue), "pools",
                    json_object_get(queue, "pools"), "box", json_object_get(queue, "box"));
    json_decref(queue);
    json_decref(jobs);
    return out;
}
