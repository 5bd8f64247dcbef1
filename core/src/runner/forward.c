/* forward.c - a request about a job or task that another box of the fleet
 * holds goes to that box (docs/runner.md, "Several boxes"; docs/api.md,
 * "Forwarding"): the output (followed or not), a cancel, a kept task's next
 * command and a task's end; (added, issue 30) a task's files (a 200 streamed,
 * keeping the read timeout), pause and resume, snapshot (600 s for the reply)
 * and egress change (runner_forward_task_to, once fwd_owner.c has read the
 * owner on the store thread; a terminal and ports are relayed as bytes by
 * fwd_tunnel.c). The box that receives the request checks the
 * client's scopes against the shared record, sends the request to the
 * owner's API address (its `boxes` row) with the marker X-Sbx-Forwarded-By,
 * and relays the owner's answer, streaming for the output.
 *
 * Bounded: a connect and a read timeout, at most fwd_cap's forwards to one
 * box and of one client at a time, the owner's reply head
 * read under fwd_parse.h's caps and a non-streamed body under FWD_BODY_MAX,
 * and a relay that pauses reading the owner while the caller has more than
 * FWD_BUFFERED bytes unsent (dropped, logged, after FWD_STALL_S paused). One
 * hop: a request that carries the marker is never forwarded again.
 * Loop thread only. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "runner/fwd_parse.h"
#include "runner/state.h"
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/fleet.h"
#include "runner/forward.h"
#include "runner/storeq.h"
#include "util/log.h"
#include "util/xalloc.h"

#define FWD_CONNECT_S 5
#define FWD_READ_S 30           /* a reply that is not a followed output */
#define FWD_SLOW_S 600          /* (added) a snapshot or a pause to disk being made */
#define FWD_BODY_MAX (1u << 20) /* a reply that is not output: JSON */
#define FWD_BUFFERED (1u << 20) /* unsent to a slow caller before the relay pauses */
#define FWD_STALL_S 30          /* paused that long: the forward is dropped */
#define FWD_POLL_MS 50          /* while paused */
#define FWD_WAIT_MS 500         /* a follow of a queued job checks its record */
#define FWD_WAIT_MAX_S 3600     /* ... and gives up */
#define FWD_WAIT_PER_CLIENT 32  /* follows of queued jobs per client */

/* at most 32 forwards to one box and 8 of one client at a time (503, 429) */
static const struct runner_fwd_cap fwd_cap = {32, 8, "forwards", "in flight"};

struct runner_fwd {
    struct sbx_runner *r;
    struct evhttp_request *req;     /* the caller's */
    struct evhttp_connection *conn; /* ... and its connection */
    struct bufferevent *bev;        /* to the owner */
    struct event *poll;             /* while paused */
    char box[64];
    char client[64];
    char what[96]; /* "job J", "task T" */
    int stream;    /* the output: relayed as it comes */
    int frames;    /* ... in frames (an error can follow at a frame's end) */
    int keep_rt;   /* (added) a stream that keeps its read timeout (a file, not a follow) */
    int started;   /* the caller's reply started */
    int paused_ms;
    struct fwd_reply p;
    struct fwd_frames fr;
    struct evbuffer *body; /* a reply that is not streamed */
    /* (a follow waiting for a claim: no bev, box "") */
    int waiting;
    /* (added) its record's read is with the store thread (storeq.h): the
     * call owns f until it comes back; gone: the caller left meanwhile */
    int polling, gone, queued;
    char id[SBX_SCHED_ID_MAX + 1];
    struct runner_client who;
    struct runner_fwd *next;
};

/* The runner's forwards in flight (r->fwds). */
static void unlink_fwd(struct runner_fwd *f)
{
    for (struct runner_fwd **pp = &f->r->fwds; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == f) {
            *pp = f->next;
            return;
        }
    }
}

static void fwd_free(struct runner_fwd *f)
{
    unlink_fwd(f);
    if (f->conn != NULL) {
        evhttp_connection_set_closecb(f->conn, NULL, NULL);
    }
    if (f->bev != NULL) {
        bufferevent_free(f->bev);
    }
    if (f->poll != NULL) {
        event_free(f->poll);
    }
    if (f->body != NULL) {
        evbuffer_free(f->body);
    }
    free(f);
}

