/* cmd_info.c - `sbx info [--provider NAME] [--json]`: what this box runs:
 * the configuration in force and what the provider reports of its engine
 * (user namespaces on or off, how the disk cap is enforced), the admission
 * budget and the kernel's shared inotify pool (info_box.c). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "cli/info_box.h"
#include "image/image.h"
#include "plugin/instance.h"
#include "policy/policy.h"
#include "sandbox/caps.h"
#include "sandbox/backlog.h"
#include "sandbox/statedir.h"
#include "sbx_build.h"
#include "sandbox/wtscan.h"
#include "util/paths.h"
#include "util/units.h"

void sbx_cmd_info_help(FILE *out)
{
    fprintf(
        out,
        "usage: sbx info [--provider NAME] [--json]\n"
        "\n"
        "Shows the configuration in force (file, plugin, policy and state directories,\n"
        "the helper programs' directory, the image and the definition 'sbx image build'\n"
        "would use, limits) and what the provider reports about its engine: its version, whether\n"
        "user namespaces are on, which mechanism enforces the disk cap, and the\n"
        "seccomp profile sandboxes run with; and the isolation tasks get: the limits,\n"
        "egress control and user namespaces the provider does not enforce (tasks are\n"
        "refused then, unless the instance sets unisolated = true).\n"
        "Also the admission budget (box.memory - box.host_reserve, what embedded\n"
        "sandboxes hold now, the CPU clamp) and the kernel's shared inotify pool\n"
        "against box.max_sandboxes, with a warning on stderr when it is too low\n"
        "(scripts/kernel-limits.sh raises it; docs/operations.md).\n"
        "\n"
        "\n"
        "  --provider NAME   the provider instance to ask (default: config 'provider')\n"
        "  --json            all of it as one JSON object\n"
        "\n"
        "Exit status: 0 ok, 1 the provider could not be reached, 2 configuration error.\n");
}

int sbx_cmd_info(struct sbx_cli *cli, int argc, char **argv)
{
    static const struct option opts[] = {{"provider", required_argument, NULL, 'p'},
                                         {"json", no_argument, NULL, 'j'},
                                         {NULL, 0, NULL, 0}};
    struct sbx_provider_info info = {.userns = -1};
    struct sbx_open_instance *oi;
    struct sbx_config *cfg;
    const char *provider = NULL;
    const char *dir;
    sbx_error_t *err = NULL;
    char *state;
    char *policy_dir;
    char *libexec;
    char *definition;
    char mem[32];
    char disk[32];
    char isolation[384] = "";
    char protected_text[1024] = "";
    json_t *pools_json = NULL;
    char unenforced[160] = "";
    json_t *j;
    int json = 0;
    int backlog = -1;
    int rc = SBX_EXIT_OK;
    int c;

    struct sbx_args a = {.cmd = "info", .opts = opts, .argc = argc, .argv = argv};

    while ((c = sbx_args_next(&a)) != -1) {
        if (c == 'p') {
            provider = optarg;
        }
        else if (c == 'j') {
            json = 1;
        }
        else {
            return SBX_EXIT_USAGE;
        }
    }
    if (sbx_args_operands(&a, 0, 0, "") < 0) {
        return SBX_EXIT_USAGE;
    }
    cfg = sbx_cli_config(cli);
    dir = cfg ? sbx_cli_plugin_dir(cli) : NULL;
    if (dir == NULL) {
        return SBX_EXIT_USAGE;
    }
    provider = provider ? provider : cfg->provider;
    state = sbx_state_dir(cfg->state_dir, NULL);
    policy_dir = sbx_policy_dir_resolve(cfg->policy_dir, NULL);
    libexec = sbx_asset_dir(SBX_ASSET_LIBEXEC);
    definition = sbx_image_def_find(NULL, NULL);
    oi = sbx_instance_open(cfg, dir, provider, SBX_PLUGIN_PROVIDER, &err);
    if (oi != NULL && sbx_instance_provider(oi)->info != NULL) {
        sbx_instance_provider(oi)->info(oi->ctx, &info, NULL);
    }
    sbx_size_format(cfg->limits.memory, mem, sizeof(mem));
    sbx_size_format(cfg->limits.disk, disk, sizeof(disk));
    j = json_pack("{s:s, s:s?, s:s, s:s?, s:s, s:s, s:{s:f, s:I, s:I, s:I, s:I, s:I}, s:i}",
                  "version", SBX_VERSION, "config", cfg->path, "plugin_dir", dir, "state_dir",
                  state, "image", cfg->image, "provider", provider, "limits", "cpus",
                  cfg->limits.cpus, "memory", (json_int_t)cfg->limits.memory, "disk",
                  (json_int_t)cfg->limits.disk, "pids", (json_int_t)cfg->limits.pids, "idle",
                  (json_int_t)cfg->limits.idle, "max", (json_int_t)cfg->limits.max, "max_sandboxes",
                  cfg->box.max_sandboxes);
    json_object_set_new(j, "policy_dir", policy_dir ? json_string(policy_dir) : json_null());
    json_object_set_new(j, "libexec_dir", libexec ? json_string(libexec) : json_null());
    json_object_set_new(j, "image_definition", definition ? json_string(definition) : json_null());
    sbx_info_box(cfg, state, j, 0);
    /* (added) what a worktree keeps from the sandbox (docs/tasks.md, "Worktrees") */
    {
        const char *const *g = cfg->worktree_protect ? (const char *const *)cfg->worktree_protect
                                                     : sbx_protect_default;
        json_t *arr = json_array();

        protected_text[0] = '\0';
        for (size_t i = 0; g[i] != NULL; i++) {
            size_t used = strlen(protected_text);

            json_array_append_new(arr, json_string(g[i]));
            snprintf(protected_text + used, sizeof(protected_text) - used, "%s%s", i ? " " : "",
                     g[i]);
        }
        json_object_set_new(j, "worktree_protect", arr);
        /* (added) a pool's own list (pools.NAME.worktree_protect) */
        pools_json = json_object();
        for (size_t p = 0; p < cfg->n_pools; p++) {
            char **pg = cfg->pools[p].worktree_protect;
            json_t *parr;

            if (pg == NULL) {
                continue;
            }
            parr = json_array();
            for (size_t i = 0; pg[i] != NULL; i++) {
                json_array_append_new(parr, json_string(pg[i]));
            }
            json_object_set_new(pools_json, cfg->pools[p].name, parr);
        }
        json_object_set(j, "worktree_protect_pools", pools_json);
    }
    if (oi != NULL) {
        json_object_set_new(j, "engine", json_string(info.engine));
        json_object_set_new(j, "userns", info.userns < 0 ? json_null() : json_boolean(info.userns));
        json_object_set_new(j, "disk_limit", json_string(info.disk_limit));
        backlog = sbx_removal_backlog(oi, NULL);
        json_object_set_new(j, "removal_backlog",
                            backlog < 0 ? json_null() : json_integer(backlog));
        json_object_set_new(j, "nested_containers",
                            info.nested[0] ? json_string(info.nested) : json_null());
        json_object_set_new(j, "seccomp",
                            info.seccomp[0] ? json_string(info.seccomp) : json_null());
        json_object_set_new(j, "worktree",
                            info.worktree[0] ? json_string(info.worktree) : json_null());
        sbx_caps_describe(oi, &info, &cfg->limits, j, isolation, sizeof(isolation));
        sbx_caps_text(sbx_caps_wanted(&cfg->limits) &
                          ~sbx_caps_enforced(sbx_instance_provider(oi)->flags, &info) &
                          (SBX_CAP_MEMORY | SBX_CAP_CPUS | SBX_CAP_PIDS | SBX_CAP_DISK),
                      unenforced, sizeof(unenforced));
    }
    else {
        json_object_set_new(j, "provider_error", json_string(sbx_error_msg(err)));
        rc = SBX_EXIT_FAIL;
    }
    if (json) {
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

        printf("%s\n", s);
        free(s);
    }
    else {
        printf(
            "sbx %s\nconfig:      %s\nplugin dir:  %s\npolicy dir:  %s\nhelpers:     %s\n"
            "state dir:   %s\nimage:       %s\ndefinition:  %s\n"
            "limits:      %.2f CPUs, %s memory, %s disk, %lld pids, idle %llds, max %llds%s%s%s\n"
            "box:         at most %d sandboxes\nprovider:    %s\n",
            SBX_VERSION, cfg->path ? cfg->path : "(built-in defaults)", dir,
            policy_dir ? policy_dir : "(not found)", libexec ? libexec : "?", state ? state : "?",
            cfg->image, definition ? definition : "(none found)", cfg->limits.cpus, mem, disk,
            (long long)cfg->limits.pids, (long long)cfg->limits.idle, (long long)cfg->limits.max,
            unenforced[0] ? " (NOT ENFORCED: " : "", unenforced, unenforced[0] ? ")" : "",
            cfg->box.max_sandboxes, provider);
        sbx_info_box(cfg, state, j, 1);
        if (oi != NULL) {
            printf("engine:      %s\nuser ns:     %s\ndisk cap:    %s\n", info.engine,
                   info.userns < 0 ? "unknown"
                   : info.userns   ? "on"
                                   : "OFF (see docs/operations.md)",
                   info.disk_limit[0] ? info.disk_limit : "not reported");
            if (backlog >= 0) {
                printf("removal:     %d sandbox%s killed and waiting for the engine's removal "
                       "(in the background; /healthz says so past %d)\n",
                       backlog, backlog == 1 ? "" : "es", SBX_REMOVAL_BACKLOG_MAX);
            }
            printf("nested:      %s\n", info.nested[0] ? info.nested : "none");
            printf("seccomp:     %s\n", info.seccomp[0] ? info.seccomp : "not reported");
            printf("isolation:   %s\n", isolation);
            printf("worktree:    %s\n", info.worktree[0] ? info.worktree : "plain bind mount");
            printf("protected:   %s (read-only inside; made inside: quarantined)\n",
                   protected_text[0] ? protected_text : "none (worktree.protect = [])");
            {
                const char *pname;
                json_t *parr;

                json_object_foreach(pools_json, pname, parr)
                {
                    size_t i;
                    json_t *g;

                    printf("protected:   pool %s:", pname);
                    json_array_foreach(parr, i, g)
                    {
                        printf(" %s", json_string_value(g));
                    }
                    printf("%s\n", json_array_size(parr) ? "" : " none");
                }
            }
            printf("git:         the sandbox's own .git; the host takes back the task's branch "
                   "only\n");
        }
        else {
            printf("engine:      unreachable: %s\n", sbx_error_msg(err));
        }
    }
    json_decref(j);
    json_decref(pools_json);
    sbx_error_free(&err);
    sbx_instance_close(oi);
    free(state);
    free(policy_dir);
    free(libexec);
    free(definition);
    return rc;
}
