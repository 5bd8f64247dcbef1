/* spike.h - the spike bar of ADR 0287 decision 13, measured for one provider
 * (docs/spike.md). Each criterion is a row: bar, measured value, and pass,
 * fail or cannot-measure with the reason; raw measurements go in `raw`. */
#ifndef SBX_SPIKE_SPIKE_H
#define SBX_SPIKE_SPIKE_H

#include <jansson.h>
#include <stdio.h>

#include "config/config.h"
#include "util/error.h"

enum sbx_spike_status {
    SBX_SPIKE_PASS = 0,
    SBX_SPIKE_FAIL = 1,
    SBX_SPIKE_CANNOT = 2, /* cannot measure here: `why` says why */
};

enum sbx_spike_criterion {
    SBX_SPIKE_WARM_START = 0,
    SBX_SPIKE_CONCURRENT,
    SBX_SPIKE_TESTCONTAINERS,
    SBX_SPIKE_EGRESS,
    SBX_SPIKE_CREDENTIALS,
    SBX_SPIKE_COST,
    SBX_SPIKE_AGENT_VAULT,
    SBX_SPIKE_NCRITERIA,
};

struct sbx_spike_row {
    enum sbx_spike_status status;
    char *bar;      /* "<= 10 s" */
    char *measured; /* "p50 0.41 s, p95 0.52 s, max 0.60 s" */
    char *why;      /* reason for fail or cannot-measure, or NULL */
    json_t *raw;    /* every raw measurement */
};

struct sbx_spike_column {
    char *provider;
    /* (added) "sandbox", or for an instance run with `unisolated = true`
     * "none" or "partial"; unenforced lists what it does not enforce ("" when
     * nothing). Every row of an unisolated column says so. */
    char *isolation;
    char *unenforced;
    struct sbx_spike_row rows[SBX_SPIKE_NCRITERIA];
};

struct sbx_spike_opts {
    int runs;                /* warm-start samples */
    const char *credentials; /* credential instance for the credentials row, or NULL */
};

/* The bar values from config `spike { ... }` (with the ADR's defaults). */
struct sbx_spike_bar {
    double warm_start;      /* seconds */
    int concurrent;         /* sandboxes at once */
    double concurrent_cpus; /* limits of each concurrent sandbox */
    int64_t concurrent_memory;
    double agent_hour_cost; /* dollars per agent-hour above the bare box */
};

const char *sbx_spike_criterion_name(enum sbx_spike_criterion c);
const char *sbx_spike_status_name(enum sbx_spike_status s);
void sbx_spike_bar_from_config(const struct sbx_config *cfg, struct sbx_spike_bar *bar);
/* The bar of one criterion as text ("<= 10 s"). */
void sbx_spike_bar_text(enum sbx_spike_criterion c, const struct sbx_spike_bar *b, char *buf,
                        size_t len);

/* Measures every criterion for one provider instance; a criterion that
 * fails or cannot be measured is a row, not an error. Returns -1 only when
 * the spike itself cannot run. */
int sbx_spike_measure(const struct sbx_config *cfg, const char *plugin_dir, const char *provider,
                      const struct sbx_spike_opts *opts, struct sbx_spike_column *out,
                      sbx_error_t **err);
void sbx_spike_column_fini(struct sbx_spike_column *c);

/* report.c */
void sbx_spike_print_table(FILE *out, const struct sbx_spike_column *cols, size_t n,
                           const struct sbx_spike_bar *bar);
json_t *sbx_spike_report_json(const struct sbx_spike_column *cols, size_t n,
                              const struct sbx_spike_bar *bar);
char *sbx_spike_report_markdown(const struct sbx_spike_column *cols, size_t n,
                                const struct sbx_spike_bar *bar);

/* Row helpers shared by the criteria (spike.c). */
void sbx_spike_row_set(struct sbx_spike_row *r, enum sbx_spike_status st, const char *bar,
                       const char *why, const char *fmt, ...) __attribute__((format(printf, 5, 6)));

#endif
