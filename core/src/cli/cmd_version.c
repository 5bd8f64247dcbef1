/* cmd_version.c - `sbx version [--json]` (and `sbx --version`): the version,
 * the git commit it was built from and the plugin ABI. */
#include <jansson.h>
#include <stdlib.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "sbx/sbx_plugin.h"
#include "sbx_build.h"

/* the sbx binary's own (main.c) replaces this one */
__attribute__((weak)) const char sbx_git_commit[] = "unknown";

void sbx_cmd_version_help(FILE *out)
{
    fprintf(out, "usage: sbx version [--json]\n"
                 "\n"
                 "Prints the version, the git commit sbx was built from (\"-dirty\" when the\n"
                 "tree had changes, \"unknown\" outside a git checkout) and the plugin ABI.\n"
                 "\n"
                 "  --json   print {\"version\", \"commit\", \"plugin_abi\"}\n"
                 "\n"
                 "Exit status: 0 ok, 2 usage.\n");
}

void sbx_cli_print_version(void)
{
    printf("sbx %s (commit %s, plugin ABI %u.%u)\n", SBX_VERSION, sbx_git_commit,
           SBX_PLUGIN_ABI_MAJOR, SBX_PLUGIN_ABI_MINOR);
}

int sbx_cmd_version(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_args a = {.cmd = "version", .argc = argc, .argv = argv};
    int json = 0;

    (void)cli;
    if (sbx_args_json_only(&a, 0, 0, "", &json) < 0) {
        return SBX_EXIT_USAGE;
    }
    if (json) {
        char abi[32];
        json_t *o;
        char *s;

        snprintf(abi, sizeof(abi), "%u.%u", SBX_PLUGIN_ABI_MAJOR, SBX_PLUGIN_ABI_MINOR);
        o = json_pack("{s:s, s:s, s:s}", "version", SBX_VERSION, "commit", sbx_git_commit,
                      "plugin_abi", abi);
        s = json_dumps(o, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        printf("%s\n", s);
        free(s);
        json_decref(o);
    }
    else {
        sbx_cli_print_version();
    }
    return SBX_EXIT_OK;
}
