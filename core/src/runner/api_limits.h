/* api_limits.h - a listener's caps on request heads and bodies and its
 * deadlines (api_limits.c). */
#ifndef SBX_RUNNER_API_LIMITS_H
#define SBX_RUNNER_API_LIMITS_H

struct runner_listener;
struct evhttp;
struct event_base;
struct evhttp_request;

/* Caps a listener's request heads and bodies and installs the deadline. */
int runner_api_limits(struct runner_listener *l, struct evhttp *http, struct event_base *base);
/* After evhttp_free: drops what the listener still holds. */
void runner_api_limits_free(struct runner_listener *l);
/* The connection of req delivered a complete request: its deadline ends. */
void runner_conn_request_done(struct runner_listener *l, struct evhttp_request *req);

#endif
