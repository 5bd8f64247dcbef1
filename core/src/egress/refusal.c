/* refusal.c - what a refused client is told (docs/egress.md, "Reading a denial").
 *
 * A client that sent the proxy a request gets the HTTP refusal: the status line's
 * reason phrase and the body carry deny.c's text, X-Sbx-Deny the bare reason.
 *
 * (added, issue 27) A transparent connection (the relay's redirect, names.c) sent no
 * request the proxy read: the program thinks it talks to the destination. Refused
 * (a denied name's address, a port or address no rule allows, a destination that does
 * not answer), it is answered by what the program sends first, read here and never
 * sent anywhere:
 *   - a TLS record (a ClientHello): a fatal alert, access_denied (49) for a 403,
 *     internal_error (80) for the rest; the TLS library prints the alert's name;
 *   - an HTTP/1 request: its head is read (at most SBX_EGRESS_HEAD_MAX), then the same
 *     HTTP refusal as on the proxy path;
 *   - anything else, an end, or nothing within egress.header_timeout: closed.
 * After an answer the connection's sending side is shut and what the client still
 * sends is read and dropped (at most LINGER_MAX bytes, FLUSH_TIMEOUT seconds), so that
 * closing with unread bytes does not reset the connection before the client has read
 * the answer. The connection's one log line (its reason, attribution) is written at
 * the end, as for every refusal. Egress loop only. */
#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/event.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "egress/conn.h"
#include "egress/deny.h"

#define LINGER_MAX (64 * 1024)
#define LINGER_SECONDS 5
#define METHOD_MAX 16 /* an HTTP method token longer than this is not HTTP here */
#define TLS_ALERT_ACCESS_DENIED 49
#define TLS_ALERT_INTERNAL_ERROR 80

void sbx_egress_refusal_http(struct sbx_egress_conn *c, int status, const char *reason)
{
    char text[SBX_EGRESS_DENY_TEXT_MAX];
    char why[SBX_EGRESS_HOST_MAX + 200] = "";
    size_t n;

    n = sbx_egress_deny_text(reason, c->req.host[0] ? c->req.host : NULL, c->req.port,
                             c->req.host_is_ip, text, sizeof(text));
    if (c->req.host[0] != '\0' && c->req.port != 0 && c->sb->task != NULL &&
        strchr(text, ':') != NULL && strstr(text, c->req.host) != NULL) {
        snprintf(why, sizeof(why), "explain on the host: sbx egress why %s%s%s:%u --task %s\n",
                 c->req.host_is_ip && strchr(c->req.host, ':') ? "[" : "", c->req.host,
                 c->req.host_is_ip && strchr(c->req.host, ':') ? "]" : "", c->req.port,
                 c->sb->task);
    }
    evbuffer_add_printf(bufferevent_get_output(c->client),
                        "HTTP/1.1 %d %s\r\nX-Sbx-Deny: %s\r\nContent-Type: text/plain\r\n"
                        "Content-Length: %zu\r\nConnection: close\r\n\r\n%s\n%s",
                        status, text, reason, n + 1 + strlen(why), text, why);
}

static void linger_read(struct bufferevent *bev, void *arg)
{
    struct sbx_egress_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t n = evbuffer_get_length(in);

    evbuffer_drain(in, n);
    c->answer_dropped += n;
    if (c->answer_dropped > LINGER_MAX) {
        sbx_egress_conn_finish(c);
    }
}

static void linger_write(struct bufferevent *bev, void *arg)
{
    struct sbx_egress_conn *c = arg;

    (void)bev;
    shutdown(c->client_fd, SHUT_WR); /* the answer is out: the client reads it, then EOF */
    if (c->client_eof) {
        sbx_egress_conn_finish(c); /* and it has sent all it will */
    }
}

static void linger_event(struct bufferevent *bev, short events, void *arg)
{
    struct sbx_egress_conn *c = arg;

    if ((events & BEV_EVENT_EOF) && !(events & BEV_EVENT_ERROR) &&
        evbuffer_get_length(bufferevent_get_output(bev)) > 0) {
        /* the client half-closed before the answer was out: it still reads */
        c->client_eof = 1;
        bufferevent_disable(bev, EV_READ);
        return;
    }
    sbx_egress_conn_finish(c); /* the client closed (or failed), the answer out: done */
}

