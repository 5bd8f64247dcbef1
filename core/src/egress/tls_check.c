/* tls_check.c - ST_TLS (proxy.c has the state diagram): the tunnel's first ClientHello
 * passed (sni_check.c); the proxy relays through its own buffers while it follows the
 * TLS record layer both ways (tls_record.c), refusing what does not belong to one
 * handshake for the allowed name, and hands the sockets to the splice tunnel once the
 * handshake is done (docs/egress.md, "What a tunnel may carry"). Event loop only. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>

#include "egress/conn.h"
#include "egress/egress_int.h"
#include "egress/sni.h"
#include "egress/tls_record.h"

/* What one direction may hold in the proxy while the handshake is followed: the
 * source is not read while the other side's output holds more. */
#define TLS_OUT_MAX (64 * 1024)
/* The client's input: a whole record (or a retried ClientHello) and a header. */
#define TLS_IN_MAX (SBX_EGRESS_SNI_MAX + 5 + SBX_TLS_RECORD_MAX)

static void client_read(struct bufferevent *bev, void *arg)
{
    struct sbx_egress_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len = evbuffer_get_length(in);
    const unsigned char *p;
    size_t used = 0;
    size_t need = 0;
    const char *reason = NULL;
    enum sbx_tls_verdict v;

    if (len == 0) {
        return;
    }
    p = evbuffer_pullup(in, (ev_ssize_t)len);
    if (p == NULL) {
        sbx_egress_conn_deny_tunnel(c, "out-of-memory");
        return;
    }
    v = sbx_tls_follow_client(&c->tls, p, len, &used, &need, &reason);
    if (v == SBX_TLS_DENY) {
        sbx_egress_conn_deny_tunnel(c, reason);
        return;
    }
    if (used > 0) {
        evbuffer_remove_buffer(in, bufferevent_get_output(c->up), used);
        c->prefix_up += used;
    }
    if (v == SBX_TLS_DONE) {
        sbx_egress_conn_start_pipe(c);
        return;
    }
    /* a partial record waits at most egress.header_timeout for its rest */
    if (evbuffer_get_length(in) > 0) {
        if (!evtimer_pending(c->timer, NULL)) {
            evtimer_add(c->timer, &c->sb->e->header_timeout);
        }
    }
    else {
        event_del(c->timer);
    }
    bufferevent_setwatermark(c->client, EV_READ, need - used, TLS_IN_MAX);
    if (evbuffer_get_length(bufferevent_get_output(c->up)) > TLS_OUT_MAX) {
        bufferevent_disable(c->client, EV_READ); /* up_written reads again */
    }
}

static void up_read(struct bufferevent *bev, void *arg)
{
    struct sbx_egress_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    struct evbuffer *out = bufferevent_get_output(c->client);
    struct evbuffer_iovec v[8];
    int n = evbuffer_peek(in, -1, NULL, v, 8);
    size_t len = evbuffer_get_length(in);

    if (n > 8) { /* more chunks than fit: look at them linearised */
        sbx_tls_follow_server(&c->tls, evbuffer_pullup(in, -1), len);
    }
    else {
        for (int i = 0; i < n; i++) {
            sbx_tls_follow_server(&c->tls, v[i].iov_base, v[i].iov_len);
        }
    }
    evbuffer_remove_buffer(in, out, len);
    c->prefix_down += len;
    if (evbuffer_get_length(out) > TLS_OUT_MAX) {
        bufferevent_disable(c->up, EV_READ); /* client_written reads again */
    }
}

/* An output drained: read its source again. */
static void client_written(struct bufferevent *bev, void *arg)
{
    struct sbx_egress_conn *c = arg;

    (void)bev;
    bufferevent_enable(c->up, EV_READ);
}

static void up_written(struct bufferevent *bev, void *arg)
{
    struct sbx_egress_conn *c = arg;

    (void)bev;
    bufferevent_enable(c->client, EV_READ);
}

static void client_event(struct bufferevent *bev, short events, void *arg)
{
    struct sbx_egress_conn *c = arg;

    (void)bev;
    (void)events;
    c->reason = "client-closed";
    sbx_egress_conn_finish(c);
}

/* The destination ended during the handshake (an alert, then its close): the client
 * gets what it sent, and nothing more of the client's goes anywhere. An end of stream
 * is a clean end (no reason), as in the tunnel. */
static void up_event(struct bufferevent *bev, short events, void *arg)
{
    struct sbx_egress_conn *c = arg;

    (void)bev;
    if (events & BEV_EVENT_EOF) {
        up_read(c->up, c);
    }
    sbx_egress_conn_flush_close(c, (events & BEV_EVENT_EOF) ? NULL : "destination-error");
}

void sbx_egress_conn_start_tls(struct sbx_egress_conn *c, size_t hello_len)
{
    struct evbuffer *in = bufferevent_get_input(c->client);

    c->state = ST_TLS;
    event_del(c->timer);
    if (c->up_spoke != NULL) {
        event_free(c->up_spoke);
        c->up_spoke = NULL;
    }
    sbx_tls_follow_init(&c->tls, c->sni[0] ? c->sni : NULL);
    evbuffer_remove_buffer(in, bufferevent_get_output(c->up), hello_len);
    c->prefix_up += hello_len;
    bufferevent_setcb(c->client, client_read, client_written, client_event, c);
    bufferevent_setcb(c->up, up_read, up_written, up_event, c);
    bufferevent_setwatermark(c->client, EV_READ, 0, TLS_IN_MAX);
    bufferevent_setwatermark(c->up, EV_READ, 0, TLS_OUT_MAX);
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_setwatermark(c->up, EV_WRITE, 0, 0);
    bufferevent_enable(c->client, EV_READ | EV_WRITE);
    bufferevent_enable(c->up, EV_READ | EV_WRITE);
    if (evbuffer_get_length(in) > 0) {
        client_read(c->client, c); /* sent right behind the hello */
    }
}
