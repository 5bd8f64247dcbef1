/* fwd_tunnel.c - (added) a task's terminal and its port previews through a box
 * of the fleet that does not hold the task (docs/runner.md, "Several boxes";
 * docs/api.md, "Terminals and ports"). The request goes to the owning box as
 * forward.c's do (the marker, the client and its scopes; over TCP the
 * caller's own token, never logged), and the caller's connection, taken over
 * from evhttp as api_term.c does, becomes a byte relay to the owner:
 *
 *   terminal  the owner's answer is relayed; once its status is 101, bytes go
 *             both ways (the frames of core/src/sandbox/pty.h, not parsed)
 *             until either side ends; any other answer is relayed as it is and
 *             the connection then closed. (changed, issue 31) Likewise a raw
 *             port (`sbx port`, sbx-port.v1) and an archive (`sbx cp`,
 *             sbx-archive.v1): the upgrade the caller asked for is asked of
 *             the owner, and its 101 starts the bytes both ways.
 *   ports     the owner's answer (the server's response in the sandbox, with
 *             the owner's CSP) is relayed as it comes until the owner closes;
 *             (changed, issue 31) an interim (1xx) answer to a preview is a
 *             502, never relayed: the owner drops those (preview.c), so one
 *             comes only from an owner of an older sbx, whose CSP went on it
 *             and not on the page after.
 *
 * (changed, issue 31) The owner's reply head is parsed by the one HTTP/1 parser
 * (http/h1_reply.h, kind TUNNEL: RFC 9112 strict, at most 33 KiB) before any of
 * it is relayed: a head it refuses, or one cut short, is a 502 to the caller
 * naming why; the head then goes to the caller as it came, with what followed.
 *
 * The owner checks the scope and the task's client again. Bounded: at most
 * tun_cap's relays to one box and of one client (503, 429),
 * the connect FWD_CONNECT_S, each read of the owner's head within TUN_HEAD_S, a
 * port's answer idle at most TUN_IDLE_S, at most TUN_BUFFERED bytes waiting
 * for either side before reading the other pauses, and a side that takes
 * nothing for TUN_SEND_S with bytes waiting ends the relay. An upgraded relay
 * (a terminal, a raw port, an archive) has no idle limit (a shell may wait
 * long): the owner ends it with its process, the caller by closing. Loop thread only. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "http/h1_reply.h"
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/fleet.h"
#include "runner/forward.h"
#include "runner/jobs.h"
#include "runner/preview.h"
#include "util/log.h"
#include "util/xalloc.h"

#define TUN_CONNECT_S 5
#define TUN_HEAD_S 30           /* each read of the owner's head */
#define TUN_IDLE_S 300          /* a port's answer, between two reads */
#define TUN_SEND_S 60           /* bytes waiting for a side that takes none */
#define TUN_BUFFERED (1u << 20) /* waiting for one side before the other pauses */
#define TUN_LINE 64             /* the owner's status line, as far as it is logged */

/* the owner's own cap on terminals and port connections, and of one client on
 * this box (503, 429) */
static const struct runner_fwd_cap tun_cap = {64, 16, "terminals and port connections",
                                              "relayed there"};

struct tun {
    struct sbx_runner *r;
    struct evhttp_connection *evcon; /* the caller's, taken over; NULL once evhttp freed it */
    struct bufferevent *cb;          /* the caller (a duplicate of its socket) */
    struct bufferevent *ob;          /* the owner */
    struct evbuffer *early;          /* the caller's bytes read with its request */
    char box[64];
    char client[64];
    char what[96];
    const char *upgrade;      /* the protocol asked for (forward.h), NULL: a preview */
    int relayed;              /* bytes of the owner reached the caller's buffer */
    int upgraded;             /* the owner answered 101 to the upgrade */
    int closing;              /* the caller gets what waits, then the end */
    struct sbx_h1_head *head; /* the owner's reply head until it is read; then NULL */
    size_t up, down;          /* bytes to the owner, to the caller */
    struct tun *next;
};

static struct tun *tuns; /* loop thread only */

/* For the log: what is relayed, by the upgrade asked for. */
static const char *kind_of(const char *upgrade)
{
    if (upgrade == NULL) {
        return "a port of ";
    }
    if (strcmp(upgrade, RUNNER_UPGRADE_TERMINAL) == 0) {
        return "the terminal of ";
    }
    return strcmp(upgrade, RUNNER_UPGRADE_ARCHIVE) == 0 ? "the archive of " : "a raw port of ";
}

