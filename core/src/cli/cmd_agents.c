/* cmd_agents.c - `sbx agents setup`: registers `sbx mcp` with Claude Code and
 * OpenCode in a project and installs the usage skill (docs/mcp.md). */
#include <jansson.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "agents/agents.h"
#include "cli/args.h"
#include "cli/cli.h"
#include "util/paths.h"
#include "util/xalloc.h"

void sbx_cmd_agents_help(FILE *out)
{
    fprintf(out, "usage: sbx agents setup [--project DIR] [--client claude-code|opencode|all]\n"
                 "                        [--command PATH] [--dry-run] [--json]\n"
                 "\n"
                 "Registers the sbx MCP server ('sbx mcp') with coding agents in a project and\n"
                 "installs a skill that tells them when and how to use its tools:\n"
                 "  claude-code  .mcp.json (mcpServers.sbx), .claude/skills/sbx-sandbox/SKILL.md\n"
                 "  opencode     opencode.json (mcp.sbx), .opencode/skills/sbx-sandbox/SKILL.md\n"
                 "Existing entries are kept; only the \"sbx\" entry is added or updated. A\n"
                 "malformed file is refused (nothing is written). Running it twice changes\n"
                 "nothing.\n"
                 "\n"
                 "Options:\n"
                 "  --project DIR        the project (default: the current directory)\n"
                 "  --client NAME        claude-code, opencode or all (default all)\n"
                 "  --command PATH       the sbx the agents start (default: 'sbx' when an sbx is\n"
                 "                       on PATH, else this binary's absolute path, saying so)\n"
                 "  --dry-run            print the changes as a unified diff; write nothing\n"
                 "  --json               print a JSON summary of the changes\n"
                 "\n"
                 "After writing it prints the step each client still needs: Claude Code lists\n"
                 "a project's server as pending approval until the user approves it.\n"
                 "\n"
                 "Exit status: 0 ok, 1 failed (e.g. a malformed file), 2 usage error.\n");
}

struct agents_opts {
    const char *project;
    const char *command; /* --command, or NULL */
    int clients;
    int dry;
    int json;
};

/* Parses `sbx agents setup`'s options into *o. Returns 0, or the exit status
 * after printing the error. */
static int agents_parse(int argc, char **argv, struct agents_opts *o)
{
    static const struct option opts[] = {
        {"project", required_argument, NULL, 'p'}, {"client", required_argument, NULL, 'c'},
        {"command", required_argument, NULL, 'C'}, {"dry-run", no_argument, NULL, 'n'},
        {"json", no_argument, NULL, 'j'},          {NULL, 0, NULL, 0},
    };
    struct sbx_args a = {
        .cmd = "agents setup", .help = "agents", .opts = opts, .argc = argc - 1, .argv = argv + 1};
    int c;

    *o = (struct agents_opts){.project = ".", .clients = SBX_AGENTS_ALL};
    if (argc < 2 || strcmp(argv[1], "setup") != 0) {
        fprintf(stderr, "sbx: error: agents: usage: sbx agents setup [OPTIONS] (see 'sbx agents "
                        "--help')\n");
        return SBX_EXIT_USAGE;
    }
    while ((c = sbx_args_next(&a)) != -1) {
        switch (c) {
        case 'p':
            o->project = optarg;
            break;
        case 'c':
            o->clients = sbx_agents_client_parse(optarg);
            if (o->clients < 0) {
                fprintf(stderr,
                        "sbx: error: agents setup: --client '%s': use claude-code, "
                        "opencode or all\n",
                        optarg);
                return SBX_EXIT_USAGE;
            }
            break;
        case 'C':
            o->command = optarg;
            break;
        case 'n':
            o->dry = 1;
            break;
        case 'j':
            o->json = 1;
            break;
        default:
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, 0, 0, "") < 0) {
        return SBX_EXIT_USAGE;
    }
    return 0;
}

/* True for the one change per client that names its next step (the
 * configuration file, not the skill). */
static int agents_is_config(const struct sbx_agents_change *ch)
{
    return strstr(ch->path, "SKILL.md") == NULL;
}