/* The answer is in the client's output: send it, shut, drop what still comes. */
static void linger(struct sbx_egress_conn *c)
{
    struct timeval tv = {LINGER_SECONDS, 0};
    struct evbuffer *in = bufferevent_get_input(c->client);

    c->state = ST_CLOSING;
    c->answer_dropped = evbuffer_get_length(in);
    evbuffer_drain(in, c->answer_dropped);
    bufferevent_setwatermark(c->client, EV_READ, 0, 0);
    bufferevent_setwatermark(c->client, EV_WRITE, 0, 0);
    bufferevent_setcb(c->client, linger_read, linger_write, linger_event, c);
    bufferevent_enable(c->client, c->client_eof ? EV_WRITE : EV_READ | EV_WRITE);
    evtimer_add(c->timer, &tv);
}

/* 1 when p[0..n) starts an HTTP/1 request line ("TOKEN "), 0 when it may still (only
 * capital letters so far), -1 when it cannot. */
static int http_start(const unsigned char *p, size_t n)
{
    for (size_t i = 0; i < n && i <= METHOD_MAX; i++) {
        if (p[i] == ' ') {
            return i > 0 ? 1 : -1;
        }
        if (p[i] < 'A' || p[i] > 'Z') {
            return -1;
        }
    }
    return n > METHOD_MAX ? -1 : 0;
}

static void answer_read(struct bufferevent *bev, void *arg)
{
    struct sbx_egress_conn *c = arg;
    struct evbuffer *in = bufferevent_get_input(bev);
    size_t len = evbuffer_get_length(in);
    size_t want = len < SBX_EGRESS_HEAD_MAX + 1 ? len : SBX_EGRESS_HEAD_MAX + 1;
    const unsigned char *p;
    long end;
    int kind;

    if (want == 0) {
        return;
    }
    p = evbuffer_pullup(in, (ev_ssize_t)want);
    kind = http_start(p, want);
    if (c->client_eof && kind == 0) {
        kind = -1; /* the client has ended: no more of the request line comes */
    }
    if (p[0] == 0x16) { /* a TLS handshake record: a fatal alert (RFC 8446, 6.2) */
        unsigned char alert[7] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, TLS_ALERT_INTERNAL_ERROR};

        if (c->status == 403) {
            alert[6] = TLS_ALERT_ACCESS_DENIED;
        }
        evbuffer_add(bufferevent_get_output(bev), alert, sizeof(alert));
        linger(c);
        return;
    }
    if (kind < 0) {
        sbx_egress_conn_finish(c); /* bytes of another protocol: no answer it could read */
        return;
    }
    if (kind == 0) {
        return;
    }
    end = sbx_egress_head_scan((const char *)p, want, &c->head_scanned);
    if (end == 0 && want <= SBX_EGRESS_HEAD_MAX && !c->client_eof) {
        return; /* the rest of the head */
    }
    sbx_egress_refusal_http(c, c->status, c->reason); /* a malformed or long head too */
    linger(c);
}

static void answer_event(struct bufferevent *bev, short events, void *arg)
{
    struct sbx_egress_conn *c = arg;

    if ((events & BEV_EVENT_EOF) && !(events & BEV_EVENT_ERROR) &&
        evbuffer_get_length(bufferevent_get_input(bev)) > 0) {
        /* a request (or hello) and then the client's half-close: answer what came */
        c->client_eof = 1;
        bufferevent_disable(bev, EV_READ);
        answer_read(bev, c);
        return;
    }
    sbx_egress_conn_finish(c); /* the client ended before it sent a byte, or failed */
}

void sbx_egress_conn_answer(struct sbx_egress_conn *c, const char *reason)
{
    c->reason = reason;
    c->state = ST_ANSWER;
    c->head_scanned = 0;
    sbx_egress_conn_drop_up(c);
    if (c->client == NULL) {
        sbx_egress_conn_finish(c);
        return;
    }
    bufferevent_setwatermark(c->client, EV_READ, 0, SBX_EGRESS_HEAD_MAX + 1);
    bufferevent_setcb(c->client, answer_read, NULL, answer_event, c);
    bufferevent_enable(c->client, EV_READ);
    evtimer_add(c->timer, &c->sb->e->header_timeout);
    if (evbuffer_get_length(bufferevent_get_input(c->client)) > 0) {
        answer_read(c->client, c); /* sent before the refusal was decided */
    }
}
