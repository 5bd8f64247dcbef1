/* tunnel.c - the bulk phase of a proxied connection: splice(2) from one socket into a
 * pipe and from the pipe into the other socket, both ways. The kernel moves page
 * references; the proxy never copies payload bytes. */
#include "egress/tunnel.h"

#include <errno.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "egress/share.h"

struct dir {
    struct sbx_egress_tunnel *t;
    int src;
    int dst;
    int pipe[2];
    size_t in_pipe;          /* bytes spliced in, not yet out */
    struct evbuffer *prefix; /* sent to dst before anything else */
    uint64_t bytes;
    uint64_t limit; /* bytes of src to forward; what follows is dropped */
    uint64_t dropped;
    int eof;
    int shut;
    struct event *rd; /* src readable */
    struct event *wr; /* dst writable */
    int rd_on;        /* whether rd / wr are added: epoll_ctl only on change */
    int wr_on;
    int bulk; /* (added) rd and wr run at SBX_EGRESS_PRIO_BULK (past the first bytes) */
    /* (added) later: the sandbox's bucket ran dry, reading resumes then; waiting: it is
     * armed (src is not read until it fires) */
    struct event *later;
    int waiting;
    const char *src_error;
    const char *dst_error;
};

struct sbx_egress_tunnel {
    struct dir d[2]; /* d[0]: a -> b, d[1]: b -> a */
    size_t pipe_cap;
    size_t *active; /* tunnels open in this proxy */
    size_t *busy;   /* sandboxes with a tunnel open (they share a turn) */
    size_t *mine;   /* this tunnel's sandbox's open tunnels (they share its part) */
    /* (added) the proxy's egress.bandwidth (NULL: not shared) and this tunnel's
     * sandbox's bucket of it */
    struct sbx_egress_share *share;
    struct sbx_egress_bucket *bucket;
    void (*done)(void *arg, const char *reason);
    void *arg;
};

static void watch(struct event *ev, int *on, int want)
{
    if (want && !*on) {
        event_add(ev, NULL);
    }
    else if (!want && *on) {
        event_del(ev);
    }
    *on = want;
}

static void finish(struct sbx_egress_tunnel *t, const char *reason)
{
    for (int i = 0; i < 2; i++) {
        watch(t->d[i].rd, &t->d[i].rd_on, 0);
        watch(t->d[i].wr, &t->d[i].wr_on, 0);
        if (t->d[i].waiting) {
            evtimer_del(t->d[i].later);
            t->d[i].waiting = 0;
        }
    }
    if (reason == NULL && (t->d[0].dropped > 0 || t->d[1].dropped > 0)) {
        reason = "one-request";
    }
    t->done(t->arg, reason);
}