static void tun_end(struct tun *t, const char *why)
{
    for (struct tun **pp = &tuns; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == t) {
            *pp = t->next;
            break;
        }
    }
    sbx_info("runner: relay of %s%s to box %s for client '%s' ended (%zu bytes up, %zu down): %s",
             kind_of(t->upgrade), t->what, t->box, t->client, t->up, t->down, why);
    if (t->cb != NULL) {
        bufferevent_free(t->cb); /* our duplicate of the socket */
    }
    if (t->ob != NULL) {
        bufferevent_free(t->ob);
    }
    if (t->early != NULL) {
        evbuffer_free(t->early);
    }
    free(t->head);
    if (t->evcon != NULL) {
        evhttp_connection_free(t->evcon); /* evhttp's descriptor: the socket closes */
    }
    free(t);
}

void runner_tunnel_drop_all(struct sbx_runner *r)
{
    struct tun **pp = &tuns;

    while (*pp != NULL) {
        struct tun *t = *pp;

        if (t->r != r) {
            pp = &t->next;
            continue;
        }
        t->evcon = NULL; /* evhttp_free freed it */
        tun_end(t, "the runner stopped");
    }
}

/* Before the owner sent anything: the caller gets a 502 naming the box, then
 * the end; after, the relay just ends (the caller sees a cut stream). */
static void tun_fail(struct tun *t, const char *why)
{
    if (t->relayed || t->cb == NULL) {
        sbx_warn("runner: relay of %s to box %s for client '%s' cut: %s", t->what, t->box,
                 t->client, why);
        tun_end(t, why);
        return;
    }
    {
        char msg[400];
        json_t *j;
        char *body;

        snprintf(msg, sizeof(msg), "box %s holds %s and did not answer: %s", t->box, t->what, why);
        sbx_warn("runner: %s", msg);
        j = json_pack("{s:s}", "error", msg);
        body = json_dumps(j, JSON_COMPACT);
        evbuffer_add_printf(bufferevent_get_output(t->cb),
                            "HTTP/1.1 502 Bad Gateway\r\nContent-Type: application/json\r\n"
                            "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n",
                            strlen(body) + 1, body);
        free(body);
        json_decref(j);
    }
    t->relayed = 1;
    t->closing = 1;
    if (t->ob != NULL) {
        bufferevent_free(t->ob);
        t->ob = NULL;
    }
    bufferevent_setwatermark(t->cb, EV_WRITE, 0, 0);
    bufferevent_enable(t->cb, EV_WRITE);
}

/* (changed, issue 31) The owner's reply head, parsed by the one HTTP/1 parser
 * under its cap (http/h1_reply.h) from the bytes waiting in in, which stay there
 * to be relayed as they came; a preview's head is relayed as the owner makes
 * it (runner_preview_head: the CSP, Connection: close), whatever sbx the owner
 * runs, and the rest as it came: 0 once it is complete (an upgrade's 101 starts
 * relaying the caller's bytes), 1 while more are needed, -1 when it is refused
 * (the caller got a 502 saying why; nothing of the owner's was relayed). */
static int see_head(struct tun *t, struct evbuffer *in)
{
    size_t n = evbuffer_get_length(in);
    size_t cap = t->head->lim.head_max + 1;
    const char *buf;
    char why[256];
    char line[TUN_LINE + 1];
    long end;

    if (n == 0) {
        return 1;
    }
    n = n < cap ? n : cap;
    buf = (const char *)evbuffer_pullup(in, (ev_ssize_t)n);
    end = buf != NULL ? sbx_h1_reply_feed(t->head, buf, n, "the owner", why, sizeof(why)) : -1;
    if (end <= 0) {
        if (end < 0) {
            tun_fail(t, buf != NULL ? why : "out of memory");
        }
        return end < 0 ? -1 : 1;
    }
    sbx_h1_reply_status_line(t->head, buf, line, sizeof(line)); /* shown in our log */
    if (t->upgrade == NULL && t->head->status < 200) {
        char msg[TUN_LINE + 80];

        snprintf(msg, sizeof(msg), "the owner answered '%s' to a preview (an interim answer)",
                 line);
        tun_fail(t, msg);
        return -1;
    }
    if (t->upgrade == NULL) { /* (added, issue 31) a preview's head as the owner's own makes it */
        size_t room = (size_t)end + RUNNER_PREVIEW_HEAD_EXTRA;
        char *out = xmalloc(room);
        size_t len = runner_preview_head(t->head, buf, out, room);

        evbuffer_drain(in, (size_t)end);
        bufferevent_write(t->cb, out, len);
        t->down += len;
        free(out);
    }
    if (t->upgrade != NULL && t->head->status == 101 && t->head->minor == 1) {
        struct timeval wt = {TUN_SEND_S, 0};

        t->upgraded = 1;
        /* a shell may be silent for long: no read timeout from now on */
        bufferevent_set_timeouts(t->ob, NULL, &wt);
        evbuffer_add_buffer(bufferevent_get_output(t->ob), t->early);
        bufferevent_enable(t->cb, EV_READ);
    }
    sbx_info("runner: relay of %s%s from box %s for client '%s': the owner answered '%s'",
             kind_of(t->upgrade), t->what, t->box, t->client, line);
    free(t->head);
    t->head = NULL;
    return 0;
}

