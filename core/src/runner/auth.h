/* auth.h - the API's clients: who a request is and what it may do (auth.c). */
#ifndef SBX_RUNNER_AUTH_H
#define SBX_RUNNER_AUTH_H

#include "util/error.h"

struct sbx_runner;
struct runner_client;

int runner_clients_load(struct sbx_runner *r, sbx_error_t **err);
void runner_clients_free(struct sbx_runner *r);
/* (changed) The unix socket's client: "local", with the scopes of the
 * runner.clients entry named "local" (every scope without one). */
const struct runner_client *runner_local_client(const struct sbx_runner *r);
/* The client whose token is in `Authorization: Bearer ...`, or NULL. Constant
 * time in the token's bytes. */
const struct runner_client *runner_authenticate(struct sbx_runner *r, const char *authz);
/* (added, issue 25) client's jobs may use the credential instance name: it
 * is in its runner.clients entry's `credentials` (`default`, and `local`
 * without an entry: every one). */
int runner_may_use_credentials(const struct sbx_runner *r, const char *client, const char *name);
/* The client may see (cancel) a job or task of owner. */
int runner_may_read(const struct runner_client *who, const char *owner);
int runner_may_cancel(const struct runner_client *who, const char *owner);

#endif
