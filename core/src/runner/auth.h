/* auth.h - the API's clients: who a request is and what it may do (auth.c).
 * struct runner_auth is the module's own (opaque): the clients and their
 * tokens, which never leave auth.c. */
#ifndef SBX_RUNNER_AUTH_H
#define SBX_RUNNER_AUTH_H

#include <stddef.h>

#include "util/error.h"

struct sbx_config;
struct runner_auth;

/* An API client: who a request is, and what it may do (no token). */
struct runner_client {
    char name[64];
    unsigned scopes; /* enum sbx_scope */
};

/* The clients of cfg (runner.token_env, runner.clients: their tokens read
 * from the environment or a file), or NULL with *err. cfg outlives it. */
struct runner_auth *runner_clients_load(const struct sbx_config *cfg, sbx_error_t **err);
void runner_clients_free(struct runner_auth *a);
/* How many TCP clients (a TCP listener needs one). */
size_t runner_auth_n_clients(const struct runner_auth *a);
/* (changed) The unix socket's client: "local", with the scopes of the
 * runner.clients entry named "local" (every scope without one). */
const struct runner_client *runner_local_client(const struct runner_auth *a);
/* The client whose token is in `Authorization: Bearer ...`, or NULL. Constant
 * time in the token's bytes. */
const struct runner_client *runner_authenticate(const struct runner_auth *a, const char *authz);
/* (added, issue 25) client's jobs may use the credential instance name: it
 * is in its runner.clients entry's `credentials` (`default`, and `local`
 * without an entry: every one). */
int runner_may_use_credentials(const struct runner_auth *a, const char *client, const char *name);
/* The client may see (cancel) a job or task of owner. */
int runner_may_read(const struct runner_client *who, const char *owner);
int runner_may_cancel(const struct runner_client *who, const char *owner);

#endif
