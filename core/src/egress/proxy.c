/* proxy.c - one proxied connection: read and check the request head, decide, resolve,
 * connect, then relay bytes both ways with back-pressure and half-close. Runs on the
 * egress event loop only.
 *
 * The connection's states (enum conn_state, conn.h; docs/egress.md has the same
 * diagram). Each numbered arrow is explained below it.
 *
 *                  sbx_egress_accept (accept.c)
 *                            |
 *                            v
 *                      +-----------+  (1)   +-----------+
 *                      |   HELLO   |------->|   HEAD    |
 *                      +-----------+        +-----------+
 *                            |                |   |   |
 *                            |             (3)|   |   |(4)
 *                            |                v   |   v
 *                            |      +-----------+ | +-----------+
 *                            |      |  CLOSING  | | | RESOLVING |
 *                            |      +-----------+ | +-----------+
 *                            |        ^   ^    |  |(5)  |    |(6)
 *                            |     (7)|   +----|--|-----|----+
 *                            |        |        |  v     v
 *                            |        |        | +------------+
 *                            |        +--------|-| CONNECTING |<-+ (8)
 *                            |                 | +------------+--+
 *                            |                 |   |(9)     |(10)
 *                            |                 |   v        |
 *                            |                 | +-------+  |
 *                            |                 | |  SNI  |  |
 *                            |                 | +-------+  |
 *                            |                 |   |  |(11) v
 *                            |                 |   |  |   +------+
 *                            |                 |   |  +-->| PIPE |
 *                            |                 |   |      +------+
 *                        (2) |            (12) |   | (13)    | (14)
 *                            v                 v   v         v
 *                  +-----------------------------------------------+
 *                  | finish: one log line, budget back, all freed  |
 *                  +-----------------------------------------------+
 *
 *  (1)  hello_read: the first byte starts a plain request, or a relay hands over its
 *       client's TCP socket (SCM_RIGHTS); sbx_egress_conn_start_head reads the head.
 *  (2)  closed before a byte, bad-handover, out-of-descriptors, header-timeout (408 is
 *       logged; nothing is sent: no request was seen).
 *  (3)  refuse(): malformed-head 400, header-too-large 431, header-timeout 408 (the
 *       same timer since the accept), log-unavailable, not-allowed, ip-literal 403,
 *       budget-buffer 503, resolve-failed 502 (no resolver). HEAD -> finish directly
 *       when the client closes (head_event).
 *  (4)  decide(): a rule allows a name that egress.hosts does not list: evdns lookup.
 *  (5)  an IP literal, or a name egress.hosts lists: connect_next at once; after
 *       a lookup, the public answers and those a CIDR rule allows (resolved()).
 *  (6)  resolved(): resolve-failed 502; only private answers and no CIDR rule for
 *       them: private-address 403 (the allow is taken back).
 *  (7)  connect_next(): no candidate left, connect-failed 502; no socket,
 *       out-of-descriptors / out-of-memory 503.
 *  (8)  connect_event(): this address failed or passed egress.connect_timeout: the
 *       next candidate (at most 16).
 *  (9)  connected, a CONNECT and egress.check_sni: "200 Connection established" is
 *       sent, then the first bytes of either side are awaited (sni_check.c).
 *  (10) connected, plain HTTP or check_sni off: sbx_egress_conn_start_pipe (the
 *       200 or the rewritten request head goes first).
 *  (11) sni_check.c: a ClientHello naming the CONNECT host or no name, an
 *       HTTP/1 head for that host (rewritten), an opaque rule for other bytes, or the
 *       destination spoke first while the client was silent.
 *  (12) the sandbox is removed (sbx_egress_conn_close, any state); CLOSING: the
 *       refusal is flushed, the client went, or 5 s passed.
 *  (13) sbx_egress_conn_deny_tunnel(): sni-mismatch, sni-ech, sni-unreadable,
 *       http-in-tunnel (h2), tunnel-protocol, malformed or foreign tunneled head,
 *       sni-timeout; the client has its 200, so it only sees the end. client-closed.
 *  (14) tunnel.c splices both ways; a side's end of stream is passed on as
 *       shutdown(SHUT_WR) (half-close) and the tunnel ends when both are; a socket
 *       error, or bytes past the one plain request (one-request), end it at once.
 *       Starting the pipe may end it: out-of-memory or out-of-descriptors while
 *       building the tunnel.
 *  Refusals (3), (6), (7) of a transparent connection (the relay's redirect, no
 *  request read yet) are answered by the client's first bytes instead, in
 *  ST_ANSWER then ST_CLOSING (refusal.c); a "\x03" connection (a denied name's
 *  address) is refused in decide() before any rule, never connected.
 */
