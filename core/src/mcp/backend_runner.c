/* backend_runner.c - the backend used when `runner.listen` is set. The
 * runner's HTTP API (`sbx serve`, issue 7) is not built yet, so every call
 * fails with that reason; it never falls back to running embedded, so pools
 * and caps cannot be bypassed by a misconfigured agent. A real client
 * replaces these functions (same ops). */
#include <stdlib.h>

#include "mcp/backend.h"
#include "util/log.h"
#include "util/xalloc.h"

struct runner {
    char *listen;
};

static int no_client(struct runner *r, sbx_error_t **err)
{
    return sbx_error_set(err, SBX_E_ENGINE,
                         "runner.listen is set to '%s', but this sbx has no runner client yet "
                         "(the runner API is not built): nothing was run. Unset runner.listen "
                         "to run tasks embedded in this process",
                         r->listen);
}

static json_t *runner_run(void *ctx, const struct sbx_mcp_run *req, struct sbx_mcp_call *call,
                          sbx_error_t **err)
{
    (void)req;
    (void)call;
    no_client(ctx, err);
    return NULL;
}

static json_t *runner_name(void *ctx, const char *name, sbx_error_t **err)
{
    (void)name;
    no_client(ctx, err);
    return NULL;
}

static json_t *runner_queue(void *ctx, sbx_error_t **err)
{
    no_client(ctx, err);
    return NULL;
}

static void runner_shutdown(void *ctx)
{
    (void)ctx;
}

static void runner_destroy(void *ctx)
{
    struct runner *r = ctx;

    free(r->listen);
    free(r);
}

static const struct sbx_mcp_backend_ops runner_ops = {
    .mode = "runner",
    .run = runner_run,
    .end = runner_name,
    .job = runner_name,
    .cancel = runner_name,
    .queue = runner_queue,
    .shutdown = runner_shutdown,
    .destroy = runner_destroy,
};

void sbx_mcp_backend_runner(const struct sbx_config *cfg, struct sbx_mcp_backend *out)
{
    struct runner *r = xcalloc(1, sizeof(*r));

    r->listen = xstrdup(cfg->runner.listen);
    out->ops = &runner_ops;
    out->ctx = r;
}

int sbx_mcp_backend_open(const struct sbx_config *cfg, const char *plugin_dir,
                         struct sbx_mcp_backend *out, sbx_error_t **err)
{
    if (cfg->runner.listen != NULL && cfg->runner.listen[0] != '\0') {
        sbx_warn("mcp: runner.listen is set (%s) but there is no runner client yet: every "
                 "tool call will fail until it exists or runner.listen is unset",
                 cfg->runner.listen);
        sbx_mcp_backend_runner(cfg, out);
        return 0;
    }
    return sbx_mcp_backend_embedded(cfg, plugin_dir, out, err);
}
