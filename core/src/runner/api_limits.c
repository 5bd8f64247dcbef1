/* api_limits.c - what a peer that has not authenticated can make the runner
 * API hold (docs/api.md, "Limits before authentication"): the request head's
 * size (evhttp's cap, then 413 and the connection closed), its header lines
 * (431), the body (413), the time from accepting a connection to its first
 * complete request, and how many connections may be that far at once
 * (SBX_RUNNER_MAX_PENDING per listener). libevent 2.1 has no such deadline, and no callback
 * when it frees a connection: the runner makes each connection's bufferevent
 * itself (evhttp_set_bevcb) and holds a reference on it until the connection
 * delivers a request, so the socket stays valid for the deadline's shutdown();
 * a sweep every 250 ms drops the reference of a connection evhttp has freed
 * (its callbacks cleared), which is when the socket closes; until then reading
 * stops at a high-water mark of the largest request. evhttp frees everything
 * else the connection held. Loop thread only. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "runner/api_limits.h"
#include "runner/runner.h"
#include "util/log.h"
#include "util/xalloc.h"

#define SWEEP_MS 250
/* evhttp (2.1) keeps a body in the socket's buffer until all of it is there:
 * the mark is the largest head and body it accepts */
#define READ_HIGH_WATER (SBX_RUNNER_MAX_HEAD + 2 * SBX_RUNNER_MAX_BODY + 4096)

struct runner_conn_guard {
    struct runner_listener *l;
    struct bufferevent *bev; /* one reference is ours */
    struct event *timer;     /* the deadline; NULL once passed */
    int over;                /* over SBX_RUNNER_MAX_PENDING: closed at once */
    struct runner_conn_guard *prev, *next;
};

static void guard_drop(struct runner_conn_guard *g)
{
    if (g->timer != NULL) {
        event_free(g->timer);
    }
    if (g->prev != NULL) {
        g->prev->next = g->next;
    }
    else {
        g->l->guards = g->next;
    }
    if (g->next != NULL) {
        g->next->prev = g->prev;
    }
    g->l->n_guards--;
    bufferevent_decref(g->bev); /* evhttp freed it already: the socket closes */
    free(g);
}

/* evhttp clears a bufferevent's callbacks when it frees it. */
static int freed_by_evhttp(struct bufferevent *bev)
{
    bufferevent_data_cb r = NULL, w = NULL;
    bufferevent_event_cb e = NULL;
    void *arg = NULL;

    bufferevent_getcb(bev, &r, &w, &e, &arg);
    return r == NULL && w == NULL && e == NULL;
}

static void on_deadline(evutil_socket_t fd, short what, void *arg)
{
    struct runner_conn_guard *g = arg;
    evutil_socket_t s = bufferevent_getfd(g->bev);

    (void)fd;
    (void)what;
    event_free(g->timer);
    g->timer = NULL;
    if (freed_by_evhttp(g->bev)) {
        guard_drop(g);
        return;
    }
    if (!g->over) {
        sbx_warn("runner: %s connection sent no complete request within %d s: closed",
                 g->l->tcp ? "a TCP" : "a unix socket", SBX_RUNNER_HEADER_TIMEOUT_S);
    }
    if (s >= 0) {
        /* evhttp reads the end of the stream and frees the connection; the
         * sweep then drops our reference */
        shutdown(s, SHUT_RDWR);
    }
}

static void on_sweep(evutil_socket_t fd, short what, void *arg)
{
    struct runner_listener *l = arg;
    struct runner_conn_guard *g = l->guards;

    (void)fd;
    (void)what;
    while (g != NULL) {
        struct runner_conn_guard *next = g->next;

        if (freed_by_evhttp(g->bev)) {
            guard_drop(g);
        }
        g = next;
    }
}

static struct bufferevent *make_bev(struct event_base *base, void *arg)
{
    struct runner_listener *l = arg;
    struct runner_conn_guard *g = xcalloc(1, sizeof(*g));
    struct timeval tv = {SBX_RUNNER_HEADER_TIMEOUT_S, 0};

    g->l = l;
    /* over the cap: the deadline is now (evhttp sets the socket before the
     * loop runs the timer), so no peer holds more than the cap's worth */
    if (l->n_guards >= SBX_RUNNER_MAX_PENDING) {
        g->over = 1;
        tv.tv_sec = 0;
        if (!l->over) {
            sbx_warn("runner: %d %s connections still sending their first request: "
                     "closing new ones until fewer",
                     l->n_guards, l->tcp ? "TCP" : "unix socket");
        }
    }
    l->over = g->over;
    /* as evhttp makes its own: evhttp sets the socket right after */
    g->bev = bufferevent_socket_new(base, -1, BEV_OPT_CLOSE_ON_FREE);
    if (g->bev == NULL) {
        free(g);
        return NULL;
    }
    bufferevent_incref(g->bev);
    /* evhttp drains what it reads as it parses; a connection it has freed is
     * drained by no one until the sweep, so reading stops here */
    bufferevent_setwatermark(g->bev, EV_READ, 0, READ_HIGH_WATER);
    g->timer = evtimer_new(base, on_deadline, g);
    if (g->timer != NULL) {
        evtimer_add(g->timer, &tv);
    }
    g->next = l->guards;
    if (g->next != NULL) {
        g->next->prev = g;
    }
    l->guards = g;
    l->n_guards++;
    return g->bev;
}

void runner_conn_request_done(struct runner_listener *l, struct evhttp_request *req)
{
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *bev = c ? evhttp_connection_get_bufferevent(c) : NULL;

    for (struct runner_conn_guard *g = l->guards; g != NULL && bev != NULL; g = g->next) {
        if (g->bev == bev) {
            guard_drop(g); /* evhttp keeps its own reference */
            return;
        }
    }
}

int runner_api_limits(struct runner_listener *l, struct evhttp *http, struct event_base *base)
{
    struct timeval tv = {0, SWEEP_MS * 1000};

    evhttp_set_max_headers_size(http, SBX_RUNNER_MAX_HEAD);
    evhttp_set_max_body_size(http, 2 * SBX_RUNNER_MAX_BODY);
    evhttp_set_bevcb(http, make_bev, l);
    l->sweep = event_new(base, -1, EV_PERSIST, on_sweep, l);
    return l->sweep != NULL ? event_add(l->sweep, &tv) : -1;
}

void runner_api_limits_free(struct runner_listener *l)
{
    if (l->sweep != NULL) {
        event_free(l->sweep);
        l->sweep = NULL;
    }
    while (l->guards != NULL) {
        guard_drop(l->guards);
    }
}