int runner_forwarded(struct evhttp_request *req)
{
    return evhttp_find_header(evhttp_request_get_input_headers(req), RUNNER_FWD_HEADER) != NULL;
}

/* (added) The peer of req's connection is a process of the runner's own
 * user (SO_PEERCRED: the kernel's word, not the peer's); *uid gets its uid. */
static int peer_is_runner(struct evhttp_request *req, unsigned *uid)
{
    struct evhttp_connection *c = evhttp_request_get_connection(req);
    struct bufferevent *b = c ? evhttp_connection_get_bufferevent(c) : NULL;
    evutil_socket_t fd = b ? bufferevent_getfd(b) : -1;
    struct ucred uc;
    socklen_t len = sizeof(uc);

    *uid = (unsigned)-1;
    if (fd < 0 || getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0) {
        return 0;
    }
    *uid = (unsigned)uc.uid;
    return uc.uid == geteuid();
}

const struct runner_client *runner_forwarded_client(struct sbx_runner *r,
                                                    struct evhttp_request *req,
                                                    struct runner_client *buf, char *why,
                                                    size_t wlen)
{
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *name = evhttp_find_header(h, RUNNER_FWD_CLIENT);
    const char *scopes = evhttp_find_header(h, RUNNER_FWD_SCOPES);
    size_t n = name ? strlen(name) : 0;
    unsigned long v;
    unsigned uid;
    char *end;

    why[0] = '\0';
    if (!runner_forwarded(req) && name == NULL && scopes == NULL) {
        return runner_local_client(r->auth);
    }
    /* (changed) only a box of this fleet forwards: a box of one is never
     * forwarded to, and on a fleet box the peer must be the runner's own
     * user (docs/runner.md, "Forwarded identity") */
    if (r->fleet == NULL) {
        snprintf(why, wlen,
                 "forwarding headers (" RUNNER_FWD_HEADER ", " RUNNER_FWD_CLIENT
                 ", " RUNNER_FWD_SCOPES ") are taken only from a box of a fleet, and "
                 "this box is in none");
        return NULL;
    }
    if (!peer_is_runner(req, &uid)) {
        snprintf(why, wlen,
                 "forwarding headers from uid %u: only a box of the fleet running as the runner's "
                 "own user may send them",
                 uid);
        return NULL;
    }
    if (!runner_forwarded(req) || n == 0 || n >= sizeof(buf->name) ||
        strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-") != n ||
        scopes == NULL || scopes[0] < '0' || scopes[0] > '9') {
        snprintf(why, wlen,
                 "a forwarded request needs " RUNNER_FWD_HEADER ", " RUNNER_FWD_CLIENT
                 " (a client name) and " RUNNER_FWD_SCOPES " (a number)");
        return NULL;
    }
    v = strtoul(scopes, &end, 10);
    if (*end != '\0' || v > SBX_SCOPE_ALL) {
        snprintf(why, wlen, RUNNER_FWD_SCOPES ": not a set of scopes");
        return NULL;
    }
    memset(buf, 0, sizeof(*buf));
    memcpy(buf->name, name, n);
    buf->scopes = (unsigned)v; /* the scopes the client has on every box */
    return buf;
}

/* The forwarding box's id as the owner logs it: [A-Za-z0-9._-], at most 63. */
static void marker_of(struct evhttp_request *req, char *out, size_t len)
{
    const char *m = evhttp_find_header(evhttp_request_get_input_headers(req), RUNNER_FWD_HEADER);
    size_t n = 0;

    for (; m != NULL && *m != '\0' && n + 1 < len && n < 63; m++) {
        out[n++] = strchr("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._-", *m)
                       ? *m
                       : '?';
    }
    out[n] = '\0';
}

/* The forward failed: a 502 before the caller's reply started; after, an
 * error line at a frame's end (the client prints it), else the caller's
 * connection is closed without the last chunk (the client sees a cut
 * transfer, never a clean end). */