#include <arpa/inet.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/dns.h>
#include <event2/event.h>
#include <event2/listener.h>
#include <event2/util.h>
#include <netinet/in.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "egress/conn.h"
#include "egress/egress_int.h"
#include "egress/request.h"
#include "egress/tunnel.h"
#include "util/log.h"
#include "util/xalloc.h"

#define FLUSH_TIMEOUT 5 /* seconds to deliver a refusal before closing */

void sbx_egress_conn_finish(struct sbx_egress_conn *c)
{
    struct sbx_egress_sandbox *sb = c->sb;
    struct sbx_egress_record rec = {0};
    struct timespec now;

    if (c->dns != NULL) {
        struct evdns_getaddrinfo_request *r = c->dns;

        c->dns = NULL;
        evdns_getaddrinfo_cancel(r);
    }
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (c->decision == NULL) {
        c->decision = "deny";
        sb->denied++;
    }
    rec.start = c->start;
    rec.duration = (double)(now.tv_sec - c->t0.tv_sec) + (now.tv_nsec - c->t0.tv_nsec) / 1e9;
    rec.job = c->job;
    rec.task = sb->task;
    rec.sandbox = sb->name;
    rec.exec = c->exec[0] ? c->exec : NULL;
    rec.pid = c->pid;
    rec.method = c->req.method[0] ? c->req.method : NULL;
    rec.host = c->req.host[0] ? c->req.host : NULL;
    rec.port = c->req.port;
    rec.address = c->address[0] ? c->address : NULL;
    rec.sni = c->sni[0] ? c->sni : NULL;
    rec.opaque = c->opaque;
    rec.decision = c->decision;
    rec.rule = c->rule;
    rec.priv = c->address[0] ? c->private_src : NULL;
    rec.reason = c->reason;
    rec.status = c->status;
    if (c->tunnel != NULL) {
        sbx_egress_tunnel_counts(c->tunnel, &rec.bytes_up, &rec.bytes_down);
        rec.bytes_up += c->prefix_up;
        rec.bytes_down += c->prefix_down;
    }
    else if (c->tls.hellos > 0) { /* ended while the handshake was followed */
        rec.bytes_up = c->prefix_up;
        rec.bytes_down = c->prefix_down;
    }
    if (!c->quiet) {
        sbx_egress_log_write(&sb->e->log, &rec);
    }

    sb->reserved -= c->reserved;
    sb->n_conns--;
    if (c->prev != NULL) {
        c->prev->next = c->next;
    }
    else {
        sb->conns = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    /* Disabled first: inside its own callback a bufferevent is freed only after the
     * callback returns, when its descriptor is closed (and may be another's). */
    if (c->client != NULL) {
        bufferevent_disable(c->client, EV_READ | EV_WRITE);
        bufferevent_free(c->client);
    }
    if (c->up != NULL) {
        bufferevent_disable(c->up, EV_READ | EV_WRITE);
        bufferevent_free(c->up);
    }
    sbx_egress_tunnel_free(c->tunnel);
    if (c->hello != NULL) {
        event_free(c->hello);
    }
    if (c->up_spoke != NULL) {
        event_free(c->up_spoke);
    }
    if (c->client_fd >= 0) {
        close(c->client_fd);
    }
    if (c->up_fd >= 0) {
        close(c->up_fd);
    }
    if (c->timer != NULL) {
        event_free(c->timer);
    }
    sbx_egress_request_clear(&c->req);
    free(c->tunnel_head);
    free(c->job);
    free(c);
}

static void closing_write(struct bufferevent *bev, void *arg)
{
    (void)bev;
    sbx_egress_conn_finish(arg);
}

static void closing_event(struct bufferevent *bev, short events, void *arg)
{
    (void)bev;
    (void)events;
    sbx_egress_conn_finish(arg);
}

/* Answers STATUS and closes once it is sent. The status line's reason phrase and the
 * body say what happened and what to ask for (deny.c), where clients show them (curl
 * prints a refused CONNECT's status line, npm and Node the reason phrase); X-Sbx-Deny
 * carries the bare reason. A connection the rules allowed keeps decision "allow" (a
 * 502 after an allow is not a denial). */
static void refuse(struct sbx_egress_conn *c, int status, const char *reason)
{
    if (c->decision == NULL) {
        c->decision = "deny";
        c->sb->denied++;
    }
    c->status = status;
    if (c->transparent) {                  /* (changed) answered by what the client sends first */
        sbx_egress_conn_answer(c, reason); /* refusal.c */
        return;
    }
    sbx_egress_refusal_http(c, status, reason);
    sbx_egress_conn_flush_close(c, reason); /* the answer is queued: sent, then closed */
}

void sbx_egress_conn_drop_up(struct sbx_egress_conn *c)
{
    if (c->up != NULL) {
        bufferevent_disable(c->up, EV_READ | EV_WRITE);
        bufferevent_free(c->up);
        c->up = NULL;
    }
    if (c->up_fd >= 0) {
        close(c->up_fd);
        c->up_fd = -1;
    }
}

void sbx_egress_conn_flush_close(struct sbx_egress_conn *c, const char *reason)
{
    struct timeval flush = {FLUSH_TIMEOUT, 0};

    c->reason = reason;
    c->state = ST_CLOSING;
    sbx_egress_conn_drop_up(c);
    bufferevent_disable(c->client, EV_READ);
    if (evbuffer_get_length(bufferevent_get_output(c->client)) == 0) {
        sbx_egress_conn_finish(c);
        return;
    }
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_setcb(c->client, NULL, closing_write, closing_event, c);
    bufferevent_enable(c->client, EV_WRITE);
    evtimer_add(c->timer, &flush);
}

static void tunnel_done(void *arg, const char *reason)
{
    struct sbx_egress_conn *c = arg;

    if (c->reason == NULL) {
        c->reason = reason;
    }
    sbx_egress_conn_finish(c);
}

/* The destination is connected: answer CONNECT (or send the rewritten head), then hand
 * both sockets to a splice tunnel. Bytes already read from the client go first. */
void sbx_egress_conn_start_pipe(struct sbx_egress_conn *c)
{
    struct evbuffer *up_prefix = evbuffer_new();
    struct evbuffer *client_prefix = evbuffer_new();
    const char *why = NULL;
    struct evbuffer *in;
    uint64_t body;
    size_t keep;
    size_t dropped;
    int framed;

    if (up_prefix == NULL || client_prefix == NULL) {
        if (up_prefix != NULL) {
            evbuffer_free(up_prefix);
        }
        if (client_prefix != NULL) {
            evbuffer_free(client_prefix);
        }
        c->reason = "out-of-memory";
        c->sb->refused++;
        sbx_egress_conn_finish(c);
        return;
    }
    c->state = ST_PIPE;
    event_del(c->timer);
    if (c->up_spoke != NULL) {
        event_free(c->up_spoke);
        c->up_spoke = NULL;
    }
    if (c->up != NULL) {
        /* ST_TLS: records checked and not yet sent up go before anything else (their
         * bytes are counted in prefix_up already); what the destination sent and the
         * client has not got follows the client's output below. */
        struct evbuffer *out = bufferevent_get_output(c->up);

        evbuffer_unfreeze(out, 1);
        evbuffer_add_buffer(up_prefix, out);
    }
    if (c->replied) {
        /* What is left of the 200 goes first. A bufferevent freezes its output's front
         * (only it drains it); it is about to go, so thaw it and move the rest. */
        struct evbuffer *out = bufferevent_get_output(c->client);

        evbuffer_unfreeze(out, 1);
        evbuffer_add_buffer(client_prefix, out);
        if (c->up != NULL) {
            evbuffer_add_buffer(client_prefix, bufferevent_get_input(c->up));
        }
    }
    else if (c->req.connect) {
        c->status = 200;
        if (!c->transparent) { /* (added) nothing asked for it */
            evbuffer_add_printf(client_prefix, "HTTP/1.1 200 Connection established\r\n\r\n");
        }
    }
    else {
        evbuffer_add(up_prefix, c->req.forward, c->req.forward_len);
        c->prefix_up = c->req.forward_len;
    }
    if (c->tunnel_head != NULL) {
        evbuffer_add(up_prefix, c->tunnel_head, c->tunnel_head_len);
        c->prefix_up += c->tunnel_head_len;
    }
    /* Plain HTTP, in a tunnel or not, is one request: its body goes on, and what the
     * client pipelines behind it never does (a CDN routes each request by its Host). */
    framed = !c->req.connect || c->tunnel_head != NULL;
    body = c->req.connect ? c->tunnel_body : c->req.body;
    in = bufferevent_get_input(c->client);
    keep = evbuffer_get_length(in);
    if (framed && keep > body) {
        keep = (size_t)body;
    }
    c->prefix_up += keep;
    evbuffer_remove_buffer(in, up_prefix, keep);
    dropped = evbuffer_get_length(in);
    bufferevent_disable(c->client, EV_READ | EV_WRITE);
    bufferevent_free(c->client);
    c->client = NULL;
    bufferevent_disable(c->up, EV_READ | EV_WRITE);
    bufferevent_free(c->up);
    c->up = NULL;
    c->tunnel = sbx_egress_tunnel_new(c->sb->e->base, c->client_fd, c->up_fd, up_prefix,
                                      client_prefix, SBX_EGRESS_PIPE_SIZE, &c->sb->e->n_tunnels,
                                      &c->sb->e->n_busy, &c->sb->n_tunnels, tunnel_done, c, &why);
    evbuffer_free(up_prefix);
    evbuffer_free(client_prefix);
    if (c->tunnel == NULL) {
        c->reason = why;
        c->sb->refused++;
        sbx_egress_warn_exhausted(c->sb->e, c->sb->name, why);
        sbx_egress_conn_finish(c);
        return;
    }
    sbx_egress_tunnel_share(c->tunnel, &c->sb->e->share, &c->sb->bucket);
    if (framed) {
        sbx_egress_tunnel_limit(c->tunnel, body - keep, dropped);
    }
}

static void connect_next(struct sbx_egress_conn *c);

static void connect_event(struct bufferevent *bev, short events, void *arg)
{
    struct sbx_egress_conn *c = arg;

    (void)bev;
    if (events & BEV_EVENT_CONNECTED) {
        bufferevent_set_timeouts(c->up, NULL, NULL);
        sbx_egress_conn_connected(c);
        if (c->req.connect && c->sb->e->check_sni) {
            bufferevent_setcb(c->up, NULL, NULL, NULL, NULL);
            sbx_egress_conn_start_sni(c);
        }
        else {
            sbx_egress_conn_start_pipe(c);
        }
        return;
    }
    bufferevent_free(c->up);
    c->up = NULL;
    close(c->up_fd);
    c->up_fd = -1;
    connect_next(c);
}

static void connect_next(struct sbx_egress_conn *c)
{
    struct sockaddr_storage ss;
    socklen_t len;
    const struct sbx_egress_addr *a;
    char ip[INET6_ADDRSTRLEN];

    if (c->next_cand >= c->n_cand) {
        refuse(c, 502, "connect-failed");
        return;
    }
    c->private_src = c->cand_src[c->next_cand];
    a = &c->cand[c->next_cand++];
    memset(&ss, 0, sizeof(ss));
    sbx_egress_addr_format(a, ip, sizeof(ip));
    if (a->family == AF_INET) {
        struct sockaddr_in *sin = (struct sockaddr_in *)&ss;

        sin->sin_family = AF_INET;
        sin->sin_port = htons((uint16_t)c->req.port);
        memcpy(&sin->sin_addr, a->b, 4);
        len = sizeof(*sin);
        snprintf(c->address, sizeof(c->address), "%s:%u", ip, c->req.port);
    }
    else {
        struct sockaddr_in6 *sin6 = (struct sockaddr_in6 *)&ss;

        sin6->sin6_family = AF_INET6;
        sin6->sin6_port = htons((uint16_t)c->req.port);
        memcpy(&sin6->sin6_addr, a->b, 16);
        len = sizeof(*sin6);
        snprintf(c->address, sizeof(c->address), "[%s]:%u", ip, c->req.port);
    }
    c->state = ST_CONNECTING;
    c->up_fd = socket(a->family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (c->up_fd < 0) {
        const char *why = sbx_egress_exhausted(errno);

        c->sb->refused++;
        sbx_egress_warn_exhausted(c->sb->e, c->sb->name, why);
        refuse(c, 503, why);
        return;
    }
    /* Fixed buffers (before connect, so the window scale fits them): what a destination
     * can queue in the proxy for this tunnel is bounded, and charged to the sandbox's
     * egress.max_buffer. A near destination gets a smaller send buffer once connected. */
    setsockopt(c->up_fd, SOL_SOCKET, SO_RCVBUF, &c->sb->e->socket_buffer,
               sizeof(c->sb->e->socket_buffer));
    setsockopt(c->up_fd, SOL_SOCKET, SO_SNDBUF, &c->sb->e->socket_buffer,
               sizeof(c->sb->e->socket_buffer));
    c->up = bufferevent_socket_new(c->sb->e->base, c->up_fd, 0);
    if (c->up == NULL) {
        close(c->up_fd);
        c->up_fd = -1;
        c->sb->refused++;
        refuse(c, 503, "out-of-memory");
        return;
    }
    bufferevent_setcb(c->up, NULL, NULL, connect_event, c);
    bufferevent_set_timeouts(c->up, NULL, &c->sb->e->connect_timeout);
    if (bufferevent_socket_connect(c->up, (struct sockaddr *)&ss, (int)len) < 0) {
        bufferevent_free(c->up);
        c->up = NULL;
        close(c->up_fd);
        c->up_fd = -1;
        connect_next(c);
    }
}

/* Keeps an address if it is public, or a CIDR rule allows it, or it came from a trusted
 * source (egress.hosts, egress.private_allow: src), or egress.private_allow lists a CIDR
 * for the name that holds it (DNS may answer with an internal address). A private
 * candidate remembers what allowed it, for the log's "private". */
static void add_candidate(struct sbx_egress_conn *c, const struct sbx_egress_addr *a,
                          const char *src)
{
    const struct sbx_egress *e = c->sb->e;
    const struct sbx_egress_rule *r;

    if (c->n_cand == MAX_CANDIDATES) {
        return;
    }
    if (sbx_egress_addr_is_public(a)) {
        c->cand_src[c->n_cand] = NULL;
        c->cand[c->n_cand++] = *a;
        return;
    }
    if (src == NULL && (r = sbx_egress_rules_match_addr(&c->sb->rules, a, c->req.port)) != NULL) {
        src = r->text;
    }
    for (size_t i = 0; src == NULL && i < e->n_private_nets; i++) {
        if (strcmp(e->private_nets[i].name, c->req.host) == 0 &&
            sbx_egress_private_match(e->private_nets[i].cidr, a)) {
            src = "egress.private_allow";
        }
    }
    if (src != NULL) {
        c->cand_src[c->n_cand] = src;
        c->cand[c->n_cand++] = *a;
    }
}

static void resolved(int result, struct evutil_addrinfo *res, void *arg)
{
    struct sbx_egress_conn *c = arg;

    if (result == EVUTIL_EAI_CANCEL) {
        return; /* c may be gone */
    }
    c->dns = NULL;
    if (result != 0) {
        refuse(c, 502, "resolve-failed");
        return;
    }
    for (struct evutil_addrinfo *ai = res; ai != NULL; ai = ai->ai_next) {
        struct sbx_egress_addr a;

        if (sbx_egress_addr_from_sockaddr(ai->ai_addr, &a) == 0) {
            add_candidate(c, &a, NULL);
        }
    }
    evutil_freeaddrinfo(res);
    if (c->n_cand == 0) {
        c->decision = NULL;
        c->sb->allowed--;
        c->rule = NULL;
        refuse(c, 403, "private-address");
        return;
    }
    connect_next(c);
}

static void decide(struct sbx_egress_conn *c)
{
    struct sbx_egress *e = c->sb->e;
    const struct sbx_egress_rule *rule;

    if (c->name_denied) { /* (added) a denied name's address: never connected (names.c) */
        refuse(c, 403, sbx_egress_conn_denied_reason(c));
        return;
    }
    if (sbx_egress_log_ready(&e->log) < 0) {
        refuse(c, 403, "log-unavailable");
        return;
    }
    if (c->req.host_is_ip) {
        rule = sbx_egress_rules_match_addr(&c->sb->rules, &c->req.ip, c->req.port);
        if (rule == NULL) {
            refuse(c, 403, "ip-literal");
            return;
        }
    }
    else {
        rule = sbx_egress_rules_match_name(&c->sb->rules, c->req.host, c->req.port);
        if (rule == NULL) {
            refuse(c, 403, "not-allowed");
            return;
        }
    }
    /* The tunnel's buffers, reserved before anything is connected: over the sandbox's
     * budget the connection is refused, never the proxy's memory stretched. */
    c->reserved = SBX_EGRESS_TUNNEL_RESERVE(e->socket_buffer);
    if (c->sb->reserved + c->reserved > e->max_buffer) {
        c->reserved = 0;
        c->sb->refused++;
        refuse(c, 503, "budget-buffer");
        return;
    }
    c->sb->reserved += c->reserved;
    c->decision = "allow";
    c->rule = rule->text;
    c->sb->allowed++;
    if (c->req.host_is_ip) {
        c->cand_src[0] = sbx_egress_addr_is_public(&c->req.ip) ? NULL : rule->text;
        c->cand[c->n_cand++] = c->req.ip;
        connect_next(c);
        return;
    }
    for (size_t i = 0; i < e->n_hosts; i++) {
        if (strcmp(e->hosts[i].name, c->req.host) == 0) {
            add_candidate(c, &e->hosts[i].addr, e->hosts[i].src);
        }
    }
    if (c->n_cand > 0) {
        connect_next(c);
        return;
    }
    if (e->dns == NULL) {
        refuse(c, 502, "resolve-failed");
        return;
    }
    {
        struct evutil_addrinfo hints;
        struct evdns_getaddrinfo_request *r;

        memset(&hints, 0, sizeof(hints));
        hints.ai_family = AF_UNSPEC;
        hints.ai_socktype = SOCK_STREAM;
        hints.ai_protocol = IPPROTO_TCP;
        c->state = ST_RESOLVING;
        r = evdns_getaddrinfo(e->dns, c->req.host, NULL, &hints, resolved, c);
        if (r != NULL) {
            c->dns = r;
        }
    }
}

static void head_read(struct bufferevent *bev, void *arg)
{
    struct sbx_egress_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len = evbuffer_get_length(in);
    size_t want = len < SBX_EGRESS_HEAD_MAX + 1 ? len : SBX_EGRESS_HEAD_MAX + 1;
    const char *p = (const char *)evbuffer_pullup(in, (ev_ssize_t)want);
    long end = sbx_egress_head_scan(p, want, &c->head_scanned);
    int status = 0;
    const char *reason = NULL;

    if (end < 0) {
        refuse(c, 400, "malformed-head");
        return;
    }
    if (end == 0) {
        if (want > SBX_EGRESS_HEAD_MAX) {
            refuse(c, 431, "header-too-large");
        }
        return;
    }
    if (sbx_egress_request_parse(p, (size_t)end, &c->req, &status, &reason) < 0) {
        if (c->transparent) {
            evbuffer_drain(in, (size_t)end); /* the relay's line, not the client's bytes */
        }
        refuse(c, status, reason);
        return;
    }
    evbuffer_drain(in, (size_t)end);
    event_del(c->timer);
    bufferevent_disable(bev, EV_READ);
    decide(c);
}

static void head_event(struct bufferevent *bev, short events, void *arg)
{
    struct sbx_egress_conn *c = arg;

    (void)bev;
    (void)events;
    if (c->reason == NULL) {
        c->reason = "client-closed";
    }
    sbx_egress_conn_finish(c);
}

void sbx_egress_conn_timer(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_egress_conn *c = arg;

    (void)fd;
    (void)what;
    if (c->state == ST_HEAD) {
        refuse(c, 408, "header-timeout");
        return;
    }
    if (c->state == ST_HELLO) {
        c->reason = "header-timeout";
        c->status = 408;
    }
    if (c->state == ST_SNI) {
        sbx_egress_conn_deny_tunnel(c, "sni-timeout");
        return;
    }
    if (c->state == ST_TLS) {
        sbx_egress_conn_deny_tunnel(c, "tls-timeout");
        return;
    }
    sbx_egress_conn_finish(c);
}

void sbx_egress_conn_start_head(struct sbx_egress_conn *c, const char *first, size_t n)
{
    c->state = ST_HEAD;
    c->client = bufferevent_socket_new(c->sb->e->base, c->client_fd, 0);
    if (c->client == NULL) {
        c->reason = "out-of-memory";
        c->sb->refused++;
        sbx_egress_conn_finish(c);
        return;
    }
    if (n > 0) {
        /* The input's end is frozen (only the bufferevent appends); its front is not. */
        evbuffer_prepend(bufferevent_get_input(c->client), first, n);
    }
    bufferevent_setwatermark(c->client, EV_READ, 0, SBX_EGRESS_HEAD_MAX + 1);
    bufferevent_setcb(c->client, head_read, NULL, head_event, c);
    bufferevent_enable(c->client, EV_READ);
    if (n > 0) {
        head_read(c->client, c);
    }
}

/* Closes a connection now (its sandbox is being removed). */
void sbx_egress_conn_close(struct sbx_egress_conn *c, const char *reason)
{
    if (c->reason == NULL) {
        c->reason = reason;
    }
    sbx_egress_conn_finish(c);
}

/* Used by egress.c to walk a sandbox's connections. */
struct sbx_egress_conn *sbx_egress_conn_next(struct sbx_egress_conn *c);
struct sbx_egress_conn *sbx_egress_conn_next(struct sbx_egress_conn *c)
{
    return c->next;
}
