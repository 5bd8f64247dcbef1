/* cli.c - global options and dispatch of sbx subcommands. */
#include "cli/cli.h"

#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "http/http.h"
#include "plugin/loader.h"
#include "sbx_build.h"
#include "util/log.h"

static void help_help(FILE *out);

static const struct sbx_cmd commands[] = {
    {"run", "run a command in a fresh sandbox (start + exec + end)", sbx_cmd_run, sbx_cmd_run_help},
    {"task", "start, end or list tasks (one sandbox, many commands)", sbx_cmd_task,
     sbx_cmd_task_help},
    {"exec", "run a command in a running task's sandbox", sbx_cmd_exec, sbx_cmd_exec_help},
    {"attach", "attach this terminal to a task's kept session (sbx exec -it --keep)",
     sbx_cmd_attach, sbx_cmd_attach_help},
    {"snapshot", "list or remove snapshots of tasks (sbx task snapshot, fork)", sbx_cmd_snapshot,
     sbx_cmd_snapshot_help},
    {"port", "forward a host loopback port to a port inside a task", sbx_cmd_port,
     sbx_cmd_port_help},
    {"cp", "copy files between the host and a task's sandbox", sbx_cmd_cp, sbx_cmd_cp_help},
    {"mcp", "serve the sandbox tools to an AI agent (MCP over stdio)", sbx_cmd_mcp,
     sbx_cmd_mcp_help},
    {"agents", "set up Claude Code and OpenCode to use 'sbx mcp'", sbx_cmd_agents,
     sbx_cmd_agents_help},
    {"serve", "run the runner daemon (queue, pools, slots, HTTP API)", sbx_cmd_serve,
     sbx_cmd_serve_help},
    {"submit", "submit a job to the runner", sbx_cmd_submit, sbx_cmd_submit_help},
    {"job", "show a runner job's record, or follow its output", sbx_cmd_job, sbx_cmd_job_help},
    {"cancel", "cancel a runner job, or end a task kept by the runner", sbx_cmd_cancel,
     sbx_cmd_cancel_help},
    {"queue", "show the runner's queue, slots, autoscaler and spend", sbx_cmd_queue,
     sbx_cmd_queue_help},
    {"image", "build the warm sandbox image", sbx_cmd_image, sbx_cmd_image_help},
    {"info", "show the configuration in force and the provider's engine", sbx_cmd_info,
     sbx_cmd_info_help},
    {"spike", "measure the spike bar (ADR decision 13) per provider", sbx_cmd_spike,
     sbx_cmd_spike_help},
    {"plugins", "list the plugins in the plugin dir", sbx_cmd_plugins, sbx_cmd_plugins_help},
    {"config", "check a configuration file", sbx_cmd_config, sbx_cmd_config_help},
    {"policy", "check, evaluate and test policy scripts", sbx_cmd_policy, sbx_cmd_policy_help},
    {"egress", "explain the egress decision for a host (egress why)", sbx_cmd_egress,
     sbx_cmd_egress_help},
    {"version", "print the version, git commit and plugin ABI", sbx_cmd_version,
     sbx_cmd_version_help},
    {"help", "show help for sbx or a command", NULL, help_help},
    {NULL, NULL, NULL, NULL},
};

static void usage(FILE *out)
{
    fprintf(out, "usage: sbx [GLOBAL OPTIONS] COMMAND [ARGS]\n"
                 "\n"
                 "Runs each task in its own fresh, limited, egress-filtered sandbox.\n"
                 "\n"
                 "Commands:\n");
    for (const struct sbx_cmd *c = commands; c->name != NULL; c++) {
        fprintf(out, "  %-10s %s\n", c->name, c->summary);
    }
    fprintf(out, "\n"
                 "Global options:\n"
                 "  --config FILE        configuration file (else $SBX_CONFIG, ./sbx.conf,\n"
                 "                       " SBX_SYSTEM_CONFIG ", else built-in defaults)\n"
                 "  --log-level LEVEL    error, warn (default), info or debug\n"
                 "  --log-format FORMAT  text (default) or json; logs go to stderr\n"
                 "  -v, --verbose        same as --log-level info\n"
                 "  --version            print the version (as 'sbx version')\n"
                 "  -h, --help           this help; 'sbx COMMAND --help' for a command\n"
                 "\n"
                 "Exit status: 0 ok, 1 failed, 2 usage or configuration error. 'sbx run' and\n"
                 "'sbx exec' exit with the command's own status (128+n for a signal), 125 when\n"
                 "sbx itself fails, 126 when the command cannot be executed, 127 when it is not\n"
                 "found.\n"
                 "\n"
                 "Docs: man sbx-COMMAND, and share/doc/sbx under the prefix (docs/ in the\n"
                 "source tree).\n");
}

static void help_help(FILE *out)
{
    fprintf(out, "usage: sbx help [COMMAND]\n\nShows help for sbx or for one command.\n");
}

