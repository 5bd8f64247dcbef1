/* api_routes.c - the runner API's routes: one table (route.h says the row format;
 * docs/api.md the endpoints). A new endpoint is one row here and its handler;
 * the router (api_http.c) checks the method (405), the path (404), {id} (400) and
 * the scope (403) before the handler runs. */
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <string.h>

#include "runner/route.h"
#include "runner/api_int.h"
#include "config/config.h"

/* follow=1|true, frames=1|true, fork=1|true (route.h) */
int runner_query_flag(const char *query, const char *name)
{
    struct evkeyvalq q;
    const char *v;
    int on;

    if (query == NULL) {
        return 0;
    }
    evhttp_parse_query_str(query, &q);
    v = evhttp_find_header(&q, name);
    on = v != NULL && (strcmp(v, "1") == 0 || strcmp(v, "true") == 0);
    evhttp_clear_headers(&q);
    return on;
}

static void healthz(const struct runner_route_call *c)
{
    runner_handle_health(c->r, c->req, 0);
}

static void readyz(const struct runner_route_call *c)
{
    runner_handle_health(c->r, c->req, 1);
}

static void jobs_list(const struct runner_route_call *c)
{
    runner_handle_jobs_list(c->r, c->req, c->who);
}

static void submit(const struct runner_route_call *c)
{
    runner_handle_submit(c->r, c->req, c->who);
}

static void job_get(const struct runner_route_call *c)
{
    runner_handle_job_get(c->r, c->req, c->arg[0], c->who);
}

static void job_output(const struct runner_route_call *c)
{
    runner_handle_output(c->r, c->req, c->arg[0], runner_query_flag(c->query, "follow"),
                         runner_query_flag(c->query, "frames"), c->who);
}

static void job_cancel(const struct runner_route_call *c)
{
    runner_handle_cancel(c->r, c->req, c->arg[0], c->who);
}

static void task_end(const struct runner_route_call *c)
{
    runner_handle_task_end(c->r, c->req, c->arg[0], c->who);
}

#define GET EVHTTP_REQ_GET
#define POST EVHTTP_REQ_POST
#define PUT EVHTTP_REQ_PUT
#define DELETE EVHTTP_REQ_DELETE
#define ANY RUNNER_ROUTE_ANY
#define READ (SBX_SCOPE_READ_OWN | SBX_SCOPE_READ_ALL)

/* {method, pattern, scope, handler, doc}: route.h. Scope 0 on a job or task:
 * the handler checks the owner (read-own/read-all, cancel-any) on the record. */
const struct runner_route runner_api_routes[] = {
    {GET, "/metrics", SBX_SCOPE_METRICS, runner_api_metrics, NULL},
    {GET, "/healthz", 0, healthz, NULL}, /* any client on TCP, none on the unix socket */
    {GET, "/readyz", 0, readyz, NULL},
    {GET, "/v1/queue", READ, runner_api_queue, NULL},
    {GET, "/v1/slots", READ, runner_api_slots, NULL},
    {GET, "/v1/jobs", READ, jobs_list, "list jobs"},
    {POST, "/v1/jobs", SBX_SCOPE_SUBMIT, submit, "submit one"},
    {GET, "/v1/jobs/{id}", 0, job_get, NULL},
    {GET, "/v1/jobs/{id}/output", 0, job_output, NULL},
    {POST, "/v1/jobs/{id}/cancel", 0, job_cancel, NULL},
    {POST, "/v1/tasks/{id}/end", 0, task_end, NULL},
    /* the task's owner alone (the handlers check it), with the scope */
    {POST, "/v1/tasks/{id}/snapshot", SBX_SCOPE_SNAPSHOT, runner_api_task_snapshot, NULL},
    {POST, "/v1/tasks/{id}/egress", SBX_SCOPE_EGRESS, runner_api_task_egress, NULL},
    {GET, "/v1/tasks/{id}/files", SBX_SCOPE_SUBMIT, runner_api_task_files, "read a file"},
    {PUT, "/v1/tasks/{id}/files", SBX_SCOPE_SUBMIT, runner_api_task_files, "write one"},
    {POST, "/v1/tasks/{id}/pause", SBX_SCOPE_SUBMIT, runner_api_task_pause, NULL},
    {POST, "/v1/tasks/{id}/resume", SBX_SCOPE_SUBMIT, runner_api_task_resume, NULL},
    /* the connection taken over (api_term.c); a terminal's other methods are 426 */
    {ANY, "/v1/tasks/{id}/terminal", SBX_SCOPE_EXEC, runner_api_task_terminal, NULL},
    {ANY, "/v1/tasks/{id}/ports", SBX_SCOPE_EXEC, runner_api_task_port, NULL}, /* 400 */
    {ANY, "/v1/tasks/{id}/ports/*", SBX_SCOPE_EXEC, runner_api_task_port, NULL},
    /* the snapshots the client made (any with cancel-any / read-all) */
    {GET, "/v1/snapshots", SBX_SCOPE_SNAPSHOT, runner_api_snapshots_list, NULL},
    {DELETE, "/v1/snapshots/{snap}", SBX_SCOPE_SNAPSHOT, runner_api_snapshot_rm, NULL},
    /* (added, issue 31) `sbx cp`'s streamed archives (api_term.c; the owner alone) */
    {ANY, "/v1/tasks/{id}/archive", SBX_SCOPE_SUBMIT, runner_api_task_archive, NULL},
};

const size_t runner_api_routes_n = sizeof(runner_api_routes) / sizeof(runner_api_routes[0]);