/* --json: the summary of the plan, its files and each client's next step. */
static void agents_print_json(const struct agents_opts *o, const char *program, const char *note,
                              const struct sbx_agents_plan *plan)
{
    json_t *files = json_array();
    json_t *steps = json_array();
    json_t *summary;
    char *s;

    for (size_t i = 0; i < plan->n; i++) {
        const struct sbx_agents_change *ch = &plan->changes[i];

        json_array_append_new(files, json_pack("{s:s, s:s, s:s}", "path", ch->path, "client",
                                               ch->client, "action",
                                               !ch->changed   ? "unchanged"
                                               : ch->old_text ? "update"
                                                              : "create"));
    }
    for (size_t i = 0; i < plan->n; i++) {
        const char *step = sbx_agents_next_step(plan->changes[i].client);

        if (agents_is_config(&plan->changes[i])) {
            json_array_append_new(
                steps, json_pack("{s:s, s:s}", "client", plan->changes[i].client, "step", step));
        }
    }
    summary =
        json_pack("{s:s, s:s, s:s?, s:b, s:o, s:o}", "project", o->project, "command", program,
                  "note", note, "dry_run", o->dry, "files", files, "next_steps", steps);
    s = json_dumps(summary, JSON_INDENT(2));
    printf("%s\n", s);
    free(s);
    json_decref(summary);
}

/* Without --json: each file's diff (--dry-run) or what was done to it, the
 * note about the command, and each client's next step. */
static void agents_print_text(const struct agents_opts *o, const char *note,
                              const struct sbx_agents_plan *plan)
{
    int changed = 0;

    for (size_t i = 0; i < plan->n; i++) {
        const struct sbx_agents_change *ch = &plan->changes[i];

        changed += ch->changed;
        if (o->dry) {
            char *d = sbx_agents_diff(ch);

            fputs(d, stdout);
            free(d);
        }
        else {
            printf("%-10s %s (%s)\n",
                   !ch->changed   ? "unchanged"
                   : ch->old_text ? "updated"
                                  : "created",
                   ch->path, ch->client);
        }
    }
    if (o->dry && changed == 0) {
        printf("nothing to change in %s\n", o->project);
    }
    if (note != NULL) {
        fprintf(stderr, "sbx: agents setup: %s\n", note);
    }
    for (size_t i = 0; !o->dry && i < plan->n; i++) {
        if (agents_is_config(&plan->changes[i])) {
            printf("next: %s\n", sbx_agents_next_step(plan->changes[i].client));
        }
    }
}

int sbx_cmd_agents(struct sbx_cli *cli, int argc, char **argv)
{
    struct agents_opts o;
    struct sbx_agents_plan plan;
    sbx_error_t *err = NULL;
    char *program;
    char *note = NULL;
    char *self;
    int rc;

    (void)cli;
    rc = agents_parse(argc, argv, &o);
    if (rc != 0) {
        return rc;
    }
    self = sbx_exe_path();
    program = o.command ? xstrdup(o.command) : sbx_agents_program(getenv("PATH"), self, &note);
    free(self);
    if (sbx_agents_plan(o.project, (unsigned)o.clients, program, &plan, &err) < 0) {
        sbx_cli_print_error(err);
        rc = sbx_cli_exit_for(err) == SBX_EXIT_USAGE && err->code == SBX_E_USAGE ? SBX_EXIT_USAGE
                                                                                 : SBX_EXIT_FAIL;
        sbx_error_free(&err);
        free(program);
        free(note);
        return rc;
    }
    if (!o.dry && sbx_agents_apply(o.project, &plan, &err) < 0) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        sbx_agents_plan_free(&plan);
        free(program);
        free(note);
        return SBX_EXIT_FAIL;
    }
    if (o.json) {
        agents_print_json(&o, program, note, &plan);
    }
    else {
        agents_print_text(&o, note, &plan);
    }
    sbx_agents_plan_free(&plan);
    free(program);
    free(note);
    return SBX_EXIT_OK;
}
