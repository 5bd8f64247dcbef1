/* cmd_spike.c - `sbx spike`: the spike bar of ADR 0287 decision 13 for one or
 * more providers, side by side. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "spike/spike.h"
#include "util/xalloc.h"

#define MAX_PROVIDERS 8

void sbx_cmd_spike_help(FILE *out)
{
    fprintf(out, "usage: sbx spike [--provider NAME]... [--runs N] [--credentials NAME] [--json]\n"
                 "                 [--out FILE]\n"
                 "\n"
                 "Measures ADR 0287 decision 13 for each provider and prints, per criterion,\n"
                 "the bar, the measured value and pass, fail or cannot-measure (with why):\n"
                 "warm start (request to the end of `true`: p50, p95, max over N runs),\n"
                 "concurrent sandboxes (spike.concurrent at once with a CPU and memory load,\n"
                 "with the box's headroom), Testcontainers, the egress allow-list,\n"
                 "short-lived credentials only, cost per agent-hour (formula and inputs\n"
                 "printed), and Agent Vault (deferred: its plugin's reason).\n"
                 "Bars come from config `spike { warm_start; concurrent; concurrent_cpus;\n"
                 "concurrent_memory; agent_hour_cost; }` and runner.box_hour_price.\n"
                 "\n"
                 "  --provider NAME    a provider instance (repeatable; default: config provider)\n"
                 "  --runs N           warm-start samples (default 5)\n"
                 "  --credentials NAME credential instance for the credentials criterion\n"
                 "  --json             the report as JSON on stdout (every raw measurement)\n"
                 "  --out FILE         also write FILE.json and FILE.md\n"
                 "\n"
                 "Exit status: 0 when nothing failed (cannot-measure is not a failure), 1 when a\n"
                 "criterion failed, 2 usage or configuration error.\n");
}

static int write_text(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");

    if (f == NULL) {
        fprintf(stderr, "sbx: error: spike: cannot write %s\n", path);
        return -1;
    }
    fputs(text, f);
    fclose(f);
    return 0;
}

struct spike_cli {
    const char *providers[MAX_PROVIDERS];
    size_t n;
    struct sbx_spike_opts so;
    const char *out; /* --out, or NULL */
    int json;
};

/* Parses `sbx spike`'s options into *o. Returns 0 or -1 (printed). */
static int spike_parse(int argc, char **argv, struct spike_cli *o)
{
    static const struct option opts[] = {
        {"provider", required_argument, NULL, 'p'},    {"runs", required_argument, NULL, 'r'},
        {"credentials", required_argument, NULL, 'c'}, {"json", no_argument, NULL, 'j'},
        {"out", required_argument, NULL, 'o'},         {NULL, 0, NULL, 0},
    };
    struct sbx_args a = {.cmd = "spike", .opts = opts, .argc = argc, .argv = argv};
    int c;

    while ((c = sbx_args_next(&a)) != -1) {
        switch (c) {
        case 'p':
            if (o->n == MAX_PROVIDERS) {
                fprintf(stderr, "sbx: error: spike: at most %d providers\n", MAX_PROVIDERS);
                return -1;
            }
            o->providers[o->n++] = optarg;
            break;
        case 'r': {
            char *end = NULL;
            long v = strtol(optarg, &end, 10);

            if (*optarg == '\0' || *end != '\0' || v < 1 || v > 1000) {
                fprintf(stderr, "sbx: error: spike: --runs '%s': use 1 to 1000\n", optarg);
                return -1;
            }
            o->so.runs = (int)v;
            break;
        }
        case 'c':
            o->so.credentials = optarg;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'o':
            o->out = optarg;
            break;
        default:
            return -1;
        }
    }
    return sbx_args_operands(&a, 0, 0, "") < 0 ? -1 : 0;
}

/* Measures each provider into cols. Returns 1 when a criterion failed, 0 when
 * none did, -1 having said why the measuring failed (cols freed then). */
static int spike_measure(const struct sbx_config *cfg, const char *dir, const struct spike_cli *o,
                         struct sbx_spike_column *cols)
{
    int failed = 0;

    for (size_t i = 0; i < o->n; i++) {
        sbx_error_t *err = NULL;

        if (sbx_spike_measure(cfg, dir, o->providers[i], &o->so, &cols[i], &err) < 0) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
            for (size_t k = 0; k < i; k++) {
                sbx_spike_column_fini(&cols[k]);
            }
            return -1;
        }
        for (int k = 0; k < SBX_SPIKE_NCRITERIA; k++) {
            failed |= cols[i].rows[k].status == SBX_SPIKE_FAIL;
        }
    }
    return failed;
}

/* --out FILE: the report as FILE.json and FILE.md. -1 when one cannot be
 * written (said). */
static int spike_write_out(const char *out, json_t *report, const char *md)
{
    char *jp = xasprintf("%s.json", out);
    char *mp = xasprintf("%s.md", out);
    char *s = json_dumps(report, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    int rc = 0;

    if (write_text(jp, s) < 0 || write_text(mp, md) < 0) {
        rc = -1;
    }
    free(s);
    free(jp);
    free(mp);
    return rc;
}

int sbx_cmd_spike(struct sbx_cli *cli, int argc, char **argv)
{
    struct spike_cli o = {.so = {.runs = 5}};
    struct sbx_spike_column cols[MAX_PROVIDERS];
    struct sbx_spike_bar bar;
    struct sbx_config *cfg;
    const char *dir;
    int failed;
    json_t *report;
    char *md;

    if (spike_parse(argc, argv, &o) < 0) {
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    dir = cfg ? sbx_cli_plugin_dir(cli) : NULL;
    if (dir == NULL) {
        return SBX_EXIT_USAGE;
    }
    if (o.n == 0) {
        o.providers[o.n++] = cfg->provider;
    }
    for (size_t i = 0; i < o.n; i++) {
        if (sbx_config_instance(cfg, o.providers[i], SBX_PLUGIN_PROVIDER) == NULL) {
            fprintf(stderr, "sbx: error: spike: no provider instance '%s'\n", o.providers[i]);
            return SBX_EXIT_USAGE;
        }
    }
    sbx_spike_bar_from_config(cfg, &bar);
    failed = spike_measure(cfg, dir, &o, cols);
    if (failed < 0) {
        return SBX_EXIT_FAIL;
    }
    report = sbx_spike_report_json(cols, o.n, &bar);
    md = sbx_spike_report_markdown(cols, o.n, &bar);
    if (o.json) {
        char *s = json_dumps(report, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

        printf("%s\n", s);
        free(s);
    }
    else {
        sbx_spike_print_table(stdout, cols, o.n, &bar);
    }
    if (o.out != NULL && spike_write_out(o.out, report, md) < 0) {
        failed = 1;
    }
    json_decref(report);
    free(md);
    for (size_t i = 0; i < o.n; i++) {
        sbx_spike_column_fini(&cols[i]);
    }
    return failed ? SBX_EXIT_FAIL : SBX_EXIT_OK;
}
