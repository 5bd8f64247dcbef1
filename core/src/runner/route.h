/* route.h - the runner API's routes as one table (docs/architecture.md, "HTTP/1
 * heads and the API's routes"; the table itself is in api_routes.c).
 *
 * A row is {method, pattern, scope, handler, doc}:
 *   method   one EVHTTP_REQ_* value (a path with GET and POST has two rows), or
 *            RUNNER_ROUTE_ANY for a handler that takes every method (a proxy);
 *   pattern  "/v1/jobs/{id}/output": literal segments and captures; "{id}" is one
 *            segment that must be a job or task id (1-63 of [A-Za-z0-9._:-], else
 *            400 "job id '...'" named after the segment before it); "{name}" (any
 *            other name) one segment of at most 64 bytes, checked by the handler;
 *            a last segment "*" matches the rest of the path (c->rest, may be "");
 *   scope    the scopes of which the client needs one (SBX_SCOPE_*, or'ed), else
 *            403 "client 'C' lacks scope 'S'"; 0 when any authenticated client may
 *            call it or the handler decides (an owner check needs the record);
 *   handler  void fn(const struct runner_route_call *c): c->arg[0..] are the
 *            captures in order, c->query the query string (NULL none), c->l the
 *            listener the request came on (a handler that takes the connection
 *            over, or tells TCP from the unix socket, needs it);
 *   doc      NULL, or a few words for the 405 reply ("list jobs": "use GET to
 *            list jobs, POST to submit one").
 * The router answers 404 for a path no row matches and 405 (with the methods the
 * path takes) for a path matched with another method. Adding an endpoint is one
 * row and its handler. */
#ifndef SBX_RUNNER_ROUTE_H
#define SBX_RUNNER_ROUTE_H

#include <stddef.h>

struct sbx_runner;
struct evhttp_request;
struct runner_client;
struct runner_listener;

#define RUNNER_ROUTE_ARGS 3     /* captures per pattern */
#define RUNNER_ROUTE_ARG_MAX 64 /* bytes of one capture */
#define RUNNER_ROUTE_ANY 0x1ff  /* every EVHTTP_REQ_* (GET .. PATCH) */

struct runner_route_call {
    struct sbx_runner *r;
    struct runner_listener *l;
    int tcp; /* (added) the request came on the TCP listener */
    struct evhttp_request *req;
    const struct runner_client *who;
    const char *path;
    const char *query; /* NULL: none */
    char arg[RUNNER_ROUTE_ARGS][RUNNER_ROUTE_ARG_MAX + 1];
    const char *rest; /* what a last "*" matched */
};

struct runner_route {
    int method; /* enum evhttp_cmd_type, or RUNNER_ROUTE_ANY */
    const char *pattern;
    unsigned scope;
    void (*handler)(const struct runner_route_call *c);
    const char *doc;
};

enum runner_route_result {
    RUNNER_ROUTE_FOUND,
    RUNNER_ROUTE_NOT_FOUND, /* 404 */
    RUNNER_ROUTE_METHOD,    /* 405: *allowed has the path's methods */
    RUNNER_ROUTE_BAD_ID,    /* 400: msg says which */
};

/* Finds the row for method and path; on FOUND *hit and c->arg / c->rest are set.
 * *allowed gets the methods the path takes (or'ed), msg the 400's text. Pure. */
enum runner_route_result runner_route_find(const struct runner_route *table, size_t n, int method,
                                           const char *path, struct runner_route_call *c,
                                           const struct runner_route **hit, int *allowed, char *msg,
                                           size_t mlen);
/* "use GET to list jobs, POST to submit one" for the rows of path's pattern. */
void runner_route_allowed(const struct runner_route *table, size_t n, const char *path, char *out,
                          size_t len);

/* Handlers of api_http.c that the table names. */
void runner_api_metrics(const struct runner_route_call *c);
void runner_api_queue(const struct runner_route_call *c);
void runner_api_slots(const struct runner_route_call *c);
/* api_snap.c: snapshots and egress changes */
void runner_api_task_snapshot(const struct runner_route_call *c);
/* (added) 1 when the query has NAME=1 or NAME=true (api_routes.c) */
int runner_query_flag(const char *query, const char *name);
void runner_api_task_egress(const struct runner_route_call *c);
void runner_api_snapshots_list(const struct runner_route_call *c);
void runner_api_snapshot_rm(const struct runner_route_call *c);
/* api_term.c: a task's terminal and ports (the connection taken over) */
void runner_api_task_terminal(const struct runner_route_call *c);
void runner_api_task_port(const struct runner_route_call *c);
void runner_api_task_archive(const struct runner_route_call *c); /* (added, issue 31) */
/* api_files.c: a task's files, its pause and resume */
void runner_api_task_files(const struct runner_route_call *c);
void runner_api_task_pause(const struct runner_route_call *c);
void runner_api_task_resume(const struct runner_route_call *c);

/* The API's table (api_routes.c). */
extern const struct runner_route runner_api_routes[];
extern const size_t runner_api_routes_n;

#endif
