/* cmd_config.c - `sbx config check [FILE] [--json]` and
 * `sbx config keys [--json | --markdown]`. */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "config/keys_doc.h"
#include "plugin/instance.h"
#include "plugin/loader.h"

void sbx_cmd_config_help(FILE *out)
{
    fprintf(out, "usage: sbx config check [FILE] [--json]\n"
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
                 "  --json       check: print {\"config\", \"ok\", \"instances\": [{\"name\",\n"
                 "               \"kind\", \"plugin\", \"where\"}]} (or \"error\" when invalid);\n"
                 "               keys: the keys as a JSON array\n"
                 "  --markdown   keys: the key tables of docs/configuration.md\n"
                 "\n"
                 "Exit status: 0 valid, 2 invalid.\n");
}

static int config_keys(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"markdown", no_argument, NULL, 'm'}, {NULL, 0, NULL, 0}};
    struct sbx_args a = {
        .cmd = "config keys", .help = "config", .opts = opts, .argc = argc, .argv = argv};
    int fmt = 0;
    int c;

    while ((c = sbx_args_next(&a)) != -1) {
        if (c == '?') {
            return SBX_EXIT_USAGE;
        }
        if (fmt != 0 && fmt != c) {
            sbx_args_error(&a, "give --json or --markdown, not both");
            return SBX_EXIT_USAGE;
        }
        fmt = c;
    }
    if (sbx_args_operands(&a, 0, 0, "") < 0) {
        return SBX_EXIT_USAGE;
    }
    if (fmt == 0) {
        sbx_config_keys_text(stdout);
    }
    else if (fmt == 'm') {
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

/* Loads the plugin of every instance and checks its options; NULL when all
 * are fine, else the first error. */
static sbx_error_t *check_instances(struct sbx_config *c, const char *dir)
{
    for (size_t i = 0; i < c->n_instances; i++) {
        sbx_error_t *err = NULL;
        struct sbx_open_instance *oi;

        if (c->instances[i].group == NULL) {
            /* a built-in instance: its plugin must load; its required options
             * are only needed once it is configured and used */
            struct sbx_plugin *p =
                sbx_plugin_load_name(dir, c->instances[i].plugin, c->instances[i].kind, &err);

            if (p == NULL) {
                return err;
            }
            sbx_plugin_unload(p);
            continue;
        }
        oi = sbx_instance_load(c, dir, c->instances[i].name, c->instances[i].kind, &err);
        if (oi == NULL) {
            return err;
        }
        sbx_instance_close(oi);
    }
    return NULL;
}

static void print_json(const char *path, struct sbx_config *c, const sbx_error_t *err)
{
    json_t *o = json_pack("{s:s?, s:b}", "config", c ? c->path : path, "ok", err == NULL);
    json_t *arr = json_array();
    char *s;

    for (size_t i = 0; c != NULL && i < c->n_instances; i++) {
        json_array_append_new(arr, json_pack("{s:s, s:s, s:s, s:s?}", "name", c->instances[i].name,
                                             "kind", sbx_plugin_kind_name(c->instances[i].kind),
                                             "plugin", c->instances[i].plugin, "where",
                                             c->instances[i].where));
    }
    json_object_set_new(o, "instances", arr);
    if (err != NULL) {
        json_object_set_new(o, "error", json_string(sbx_error_msg(err)));
    }
    s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    printf("%s\n", s);
    free(s);
    json_decref(o);
}

int sbx_cmd_config(struct sbx_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'}, {NULL, 0, NULL, 0}};
    struct sbx_args a = {.cmd = "config check", .help = "config", .opts = opts};
    struct sbx_config *c;
    sbx_error_t *err = NULL;
    const char *dir;
    int json = 0;
    int ch;

    if (argc >= 2 && strcmp(argv[1], "keys") == 0) {
        return config_keys(argc - 1, argv + 1);
    }
    if (argc < 2 || strcmp(argv[1], "check") != 0) {
        fprintf(stderr, "sbx: error: config: %s%s%s: use check or keys (see 'sbx config --help')\n",
                argc >= 2 ? "unknown subcommand '" : "no subcommand", argc >= 2 ? argv[1] : "",
                argc >= 2 ? "'" : "");
        return SBX_EXIT_USAGE;
    }
    a.argc = argc - 1;
    a.argv = argv + 1;
    while ((ch = sbx_args_next(&a)) != -1) {
        if (ch != 'j') {
            return SBX_EXIT_USAGE;
        }
        json = 1;
    }
    if (sbx_args_operands(&a, 0, 1, "FILE") < 0) {
        return SBX_EXIT_USAGE;
    }
    if (optind < a.argc) {
        cli->config_path = a.argv[optind];
    }
    if (!json) {
        c = sbx_cli_config(cli);
        dir = c ? sbx_cli_plugin_dir(cli) : NULL;
        if (dir == NULL) {
            return SBX_EXIT_USAGE;
        }
        err = check_instances(c, dir);
        if (err != NULL) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
            return SBX_EXIT_USAGE;
        }
        printf("%s: ok (%zu instances)\n", c->path ? c->path : "built-in defaults", c->n_instances);
        return SBX_EXIT_OK;
    }
    /* --json: the error goes into the object (and to stderr) */
    c = sbx_config_load(cli->config_path, &err);
    if (c != NULL) {
        char *pdir = sbx_plugin_dir_resolve(c->plugin_dir, &err);

        if (pdir != NULL) {
            err = check_instances(c, pdir);
            free(pdir);
        }
    }
    if (err != NULL) {
        sbx_cli_print_error(err);
    }
    print_json(cli->config_path, c, err);
    ch = err != NULL ? SBX_EXIT_USAGE : SBX_EXIT_OK;
    sbx_error_free(&err);
    sbx_config_destroy(c);
    return ch;
}