/* Moves what src read to dst; pauses reading src while dst has more than
 * TUN_BUFFERED bytes waiting (its write callback resumes it). */
static void pump(struct bufferevent *src, struct bufferevent *dst, size_t *count)
{
    struct evbuffer *in = bufferevent_get_input(src);
    struct evbuffer *out = bufferevent_get_output(dst);

    *count += evbuffer_get_length(in);
    evbuffer_add_buffer(out, in);
    if (evbuffer_get_length(out) > TUN_BUFFERED) {
        bufferevent_disable(src, EV_READ);
    }
}

static void owner_read(struct bufferevent *bev, void *arg)
{
    struct tun *t = arg;

    if (t->closing) {
        evbuffer_drain(bufferevent_get_input(bev), evbuffer_get_length(bufferevent_get_input(bev)));
        return;
    }
    if (t->head != NULL && see_head(t, bufferevent_get_input(bev)) != 0) {
        return; /* more of the head to come, or refused */
    }
    if (!t->relayed && t->upgrade == NULL) {
        struct timeval rt = {TUN_IDLE_S, 0};
        struct timeval wt = {TUN_SEND_S, 0};

        bufferevent_set_timeouts(bev, &rt, &wt); /* the answer may come slowly */
    }
    t->relayed = 1;
    pump(bev, t->cb, &t->down);
}

static void caller_read(struct bufferevent *bev, void *arg)
{
    struct tun *t = arg;

    if (!t->upgraded || t->ob == NULL) {
        return; /* not read before the 101 (reading is off) */
    }
    pump(bev, t->ob, &t->up);
}

/* The caller took what waited (down to the low mark): the owner is read
 * again, or, closing, the relay ends. */
static void caller_write(struct bufferevent *bev, void *arg)
{
    struct tun *t = arg;

    if (t->closing) {
        if (evbuffer_get_length(bufferevent_get_output(bev)) == 0) {
            tun_end(t, "the owner ended");
        }
        return;
    }
    if (t->ob != NULL) {
        bufferevent_enable(t->ob, EV_READ);
    }
}

static void owner_write(struct bufferevent *bev, void *arg)
{
    struct tun *t = arg;

    (void)bev;
    if (t->upgraded) {
        bufferevent_enable(t->cb, EV_READ);
    }
}

static const char *event_why(short what, char *buf, size_t len, const char *side)
{
    int e = EVUTIL_SOCKET_ERROR();

    if (what & BEV_EVENT_EOF) {
        snprintf(buf, len, "%s closed the connection", side);
    }
    else if (what & BEV_EVENT_TIMEOUT) {
        snprintf(buf, len, "%s: no progress within the time allowed", side);
    }
    else {
        snprintf(buf, len, "%s: %s", side, e ? strerror(e) : "connection error");
    }
    return buf;
}

