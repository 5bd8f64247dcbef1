/* status.h - the runner's read-only status page at `/` (docs/operations.md,
 * "Status page"; docs/api.md, "GET /"). Loop thread only. */
#ifndef SBX_RUNNER_STATUS_H
#define SBX_RUNNER_STATUS_H

#include <event2/http.h>

struct runner_auth;
struct runner_client;
struct runner_metrics;
struct runner_status; /* the module's own: the sessions (opaque) */

/* The page's session cookie: random, server-side, HttpOnly, SameSite=Strict. */
#define SBX_STATUS_COOKIE "sbx_session"
#define SBX_STATUS_SESSIONS 64           /* at most; the oldest goes first */
#define SBX_STATUS_SESSION_S (12 * 3600) /* a session's life */
#define SBX_STATUS_MAX_LOGIN 8192        /* the login form's body */

/* The page's sessions; auth says who a login's token is, a refused login is
 * counted in metrics (both outlive it). */
struct runner_status *runner_status_new(const struct runner_auth *auth,
                                        struct runner_metrics *metrics);
/* Serves `/`, `/login`, `/logout` and `/ui/...` (1), or leaves the request to
 * the API (0); tcp: the request came on the TCP listener. Over TCP `/` is the
 * login form until a session exists. */
int runner_status_route(struct runner_status *st, int tcp, struct evhttp_request *req,
                        const char *path);
/* The client of the request's session cookie, for a GET of what the page reads
 * (/v1/queue, /v1/slots, /v1/jobs, /v1/jobs/ID): else NULL. */
const struct runner_client *runner_status_session(struct runner_status *st,
                                                  struct evhttp_request *req, const char *path);
void runner_status_free(struct runner_status *st);

#endif
