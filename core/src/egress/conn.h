/* conn.h - one proxied connection, shared by proxy.c (request, decision, connect,
 * relay; its header has the state diagram), sni_check.c (a tunnel's first bytes) and
 * accept.c (accepting, handover, budgets at the door). Egress loop only. */
#ifndef SBX_EGRESS_CONN_H
#define SBX_EGRESS_CONN_H

#include <arpa/inet.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include <event2/util.h>

#include "egress/egress_int.h"
#include "egress/request.h"
#include "egress/tls_record.h"

#define MAX_CANDIDATES 16
/* The relay's attribution line ahead of a connection (tools/relay/attr.h):
 * "Sbx-Relay: pid=N|- exec=ID|-\r\n". */
#define SBX_EGRESS_ATTR_PREFIX "Sbx-Relay: "
#define SBX_EGRESS_ATTR_MAX 96
#define SBX_EGRESS_EXEC_MAX 40

enum conn_state {
    ST_HELLO,
    ST_HEAD,
    ST_RESOLVING,
    ST_CONNECTING,
    ST_SNI,
    ST_TLS,
    ST_PIPE,
    ST_CLOSING,
    ST_ANSWER, /* (added) a refused transparent connection: its first bytes awaited */
};

struct sbx_egress_conn {
    struct sbx_egress_sandbox *sb;
    struct bufferevent *client;
    struct bufferevent *up;
    struct event *timer;
    enum conn_state state;
    struct sbx_egress_request req;
    struct timespec start;
    struct timespec t0;
    struct evdns_getaddrinfo_request *dns;
    struct sbx_egress_addr cand[MAX_CANDIDATES];
    const char *cand_src[MAX_CANDIDATES]; /* a private candidate: what allowed it */
    const char *private_src;              /* the connected address was private: why */
    size_t n_cand;
    size_t next_cand;
    char address[INET6_ADDRSTRLEN + 8];
    const char *decision;
    const char *rule;
    const char *reason;
    int status;
    int client_fd;
    int up_fd;
    struct event *hello;
    struct event *up_spoke; /* ST_SNI: the destination sent first */
    int replied;            /* the 200 is in the client's output already */
    char *job;              /* the sandbox's job when the connection arrived */
    char *tunnel_head;      /* an HTTP request head in the tunnel, rewritten */
    size_t tunnel_head_len;
    uint64_t tunnel_body; /* its Content-Length */
    size_t head_scanned;  /* how far the head being read was scanned for its end */
    int opaque;           /* an opaque rule let client-first bytes through unchecked */
    char sni[256];
    char exec[SBX_EGRESS_EXEC_MAX + 1]; /* reported by the relay (attribution), or "" */
    int pid;                            /* reported by the relay, or 0 */
    struct sbx_egress_tunnel *tunnel;
    uint64_t prefix_up;        /* bytes sent up before the tunnel (head, checked records) */
    uint64_t prefix_down;      /* bytes sent down before the tunnel (ST_TLS) */
    struct sbx_tls_follow tls; /* ST_TLS: the handshake followed */
    uint64_t reserved;         /* its share of the sandbox's egress.max_buffer */
    int transparent;           /* (added) handed over by the relay's transparent path: no 200;
                                * a refusal is answered by the first bytes (refusal.c) */
    int quiet;                 /* (added) a name query the policy allowed: no log line */
    int name_denied;           /* (added) "\x03": a denied name's address, refused always */
    size_t answer_dropped;     /* (added) bytes dropped after a refusal's answer */
    int client_eof;            /* (added) the client half-closed while being answered */
    struct sbx_egress_conn *prev;
    struct sbx_egress_conn *next;
};

