/* health.c - the engine side of GET /healthz (docs/api.md, "Health"): a
 * thread lists the default provider's sandboxes every interval, and keeps
 * the answer and the removal backlog (sandboxes killed, not yet removed:
 * sandbox/backlog.h). A request reads it and never waits on the engine: a
 * probe without an answer after 5 s is the engine down. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "plugin/instance.h"
#include "sandbox/backlog.h"
#include "runner/health.h"
#include "util/monowait.h"
#include "util/xalloc.h"

#define HEALTH_SLOW_MS 5000

struct runner_health {
    const struct sbx_config *cfg;
    const char *plugin_dir;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int interval_ms;
    int stop;
    int64_t in_flight_since; /* ms, 0: no probe running */
    int64_t done_at;         /* ms of the last answer, 0: none yet */
    char msg[400];           /* "" ok, else why */
    int backlog;             /* (added) sandboxes waiting for removal, -1: unknown */
    struct sbx_open_instance *prov;
};

static int probe(struct runner_health *h, char *msg, size_t len)
{
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

static void *health_main(void *arg)
{
    struct runner_health *h = arg;
    char msg[sizeof(h->msg)];
    int backlog;

    pthread_mutex_lock(&h->mu);
    while (!h->stop) {
        int64_t at;

        h->in_flight_since = sbx_mono_ms();
        pthread_mutex_unlock(&h->mu);
        backlog = probe(h, msg, sizeof(msg));
        pthread_mutex_lock(&h->mu);
        h->backlog = backlog;
        h->in_flight_since = 0;
        h->done_at = sbx_mono_ms();
        memcpy(h->msg, msg, sizeof(h->msg));
        at = h->done_at + h->interval_ms;
        sbx_cond_wait_until_ms(&h->cv, &h->mu, at, &h->stop);
    }
    pthread_mutex_unlock(&h->mu);
    return NULL;
}

struct runner_health *runner_health_start(const struct sbx_config *cfg, const char *plugin_dir,
                                          int interval_ms, sbx_error_t **err)
{
    struct runner_health *h = xcalloc(1, sizeof(*h));

    h->cfg = cfg;
    h->plugin_dir = plugin_dir;
    h->interval_ms = interval_ms;
    h->backlog = -1;
    pthread_mutex_init(&h->mu, NULL);
    sbx_cond_init_mono(&h->cv);
    if (pthread_create(&h->th, NULL, health_main, h) != 0) {
        pthread_mutex_destroy(&h->mu);
        pthread_cond_destroy(&h->cv);
        free(h);
        sbx_error_set(err, SBX_E_GENERIC, "runner: cannot start the health thread");
        return NULL;
    }
    return h;
}

void runner_health_free(struct runner_health *h)
{
    if (h == NULL) {
        return;
    }
    pthread_mutex_lock(&h->mu);
    h->stop = 1;
    pthread_cond_signal(&h->cv);
    pthread_mutex_unlock(&h->mu);
    pthread_join(h->th, NULL); /* a probe in flight ends within the provider's timeout */
    if (h->prov != NULL) {
        sbx_instance_close(h->prov);
    }
    pthread_mutex_destroy(&h->mu);
    pthread_cond_destroy(&h->cv);
    free(h);
}

int runner_health_engine(struct runner_health *h, char *why, size_t len)
{
    int64_t now = sbx_mono_ms();
    int rc = -1;

    if (h == NULL) {
        snprintf(why, len, "the engine probe is not running");
        return -1;
    }
    pthread_mutex_lock(&h->mu);
    if (h->in_flight_since != 0 && now - h->in_flight_since > HEALTH_SLOW_MS) {
        snprintf(why, len, "provider '%s': no answer for %lld s", h->cfg->provider,
                 (long long)((now - h->in_flight_since) / 1000));
    }
    else if (h->done_at == 0) {
        snprintf(why, len, "provider '%s': the first probe has not answered yet", h->cfg->provider);
    }
    else {
        snprintf(why, len, "%s", h->msg);
        rc = h->msg[0] ? -1 : 0;
    }
    pthread_mutex_unlock(&h->mu);
    return rc;
}

int runner_health_backlog(struct runner_health *h)
{
    int n;

    if (h == NULL) {
        return -1;
    }
    pthread_mutex_lock(&h->mu);
    n = h->backlog;
    pthread_mutex_unlock(&h->mu);
    return n;
}
