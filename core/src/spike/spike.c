/* spike.c - measuring the spike bar for one provider: warm start,
 * concurrency, cost, Agent Vault; egress, credentials and Testcontainers in
 * spike_checks.c. */
#include "spike/spike.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugin/instance.h"
#include "sandbox/caps.h"
#include "sandbox/task.h"
#include "spike/spike_int.h"
#include "util/log.h"
#include "util/units.h"
#include "util/xalloc.h"

const char *sbx_spike_criterion_name(enum sbx_spike_criterion c)
{
    static const char *const names[] = {
        "warm start",        "concurrent sandboxes",         "Testcontainers",
        "egress allow-list", "short-lived credentials only", "cost per agent-hour",
        "Agent Vault",
    };

    return c < SBX_SPIKE_NCRITERIA ? names[c] : "?";
}

const char *sbx_spike_status_name(enum sbx_spike_status s)
{
    return s == SBX_SPIKE_PASS ? "pass" : s == SBX_SPIKE_FAIL ? "fail" : "cannot-measure";
}

void sbx_spike_bar_text(enum sbx_spike_criterion c, const struct sbx_spike_bar *b, char *buf,
                        size_t len)
{
    switch (c) {
    case SBX_SPIKE_WARM_START:
        snprintf(buf, len, "<= %.0f s", b->warm_start);
        break;
    case SBX_SPIKE_CONCURRENT:
        snprintf(buf, len, ">= %d at once", b->concurrent);
        break;
    case SBX_SPIKE_TESTCONTAINERS:
        snprintf(buf, len, "works with a per-sandbox daemon");
        break;
    case SBX_SPIKE_EGRESS:
        snprintf(buf, len, "allowed host reachable, others refused, logged");
        break;
    case SBX_SPIKE_CREDENTIALS:
        snprintf(buf, len, "only short-lived task secrets inside");
        break;
    case SBX_SPIKE_COST:
        snprintf(buf, len, "<= $%.2f per agent-hour", b->agent_hour_cost);
        break;
    default:
        snprintf(buf, len, "evaluated by the spike (ADR 0287 decision 9)");
        break;
    }
}

void sbx_spike_bar_from_config(const struct sbx_config *cfg, struct sbx_spike_bar *bar)
{
    bar->warm_start = cfg->spike.warm_start;
    bar->concurrent = cfg->spike.concurrent;
    bar->concurrent_cpus = cfg->spike.concurrent_cpus;
    bar->concurrent_memory = cfg->spike.concurrent_memory;
    bar->agent_hour_cost = cfg->spike.agent_hour_cost;
}

void sbx_spike_row_set(struct sbx_spike_row *r, enum sbx_spike_status st, const char *bar,
                       const char *why, const char *fmt, ...)
{
    va_list ap;

    r->status = st;
    free(r->bar);
    free(r->why);
    free(r->measured);
    r->bar = xstrdup(bar);
    r->why = why ? xstrdup(why) : NULL;
    va_start(ap, fmt);
    if (vasprintf(&r->measured, fmt, ap) < 0) {
        abort();
    }
    va_end(ap);
    if (r->raw == NULL) {
        r->raw = json_object();
    }
}

double sbx_spike_now(void)
{
    return (double)sbx_mono_ns() / 1e9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a;
    double y = *(const double *)b;

    return x < y ? -1 : x > y;
}

double sbx_spike_percentile(double *v, size_t n, double p)
{
    size_t i;

    if (n == 0) {
        return 0;
    }
    qsort(v, n, sizeof(double), cmp_double);
    i = (size_t)ceil(p * (double)n) - 1;
    return v[i < n ? i : n - 1];
}

static int discard(void *ud, int stream, const char *data, size_t len)
{
    (void)ud;
    (void)stream;
    (void)data;
    (void)len;
    return 0;
}

/* Runs argv in a fresh task; *secs is request to command end (teardown not
 * counted), *teardown the end. */
