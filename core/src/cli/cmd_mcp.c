/* cmd_mcp.c - `sbx mcp`: the MCP server over stdio (docs/mcp.md). */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "mcp/server.h"
#include "util/log.h"

static volatile int mcp_stop;

static void on_signal(int sig)
{
    (void)sig;
    mcp_stop = 1;
}

void sbx_cmd_mcp_help(FILE *out)
{
    fprintf(out, "usage: sbx mcp\n"
                 "\n"
                 "Serves the sbx tools to an AI agent over the Model Context Protocol: JSON-RPC\n"
                 "on stdin and stdout, one message per line (protocol 2025-11-25). Agents start\n"
                 "it themselves; 'sbx agents setup' registers it for Claude Code and OpenCode.\n"
                 "\n"
                 "Tools: sandbox_run, sandbox_end, sandbox_job, sandbox_cancel, sandbox_queue,\n"
                 "sandbox_read_file, sandbox_write_file, sandbox_snapshot, sandbox_fork\n"
                 "(docs/mcp.md). 'sbx task allow|deny' is deliberately not a tool.\n"
                 "\n"
                 "With no runner configured (runner.listen unset) it starts a private runner\n"
                 "of its own (mode \"embedded\"): a one-box runner on a thread of this process,\n"
                 "serving the agent pool with the whole box, its socket and store in a 0700\n"
                 "directory of its own; worktrees must be the directory it runs in or below it.\n"
                 "The tasks it holds end, and the directory goes, when stdin closes or on\n"
                 "SIGINT/SIGTERM/SIGHUP. With runner.listen set (mode \"runner\") the tools go\n"
                 "through that runner, its tasks outlive this process, and a runner that cannot\n"
                 "be reached fails the call (isError); it never falls back.\n"
                 "\n"
                 "stdout carries only protocol messages; logs go to stderr.\n"
                 "Exit status: 0 when stdin closed, 2 on a configuration error.\n");
}

int sbx_cmd_mcp(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_mcp_backend backend;
    struct sbx_mcp_server *s;
    struct sbx_config *cfg;
    const char *dir;
    sbx_error_t *err = NULL;
    struct sigaction sa = {0};

    static const struct option opts[] = {{NULL, 0, NULL, 0}};
    struct sbx_args a = {.cmd = "mcp", .opts = opts, .argc = argc, .argv = argv};

    if (sbx_args_next(&a) != -1 || sbx_args_operands(&a, 0, 0, "") < 0) {
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    dir = cfg ? sbx_cli_plugin_dir(cli) : NULL;
    if (dir == NULL) {
        return SBX_EXIT_USAGE;
    }
    if (sbx_mcp_backend_open(cfg, dir, &backend, &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return SBX_EXIT_USAGE;
    }
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    sbx_info("mcp: serving on stdio (mode %s)", backend.ops->mode);
    s = sbx_mcp_server_new(&backend, NULL, NULL);
    if (getenv("SBX_MCP_PROGRESS_MS") != NULL) { /* tests */
        sbx_mcp_server_set_progress_interval(s, strtoll(getenv("SBX_MCP_PROGRESS_MS"), NULL, 10));
    }
    sbx_mcp_server_serve(s, 0, &mcp_stop);
    sbx_info("mcp: %s: ending", mcp_stop ? "signal" : "stdin closed");
    sbx_mcp_server_free(s);
    return SBX_EXIT_OK;
}
