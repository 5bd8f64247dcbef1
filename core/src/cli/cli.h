/* cli.h - the sbx command line: global options, dispatch, exit codes. */
#ifndef SBX_CLI_CLI_H
#define SBX_CLI_CLI_H

#include <stdio.h>

#include "config/config.h"
#include "util/error.h"

/* Exit status (docs/architecture.md, Interfaces). */
enum sbx_exit {
    SBX_EXIT_OK = 0,
    SBX_EXIT_FAIL = 1,
    SBX_EXIT_USAGE = 2,      /* usage or configuration error */
    SBX_EXIT_SBX = 125,      /* run/exec: sbx itself failed */
    SBX_EXIT_NOEXEC = 126,   /* run/exec: the command cannot be executed */
    SBX_EXIT_NOTFOUND = 127, /* run/exec: the command was not found */
};

struct sbx_cli {
    const char *config_path;   /* --config, or NULL */
    struct sbx_config *config; /* loaded on demand by sbx_cli_config() */
    char *plugin_dir;          /* resolved on demand */
};

struct sbx_cmd {
    const char *name;
    const char *summary;
    int (*run)(struct sbx_cli *cli, int argc, char **argv);
    void (*help)(FILE *out);
};

int sbx_cli_main(int argc, char **argv);

/* The git commit sbx was built from: defined by the sbx binary (main.c), weak
 * "unknown" in libsbx for the programs that link the library alone. */
extern const char sbx_git_commit[];

/* Loads the configuration once; on failure prints the error and returns NULL
 * (the caller exits with SBX_EXIT_USAGE, or 125 for run/exec). */
struct sbx_config *sbx_cli_config(struct sbx_cli *cli);
const char *sbx_cli_plugin_dir(struct sbx_cli *cli);
/* Prints "sbx: error: MSG" to stderr. */
void sbx_cli_print_error(const sbx_error_t *err);
/* True when argv holds -h or --help before any "--". */
int sbx_cli_wants_help(int argc, char **argv);

/* Maps an error code to the exit status of a non-run command. */
int sbx_cli_exit_for(const sbx_error_t *err);

/* Commands (one file each). */
int sbx_cmd_plugins(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_plugins_help(FILE *out);
int sbx_cmd_config(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_config_help(FILE *out);
int sbx_cmd_run(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_run_help(FILE *out);
int sbx_cmd_exec(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_exec_help(FILE *out);
/* (added, cmd_exec_tty.c) `sbx exec -it`: a command on a terminal */
int sbx_exec_wants_tty(int argc, char **argv);
int sbx_cmd_exec_tty(struct sbx_cli *cli, int argc, char **argv);
/* (added, cmd_exec_tty.c) `sbx attach TASK`: the task's kept session */
int sbx_cmd_attach(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_attach_help(FILE *out);
/* (added, cmd_port.c) `sbx port TASK PORT` */
int sbx_cmd_port(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_port_help(FILE *out);
int sbx_cmd_task(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_task_help(FILE *out);
/* (added, cmd_snapshot.c) `sbx snapshot ls|rm`; `sbx task snapshot|fork|allow|deny`
 * (-1: argv[1] is none of them); `task start --from` (struct sbx_task_cli, task_opts.h) */
int sbx_cmd_snapshot(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_snapshot_help(FILE *out);
int sbx_cmd_task_extra(struct sbx_cli *cli, int argc, char **argv);
struct sbx_task_cli;
int sbx_cli_task_from(struct sbx_cli *cli, struct sbx_task_cli *o);
/* (added, issue 30) cmd_cp.c, cmd_task_files.c: files and pause of a kept task */
int sbx_cmd_cp(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_cp_help(FILE *out);
int sbx_task_cmd_files(struct sbx_cli *cli, int argc, char **argv);
int sbx_task_cmd_pause(struct sbx_cli *cli, int argc, char **argv, int resume);
int sbx_cmd_image(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_image_help(FILE *out);
/* (added) cmd_image_reg.c: push, pull, gc, inspect; -1 when argv[1] is none of them */
int sbx_cmd_image_reg(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_image_reg_help(FILE *out);
int sbx_cmd_info(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_info_help(FILE *out);
int sbx_cmd_spike(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_spike_help(FILE *out);
int sbx_cmd_policy(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_policy_help(FILE *out);
int sbx_cmd_egress(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_egress_help(FILE *out);
int sbx_cmd_mcp(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_mcp_help(FILE *out);
int sbx_cmd_agents(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_agents_help(FILE *out);

int sbx_cmd_serve(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_serve_help(FILE *out);
int sbx_cmd_submit(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_submit_help(FILE *out);
int sbx_cmd_cancel(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_cancel_help(FILE *out);
int sbx_cmd_job(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_job_help(FILE *out);
int sbx_cmd_queue(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_queue_help(FILE *out);
int sbx_cmd_version(struct sbx_cli *cli, int argc, char **argv);
void sbx_cmd_version_help(FILE *out);
/* "sbx VERSION (commit C, plugin ABI M.N)": sbx --version, sbx version. */
void sbx_cli_print_version(void);

#endif
