/* endpoint.c - where a runner keeps its state and where it listens, read from
 * the configuration by sbx serve and by its clients alike. */
#include <stdlib.h>
#include <string.h>

#include "runner/endpoint.h"
#include "sandbox/statedir.h"
#include "util/xalloc.h"

char *sbx_runner_state_path(const struct sbx_config *cfg, sbx_error_t **err)
{
    char *state;
    char *path;

    if (cfg->runner.database != NULL) {
        return xstrdup(cfg->runner.database); /* a fleet's PostgreSQL (store.h) */
    }
    if (cfg->runner.state != NULL) {
        return xstrdup(cfg->runner.state);
    }
    state = sbx_state_dir(cfg->state_dir, err);
    if (state == NULL) {
        return NULL;
    }
    if (sbx_mkdirs(state, 0700, err) < 0) {
        free(state);
        return NULL;
    }
    path = xasprintf("%s/runner.db", state);
    free(state);
    return path;
}

void sbx_runner_endpoint_clear(struct sbx_runner_endpoint *ep)
{
    free(ep->unix_path);
    free(ep->tcp_host);
    memset(ep, 0, sizeof(*ep));
}

int sbx_runner_endpoint(const struct sbx_config *cfg, struct sbx_runner_endpoint *out,
                        sbx_error_t **err)
{
    const char *l = cfg->runner.listen;
    char *state;

    memset(out, 0, sizeof(*out));
    if (l != NULL && strncmp(l, "unix:", 5) == 0) {
        if (l[5] != '/') {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "runner.listen '%s': a unix socket needs an absolute path", l);
        }
        out->unix_path = xstrdup(l + 5);
        return 0;
    }
    if (l != NULL && strncmp(l, "tcp:", 4) == 0) {
        const char *colon = strrchr(l + 4, ':');
        char *end = NULL;
        long port = colon ? strtol(colon + 1, &end, 10) : 0;

        if (colon == NULL || colon == l + 4 || end == NULL || *end != '\0' || port < 1 ||
            port > 65535) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "runner.listen '%s': use tcp:HOST:PORT (port 1-65535)", l);
        }
        out->tcp_host = xstrndup(l + 4, (size_t)(colon - (l + 4)));
        out->tcp_port = (int)port;
    }
    else if (l != NULL) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "runner.listen '%s': use unix:/PATH or tcp:HOST:PORT", l);
    }
    state = sbx_state_dir(cfg->state_dir, err);
    if (state == NULL) {
        sbx_runner_endpoint_clear(out);
        return -1;
    }
    out->unix_path = xasprintf("%s/runner.sock", state);
    free(state);
    return 0;
}
