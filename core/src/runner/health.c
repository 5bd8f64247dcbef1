/* health.c - the engine side of GET /healthz (docs/api.md, "Health"): a
 * thread lists the default provider's sandboxes every interval, and keeps
 * the answer and the removal backlog (sandboxes killed, not yet removed:
 * sandbox/backlog.h). A request reads it and never waits on the engine: a
 * probe without an answer after 5 s is the engine down. */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "plugin/instance.h"
#include "sandbox/backlog.h"
#include "runner/health.h"
#include "runner/probe.h"
#include "util/monowait.h"
#include "util/xalloc.h"

#define HEALTH_SLOW_MS 5000

struct runner_health {
    const struct sbx_config *cfg;
    const char *plugin_dir;
    int interval_ms;
    atomic_int backlog;             /* (added) sandboxes waiting for removal, -1: unknown */
    struct sbx_open_instance *prov; /* the probe's thread only */
    struct runner_probe *probe;     /* probe.h: the thread, the last answer */
};

static int probe_run(void *arg, char *msg, size_t len)
{
    struct runner_health *h = arg;
    const struct sbx_config *cfg = h->cfg;
    sbx_error_t *err = NULL;
    int backlog = -1;

    msg[0] = '\0';
    if (h->prov == NULL) {
        h->prov = sbx_instance_open(cfg, h->plugin_dir, cfg->provider, SBX_PLUGIN_PROVIDER, &err);
    }
    if (h->prov == NULL || (backlog = sbx_removal_backlog(h->prov, &err)) < 0) {
        snprintf(msg, len, "provider '%s': %s", cfg->provider, sbx_error_msg(err));
        sbx_error_free(&err);
    }
    return backlog;
}

static int probe_done(void *arg, int backlog, const char *msg)
{
    struct runner_health *h = arg;

    (void)msg;
    atomic_store(&h->backlog, backlog);
    return h->interval_ms;
}

static const struct runner_probe_ops health_ops = {.run = probe_run, .done = probe_done};

struct runner_health *runner_health_start(const struct sbx_config *cfg, const char *plugin_dir,
                                          int interval_ms, sbx_error_t **err)
{
    struct runner_health *h = xcalloc(1, sizeof(*h));

    h->cfg = cfg;
    h->plugin_dir = plugin_dir;
    h->interval_ms = interval_ms;
    atomic_init(&h->backlog, -1);
    h->probe = runner_probe_start(&health_ops, h, 0, "the health thread", err);
    if (h->probe == NULL) {
        free(h);
        return NULL;
    }
    return h;
}

void runner_health_free(struct runner_health *h)
{
    if (h == NULL) {
        return;
    }
    runner_probe_stop(h->probe); /* a probe in flight ends within the provider's timeout */
    if (h->prov != NULL) {
        sbx_instance_close(h->prov);
    }
    free(h);
}

int runner_health_engine(struct runner_health *h, char *why, size_t len)
{
    struct runner_probe_view v;
    int64_t now = sbx_mono_ms();

    if (h == NULL) {
        snprintf(why, len, "the engine probe is not running");
        return -1;
    }
    runner_probe_read(h->probe, &v);
    if (v.in_flight_since != 0 && now - v.in_flight_since > HEALTH_SLOW_MS) {
        snprintf(why, len, "provider '%s': no answer for %lld s", h->cfg->provider,
                 (long long)((now - v.in_flight_since) / 1000));
        return -1;
    }
    if (v.done_at == 0) {
        snprintf(why, len, "provider '%s': the first probe has not answered yet", h->cfg->provider);
        return -1;
    }
    snprintf(why, len, "%s", v.msg);
    return v.msg[0] ? -1 : 0;
}

int runner_health_backlog(struct runner_health *h)
{
    return h != NULL ? atomic_load(&h->backlog) : -1;
}