/* proxy.c */
/* Logs the connection's line, releases its budget share, closes and frees it. */
void sbx_egress_conn_finish(struct sbx_egress_conn *c);
/* Reads the request head from c->client_fd (first: bytes already read). */
void sbx_egress_conn_start_head(struct sbx_egress_conn *c, const char *first, size_t n);
/* c->timer: header or flush timeout. */
void sbx_egress_conn_timer(evutil_socket_t fd, short what, void *arg);
/* The destination is connected: answer CONNECT (or send the rewritten head), then hand
 * both sockets to a splice tunnel (ST_PIPE). */
void sbx_egress_conn_start_pipe(struct sbx_egress_conn *c);

/* Sends what the client's output holds, then closes (ST_CLOSING, at most 5 s). */
void sbx_egress_conn_flush_close(struct sbx_egress_conn *c, const char *reason);
/* Frees the destination's side (connecting or connected), if any. */
void sbx_egress_conn_drop_up(struct sbx_egress_conn *c);

/* refusal.c */
/* Queues the HTTP refusal STATUS REASON (deny.c's text as reason phrase and body,
 * X-Sbx-Deny) in the client's output. */
void sbx_egress_refusal_http(struct sbx_egress_conn *c, int status, const char *reason);
/* (added) A transparent connection is refused (c->status set): answer what the client
 * sends first (a TLS alert, the HTTP refusal) or close, then finish (ST_ANSWER). */
void sbx_egress_conn_answer(struct sbx_egress_conn *c, const char *reason);

/* sni_check.c */
/* A CONNECT's destination is connected: answer 200, then let the first bytes of either
 * side decide (ST_SNI). */
void sbx_egress_conn_start_sni(struct sbx_egress_conn *c);
/* The tunnel's first bytes break its rules: close both ends, logged as a deny. */
void sbx_egress_conn_deny_tunnel(struct sbx_egress_conn *c, const char *reason);

/* tls_check.c */
/* The first ClientHello (hello_len bytes at the front of the client's input) passed:
 * send it on and follow the records both ways until the handshake is done (ST_TLS),
 * then sbx_egress_conn_start_pipe. */
void sbx_egress_conn_start_tls(struct sbx_egress_conn *c, size_t hello_len);

/* names.c (added): the relay's name queries and transparent connections */
#define SBX_EGRESS_NAME_LINE 300
/* The line at buf[0..len) after a message's control byte, into line[size] without its
 * '\n': its length with the '\n', or -1 when there is no '\n' within size bytes or a
 * byte outside printable ASCII. */
long sbx_egress_name_line(const char *buf, size_t len, char *line, size_t size);
/* "\x02NAME\n" (buf: what followed the control byte): answers whether the sandbox's
 * policy allows NAME, then finishes c. */
void sbx_egress_conn_name_query(struct sbx_egress_conn *c, const char *buf, size_t len);
/* "\x01HOST:PORT\n" came with the client socket (now c->client_fd): CONNECT to it.
 * (added) denied: "\x03HOST:PORT\n", a denied name's address: refused, never connected. */
void sbx_egress_conn_transparent(struct sbx_egress_conn *c, const char *line, int denied);
/* (added) Why a "\x03" connection is refused: not-allowed, or denied-at-lookup when the
 * rules allow it now (the policy changed since the name was looked up). */
const char *sbx_egress_conn_denied_reason(const struct sbx_egress_conn *c);

/* accept.c */
/* Parses an attribution line at buf[0..len) into c->pid and c->exec. Returns the
 * line's length, 0 when buf does not start with one, -1 when it is malformed. */
long sbx_egress_attr_parse(struct sbx_egress_conn *c, const char *buf, size_t len);
/* "out-of-descriptors" for EMFILE and ENFILE, else "out-of-memory". */
const char *sbx_egress_exhausted(int err);
/* One stderr line per second at most about resource failures. */
void sbx_egress_warn_exhausted(struct sbx_egress *e, const char *sandbox, const char *what);
/* The destination is connected: size its buffers (a near one gets a smaller send
 * buffer) and settle the tunnel's reservation to what the socket really got. */
void sbx_egress_conn_connected(struct sbx_egress_conn *c);

#endif