static void fwd_fail(struct runner_fwd *f, const char *why)
{
    sbx_warn("runner: forward of %s to box %s for client '%s' failed: %s", f->what, f->box,
             f->client, why);
    if (!f->started) {
        if (f->conn != NULL) {
            evhttp_connection_set_closecb(f->conn, NULL, NULL);
        }
        runner_reply_error(f->req, 502, "box %s holds %s and did not answer: %s", f->box, f->what,
                           why);
    }
    else if (f->frames && fwd_frames_boundary(&f->fr)) {
        struct evbuffer *b = evbuffer_new();
        char msg[400];
        json_t *o;
        char *text;

        snprintf(msg, sizeof(msg), "box %s went away in the middle of the output of %s: %s", f->box,
                 f->what, why);
        o = json_pack("{s:s}", "error", msg);
        text = json_dumps(o, JSON_COMPACT);

        evbuffer_add_printf(b, "%s\n", text);
        evhttp_send_reply_chunk(f->req, b);
        evbuffer_free(b);
        free(text);
        json_decref(o);
        evhttp_connection_set_closecb(f->conn, NULL, NULL);
        evhttp_send_reply_end(f->req);
    }
    else {
        evhttp_connection_set_closecb(f->conn, NULL, NULL);
        evhttp_connection_free(f->conn); /* frees the request too */
    }
    f->conn = NULL;
    fwd_free(f);
}

static void fwd_done(struct runner_fwd *f)
{
    evhttp_connection_set_closecb(f->conn, NULL, NULL);
    if (f->started) {
        evhttp_send_reply_end(f->req);
    }
    else {
        struct evkeyvalq *h = evhttp_request_get_output_headers(f->req);

        if (f->p.ctype[0] != '\0') {
            evhttp_add_header(h, "Content-Type", f->p.ctype);
        }
        evhttp_send_reply(f->req, f->p.status, f->p.status < 300 ? "OK" : "Error", f->body);
    }
    f->conn = NULL;
    fwd_free(f);
}

/* The caller went away: libevent detached its request, ours to end. */
static void caller_closed(struct evhttp_connection *c, void *arg)
{
    struct runner_fwd *f = arg;

    (void)c;
    if (f->waiting) {
        sbx_info("runner: follow of %s (in the shared queue): the client went away", f->what);
    }
    else {
        sbx_info("runner: forward of %s to box %s: the client went away", f->what, f->box);
    }
    if (evhttp_request_get_connection(f->req) == NULL) {
        if (f->started) {
            evhttp_send_reply_end(f->req);
        }
        else {
            evhttp_request_free(f->req);
        }
    }
    f->conn = NULL;
    if (f->polling) { /* (added) the store thread's call frees it when it is back */
        unlink_fwd(f);
        f->gone = 1;
        return;
    }
    fwd_free(f);
}

static int on_head(void *ud)
{
    struct runner_fwd *f = ud;

    if (f->stream && f->p.status == 200) {
        evhttp_add_header(evhttp_request_get_output_headers(f->req), "Content-Type",
                          f->p.ctype[0] ? f->p.ctype : "text/plain; charset=utf-8");
        evhttp_send_reply_start(f->req, 200, "OK");
        f->started = 1;
        if (!f->keep_rt) {
            bufferevent_set_timeouts(f->bev, NULL, NULL); /* a followed job may be silent */
        }
    }
    else {
        f->body = evbuffer_new();
    }
    return 0;
}

static size_t caller_unsent(struct runner_fwd *f)
{
    struct bufferevent *b = evhttp_connection_get_bufferevent(f->conn);

    return b ? evbuffer_get_length(bufferevent_get_output(b)) : 0;
}

static int on_body(void *ud, const char *data, size_t n)
{
    struct runner_fwd *f = ud;

    if (!f->started) {
        if (evbuffer_get_length(f->body) + n > FWD_BODY_MAX) {
            return 1;
        }
        evbuffer_add(f->body, data, n);
        return 0;
    }
    {
        struct evbuffer *b = evbuffer_new();

        if (f->frames) {
            fwd_frames_feed(&f->fr, data, n);
        }
        evbuffer_add(b, data, n);
        evhttp_send_reply_chunk(f->req, b);
        evbuffer_free(b);
    }
    return 0;
}

static void owner_read(struct bufferevent *bev, void *arg);

