/* egress_int.h - internals shared by egress.c (lifecycle) and proxy.c (connections). */
#ifndef SBX_EGRESS_INT_H
#define SBX_EGRESS_INT_H

#include <pthread.h>
#include <stdint.h>
#include <sys/time.h>
#include <time.h>

#include <event2/util.h>

#include "egress/egress.h"
#include "egress/egress_log.h"
#include "egress/rules.h"
#include "egress/share.h"

/* How long a listener rests after accept() failed for lack of descriptors or memory
 * (a level-triggered listener would otherwise spin on the pending connection). */
#define SBX_EGRESS_ACCEPT_PAUSE_MS 100
/* Send and receive buffer of a handed-over client socket. That hop is the sandbox's own
 * loopback, so a small fixed buffer costs no throughput, and it keeps the bytes the
 * proxy forwards in the CPU cache until the client reads them; autotuned buffers grow
 * to megabytes and cost more than half the throughput (docs/egress.md, bench/). The
 * upstream socket stays autotuned: it may cross a long path. */
#define SBX_EGRESS_CLIENT_BUF (256 * 1024)
/* A destination whose connect round trip is under this many microseconds is near
 * (this host, a LAN): its socket gets the same fixed send buffer. 512 KiB in flight
 * at 200 us is about 20 Gbit/s, so nothing near is slowed. */
#define SBX_EGRESS_NEAR_RTT_US 200

struct event;
struct evconnlistener;
struct evdns_base;
struct sbx_egress_conn;

struct sbx_egress_static_host {
    char *name;
    struct sbx_egress_addr addr;
    const char *src; /* "egress.hosts" or "egress.private_allow" (logged as "private") */
};

/* egress.private_allow CIDRs: the name's DNS answers in cidr are kept. */
struct sbx_egress_private_net {
    char *name;
    char *cidr;
};

struct sbx_egress_sandbox {
    struct sbx_egress *e;
    char *dir;
    char *sock;
    char *job;
    char *task;
    char *name;
    struct sbx_egress_rules rules;
    struct evconnlistener *listener;
    struct event *resume; /* re-enables the listener (rate, accept errors) */
    struct sbx_egress_conn *conns;
    size_t n_conns;
    uint64_t allowed;
    uint64_t denied;
    uint64_t reserved;      /* buffer bytes its tunnels reserved (egress.max_buffer) */
    uint64_t refused;       /* connections refused over a budget or for resources */
    size_t n_tunnels;       /* its tunnels open (they share its part of a turn) */
    double tokens;          /* new connections it may still open now */
    struct timespec refill; /* when tokens were last refilled */
    /* (added) its part of egress.bandwidth (share.h); connections accepted in its
     * listener's turn, and the event that gives it the next turn (accept.c) */
    struct sbx_egress_bucket bucket;
    unsigned accepts;
    struct event *next_turn;
    struct sbx_egress_sandbox *next;
};

struct sbx_egress_cmd;

struct sbx_egress {
    struct event_base *base;
    int own_base;
    int threaded;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct sbx_egress_cmd *cmds;
    struct event *wake;
    struct evdns_base *dns;
    struct sbx_egress_log log;
    struct sbx_egress_static_host *hosts;
    size_t n_hosts;
    struct sbx_egress_private_net *private_nets;
    size_t n_private_nets;
    struct timeval header_timeout;
    struct timeval connect_timeout;
    int check_sni;
    size_t max_conns;     /* egress.max_connections, per sandbox */
    uint64_t max_buffer;  /* egress.max_buffer, per sandbox */
    int socket_buffer;    /* egress.socket_buffer: a destination socket's buffers */
    double conn_rate;     /* egress.connection_rate: new connections/s per sandbox */
    int reserve_fd;       /* given up to accept (and refuse) at EMFILE */
    size_t n_tunnels;     /* tunnels open on this loop */
    size_t n_busy;        /* sandboxes with a tunnel open (they share a turn) */
    time_t accept_warned; /* when an accept failure was last logged */
    /* (added) egress.bandwidth and the sandboxes sharing it (share.h) */
    struct sbx_egress_share share;
    struct sbx_egress_sandbox *sandboxes;
};

/* proxy.c: the listener callbacks (arg is the sandbox) and closing a connection. */
void sbx_egress_accept(struct evconnlistener *l, int fd, struct sockaddr *sa, int len, void *arg);
void sbx_egress_accept_error(struct evconnlistener *l, void *arg);
void sbx_egress_resume(evutil_socket_t fd, short what, void *arg);
/* (added) A sandbox's listener took SBX_EGRESS_ACCEPT_TURN connections in a row: it
 * rests until the loop has run the other ready events (accept.c). */
void sbx_egress_next_turn(evutil_socket_t fd, short what, void *arg);
#define SBX_EGRESS_ACCEPT_TURN 4
void sbx_egress_conn_close(struct sbx_egress_conn *c, const char *reason);
/* Bytes the sandbox's connections hold in the proxy now: pipes, unsent prefixes and
 * head buffers, and the destination sockets' queues. */
uint64_t sbx_egress_held(const struct sbx_egress_sandbox *sb);

#endif