static void owner_event(struct bufferevent *bev, short what, void *arg)
{
    struct tun *t = arg;
    char why[200];

    if (what & BEV_EVENT_CONNECTED) {
        struct timeval rt = {TUN_HEAD_S, 0};
        struct timeval wt = {TUN_SEND_S, 0};

        bufferevent_set_timeouts(bev, &rt, &wt);
        return;
    }
    if ((what & BEV_EVENT_EOF) && t->relayed) {
        /* the owner is done: the caller gets what waits, then the end */
        owner_read(bev, t);
        t->closing = 1;
        bufferevent_free(t->ob);
        t->ob = NULL;
        bufferevent_disable(t->cb, EV_READ);
        if (evbuffer_get_length(bufferevent_get_output(t->cb)) == 0) {
            tun_end(t, "the owner ended");
            return;
        }
        bufferevent_setwatermark(t->cb, EV_WRITE, 0, 0);
        bufferevent_enable(t->cb, EV_WRITE);
        return;
    }
    if ((what & BEV_EVENT_EOF) && t->head != NULL &&
        evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
        sbx_h1_reply_cut(evbuffer_get_length(bufferevent_get_input(bev)), "the owner", why,
                         sizeof(why));
        tun_fail(t, why);
        return;
    }
    if (what & BEV_EVENT_TIMEOUT) {
        snprintf(why, sizeof(why), "no answer within %d s",
                 (what & BEV_EVENT_WRITING) ? TUN_CONNECT_S
                 : t->relayed               ? TUN_IDLE_S
                                            : TUN_HEAD_S);
        tun_fail(t, why);
        return;
    }
    tun_fail(t, event_why(what, why, sizeof(why), "the owner"));
}

static void caller_event(struct bufferevent *bev, short what, void *arg)
{
    struct tun *t = arg;
    char why[200];

    (void)bev;
    tun_end(t, event_why(what, why, sizeof(why), "the client"));
}

/* The request to the owner: the caller's method, URI and headers but for
 * hop-by-hop ones, its credentials and any X-Sbx-* (ours are added), then
 * its body. */
static struct evbuffer *owner_request(struct sbx_runner *r, struct evhttp_request *req,
                                      const struct runner_client *who,
                                      const struct sbx_store_owner *o, const char *upgrade)
{
    /* Expect: this box answered it already */
    static const char *const drop[] = {"Authorization",
                                       "Connection",
                                       "Keep-Alive",
                                       "Proxy-Connection",
                                       "Proxy-Authorization",
                                       "Upgrade",
                                       "TE",
                                       "Content-Length",
                                       "Transfer-Encoding",
                                       "Trailer",
                                       "Host",
                                       "Expect",
                                       NULL};
    static const char *const methods[] = {"GET",     "POST",  "HEAD",    "PUT",  "DELETE",
                                          "OPTIONS", "TRACE", "CONNECT", "PATCH"};
    struct evkeyvalq *h = evhttp_request_get_input_headers(req);
    const char *authz = evhttp_find_header(h, "Authorization");
    struct evbuffer *body = evhttp_request_get_input_buffer(req);
    struct evbuffer *out = evbuffer_new();
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    const char *mname = "GET";

    for (unsigned i = 0; i < sizeof(methods) / sizeof(methods[0]); i++) {
        if ((unsigned)m == 1u << i) {
            mname = methods[i];
        }
    }
    evbuffer_add_printf(out,
                        "%s %s HTTP/1.1\r\nHost: sbx\r\n" RUNNER_FWD_HEADER
                        ": %s\r\n" RUNNER_FWD_CLIENT ": %s\r\n" RUNNER_FWD_SCOPES ": %u\r\n",
                        mname, evhttp_request_get_uri(req),
                        runner_fleet_box(r) ? runner_fleet_box(r) : "?", who->name, who->scopes);
    for (struct evkeyval *kv = h->tqh_first; kv != NULL; kv = kv->next.tqe_next) {
        int skip = strncasecmp(kv->key, "X-Sbx-", 6) == 0;

        for (unsigned i = 0; drop[i] != NULL && !skip; i++) {
            skip = strcasecmp(kv->key, drop[i]) == 0;
        }
        if (!skip) {
            evbuffer_add_printf(out, "%s: %s\r\n", kv->key, kv->value);
        }
    }
    if (strncmp(o->api, "tcp:", 4) == 0) {
        /* the caller's own token (docs/runner.md); never logged */
        evbuffer_add_printf(out, "Authorization: %s\r\n", authz);
    }
    if (upgrade != NULL) {
        evbuffer_add_printf(out, "Connection: Upgrade\r\nUpgrade: %s\r\n", upgrade);
    }
    else {
        evbuffer_add_printf(out, "Connection: close\r\n");
    }
    evbuffer_add_printf(out, "Content-Length: %zu\r\n\r\n", evbuffer_get_length(body));
    evbuffer_add_buffer_reference(out, body);
    return out;
}