static int64_t mono_ns(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* (added) Fair shares (share.h): how much of budget the sandbox's bucket lets d read
 * now; 0 arms d->later for when it may read again (src is not watched until then). */
static size_t granted(struct dir *d, size_t budget)
{
    struct sbx_egress_tunnel *t = d->t;
    int64_t now;
    uint64_t got;
    int64_t wait;

    if (t->share == NULL || t->share->bandwidth == 0) {
        return budget;
    }
    now = mono_ns();
    got = sbx_egress_share_grant(t->share, t->bucket, now, budget);
    if (got > 0) {
        if (d->waiting) {
            evtimer_del(d->later);
            d->waiting = 0;
        }
        return (size_t)got;
    }
    wait = sbx_egress_share_wait_ns(t->share, t->bucket, now);
    {
        struct timeval tv = {(time_t)(wait / 1000000000), (suseconds_t)(wait % 1000000000 / 1000)};

        if (d->bulk) {
            (void)event_priority_set(d->later, SBX_EGRESS_PRIO_BULK); /* it is bulk work */
        }
        if (evtimer_add(d->later, &tv) == 0) {
            d->waiting = 1;
            return 0;
        }
    }
    return budget; /* no timer: never stall a tunnel for good */
}

/* Bounded work per wake-up, then every other ready connection (of any sandbox) has its
 * turn: four pipes' worth per turn, shared equally by the sandboxes that have tunnels
 * open, and a sandbox's part by its tunnels (a sandbox with fifty tunnels moves no more
 * per turn than one with one), at least SBX_EGRESS_TURN_MIN each. One tunnel alone
 * moves 1 MiB per turn (throughput). The tunnels' events run at the loop's lowest
 * priority, one callback between looks for new events, so a new connection of another
 * sandbox waits for at most one such share (docs/egress.md, Fairness). */
static size_t turn_budget(const struct sbx_egress_tunnel *t)
{
    size_t groups = *t->busy > 0 ? *t->busy : 1;
    size_t part = *t->mine > 0 ? *t->mine : 1;
    size_t share = 4 * t->pipe_cap / groups / part;

    return share > SBX_EGRESS_TURN_MIN ? share : SBX_EGRESS_TURN_MIN;
}

/* Sends d's prefix to dst first: 0 when it is all out, 1 when dst is full (d now waits
 * for dst to be writable), -1 after finish(). */
static int flush_prefix(struct dir *d)
{
    ssize_t n;

    while (evbuffer_get_length(d->prefix) > 0) {
        n = evbuffer_write(d->prefix, d->dst);
        if (n < 0) {
            if (errno == EAGAIN || errno == EINTR) {
                watch(d->wr, &d->wr_on, 1);
                watch(d->rd, &d->rd_on, 0);
                return 1;
            }
            finish(d->t, d->dst_error);
            return -1;
        }
    }
    return 0;
}

/* Splices src -> pipe -> dst in direction d for at most budget bytes read; *asked: the
 * bucket was asked (budget is then what it granted), *moved: the bytes read from src.
 * Returns -1 after finish(). */
static int splice_turn(struct dir *d, size_t budget, int *asked, uint64_t *moved)
{
    struct sbx_egress_tunnel *t = d->t;
    ssize_t n;

    while (budget > 0) {
        if (d->in_pipe > 0) {
            n = splice(d->pipe[0], NULL, d->dst, NULL, d->in_pipe,
                       SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
            if (n > 0) {
                d->in_pipe -= (size_t)n;
                continue;
            }
            if (n < 0 && errno != EAGAIN && errno != EINTR) {
                finish(t, d->dst_error);
                return -1;
            }
            break; /* dst is full */
        }
        if (d->eof) {
            break;
        }
        if (d->bytes >= d->limit) {
            /* Past the one request: anything more (a second request) is dropped, never
             * sent, and ends the connection (the client retries on a new one, as after
             * any "Connection: close"). */
            char scratch[512];

            n = recv(d->src, scratch, sizeof(scratch), MSG_DONTWAIT);
            if (n > 0) {
                d->dropped += (uint64_t)n;
                finish(t, "one-request");
                return -1;
            }
        }
        else {
            uint64_t left = d->limit - d->bytes;
            size_t want = left < t->pipe_cap ? (size_t)left : t->pipe_cap;

            if (!*asked) {
                *asked = 1;
                budget = granted(d, budget);
                if (budget == 0) {
                    break; /* d->later reads again */
                }
            }
            if (t->share != NULL && t->share->bandwidth > 0 && want > budget) {
                want = budget;
            }
            n = splice(d->src, NULL, d->pipe[1], NULL, want, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        }
        if (n > 0) {
            d->in_pipe += (size_t)n;
            d->bytes += (uint64_t)n;
            *moved += (uint64_t)n;
            budget = (size_t)n < budget ? budget - (size_t)n : 0;
            continue;
        }
        if (n == 0) {
            d->eof = 1;
            break;
        }
        if (errno != EAGAIN && errno != EINTR) {
            finish(t, d->src_error);
            return -1;
        }
        break; /* src is empty */
    }
    return 0;
}

/* After a turn: d's priority, which of its events are watched, its half-close; the
 * tunnel ends when both directions are shut. Returns -1 after finish(). */
static int settle(struct dir *d)
{
    struct sbx_egress_tunnel *t = d->t;

    /* (added) A new tunnel's first bytes (a handshake, a reply's head) run at the
     * default priority, before every busy tunnel's bulk; past SBX_EGRESS_FIRST_BYTES
     * its events drop to the bulk priority (retried while one is queued: libevent
     * refuses to move an active event). New tunnels per sandbox stay bounded by
     * egress.connection_rate, so first bytes cannot be a way to jump the queue for good. */
    if (!d->bulk && d->bytes >= SBX_EGRESS_FIRST_BYTES) {
        /* both events are moved, whatever the first one answered */
        int rd_ok = event_priority_set(d->rd, SBX_EGRESS_PRIO_BULK) == 0;
        int wr_ok = event_priority_set(d->wr, SBX_EGRESS_PRIO_BULK) == 0;
        d->bulk = rd_ok && wr_ok;
    }
    if (d->in_pipe > 0) {
        watch(d->wr, &d->wr_on, 1);
        watch(d->rd, &d->rd_on, 0);
    }
    else {
        watch(d->wr, &d->wr_on, 0);
        watch(d->rd, &d->rd_on, !d->eof && !d->waiting);
        if (d->eof) {
            if (!d->shut) {
                d->shut = 1;
                shutdown(d->dst, SHUT_WR);
            }
        }
    }
    if (t->d[0].shut && t->d[1].shut) {
        finish(t, NULL);
        return -1;
    }
    return 0;
}

/* Moves what can be moved in direction d; returns -1 after finish(). */
static int pump(struct dir *d)
{
    struct sbx_egress_tunnel *t = d->t;
    size_t budget = turn_budget(t);
    int asked = 0; /* the bucket was asked (budget is what it granted) */
    uint64_t moved = 0;
    int r = flush_prefix(d);

    if (r != 0) {
        return r < 0 ? -1 : 0;
    }
    if (splice_turn(d, budget, &asked, &moved) < 0) {
        return -1;
    }
    if (asked && t->share != NULL) {
        sbx_egress_bucket_spend(t->bucket, moved);
    }
    return settle(d);
}

static void on_event(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    pump(arg);
}

/* d's sandbox may read again (fair shares). */
static void on_later(evutil_socket_t fd, short what, void *arg)
{
    struct dir *d = arg;

    (void)fd;
    (void)what;
    d->waiting = 0;
    pump(d);
}

/* The reason a tunnel could not be built, from errno. */
static const char *exhausted(int err)
{
    return err == EMFILE || err == ENFILE ? "out-of-descriptors" : "out-of-memory";
}

struct sbx_egress_tunnel *sbx_egress_tunnel_new(struct event_base *base, int fd_a, int fd_b,
                                                struct evbuffer *a_to_b, struct evbuffer *b_to_a,
                                                size_t pipe_size, size_t *active, size_t *busy,
                                                size_t *mine,
                                                void (*done)(void *arg, const char *reason),
                                                void *arg, const char **why)
{
    struct sbx_egress_tunnel *t = calloc(1, sizeof(*t));

    *why = NULL;
    if (t == NULL) {
        *why = "out-of-memory";
        return NULL;
    }
    t->done = done;
    t->arg = arg;
    t->pipe_cap = pipe_size;
    t->active = active;
    t->busy = busy;
    t->mine = mine;
    (*active)++;
    if ((*mine)++ == 0) {
        (*busy)++;
    }
    /* Everything free() looks at is valid before anything can fail: a half-built
     * tunnel is freed by the same code as a whole one, and closes no fd it does not
     * own (a zeroed pipe[] would be fd 0). */
    for (int i = 0; i < 2; i++) {
        t->d[i].pipe[0] = t->d[i].pipe[1] = -1;
        t->d[i].limit = UINT64_MAX;
    }
    for (int i = 0; i < 2; i++) {
        struct dir *d = &t->d[i];
        struct evbuffer *prefix = i == 0 ? a_to_b : b_to_a;
        int got;

        d->t = t;
        d->src = i == 0 ? fd_a : fd_b;
        d->dst = i == 0 ? fd_b : fd_a;
        d->src_error = i == 0 ? "client-error" : "destination-error";
        d->dst_error = i == 0 ? "destination-error" : "client-error";
        d->prefix = evbuffer_new();
        d->rd = event_new(base, d->src, EV_READ | EV_PERSIST, on_event, d);
        d->wr = event_new(base, d->dst, EV_WRITE | EV_PERSIST, on_event, d);
        d->later = evtimer_new(base, on_later, d);
        /* (changed) at the default priority until its first bytes are through (pump) */
        if (d->prefix == NULL || d->rd == NULL || d->wr == NULL || d->later == NULL) {
            *why = "out-of-memory";
            sbx_egress_tunnel_free(t);
            return NULL;
        }
        if (prefix != NULL && evbuffer_add_buffer(d->prefix, prefix) < 0) {
            *why = "out-of-memory";
            sbx_egress_tunnel_free(t);
            return NULL;
        }
        if (pipe2(d->pipe, O_NONBLOCK | O_CLOEXEC) < 0) {
            *why = exhausted(errno);
            d->pipe[0] = d->pipe[1] = -1;
            sbx_egress_tunnel_free(t);
            return NULL;
        }
        /* The pipe bounds what the proxy holds per direction (back-pressure: nothing
         * more is read from src while it is full). If the size cannot be set, the
         * pipe's own size is the bound. */
        fcntl(d->pipe[1], F_SETPIPE_SZ, (int)pipe_size);
        got = fcntl(d->pipe[1], F_GETPIPE_SZ);
        if (got > 0 && (size_t)got < t->pipe_cap) {
            t->pipe_cap = (size_t)got;
        }
    }
    /* Start both directions; a prefix goes out first. */
    for (int i = 0; i < 2; i++) {
        watch(t->d[i].rd, &t->d[i].rd_on, 1);
        watch(t->d[i].wr, &t->d[i].wr_on, evbuffer_get_length(t->d[i].prefix) > 0);
    }
    return t;
}

size_t sbx_egress_tunnel_held(const struct sbx_egress_tunnel *t)
{
    size_t n = 0;

    for (int i = 0; i < 2; i++) {
        n += t->d[i].in_pipe + evbuffer_get_length(t->d[i].prefix);
    }
    return n;
}

void sbx_egress_tunnel_share(struct sbx_egress_tunnel *t, struct sbx_egress_share *share,
                             struct sbx_egress_bucket *bucket)
{
    t->share = share;
    t->bucket = bucket;
}

void sbx_egress_tunnel_limit(struct sbx_egress_tunnel *t, uint64_t a_to_b, uint64_t dropped)
{
    t->d[0].limit = a_to_b;
    t->d[0].dropped = dropped;
}

void sbx_egress_tunnel_counts(const struct sbx_egress_tunnel *t, uint64_t *a_to_b, uint64_t *b_to_a)
{
    *a_to_b = t->d[0].bytes;
    *b_to_a = t->d[1].bytes;
}

void sbx_egress_tunnel_free(struct sbx_egress_tunnel *t)
{
    if (t == NULL) {
        return;
    }
    for (int i = 0; i < 2; i++) {
        struct dir *d = &t->d[i];

        if (d->rd != NULL) {
            event_free(d->rd);
        }
        if (d->wr != NULL) {
            event_free(d->wr);
        }
        if (d->later != NULL) {
            event_free(d->later);
        }
        if (d->pipe[0] >= 0) {
            close(d->pipe[0]);
        }
        if (d->pipe[1] >= 0) {
            close(d->pipe[1]);
        }
        if (d->prefix != NULL) {
            evbuffer_free(d->prefix);
        }
    }
    (*t->active)--;
    if (--(*t->mine) == 0) {
        (*t->busy)--;
    }
    free(t);
}