/* While paused: resumes once the caller took half of what waits. */
static void on_poll(evutil_socket_t fd, short what, void *arg)
{
    struct runner_fwd *f = arg;
    struct timeval tv = {0, FWD_POLL_MS * 1000};

    (void)fd;
    (void)what;
    if (caller_unsent(f) <= FWD_BUFFERED / 2) {
        sbx_debug("runner: forward of %s from box %s resumed after %d ms", f->what, f->box,
                  f->paused_ms);
        f->paused_ms = 0;
        bufferevent_enable(f->bev, EV_READ);
        owner_read(f->bev, f); /* what arrived meanwhile */
        return;
    }
    f->paused_ms += FWD_POLL_MS;
    if (f->paused_ms >= FWD_STALL_S * 1000) {
        char why[160];

        snprintf(why, sizeof(why),
                 "the client read nothing for %d s with %zu bytes unsent (limit %u): dropped",
                 FWD_STALL_S, caller_unsent(f), FWD_BUFFERED);
        f->frames = 0; /* no error line for a client that does not read: closed */
        fwd_fail(f, why);
        return;
    }
    evtimer_add(f->poll, &tv);
}

static void owner_read(struct bufferevent *bev, void *arg)
{
    struct runner_fwd *f = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    char buf[16384];

    while (evbuffer_get_length(in) > 0) {
        int got = evbuffer_remove(in, buf, sizeof(buf));

        if (got <= 0) {
            break;
        }
        if (fwd_reply_feed(&f->p, buf, (size_t)got, on_head, on_body, f) < 0) {
            fwd_fail(f, f->p.phase == FWD_BAD ? f->p.err : "its reply is larger than 1 MiB");
            return;
        }
        if (f->p.phase == FWD_DONE) {
            fwd_done(f);
            return;
        }
        if (f->started && caller_unsent(f) > FWD_BUFFERED) {
            struct timeval tv = {0, FWD_POLL_MS * 1000};

            sbx_debug("runner: forward of %s from box %s paused: %zu bytes wait for the client",
                      f->what, f->box, caller_unsent(f));
            bufferevent_disable(bev, EV_READ);
            evtimer_add(f->poll, &tv);
            return;
        }
    }
}

static void owner_event(struct bufferevent *bev, short what, void *arg)
{
    struct runner_fwd *f = arg;
    struct sbx_runner *r = f->r;
    char why[200];

    (void)bev;
    if (what & BEV_EVENT_CONNECTED) {
        return;
    }
    if (what & BEV_EVENT_EOF) {
        owner_read(f->bev, f);
        /* owner_read may have finished f: only a live forward is still linked */
        for (struct runner_fwd *g = r->fwds; g != NULL; g = g->next) {
            if (g == f) {
                if (fwd_reply_eof(&f->p) == 0) {
                    fwd_done(f);
                }
                else {
                    fwd_fail(f, f->p.err);
                }
                return;
            }
        }
        return;
    }
    if (what & BEV_EVENT_TIMEOUT) {
        snprintf(why, sizeof(why), "no answer within %d s",
                 (what & BEV_EVENT_WRITING) ? FWD_CONNECT_S : FWD_READ_S);
    }
    else {
        int e = EVUTIL_SOCKET_ERROR();

        snprintf(why, sizeof(why), "%s", e ? strerror(e) : "connection error");
    }
    fwd_fail(f, why);
}

int runner_fwd_connect(struct bufferevent *bev, const char *api, char *why, size_t len)
{
    if (strncmp(api, "unix:", 5) == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};

        if (strlen(api + 5) >= sizeof(sa.sun_path)) {
            snprintf(why, len, "its API address %.80s is too long", api);
            return -1;
        }
        strcpy(sa.sun_path, api + 5);
        if (bufferevent_socket_connect(bev, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
            snprintf(why, len, "cannot connect to %.100s: %s", api, strerror(errno));
            return -1;
        }
        return 0;
    }
    if (strncmp(api, "tcp:", 4) == 0) {
        char host[256];
        const char *colon = strrchr(api + 4, ':');
        long port = colon ? strtol(colon + 1, NULL, 10) : 0;
        size_t hl = colon ? (size_t)(colon - (api + 4)) : 0;

        if (colon == NULL || hl == 0 || hl >= sizeof(host) || port <= 0 || port > 65535) {
            snprintf(why, len, "its API address %.80s is not tcp:HOST:PORT", api);
            return -1;
        }
        memcpy(host, api + 4, hl);
        host[hl] = '\0';
        if (bufferevent_socket_connect_hostname(bev, NULL, AF_UNSPEC, host, (int)port) < 0) {
            snprintf(why, len, "cannot connect to %.100s", api);
            return -1;
        }
        return 0;
    }
    snprintf(why, len, "its API address '%.80s' is neither unix:PATH nor tcp:HOST:PORT", api);
    return -1;
}