/* Takes the caller's connection over from evhttp (api_term.c does likewise):
 * evhttp's bufferevent stops, ours serves a duplicate of the socket, and
 * what evhttp read past the request is kept for the owner. */
static int take_over(struct tun *t, struct evhttp_request *req)
{
    struct evhttp_connection *evcon = evhttp_request_get_connection(req);
    struct bufferevent *bev = evcon ? evhttp_connection_get_bufferevent(evcon) : NULL;
    struct timeval wt = {TUN_SEND_S, 0};
    int fd = bev ? bufferevent_getfd(bev) : -1;
    int dup = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 3) : -1;

    if (dup < 0) {
        return -1;
    }
    evutil_make_socket_nonblocking(dup);
    t->cb = bufferevent_socket_new(runner_base(t->r), dup,
                                   BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    if (t->cb == NULL) {
        close(dup);
        return -1;
    }
    bufferevent_disable(bev, EV_READ | EV_WRITE);
    evbuffer_add_buffer(t->early, bufferevent_get_input(bev));
    t->evcon = evcon;
    bufferevent_setcb(t->cb, caller_read, caller_write, caller_event, t);
    bufferevent_setwatermark(t->cb, EV_WRITE, TUN_BUFFERED / 2, 0);
    bufferevent_set_timeouts(t->cb, NULL, &wt);
    bufferevent_enable(t->cb, EV_WRITE); /* read once the owner's 101 came */
    return 0;
}

void runner_tunnel_to(struct sbx_runner *r, struct evhttp_request *req,
                      const struct runner_client *who, const char *id, const char *upgrade,
                      const struct sbx_store_owner *o)
{
    struct timeval ct = {TUN_CONNECT_S, 0};
    char what[96];
    char why[200] = "cannot start the connection";
    char msg[300];
    int per_box = 0;
    int per_client = 0;
    int status;
    struct tun *t;

    snprintf(what, sizeof(what), "task %s", id);
    if (runner_fwd_refused(req, o, what)) {
        return;
    }
    for (struct tun *g = tuns; g != NULL; g = g->next) {
        per_box += g->r == r && strcmp(g->box, o->box) == 0;
        per_client += g->r == r && strcmp(g->client, who->name) == 0;
    }
    status = runner_fwd_over_cap(&tun_cap, per_box, per_client, what, o->box, msg, sizeof(msg));
    if (status != 0) {
        sbx_warn("runner: relay for client '%s' refused: %s", who->name, msg);
        runner_reply_error(req, status, "%s", msg);
        return;
    }
    t = xcalloc(1, sizeof(*t));
    t->r = r;
    t->upgrade = upgrade;
    snprintf(t->box, sizeof(t->box), "%s", o->box);
    snprintf(t->client, sizeof(t->client), "%s", who->name);
    snprintf(t->what, sizeof(t->what), "%s", what);
    t->head = xmalloc(sizeof(*t->head));
    sbx_h1_reply_init(t->head, SBX_H1_REPLY_TUNNEL);
    t->early = evbuffer_new();
    t->ob =
        bufferevent_socket_new(runner_base(r), -1, BEV_OPT_CLOSE_ON_FREE | BEV_OPT_DEFER_CALLBACKS);
    if (t->early == NULL || t->ob == NULL || take_over(t, req) < 0) {
        runner_reply_error(req, 500, "relaying %s to box %s: %s", what, o->box,
                           errno ? strerror(errno) : "out of memory");
        t->cb = NULL;
        tun_end(t, "not started");
        return;
    }
    t->next = tuns;
    tuns = t;
    {
        struct evbuffer *head = owner_request(r, req, who, o, upgrade);

        bufferevent_write_buffer(t->ob, head);
        evbuffer_free(head);
    }
    bufferevent_setcb(t->ob, owner_read, owner_write, owner_event, t);
    bufferevent_setwatermark(t->ob, EV_WRITE, TUN_BUFFERED / 2, 0);
    bufferevent_set_timeouts(t->ob, NULL, &ct); /* the write timeout bounds the connect */
    sbx_info("runner: %s is held by box %s: relaying %s%s for client '%s' to %s", what, o->box,
             upgrade == NULL ? "a port's request" : "an upgrade to ", upgrade ? upgrade : "",
             who->name, o->api);
    if (runner_fwd_connect(t->ob, o->api, why, sizeof(why)) < 0 ||
        bufferevent_enable(t->ob, EV_READ | EV_WRITE) < 0) {
        tun_fail(t, why);
    }
}
