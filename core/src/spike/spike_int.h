/* spike_int.h - internals shared by the spike's files. */
#ifndef SBX_SPIKE_INT_H
#define SBX_SPIKE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "sbx/sbx_provider.h"
#include "spike/spike.h"

struct sbx_spike_results {
    double warm_p50;
};

struct sbx_spike_ctx {
    const struct sbx_config *cfg;
    const char *plugin_dir;
    const char *provider;
    int runs;
    const char *credentials;
    struct sbx_spike_bar bar;
    uint32_t flags; /* the provider's enum sbx_provider_flags */
    struct sbx_provider_info info;
    struct sbx_spike_results results;
    struct sbx_spike_results *out;
};

/* The box's headroom while a load runs: sampled from /proc every 200 ms. */
struct sbx_headroom {
    pthread_t th;
    atomic_int stop; /* (changed, issue 31) atomic, was volatile */
    double min_mem_free_pct;
    double max_cpu_busy_pct;
};

void sbx_headroom_start(struct sbx_headroom *h);
void sbx_headroom_stop(struct sbx_headroom *h);

double sbx_spike_now(void);
double sbx_spike_percentile(double *v, size_t n, double p);
int sbx_spike_one(const struct sbx_spike_ctx *s, const char *const *argv,
                  const struct sbx_limits *limits, sbx_output_fn out, void *ud, int *status,
                  double *secs, double *teardown, sbx_error_t **err);

void sbx_spike_testcontainers(const struct sbx_spike_ctx *s, struct sbx_spike_row *row);
void sbx_spike_egress(const struct sbx_spike_ctx *s, struct sbx_spike_row *row);
void sbx_spike_credentials(const struct sbx_spike_ctx *s, struct sbx_spike_row *row);
void sbx_spike_cost(const struct sbx_spike_ctx *s, struct sbx_spike_row *row);

#endif
