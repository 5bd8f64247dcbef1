/* sni_check.c - ST_SNI (proxy.c has the state diagram): a CONNECT tunnel's destination
 * is connected and the client has its 200; the first bytes of either side decide
 * whether the tunnel may start (egress.check_sni, docs/egress.md "What a tunnel may
 * carry"). Runs on the egress event loop only. */
#include <errno.h>
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <event2/util.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/conn.h"
#include "egress/egress_int.h"
#include "egress/request.h"
#include "egress/sni.h"

/* The tunnel was allowed by its CONNECT host but its first bytes say otherwise: close
 * both ends (the client has its 200 already; it sees the connection end). */
void sbx_egress_conn_deny_tunnel(struct sbx_egress_conn *c, const char *reason)
{
    if (c->decision != NULL && strcmp(c->decision, "allow") == 0) {
        c->sb->allowed--;
    }
    c->decision = "deny";
    c->sb->denied++;
    c->rule = NULL;
    c->reason = reason;
    sbx_egress_conn_finish(c);
}

/* ST_SNI: more of the client's first bytes are needed: wait for `need` of them, and
 * from now on for at most egress.header_timeout (a client that says nothing at all is
 * not timed: it may speak later, and nothing flows meanwhile). */
static void sni_wait(struct sbx_egress_conn *c, size_t need)
{
    if (need > SBX_EGRESS_SNI_MAX) {
        sbx_egress_conn_deny_tunnel(c, "sni-unreadable");
        return;
    }
    bufferevent_setwatermark(c->client, EV_READ, need, SBX_EGRESS_SNI_MAX + 1);
    if (!evtimer_pending(c->timer, NULL)) {
        evtimer_add(c->timer, &c->sb->e->header_timeout);
    }
}

/* ST_SNI: an HTTP/1 request inside the tunnel (Node's fetch tunnels http:// too): its
 * head must be whole, its host must be the tunnel's (target and Host), and it goes on
 * rewritten as the proxy's own plain HTTP requests do: hop-by-hop headers dropped,
 * "Connection: close", so the destination serves only this request. */
static void tunnel_http(struct sbx_egress_conn *c, const char *p, size_t n)
{
    struct evbuffer *in = bufferevent_get_input(c->client);
    struct sbx_egress_request r;
    long end = sbx_egress_head_scan(p, n, &c->head_scanned);
    int status = 0;
    const char *reason = NULL;

    if (end < 0) {
        sbx_egress_conn_deny_tunnel(c, "malformed-head");
        return;
    }
    if (end == 0) {
        if (n > SBX_EGRESS_HEAD_MAX) {
            sbx_egress_conn_deny_tunnel(c, "header-too-large");
            return;
        }
        sni_wait(c, n + 1);
        return;
    }
    if (sbx_egress_request_parse_tunnel(p, (size_t)end, &c->req, &r, &status, &reason) < 0) {
        sbx_egress_request_clear(&r);
        sbx_egress_conn_deny_tunnel(c, reason);
        return;
    }
    evbuffer_drain(in, (size_t)end);
    c->tunnel_head = r.forward;
    c->tunnel_head_len = r.forward_len;
    c->tunnel_body = r.body;
    r.forward = NULL;
    sbx_egress_request_clear(&r);
    sbx_egress_conn_start_pipe(c);
}

/* ST_SNI: client-first bytes that are neither TLS nor an HTTP/1 request (a leading
 * empty line, an unknown method, SSH's banner), or a ClientHello without a name to a
 * named host: the proxy cannot tell which host they reach, so they pass (unchecked)
 * only when an opaque rule allows the destination; else a deny with `reason`. */
static void opaque_or_deny(struct sbx_egress_conn *c, const char *reason)
{
    const struct sbx_egress_rule *rule = sbx_egress_rules_match_opaque(
        &c->sb->rules, c->req.host_is_ip ? NULL : c->req.host, &c->req.ip, c->req.port);

    if (rule == NULL) {
        sbx_egress_conn_deny_tunnel(c, reason);
        return;
    }
    c->opaque = 1;
    c->rule = rule->text;
    sbx_egress_conn_start_pipe(c);
}

/* ST_SNI: the client's first bytes. A TLS ClientHello must name the CONNECT host (a
 * different name on an allowed address is domain fronting) and must not hide its real
 * name (ECH), and its handshake is then followed (tls_check.c); an HTTP request must go
 * as a proxy request, where its Host is checked; TLS without a name and anything else
 * need an opaque rule (TLS without a name to an IP literal is followed). */