int runner_fwd_over_cap(const struct runner_fwd_cap *c, int n_box, int n_client, const char *what,
                        const char *box, char *msg, size_t len)
{
    int box_cap = n_box >= c->per_box;

    if (!box_cap && n_client < c->per_client) {
        return 0;
    }
    snprintf(msg, len, "%s is held by box %s: %d %s %s are %s (limit %d); try again", what, box,
             box_cap ? n_box : n_client, c->things, box_cap ? "to that box" : "of this client",
             c->state, box_cap ? c->per_box : c->per_client);
    return box_cap ? 503 : 429;
}

int runner_fwd_refused(struct evhttp_request *req, const struct sbx_store_owner *o,
                       const char *what)
{
    const char *authz = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");

    if (runner_forwarded(req)) { /* one hop only */
        char from[64];

        marker_of(req, from, sizeof(from));
        sbx_warn("runner: %s is held by box %s; a request forwarded by box %s is not forwarded "
                 "again",
                 what, o->box, from);
        runner_reply_error(req, 409,
                           "%s is held by box %s; this request was forwarded by box %s and is not "
                           "forwarded again",
                           what, o->box, from);
        return 1;
    }
    if (!o->alive || o->api == NULL) {
        runner_reply_error(req, 503,
                           "%s is held by box %s, which is not alive (its lease lapsed): try again "
                           "once the fleet has reaped it",
                           what, o->box);
        return 1;
    }
    if (strncmp(o->api, "tcp:", 4) == 0 && authz == NULL) {
        runner_reply_error(req, 502,
                           "%s is held by box %s, which listens on %s: a request from this box's "
                           "unix socket has no bearer token to forward there; use a TCP client",
                           what, o->box, o->api);
        return 1;
    }
    return 0;
}

/* The method's name for the request line (the routes forwarded use these). */
static const char *method_name(enum evhttp_cmd_type m)
{
    switch (m) {
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    default:
        return "GET";
    }
}

/* runner_forward with (added) the read timeout: read_s, or FWD_READ_S when 0;
 * keep_rt keeps it on a streamed reply (a file's bytes, not a followed job). */
