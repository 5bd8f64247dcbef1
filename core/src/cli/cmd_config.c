/* cmd_config.c - `sbx config check [FILE]` and `sbx config keys [--json]`. */
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "config/keys_doc.h"
#include "plugin/instance.h"

void sbx_cmd_config_help(FILE *out)
{
    fprintf(out, "usage: sbx config check [FILE]\n"
                 "       sbx config keys [--json | --markdown]\n"
                 "\n"
                 "Checks a configuration file against the key table: libconfig syntax, known\n"
                 "keys (a typo names the nearest key), their types (sizes like 8G, durations\n"
                 "like 60m, CPUs like 2.0) and checks (ranges, allowed values), and for every\n"
                 "provider and credential instance that its plugin loads and accepts the\n"
                 "instance's options. Problems are printed as FILE:LINE: message.\n"
                 "Without FILE it checks the file sbx would use (--config, $SBX_CONFIG,\n"
                 "./sbx.conf, " SBX_SYSTEM_CONFIG ").\n"
                 "\n"
                 "'config keys' prints every key of the core's configuration: its type,\n"
                 "default, check and one line of help (--json: as a JSON array; --markdown:\n"
                 "the key tables of docs/configuration.md). Plugin options: 'sbx plugins'\n"
                 "and docs/configuration.md.\n"
                 "\n"
                 "Exit status: 0 valid, 2 invalid.\n");
}

static int config_keys(int argc, char **argv)
{
    const char *fmt = argc > 2 ? argv[2] : NULL;

    if (argc > 3 || (fmt != NULL && strcmp(fmt, "--json") != 0 && strcmp(fmt, "--markdown") != 0)) {
        fprintf(stderr, "sbx: error: usage: sbx config keys [--json | --markdown]\n");
        return SBX_EXIT_USAGE;
    }
    if (fmt == NULL) {
        sbx_config_keys_text(stdout);
    }
    else if (strcmp(fmt, "--markdown") == 0) {
        sbx_config_keys_markdown(stdout);
    }
    else {
        json_t *arr = sbx_config_keys_json();
        char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

        printf("%s\n", s);
        free(s);
        json_decref(arr);
    }
    return SBX_EXIT_OK;
}

int sbx_cmd_config(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_config *c;
    const char *dir;

    if (argc >= 2 && strcmp(argv[1], "keys") == 0) {
        return config_keys(argc, argv);
    }
    if (argc < 2 || strcmp(argv[1], "check") != 0) {
        fprintf(stderr, "sbx: error: usage: sbx config check [FILE] | sbx config keys [--json]\n");
        return SBX_EXIT_USAGE;
    }
    if (argc > 3) {
        fprintf(stderr, "sbx: error: config check: unexpected argument '%s'\n", argv[3]);
        return SBX_EXIT_USAGE;
    }
    if (argc == 3) {
        cli->config_path = argv[2];
    }
    c = sbx_cli_config(cli);
    if (c == NULL) {
        return SBX_EXIT_USAGE;
    }
    dir = sbx_cli_plugin_dir(cli);
    if (dir == NULL) {
        return SBX_EXIT_USAGE;
    }
    for (size_t i = 0; i < c->n_instances; i++) {
        sbx_error_t *err = NULL;
        struct sbx_open_instance *oi;

        if (c->instances[i].group == NULL) {
            /* a built-in instance: its plugin must load; its required options
             * are only needed once it is configured and used */
            struct sbx_plugin *p =
                sbx_plugin_load_name(dir, c->instances[i].plugin, c->instances[i].kind, &err);

            if (p == NULL) {
                sbx_cli_print_error(err);
                sbx_error_free(&err);
                return SBX_EXIT_USAGE;
            }
            sbx_plugin_unload(p);
            continue;
        }
        oi = sbx_instance_load(c, dir, c->instances[i].name, c->instances[i].kind, &err);
        if (oi == NULL) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
            return SBX_EXIT_USAGE;
        }
        sbx_instance_close(oi);
    }
    printf("%s: ok (%zu instances)\n", c->path ? c->path : "built-in defaults", c->n_instances);
    return SBX_EXIT_OK;
}
