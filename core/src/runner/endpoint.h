/* endpoint.h - (added, issue 31, from runner.h) where a runner keeps its
 * state and where it listens (endpoint.c), read from the configuration by
 * sbx serve and by its clients alike. Public through runner.h; the runner's
 * own struct (state.h) includes it alone. */
#ifndef SBX_RUNNER_ENDPOINT_H
#define SBX_RUNNER_ENDPOINT_H

#include "config/config.h"
#include "util/error.h"

/* Where the runner listens. */
struct sbx_runner_endpoint {
    char *unix_path; /* always set: the local unix socket */
    char *tcp_host;  /* NULL unless runner.listen is tcp:HOST:PORT */
    int tcp_port;
};

/* From runner.listen ("unix:PATH" or "tcp:HOST:PORT"; default
 * unix:<state_dir>/runner.sock). A tcp listener also keeps the unix socket
 * at the default path. */
int sbx_runner_endpoint(const struct sbx_config *cfg, struct sbx_runner_endpoint *out,
                        sbx_error_t **err);
void sbx_runner_endpoint_clear(struct sbx_runner_endpoint *ep);
/* The store path: runner.state, default <state_dir>/runner.db. */
char *sbx_runner_state_path(const struct sbx_config *cfg, sbx_error_t **err);

#endif