static const struct sbx_cmd *find_command(const char *name)
{
    for (const struct sbx_cmd *c = commands; c->name != NULL; c++) {
        if (strcmp(c->name, name) == 0) {
            return c;
        }
    }
    return NULL;
}

void sbx_cli_print_error(const sbx_error_t *err)
{
    sbx_log(SBX_LOG_ERROR, "%s", sbx_error_msg(err));
}

int sbx_cli_exit_for(const sbx_error_t *err)
{
    if (err != NULL && (err->code == SBX_E_CONFIG || err->code == SBX_E_USAGE)) {
        return SBX_EXIT_USAGE;
    }
    return SBX_EXIT_FAIL;
}

int sbx_cli_wants_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--") == 0) {
            return 0;
        }
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
            return 1;
        }
    }
    return 0;
}

struct sbx_config *sbx_cli_config(struct sbx_cli *cli)
{
    sbx_error_t *err = NULL;

    if (cli->config != NULL) {
        return cli->config;
    }
    cli->config = sbx_config_load(cli->config_path, &err);
    if (cli->config == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
    }
    return cli->config;
}

const char *sbx_cli_plugin_dir(struct sbx_cli *cli)
{
    sbx_error_t *err = NULL;
    struct sbx_config *c;

    if (cli->plugin_dir != NULL) {
        return cli->plugin_dir;
    }
    c = sbx_cli_config(cli);
    if (c == NULL) {
        return NULL;
    }
    cli->plugin_dir = sbx_plugin_dir_resolve(c->plugin_dir, &err);
    if (cli->plugin_dir == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
    }
    return cli->plugin_dir;
}

int sbx_cli_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"config", required_argument, NULL, 'c'},
        {"log-level", required_argument, NULL, 'l'},
        {"log-format", required_argument, NULL, 'f'},
        {"verbose", no_argument, NULL, 'v'},
        {"version", no_argument, NULL, 'V'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    struct sbx_cli cli = {0};
    enum sbx_log_level level = SBX_LOG_WARN;
    enum sbx_log_format format = SBX_LOG_TEXT;
    const struct sbx_cmd *cmd;
    const char *env_level = getenv("SBX_LOG_LEVEL");
    struct sbx_args a = {
        .cmd = NULL, .opts = opts, .shortopts = "c:vh", .in_order = 1, .argc = argc, .argv = argv};
    int c;
    int rc;

    if (env_level != NULL && sbx_log_level_parse(env_level, &level) < 0) {
        level = SBX_LOG_WARN;
    }
    while ((c = sbx_args_next(&a)) != -1) {
        switch (c) {
        case 'c':
            cli.config_path = optarg;
            break;
        case 'l':
            if (sbx_log_level_parse(optarg, &level) < 0) {
                fprintf(stderr, "sbx: error: --log-level '%s': use error, warn, info or debug\n",
                        optarg);
                return SBX_EXIT_USAGE;
            }
            break;
        case 'f':
            if (strcmp(optarg, "json") == 0) {
                format = SBX_LOG_JSON;
            }
            else if (strcmp(optarg, "text") == 0) {
                format = SBX_LOG_TEXT;
            }
            else {
                fprintf(stderr, "sbx: error: --log-format '%s': use text or json\n", optarg);
                return SBX_EXIT_USAGE;
            }
            break;
        case 'v':
            level = SBX_LOG_INFO;
            break;
        case 'V':
            sbx_cli_print_version();
            return SBX_EXIT_OK;
        case 'h':
            usage(stdout);
            return SBX_EXIT_OK;
        default: /* sbx_args_next said what was wrong */
            return SBX_EXIT_USAGE;
        }
    }
    sbx_log_setup(level, format);
    if (optind >= argc) {
        usage(stderr);
        return SBX_EXIT_USAGE;
    }
    cmd = find_command(argv[optind]);
    if (cmd == NULL) {
        fprintf(stderr, "sbx: error: unknown command '%s' (see 'sbx --help')\n", argv[optind]);
        return SBX_EXIT_USAGE;
    }
    if (cmd->run == NULL) { /* help */
        const struct sbx_cmd *topic = optind + 1 < argc ? find_command(argv[optind + 1]) : NULL;

        if (optind + 1 < argc && topic == NULL) {
            fprintf(stderr, "sbx: error: no command '%s' (see 'sbx --help')\n", argv[optind + 1]);
            return SBX_EXIT_USAGE;
        }
        if (topic != NULL) {
            topic->help(stdout);
        }
        else {
            usage(stdout);
        }
        return SBX_EXIT_OK;
    }
    if (sbx_cli_wants_help(argc - optind, argv + optind)) {
        cmd->help(stdout);
        return SBX_EXIT_OK;
    }
    sbx_http_global_init();
    rc = cmd->run(&cli, argc - optind, argv + optind);
    sbx_config_destroy(cli.config);
    free(cli.plugin_dir);
    return rc;
}
