/* api_limits.h - a listener's caps on request heads and bodies and its
 * deadlines (api_limits.c). */
#ifndef SBX_RUNNER_API_LIMITS_H
#define SBX_RUNNER_API_LIMITS_H

struct sbx_runner;
struct evhttp;
struct event;
struct event_base;
struct evhttp_request;
struct runner_conn_guard;

/* One of the runner's two listeners (unix, tcp) and the connections on it
 * still sending their first request. */
struct runner_listener {
    struct sbx_runner *r;
    int tcp;
    /* connections still sending their first request (api_limits.c) */
    struct runner_conn_guard *guards;
    int n_guards;
    int over; /* the pending cap was hit (logged once until below it) */
    struct event *sweep;
};

/* Caps a listener's request heads and bodies and installs the deadline. */
int runner_api_limits(struct runner_listener *l, struct evhttp *http, struct event_base *base);
/* After evhttp_free: drops what the listener still holds. */
void runner_api_limits_free(struct runner_listener *l);
/* The connection of req delivered a complete request: its deadline ends. */
void runner_conn_request_done(struct runner_listener *l, struct evhttp_request *req);

#endif
