/* fwd_owner.c - (added, issue 31) which box holds a task that is not live on
 * this box, for the task routes forwarded to it (files, pause and resume,
 * snapshot, egress: forward.c; a terminal and ports: fwd_tunnel.c), read on
 * the store thread (storeq.h; docs/runner.md, "A slow or silent database").
 *
 * Before, the loop read the task's row itself (sbx_store_where on the loop's
 * connection): a slow or silent database held every client of the box,
 * /healthz and the status page included, for up to the call's deadline. Now
 * the handler hands the read over and returns to its events; when the read
 * is back the request is forwarded (or relayed), answered by the caller's
 * own `missing` (a 404, say) when no other box holds the task, or 503 with
 * Retry-After when the database is unavailable. A read not back within the
 * call's deadline is answered 503 by the loop (storeq.c), and its late
 * result only freed. Loop thread, but for owner_work (the store thread). */
#include <event2/http.h>
#include <stdlib.h>
#include <string.h>

#include "runner/state.h"
#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/fleet.h"
#include "runner/forward.h"
#include "runner/storeq.h"
#include "util/log.h"
#include "util/xalloc.h"

struct owner_call {
    char *id;
    struct runner_client who; /* name and scopes (no token) */
    unsigned flags;           /* runner_forward_task's */
    int tunnel;               /* runner_forward_tunnel's */
    const char *upgrade;      /* ... and its protocol, a static string (or NULL) */
    runner_fwd_missing missing;
    /* the store thread's findings */
    int found; /* 1: another box holds it (o), 0: no other box, -1: err */
    struct sbx_store_owner o;
    sbx_error_t *err;
    int down;
};

static void owner_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct owner_call *c = arg;
    const char *me = runner_fleet_box(r);

    c->found = sbx_store_where(st, 1, c->id, &c->o, &c->err);
    if (c->found < 0) {
        c->down = sbx_store_down(st);
        return;
    }
    if (c->found > 0 && me != NULL && strcmp(c->o.box, me) == 0) {
        c->found = 0; /* this box: it was not live here when asked */
    }
}

static void owner_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct owner_call *c = arg;

    if (late) {
        goto out;
    }
    if (evhttp_request_get_connection(req) == NULL) {
        /* the client went away while the store read: the answer frees req */
        sbx_info("runner: task %s: its client went away while the box that holds it was read",
                 c->id);
        runner_reply_error(req, 503, "the client went away");
        goto out;
    }
    if (c->found < 0 && runner_reply_unavailable(req, c->down, c->err)) {
        goto out;
    }
    if (c->found <= 0) {
        /* (a read that failed otherwise: no other box is known to hold it,
         * as the lookup on the loop answered) */
        c->missing(req, c->id);
    }
    else if (c->tunnel) {
        runner_tunnel_to(r, req, &c->who, c->id, c->upgrade, &c->o);
    }
    else {
        runner_forward_task_to(r, req, &c->who, &c->o, c->id, c->flags);
    }
out:
    sbx_store_owner_clear(&c->o);
    sbx_error_free(&c->err);
    free(c->id);
    free(c);
}

static void owner_lookup(struct sbx_runner *r, struct evhttp_request *req,
                         const struct runner_client *who, const char *id, unsigned flags,
                         int tunnel, const char *upgrade, runner_fwd_missing missing)
{
    struct owner_call *c;

    if (runner_fleet_box(r) == NULL) {
        missing(req, id); /* a box of one: nobody else holds anything */
        return;
    }
    c = xcalloc(1, sizeof(*c));
    c->id = xstrdup(id);
    snprintf(c->who.name, sizeof(c->who.name), "%s", who->name);
    c->who.scopes = who->scopes;
    c->flags = flags;
    c->tunnel = tunnel;
    c->upgrade = upgrade;
    c->missing = missing;
    runner_sq_read(r, req, owner_work, owner_done, c);
}

void runner_forward_task(struct sbx_runner *r, struct evhttp_request *req,
                         const struct runner_client *who, const char *id, unsigned flags,
                         runner_fwd_missing missing)
{
    owner_lookup(r, req, who, id, flags, 0, NULL, missing);
}

void runner_forward_tunnel(struct sbx_runner *r, struct evhttp_request *req,
                           const struct runner_client *who, const char *id, const char *upgrade,
                           runner_fwd_missing missing)
{
    owner_lookup(r, req, who, id, 0, 1, upgrade, missing);
}