int sbx_spike_one(const struct sbx_spike_ctx *s, const char *const *argv,
                  const struct sbx_limits *limits, sbx_output_fn out, void *ud, int *status,
                  double *secs, double *teardown, sbx_error_t **err)
{
    struct sbx_task_opts o = {
        .provider = s->provider, .pool = "agent", .ephemeral = 1, .limits = limits, .argv = argv};
    struct sbx_task *t = NULL;
    double a = sbx_spike_now();
    double b;
    int r;

    if (sbx_task_start(s->cfg, s->plugin_dir, &o, &t, err) < 0) {
        return -1;
    }
    r = sbx_task_exec(t, argv, NULL, 0, out ? out : discard, ud, NULL, status, err);
    b = sbx_spike_now();
    if (secs != NULL) {
        *secs = b - a;
    }
    sbx_task_end(t, "spike", NULL, r < 0 ? NULL : err);
    if (teardown != NULL) {
        *teardown = sbx_spike_now() - b;
    }
    return r;
}

static void warm_start(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    static const char *const argv[] = {"true", NULL};
    double *v = xcalloc((size_t)s->runs, sizeof(double));
    json_t *samples = json_array();
    char bar[64];
    double p50;
    double p95;
    double mx;
    int n = 0;

    snprintf(bar, sizeof(bar), "<= %.0f s", s->bar.warm_start);
    for (int i = 0; i < s->runs; i++) {
        sbx_error_t *err = NULL;
        int st = 0;
        double secs = 0;

        fprintf(stderr, "spike: %s: warm start %d/%d\n", s->provider, i + 1, s->runs);
        if (sbx_spike_one(s, argv, NULL, NULL, NULL, &st, &secs, NULL, &err) < 0 || st != 0) {
            sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar, err ? sbx_error_msg(err) : "true failed",
                              "run %d failed", i + 1);
            sbx_error_free(&err);
            json_object_set_new(row->raw, "samples_s", samples);
            free(v);
            return;
        }
        v[n++] = secs;
        json_array_append_new(samples, json_real(secs));
    }
    p50 = sbx_spike_percentile(v, (size_t)n, 0.50);
    p95 = sbx_spike_percentile(v, (size_t)n, 0.95);
    mx = v[n - 1];
    sbx_spike_row_set(row, mx <= s->bar.warm_start ? SBX_SPIKE_PASS : SBX_SPIKE_FAIL, bar,
                      mx <= s->bar.warm_start ? NULL : "the slowest start is over the bar",
                      "p50 %.2f s, p95 %.2f s, max %.2f s (%d runs)", p50, p95, mx, n);
    json_object_set_new(row->raw, "samples_s", samples);
    json_object_set_new(row->raw, "p50_s", json_real(p50));
    json_object_set_new(row->raw, "p95_s", json_real(p95));
    json_object_set_new(row->raw, "max_s", json_real(mx));
    s->out->warm_p50 = p50;
    free(v);
}

struct conc_job {
    const struct sbx_spike_ctx *s;
    int status;
    int failed;
    double secs;
    char error[256];
};

