/* forward.h - requests about what another box of the fleet holds go to that
 * box (forward.c, fwd_tunnel.c). */
#ifndef SBX_RUNNER_FORWARD_H
#define SBX_RUNNER_FORWARD_H

#include <stddef.h>

#include "util/error.h"

struct sbx_runner;
struct evhttp_request;
struct runner_client;
struct sbx_store_owner;
struct sbx_store;

/* forward.c (added): a request about a job or task that another box of the
 * fleet holds goes to that box (docs/runner.md, "Several boxes"). */
#define RUNNER_FWD_HEADER "X-Sbx-Forwarded-By" /* the forwarding box: never forwarded again */
#define RUNNER_FWD_CLIENT "X-Sbx-Client"       /* the client, honoured on the unix socket */
#define RUNNER_FWD_SCOPES "X-Sbx-Scopes"       /* ... and its scopes (enum sbx_scope bits) */
struct runner_fwd;
/* Sends req (its method, URI and body) to o's box and relays the answer,
 * streamed when stream (the output; frames: ?frames=1). Always answers req:
 * 409 when req was already forwarded once, 503 when o's box is not alive,
 * 502 when it cannot be reached or its reply is bad. who was checked against
 * the shared record by the caller. */
void runner_forward(struct sbx_runner *r, struct evhttp_request *req,
                    const struct runner_client *who, const struct sbx_store_owner *o,
                    const char *what, int stream, int frames);
/* (changed, issue 31) The task routes of issue 30 (files, pause and resume,
 * snapshot, egress) for a task that is not live on this box (fwd_owner.c):
 * on a fleet box the store thread reads which box holds it (storeq.h; the
 * loop never waits on the database), and when that comes back req goes to
 * that box as runner_forward does (flags: RUNNER_FWD_STREAM a 200 relayed as
 * it comes, a file or a tar of up to 64 MiB; RUNNER_FWD_SLOW the owner may
 * take 600 s to answer, a snapshot or a pause). When no other box holds it
 * (a box of one: at once; not found; this box) missing(req, id) answers req
 * (the caller's 404, say). Always answers req: 503 with Retry-After when the
 * database is unavailable or does not answer within the call's deadline. */
#define RUNNER_FWD_STREAM 1u
#define RUNNER_FWD_SLOW 2u
typedef void (*runner_fwd_missing)(struct evhttp_request *req, const char *id);
void runner_forward_task(struct sbx_runner *r, struct evhttp_request *req,
                         const struct runner_client *who, const char *id, unsigned flags,
                         runner_fwd_missing missing);
/* (changed) A task's terminal, port preview or (changed, issue 31) raw port
 * or archive on another box: the owner read as runner_forward_task does, then
 * runner_tunnel_to. upgrade: the protocol the caller asked to upgrade to
 * (RUNNER_UPGRADE_*, a static string), NULL for a preview. */
#define RUNNER_UPGRADE_TERMINAL "sbx-terminal.v2"
#define RUNNER_UPGRADE_PORT "sbx-port.v1"
#define RUNNER_UPGRADE_ARCHIVE "sbx-archive.v1"
void runner_forward_tunnel(struct sbx_runner *r, struct evhttp_request *req,
                           const struct runner_client *who, const char *id, const char *upgrade,
                           runner_fwd_missing missing);
/* (added) forward.c: req to o's box, the task route's way (flags above). */
void runner_forward_task_to(struct sbx_runner *r, struct evhttp_request *req,
                            const struct runner_client *who, const struct sbx_store_owner *o,
                            const char *id, unsigned flags);
/* (added) fwd_tunnel.c: the request goes to o's box and the caller's
 * connection becomes a byte relay to it (after the owner's 101 to upgrade,
 * both ways). Always answers req (or takes it over). */
void runner_tunnel_to(struct sbx_runner *r, struct evhttp_request *req,
                      const struct runner_client *who, const char *id, const char *upgrade,
                      const struct sbx_store_owner *o);
/* (added) 1 after answering req when it may not go to o's box: 409 when it
 * was forwarded once already, 503 when o's box is not alive, 502 when o is on
 * TCP and req carries no bearer token; else 0. */
int runner_fwd_refused(struct evhttp_request *req, const struct sbx_store_owner *o,
                       const char *what);
/* (added, issue 31) The caps on what this box sends on to another, one check
 * for forwards (forward.c) and relays (fwd_tunnel.c). */
struct runner_fwd_cap {
    int per_box;        /* the most to one box at a time */
    int per_client;     /* the most of one client at a time */
    const char *things; /* "forwards" */
    const char *state;  /* "in flight" */
};
/* 0 when one more may start with n_box of them open to box and n_client of
 * the client; else 503 (the box's cap, checked first) or 429 (the client's),
 * with the refusal for what in msg (len > 0). Pure: the caller logs and
 * answers. */
int runner_fwd_over_cap(const struct runner_fwd_cap *c, int n_box, int n_client, const char *what,
                        const char *box, char *msg, size_t len);
/* (added) After evhttp_free: ends the relays of fwd_tunnel.c still open. */
void runner_tunnel_drop_all(struct sbx_runner *r);
/* Connects bev to an owner's API address, "unix:PATH" or "tcp:HOST:PORT". */
struct bufferevent;
int runner_fwd_connect(struct bufferevent *bev, const char *api, char *why, size_t len);
/* A follow of a job still in the shared queue: checks the record every
 * 500 ms and, once a box claimed it, answers req as runner_handle_output. */
void runner_forward_wait(struct sbx_runner *r, struct evhttp_request *req,
                         const struct runner_client *who, const char *id, int frames);
int runner_forwarded(struct evhttp_request *req);
/* (changed) Who a request on the unix socket is: the local client (the
 * scopes runner.clients gives "local") when it carries no forwarding header;
 * the client a forwarded request names, with the scopes it carries, only on a
 * fleet box and from a peer of the runner's own user (SO_PEERCRED); else NULL
 * with why (the caller answers 400 and logs it). */
const struct runner_client *runner_forwarded_client(struct sbx_runner *r,
                                                    struct evhttp_request *req,
                                                    struct runner_client *buf, char *why,
                                                    size_t wlen);
/* After evhttp_free: ends the forwards still in flight. */
void runner_forward_drop_all(struct sbx_runner *r);
/* 1 after answering 503 (the database is down), else 0. */
int runner_reply_store_down(struct sbx_runner *r, struct evhttp_request *req,
                            const sbx_error_t *err);

#endif
