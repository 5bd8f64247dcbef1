/* report.c - the spike report: a side-by-side table, JSON with every raw
 * measurement, and Markdown. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "spike/spike.h"
#include "util/xalloc.h"

/* A column measured with `unisolated = true` on a provider that does not
 * enforce everything: every row says so. */
static int unisolated(const struct sbx_spike_column *c)
{
    return c->isolation != NULL &&
           (strcmp(c->isolation, "none") == 0 || strcmp(c->isolation, "partial") == 0);
}

static void header(const struct sbx_spike_column *c, char *buf, size_t len)
{
    if (unisolated(c)) {
        snprintf(buf, len, "%s [UNISOLATED: isolation %s]", c->provider, c->isolation);
    }
    else {
        snprintf(buf, len, "%s", c->provider);
    }
}

void sbx_spike_print_table(FILE *out, const struct sbx_spike_column *cols, size_t n,
                           const struct sbx_spike_bar *bar)
{
    (void)bar;
    fprintf(out, "%-30s", "criterion");
    for (size_t c = 0; c < n; c++) {
        char h[160];

        header(&cols[c], h, sizeof(h));
        fprintf(out, " | %-44s", h);
    }
    fprintf(out, "\n");
    for (int i = 0; i < SBX_SPIKE_NCRITERIA; i++) {
        fprintf(out, "%-30s", sbx_spike_criterion_name((enum sbx_spike_criterion)i));
        for (size_t c = 0; c < n; c++) {
            const struct sbx_spike_row *r = &cols[c].rows[i];
            char cell[256];

            snprintf(cell, sizeof(cell), "%s%s (bar %s)", sbx_spike_status_name(r->status),
                     unisolated(&cols[c]) ? ", UNISOLATED" : "", r->bar ? r->bar : "-");
            fprintf(out, " | %-44s", cell);
        }
        fprintf(out, "\n");
        for (size_t c = 0; c < n; c++) {
            const struct sbx_spike_row *r = &cols[c].rows[i];

            fprintf(out, "    %s%s: %s%s%s\n", cols[c].provider,
                    unisolated(&cols[c]) ? " [UNISOLATED]" : "", r->measured ? r->measured : "-",
                    r->why ? " -- " : "", r->why ? r->why : "");
        }
    }
}

json_t *sbx_spike_report_json(const struct sbx_spike_column *cols, size_t n,
                              const struct sbx_spike_bar *bar)
{
    json_t *providers = json_array();

    for (size_t c = 0; c < n; c++) {
        json_t *crit = json_array();

        for (int i = 0; i < SBX_SPIKE_NCRITERIA; i++) {
            const struct sbx_spike_row *r = &cols[c].rows[i];

            json_array_append_new(
                crit, json_pack("{s:s, s:s, s:s?, s:s?, s:s?, s:O?}", "criterion",
                                sbx_spike_criterion_name((enum sbx_spike_criterion)i), "result",
                                sbx_spike_status_name(r->status), "bar", r->bar, "measured",
                                r->measured, "why", r->why, "raw", r->raw));
            if (cols[c].isolation != NULL) {
                json_object_set_new(json_array_get(crit, json_array_size(crit) - 1), "isolation",
                                    json_string(cols[c].isolation));
            }
        }
        json_array_append_new(providers,
                              json_pack("{s:s, s:s?, s:s?, s:o}", "provider", cols[c].provider,
                                        "isolation", cols[c].isolation, "unenforced",
                                        cols[c].unenforced, "criteria", crit));
    }
    return json_pack("{s:{s:f, s:i, s:f, s:I, s:f}, s:o}", "bar", "warm_start_s", bar->warm_start,
                     "concurrent", bar->concurrent, "concurrent_cpus", bar->concurrent_cpus,
                     "concurrent_memory", (json_int_t)bar->concurrent_memory, "agent_hour_cost",
                     bar->agent_hour_cost, "providers", providers);
}

static void append(char **buf, size_t *len, const char *s)
{
    size_t n = strlen(s);

    *buf = xrealloc(*buf, *len + n + 1);
    memcpy(*buf + *len, s, n + 1);
    *len += n;
}

char *sbx_spike_report_markdown(const struct sbx_spike_column *cols, size_t n,
                                const struct sbx_spike_bar *bar)
{
    char *buf = xstrdup("");
    size_t len = 0;
    char line[1024];

    (void)bar;
    append(&buf, &len, "# Spike bar (ADR 0287 decision 13)\n\n| criterion |");
    for (size_t c = 0; c < n; c++) {
        char h[160];

        header(&cols[c], h, sizeof(h));
        snprintf(line, sizeof(line), " %s |", h);
        append(&buf, &len, line);
    }
    append(&buf, &len, "\n|---|");
    for (size_t c = 0; c < n; c++) {
        append(&buf, &len, "---|");
    }
    append(&buf, &len, "\n");
    for (int i = 0; i < SBX_SPIKE_NCRITERIA; i++) {
        snprintf(line, sizeof(line), "| %s |",
                 sbx_spike_criterion_name((enum sbx_spike_criterion)i));
        append(&buf, &len, line);
        for (size_t c = 0; c < n; c++) {
            const struct sbx_spike_row *r = &cols[c].rows[i];

            snprintf(line, sizeof(line), " **%s**%s (bar %s): %s%s%s |",
                     sbx_spike_status_name(r->status), unisolated(&cols[c]) ? ", UNISOLATED" : "",
                     r->bar ? r->bar : "-", r->measured ? r->measured : "-", r->why ? "; " : "",
                     r->why ? r->why : "");
            for (char *p = line; *p; p++) {
                if (*p == '\n') {
                    *p = ' ';
                }
            }
            append(&buf, &len, line);
        }
        append(&buf, &len, "\n");
    }
    return buf;
}
