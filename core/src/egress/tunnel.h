/* tunnel.h - relays bytes between two connected sockets with splice(2) through a pipe
 * per direction (no copy through user space), with back-pressure and half-close. */
#ifndef SBX_EGRESS_TUNNEL_H
#define SBX_EGRESS_TUNNEL_H

#include <stddef.h>
#include <stdint.h>

/* The event loop's priorities when the proxy owns it: connections being set up run at
 * the default (1), tunnels at the lowest (SBX_EGRESS_PRIO_BULK), and the loop looks for
 * new events after each tunnel callback (docs/egress.md, Fairness). */
#define SBX_EGRESS_PRIORITIES 3
#define SBX_EGRESS_PRIO_BULK 2
/* The least a tunnel moves per wake-up, whatever its share (syscalls per byte). */
#define SBX_EGRESS_TURN_MIN (64 * 1024)
/* (added) A tunnel direction's first bytes run at the default priority (tunnel.c). */
#define SBX_EGRESS_FIRST_BYTES (64 * 1024)

struct event_base;
struct evbuffer;
struct sbx_egress_tunnel;

/* done(arg, reason) is called once, as the last thing a tunnel callback does: reason
 * NULL when both sides finished cleanly, else "client-error" / "destination-error".
 * The tunnel never closes fd_a (the client) or fd_b (the destination). The prefixes
 * (may be NULL) are sent first: a_to_b to fd_b, b_to_a to fd_a; their bytes are
 * taken (the evbuffers are left empty). Each direction's pipe is asked for pipe_size
 * bytes: that is all the proxy holds per direction (it stops reading a side whose
 * pipe is full). *active counts the tunnels of one event loop, *mine those of the
 * tunnel's sandbox and *busy the sandboxes with any (the tunnel adds itself and removes
 * itself when freed): a wake-up moves four pipes' worth shared equally among the busy
 * sandboxes, and a sandbox's part among its tunnels, at least SBX_EGRESS_TURN_MIN. NULL when a
 * pipe, event or buffer cannot be made; *why is then "out-of-descriptors" (EMFILE, ENFILE) or
 * "out-of-memory", and nothing is left open (the caller still owns fd_a, fd_b and the prefixes). */
struct sbx_egress_tunnel *sbx_egress_tunnel_new(struct event_base *base, int fd_a, int fd_b,
                                                struct evbuffer *a_to_b, struct evbuffer *b_to_a,
                                                size_t pipe_size, size_t *active, size_t *busy,
                                                size_t *mine,
                                                void (*done)(void *arg, const char *reason),
                                                void *arg, const char **why);
/* (added) Reads from either side take bytes from the sandbox's bucket (share.h, docs/egress.md
 * "Fair shares"): when it is dry the side is not read until it refills. Both outlive t.
 * Call right after sbx_egress_tunnel_new; without it nothing is limited. */
struct sbx_egress_share;
struct sbx_egress_bucket;
void sbx_egress_tunnel_share(struct sbx_egress_tunnel *t, struct sbx_egress_share *share,
                             struct sbx_egress_bucket *bucket);
/* Forwards at most a_to_b more bytes from fd_a (after its prefix); a byte fd_a sends
 * after them is dropped and ends the tunnel with reason "one-request" (one request
 * per connection: docs/egress.md). dropped counts bytes the caller dropped already:
 * then the tunnel still serves the one request and ends with that reason. Call right
 * after sbx_egress_tunnel_new. */
void sbx_egress_tunnel_limit(struct sbx_egress_tunnel *t, uint64_t a_to_b, uint64_t dropped);
/* Bytes the tunnel holds now: in its pipes and prefixes not yet sent. */
size_t sbx_egress_tunnel_held(const struct sbx_egress_tunnel *t);
/* Bytes read from each side so far (prefixes not counted). */
void sbx_egress_tunnel_counts(const struct sbx_egress_tunnel *t, uint64_t *a_to_b,
                              uint64_t *b_to_a);
void sbx_egress_tunnel_free(struct sbx_egress_tunnel *t);

#endif