static void *conc_main(void *arg)
{
    struct conc_job *j = arg;
    /* a CPU load and a memory load inside the limits */
    static const char *const argv[] = {"sh", "-c",
                                       "i=0; while [ $i -lt 300000 ]; do i=$((i+1)); done; "
                                       "head -c 67108864 /dev/zero | tail -c 1 >/dev/null; echo ok",
                                       NULL};
    struct sbx_limits lim = {.cpus = j->s->bar.concurrent_cpus,
                             .memory = j->s->bar.concurrent_memory};
    sbx_error_t *err = NULL;

    if (sbx_spike_one(j->s, argv, &lim, NULL, NULL, &j->status, &j->secs, NULL, &err) < 0) {
        j->failed = 1;
        snprintf(j->error, sizeof(j->error), "%s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    return NULL;
}

static void concurrency(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    int n = s->bar.concurrent;
    struct conc_job *jobs = xcalloc((size_t)n, sizeof(*jobs));
    pthread_t *th = xcalloc((size_t)n, sizeof(pthread_t));
    struct sbx_headroom h;
    json_t *each = json_array();
    char bar[64];
    char mem[32];
    int ok = 0;
    const char *first_error = NULL;

    snprintf(bar, sizeof(bar), ">= %d at once", n);
    sbx_size_format(s->bar.concurrent_memory, mem, sizeof(mem));
    fprintf(stderr, "spike: %s: %d sandboxes at once (%.2f CPUs, %s each)\n", s->provider, n,
            s->bar.concurrent_cpus, mem);
    sbx_headroom_start(&h);
    for (int i = 0; i < n; i++) {
        jobs[i].s = s;
        pthread_create(&th[i], NULL, conc_main, &jobs[i]);
    }
    for (int i = 0; i < n; i++) {
        pthread_join(th[i], NULL);
        if (!jobs[i].failed && jobs[i].status == 0) {
            ok++;
        }
        else if (first_error == NULL) {
            first_error = jobs[i].failed ? jobs[i].error : "the load command failed";
        }
        json_array_append_new(each, json_pack("{s:b, s:i, s:f, s:s}", "ok",
                                              !jobs[i].failed && jobs[i].status == 0, "status",
                                              jobs[i].status, "seconds", jobs[i].secs, "error",
                                              jobs[i].error));
    }
    sbx_headroom_stop(&h);
    sbx_spike_row_set(row, ok == n ? SBX_SPIKE_PASS : SBX_SPIKE_FAIL, bar,
                      ok == n ? NULL : first_error,
                      "%d/%d finished; each %.2f CPUs, %s; box headroom: min %.0f%% memory "
                      "free, max %.0f%% CPU busy",
                      ok, n, s->bar.concurrent_cpus, mem, h.min_mem_free_pct, h.max_cpu_busy_pct);
    json_object_set_new(row->raw, "sandboxes", each);
    json_object_set_new(row->raw, "limits",
                        json_pack("{s:f, s:I}", "cpus", s->bar.concurrent_cpus, "memory",
                                  (json_int_t)s->bar.concurrent_memory));
    json_object_set_new(row->raw, "min_mem_free_pct", json_real(h.min_mem_free_pct));
    json_object_set_new(row->raw, "max_cpu_busy_pct", json_real(h.max_cpu_busy_pct));
    free(jobs);
    free(th);
}

static void agent_vault(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    const char *reason = "plugin cred_agentvault not found";
    struct sbx_plugin *p =
        sbx_plugin_load_name(s->plugin_dir, "cred_agentvault", SBX_PLUGIN_CREDENTIAL, NULL);

    if (p != NULL && p->desc.reason != NULL) {
        reason = p->desc.reason;
    }
    sbx_spike_row_set(row, SBX_SPIKE_CANNOT, "evaluated by the spike (ADR 0287 decision 9)", reason,
                      "%s", p ? sbx_plugin_state_name(p->desc.state) : "absent");
    json_object_set_new(row->raw, "plugin_state",
                        json_string(p ? sbx_plugin_state_name(p->desc.state) : "absent"));
    json_object_set_new(row->raw, "reason", json_string(reason));
    json_object_set_new(row->raw, "to_evaluate",
                        json_string("build cred_agentvault: one Agent Vault session per task "
                                    "through its proxy, then rerun this criterion"));
    sbx_plugin_unload(p);
}

/* Each row's bar, cannot-measure, the same reason. */
static void all_cannot(struct sbx_spike_ctx *s, struct sbx_spike_column *out, const char *why,
                       const char *measured)
{
    for (int i = 0; i < SBX_SPIKE_NCRITERIA; i++) {
        char bar[128];

        sbx_spike_bar_text((enum sbx_spike_criterion)i, &s->bar, bar, sizeof(bar));
        sbx_spike_row_set(&out->rows[i], SBX_SPIKE_CANNOT, bar, why, "%s", measured);
    }
    agent_vault(s, &out->rows[SBX_SPIKE_AGENT_VAULT]);
}

/* Capabilities fail closed here as for any task: a provider that does not
 * enforce what the configured limits ask for is measured only with the
 * instance's explicit `unisolated = true`, and its column says so. */
static int spike_caps(const struct sbx_config *cfg, struct sbx_open_instance *oi,
                      struct sbx_spike_ctx *s, struct sbx_spike_column *out, sbx_error_t **err)
{
    uint32_t missing = 0;
    char names[128];

    if (sbx_caps_check(oi, "spike", &cfg->limits, &missing, err) < 0) {
        sbx_instance_close(oi);
        all_cannot(s, out, sbx_error_msg(*err), "refused: not isolated");
        sbx_error_free(err);
        out->isolation = xstrdup("refused");
        out->unenforced = xstrdup("");
        return -1;
    }
    sbx_caps_text(missing, names, sizeof(names));
    out->unenforced = xstrdup(names);
    out->isolation = xstrdup(sbx_caps_isolation(sbx_caps_wanted(&cfg->limits),
                                                sbx_caps_wanted(&cfg->limits) & ~missing));
    return 0;
}

int sbx_spike_measure(const struct sbx_config *cfg, const char *plugin_dir, const char *provider,
                      const struct sbx_spike_opts *opts, struct sbx_spike_column *out,
                      sbx_error_t **err)
{
    struct sbx_spike_ctx s = {.cfg = cfg,
                              .plugin_dir = plugin_dir,
                              .provider = provider,
                              .runs = opts->runs > 0 ? opts->runs : 5,
                              .credentials = opts->credentials};
    struct sbx_open_instance *oi;

    memset(out, 0, sizeof(*out));
    out->provider = xstrdup(provider);
    sbx_spike_bar_from_config(cfg, &s.bar);
    s.out = &s.results;
    oi = sbx_instance_open(cfg, plugin_dir, provider, SBX_PLUGIN_PROVIDER, err);
    if (oi == NULL) {
        /* the provider cannot run at all: every criterion says why */
        for (int i = 0; i < SBX_SPIKE_NCRITERIA; i++) {
            char bar[128];

            sbx_spike_bar_text((enum sbx_spike_criterion)i, &s.bar, bar, sizeof(bar));
            sbx_spike_row_set(&out->rows[i], SBX_SPIKE_CANNOT, bar, sbx_error_msg(*err),
                              "provider unavailable");
        }
        sbx_error_free(err);
        agent_vault(&s, &out->rows[SBX_SPIKE_AGENT_VAULT]);
        return 0;
    }
    if (spike_caps(cfg, oi, &s, out, err) < 0) {
        return 0; /* refused: every criterion says why */
    }
    s.flags = sbx_instance_provider(oi)->flags;
    if (sbx_instance_provider(oi)->info != NULL) {
        sbx_instance_provider(oi)->info(oi->ctx, &s.info, NULL);
    }
    sbx_instance_close(oi);
    if (s.info.simulated) {
        /* a local test double: nothing measured against it is the service's */
        for (int i = 0; i < SBX_SPIKE_AGENT_VAULT; i++) {
            char bar[128];

            sbx_spike_bar_text((enum sbx_spike_criterion)i, &s.bar, bar, sizeof(bar));
            sbx_spike_row_set(&out->rows[i], SBX_SPIKE_CANNOT, bar,
                              "the provider's engine is a local test double: its timings and "
                              "isolation are not the service's",
                              "%s", s.info.engine);
        }
        agent_vault(&s, &out->rows[SBX_SPIKE_AGENT_VAULT]);
        return 0;
    }
    warm_start(&s, &out->rows[SBX_SPIKE_WARM_START]);
    concurrency(&s, &out->rows[SBX_SPIKE_CONCURRENT]);
    sbx_spike_testcontainers(&s, &out->rows[SBX_SPIKE_TESTCONTAINERS]);
    sbx_spike_egress(&s, &out->rows[SBX_SPIKE_EGRESS]);
    sbx_spike_credentials(&s, &out->rows[SBX_SPIKE_CREDENTIALS]);
    sbx_spike_cost(&s, &out->rows[SBX_SPIKE_COST]);
    agent_vault(&s, &out->rows[SBX_SPIKE_AGENT_VAULT]);
    return 0;
}

void sbx_spike_column_fini(struct sbx_spike_column *c)
{
    for (int i = 0; i < SBX_SPIKE_NCRITERIA; i++) {
        free(c->rows[i].bar);
        free(c->rows[i].measured);
        free(c->rows[i].why);
        json_decref(c->rows[i].raw);
    }
    free(c->provider);
    free(c->isolation);
    free(c->unenforced);
    memset(c, 0, sizeof(*c));
}