static void forward_req(struct sbx_runner *r, struct evhttp_request *req,
                        const struct runner_client *who, const struct sbx_store_owner *o,
                        const char *what, int stream, int frames, int read_s, int keep_rt)
{
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *authz = evhttp_find_header(evhttp_request_get_input_headers(req), "Authorization");
    const char *ctype = evhttp_find_header(evhttp_request_get_input_headers(req), "Content-Type");
    struct timeval ct = {FWD_CONNECT_S, 0};
    struct timeval rt = {read_s > 0 ? read_s : FWD_READ_S, 0};
    struct runner_fwd *f;
    struct evbuffer *out;
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    char why[200] = "cannot start the connection";
    char msg[300];
    int per_box = 0;
    int per_client = 0;
    int status;

    if (runner_fwd_refused(req, o, what)) {
        return;
    }
    for (struct runner_fwd *g = r->fwds; g != NULL; g = g->next) {
        per_box += !g->waiting && strcmp(g->box, o->box) == 0;
        per_client += !g->waiting && strcmp(g->client, who->name) == 0;
    }
    status = runner_fwd_over_cap(&fwd_cap, per_box, per_client, what, o->box, msg, sizeof(msg));
    if (status != 0) {
        sbx_warn("runner: forward for client '%s' refused: %s", who->name, msg);
        runner_reply_error(req, status, "%s", msg);
        return;
    }
    f = xcalloc(1, sizeof(*f));
    f->r = r;
    f->req = req;
    f->conn = evhttp_request_get_connection(req);
    f->stream = stream;
    f->frames = frames;
    f->keep_rt = keep_rt;
    snprintf(f->box, sizeof(f->box), "%s", o->box);
    snprintf(f->client, sizeof(f->client), "%s", who->name);
    snprintf(f->what, sizeof(f->what), "%s", what);
    fwd_reply_init(&f->p);
    f->poll = evtimer_new(r->base, on_poll, f);
    /* deferred callbacks: a connect or name lookup that fails inside
     * runner_fwd_connect reports it from the loop, never while f is still being
     * set up here (and bufferevent_free drops a pending one) */
    f->bev = bufferevent_socket_new(r->base, -1, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    f->next = r->fwds;
    r->fwds = f;
    if (f->poll == NULL || f->bev == NULL || f->conn == NULL) {
        fwd_fail(f, "out of memory");
        return;
    }
    bufferevent_setcb(f->bev, owner_read, NULL, owner_event, f);
    /* the write timeout bounds the connect; the read timeout a reply that is
     * not a followed output (lifted once its streamed reply starts) */
    bufferevent_set_timeouts(f->bev, &rt, &ct);
    evhttp_connection_set_closecb(f->conn, caller_closed, f);
    out = bufferevent_get_output(f->bev);
    evbuffer_add_printf(out,
                        "%s %s HTTP/1.1\r\nHost: sbx\r\nConnection: close\r\n" RUNNER_FWD_HEADER
                        ": %s\r\n" RUNNER_FWD_CLIENT ": %s\r\n" RUNNER_FWD_SCOPES ": %u\r\n",
                        method_name(m), evhttp_request_get_uri(req),
                        runner_fleet_box(r) ? runner_fleet_box(r) : "?", who->name, who->scopes);
    if (strncmp(o->api, "tcp:", 4) == 0) {
        /* the caller's own token: every box of a fleet has the same clients
         * (docs/runner.md); it is never logged */
        evbuffer_add_printf(out, "Authorization: %s\r\n", authz);
    }
    if (m == EVHTTP_REQ_POST || m == EVHTTP_REQ_PUT) {
        /* (changed) the caller's type (a file's bytes, a tar): evhttp parsed
         * the header, so it holds no line break */
        evbuffer_add_printf(out, "Content-Type: %.200s\r\nContent-Length: %zu\r\n\r\n",
                            ctype                 ? ctype
                            : m == EVHTTP_REQ_PUT ? "application/octet-stream"
                                                  : "application/json",
                            evbuffer_get_length(in));
        evbuffer_add(out, evbuffer_pullup(in, -1), evbuffer_get_length(in));
    }
    else {
        evbuffer_add(out, "\r\n", 2);
    }
    sbx_info("runner: %s is held by box %s: forwarding %s %s for client '%s' to %s", what, o->box,
             method_name(m), evhttp_request_get_uri(req), who->name, o->api);
    if (runner_fwd_connect(f->bev, o->api, why, sizeof(why)) < 0 ||
        bufferevent_enable(f->bev, EV_READ | EV_WRITE) < 0) {
        fwd_fail(f, why);
    }
}

void runner_forward(struct sbx_runner *r, struct evhttp_request *req,
                    const struct runner_client *who, const struct sbx_store_owner *o,
                    const char *what, int stream, int frames)
{
    forward_req(r, req, who, o, what, stream, frames, 0, 0);
}

void runner_forward_task_to(struct sbx_runner *r, struct evhttp_request *req,
                            const struct runner_client *who, const struct sbx_store_owner *o,
                            const char *id, unsigned flags)
{
    char what[96];

    snprintf(what, sizeof(what), "task %s", id);
    forward_req(r, req, who, o, what, (flags & RUNNER_FWD_STREAM) != 0, 0,
                (flags & RUNNER_FWD_SLOW) ? FWD_SLOW_S : 0, 1);
}

/* After a read of the record: wait on while it is queued with no box (or
 * the database is down), else answer as runner_handle_output. */
static void wait_decide(struct runner_fwd *f, int queued)
{
    struct sbx_runner *r = f->r;
    struct timeval tv = {0, FWD_WAIT_MS * 1000};

    f->paused_ms += FWD_WAIT_MS;
    if (queued && f->paused_ms < FWD_WAIT_MAX_S * 1000) {
        evtimer_add(f->poll, &tv);
        return;
    }
    {
        struct evhttp_request *req = f->req;
        struct runner_client who = f->who;
        char id[sizeof(f->id)];
        int frames = f->frames;

        memcpy(id, f->id, sizeof(id));
        fwd_free(f); /* the request is the caller's again */
        if (queued) {
            runner_reply_error(req, 409,
                               "job %s still waits in the shared queue after %d s; follow it again",
                               id, FWD_WAIT_MAX_S);
            return;
        }
        runner_handle_output(r, req, id, 1, frames, &who);
    }
}

/* 1 while the job is queued with no box, or its record cannot be read. */
static int still_queued(struct sbx_store *st, const char *id)
{
    struct sbx_job_rec rec = {0};
    sbx_error_t *err = NULL;
    int queued = 1; /* the database down: wait on */

    if (sbx_store_job_get(st, id, &rec, &err) == 0) {
        queued = rec.state == SBX_JOB_QUEUED && rec.box == NULL;
        sbx_job_rec_clear(&rec);
    }
    sbx_error_free(&err);
    return queued;
}

static void wait_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct runner_fwd *f = arg;

    (void)r;
    f->queued = still_queued(st, f->id);
}

