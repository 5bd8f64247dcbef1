/* cmd_plugins.c - `sbx plugins [--json]`: every plugin in the plugin dir. */
#include <dirent.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "plugin/loader.h"
#include "util/xalloc.h"

void sbx_cmd_plugins_help(FILE *out)
{
    fprintf(out, "usage: sbx plugins [--json]\n"
                 "\n"
                 "Loads every plugin (*.so) in the plugin dir with the ABI checks and lists\n"
                 "its name, kind (provider|credential), state (ready|stub|deferred), the\n"
                 "reason a stub gives and its ABI version (--json adds its path). A plugin\n"
                 "that is refused\n"
                 "is reported on stderr with the reason, and the exit status is 1.\n"
                 "\n"
                 "Plugin dir: 'plugin_dir' in the configuration, else $SBX_PLUGIN_DIR, else\n"
                 "the binary's own (build/plugins, or lib/sbx/plugins under its prefix).\n"
                 "\n"
                 "  --json   one JSON array of objects on stdout\n");
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

int sbx_cmd_plugins(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_args a = {.cmd = "plugins", .argc = argc, .argv = argv};
    const char *dir_path;
    json_t *arr;
    char **names = NULL;
    size_t n = 0;
    int json = 0;
    int refused = 0;
    struct dirent *de;
    DIR *dir;

    if (sbx_args_json_only(&a, 0, 0, "", &json) < 0) {
        return SBX_EXIT_USAGE;
    }
    arr = json_array();
    dir_path = sbx_cli_plugin_dir(cli);
    if (dir_path == NULL) {
        json_decref(arr);
        return SBX_EXIT_USAGE;
    }
    dir = opendir(dir_path);
    if (dir == NULL) {
        fprintf(stderr, "sbx: error: plugin dir %s: cannot open\n", dir_path);
        json_decref(arr);
        return SBX_EXIT_FAIL;
    }
    while ((de = readdir(dir)) != NULL) {
        size_t len = strlen(de->d_name);

        if (len > 3 && strcmp(de->d_name + len - 3, ".so") == 0) {
            names = xrealloc(names, (n + 1) * sizeof(char *));
            names[n++] = xstrdup(de->d_name);
        }
    }
    closedir(dir);
    qsort(names, n, sizeof(char *), cmp_str);
    if (!json) {
        printf("%-22s %-10s %-8s %-5s %-8s %s\n", "NAME", "KIND", "STATE", "ABI", "VERSION",
               "REASON");
    }
    for (size_t i = 0; i < n; i++) {
        sbx_error_t *err = NULL;
        char *path = xasprintf("%s/%s", dir_path, names[i]);
        struct sbx_plugin *p = sbx_plugin_load(dir_path, path, 0, NULL, &err);

        if (p == NULL) {
            sbx_cli_print_error(err);
            sbx_error_free(&err);
            refused = 1;
        }
        else if (json) {
            char abi[32];

            snprintf(abi, sizeof(abi), "%u.%u", p->desc.abi_major, p->desc.abi_minor);
            json_array_append_new(
                arr, json_pack("{s:s, s:s, s:s, s:s?, s:s, s:s, s:s}", "name", p->desc.name, "kind",
                               sbx_plugin_kind_name(p->desc.kind), "state",
                               sbx_plugin_state_name(p->desc.state), "reason", p->desc.reason,
                               "abi", abi, "version", p->desc.version, "path", p->path));
        }
        else {
            char abi[32];

            snprintf(abi, sizeof(abi), "%u.%u", p->desc.abi_major, p->desc.abi_minor);
            printf("%-22s %-10s %-8s %-5s %-8s %s\n", p->desc.name,
                   sbx_plugin_kind_name(p->desc.kind), sbx_plugin_state_name(p->desc.state), abi,
                   p->desc.version, p->desc.reason ? p->desc.reason : "-");
        }
        sbx_plugin_unload(p);
        free(path);
        free(names[i]);
    }
    free(names);
    if (json) {
        char *s = json_dumps(arr, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

        printf("%s\n", s);
        free(s);
    }
    else {
        printf("plugin dir: %s\n", dir_path);
    }
    json_decref(arr);
    return refused ? SBX_EXIT_FAIL : SBX_EXIT_OK;
}