static void sni_read(struct bufferevent *bev, void *arg)
{
    struct sbx_egress_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len = evbuffer_get_length(in);
    size_t want = len < SBX_EGRESS_SNI_MAX + 1 ? len : SBX_EGRESS_SNI_MAX + 1;
    const unsigned char *p = evbuffer_pullup(in, (ev_ssize_t)want);
    char host[256];
    int http;

    if (want == 0) {
        return;
    }
    switch (sbx_egress_sni_parse(p, want, host, sizeof(host))) {
    case SBX_SNI_MORE:
        sni_wait(c, sbx_egress_sni_want(p, want));
        return;
    case SBX_SNI_NOT_TLS:
        http = sbx_egress_http_start(p, want);
        if (http == 1) {
            tunnel_http(c, (const char *)p, want);
        }
        else if (http == 2) {
            sbx_egress_conn_deny_tunnel(c, "http-in-tunnel"); /* HTTP/2: names inside HPACK */
        }
        else if (http < 0) {
            sni_wait(c, want + 1);
        }
        else {
            opaque_or_deny(c, "tunnel-protocol");
        }
        return;
    case SBX_SNI_ABSENT:
        /* No name: nothing to hold it to. A CIDR rule allowed an IP-literal tunnel's
         * address itself (TLS never names an address), so its handshake is followed;
         * a tunnel to a name needs an opaque rule. */
        if (c->req.host_is_ip) {
            sbx_egress_conn_start_tls(c, sbx_egress_sni_hello_len(p, want));
            return;
        }
        opaque_or_deny(c, "sni-absent");
        return;
    case SBX_SNI_FOUND:
        snprintf(c->sni, sizeof(c->sni), "%s", host);
        /* an IP-literal tunnel: only that literal itself (names are not IPs) */
        if (!sbx_egress_sni_matches(host, c->req.host)) {
            sbx_egress_conn_deny_tunnel(c, "sni-mismatch");
            return;
        }
        sbx_egress_conn_start_tls(c, sbx_egress_sni_hello_len(p, want));
        return;
    case SBX_SNI_ECH:
        sbx_egress_conn_deny_tunnel(c, "sni-ech");
        return;
    case SBX_SNI_MALFORMED:
    default:
        sbx_egress_conn_deny_tunnel(c, "sni-unreadable");
        return;
    }
}

static void sni_event(struct bufferevent *bev, short events, void *arg)
{
    struct sbx_egress_conn *c = arg;

    (void)bev;
    (void)events;
    c->reason = "client-closed";
    sbx_egress_conn_finish(c);
}

/* ST_SNI: the destination spoke first, so it is no TLS server (SSH, SMTP): relay, unless
 * the client has sent something too (read or still in the socket): then its bytes
 * decide, as above. */
static void up_spoke(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_egress_conn *c = arg;
    char byte;

    (void)fd;
    (void)what;
    if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0) {
        sni_read(c->client, c);
        return;
    }
    if (recv(c->client_fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) != -1 ||
        (errno != EAGAIN && errno != EWOULDBLOCK)) {
        return; /* bytes or an end are waiting: the client's read event decides */
    }
    sbx_egress_conn_start_pipe(c);
}

/* The destination of a CONNECT is connected: answer 200, then wait for the client's
 * first bytes (or the destination's) before the tunnel starts. */
void sbx_egress_conn_start_sni(struct sbx_egress_conn *c)
{
    c->state = ST_SNI;
    c->status = 200;
    c->head_scanned = 0; /* a request in the tunnel is a head of its own */
    c->replied = 1;
    if (!c->transparent) { /* (added) the relay's transparent path asked for nothing */
        evbuffer_add_printf(bufferevent_get_output(c->client),
                            "HTTP/1.1 200 Connection established\r\n\r\n");
    }
    bufferevent_setwatermark(c->client, EV_READ, 0, SBX_EGRESS_SNI_MAX + 1);
    bufferevent_setcb(c->client, sni_read, NULL, sni_event, c);
    bufferevent_enable(c->client, EV_READ | EV_WRITE);
    c->up_spoke = event_new(c->sb->e->base, c->up_fd, EV_READ, up_spoke, c);
    event_add(c->up_spoke, NULL);
    if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0) {
        sni_read(c->client, c); /* sent right behind the CONNECT head */
    }
}