static void wait_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct runner_fwd *f = arg;

    (void)r;
    (void)req;
    f->polling = 0;
    if (f->gone) {
        fwd_free(f);
        return;
    }
    if (late) {
        return; /* the runner stops: runner_forward_drop_all frees it */
    }
    wait_decide(f, f->queued);
}

static void on_wait(evutil_socket_t fd, short what, void *arg)
{
    struct runner_fwd *f = arg;

    (void)fd;
    (void)what;
    if (runner_sq_threaded(f->r)) { /* (added) the store thread reads it */
        f->polling = 1;
        runner_sq_read(f->r, NULL, wait_work, wait_done, f);
        return;
    }
    wait_decide(f, still_queued(f->r->store, f->id));
}

void runner_forward_wait(struct sbx_runner *r, struct evhttp_request *req,
                         const struct runner_client *who, const char *id, int frames)
{
    struct timeval tv = {0, FWD_WAIT_MS * 1000};
    struct runner_fwd *f;
    int n = 0;

    for (struct runner_fwd *g = r->fwds; g != NULL; g = g->next) {
        n += g->waiting && strcmp(g->client, who->name) == 0;
    }
    if (n >= FWD_WAIT_PER_CLIENT) {
        runner_reply_error(req, 429,
                           "job %s waits in the shared queue: this client already follows %d "
                           "queued jobs (limit %d)",
                           id, n, FWD_WAIT_PER_CLIENT);
        return;
    }
    f = xcalloc(1, sizeof(*f));
    f->r = r;
    f->req = req;
    f->conn = evhttp_request_get_connection(req);
    f->waiting = 1;
    f->frames = frames;
    f->who = *who;
    snprintf(f->id, sizeof(f->id), "%s", id);
    snprintf(f->client, sizeof(f->client), "%s", who->name);
    snprintf(f->what, sizeof(f->what), "job %s", id);
    f->next = r->fwds;
    r->fwds = f;
    f->poll = evtimer_new(r->base, on_wait, f);
    if (f->poll == NULL || f->conn == NULL) {
        fwd_fail(f, "out of memory");
        return;
    }
    evhttp_connection_set_closecb(f->conn, caller_closed, f);
    evtimer_add(f->poll, &tv);
    sbx_info("runner: follow of %s waits for its claim (in the shared queue)", f->what);
}

void runner_forward_drop_all(struct sbx_runner *r)
{
    /* after evhttp_free: the callers' requests and connections are gone */
    runner_tunnel_drop_all(r); /* (added) fwd_tunnel.c */
    while (r->fwds != NULL) {
        r->fwds->conn = NULL;
        fwd_free(r->fwds);
    }
}

int runner_reply_store_down(struct sbx_runner *r, struct evhttp_request *req,
                            const sbx_error_t *err)
{
    if (!sbx_store_down(r->store)) {
        return 0;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Retry-After", "2");
    runner_reply_error(req, 503, "the database is unavailable, try again: %s",
                       err ? sbx_error_msg(err) : "no connection");
    return 1;
}
