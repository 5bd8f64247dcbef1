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

/* What `sbx info` reports: the configuration in force and the provider's
 * engine, gathered once for the JSON object and the text. */
struct info {
    struct sbx_config *cfg;
    const char *dir; /* the plugin directory */
    const char *provider;
    char *state;
    char *policy_dir;
    char *libexec;
    char *definition;
    struct sbx_open_instance *oi; /* NULL: err says why */
    sbx_error_t *err;
    struct sbx_provider_info pi;
    int backlog;
    char isolation[384];
    char protected_text[1024];
    char unenforced[160];
    json_t *pools_json; /* a pool's own worktree_protect */
};

/* Parses `sbx info`'s options. Returns 0 or -1 (printed). */
static int info_parse(int argc, char **argv, const char **provider, int *json)
{
    static const struct option opts[] = {{"provider", required_argument, NULL, 'p'},
                                         {"json", no_argument, NULL, 'j'},
                                         {NULL, 0, NULL, 0}};
    struct sbx_args a = {.cmd = "info", .opts = opts, .argc = argc, .argv = argv};
    int c;

    while ((c = sbx_args_next(&a)) != -1) {
        if (c == 'p') {
            *provider = optarg;
        }
        else if (c == 'j') {
            *json = 1;
        }
        else {
            return -1;
        }
    }
    return sbx_args_operands(&a, 0, 0, "") < 0 ? -1 : 0;
}

/* (added) what a worktree keeps from the sandbox (docs/tasks.md, "Worktrees"):
 * the configured list into j and in->protected_text, each pool's own list
 * (pools.NAME.worktree_protect) into in->pools_json. */
static void info_protect(struct info *in, json_t *j)
{
    const struct sbx_config *cfg = in->cfg;
    const char *const *g =
        cfg->worktree_protect ? (const char *const *)cfg->worktree_protect : sbx_protect_default;
    json_t *arr = json_array();

    in->protected_text[0] = '\0';
    for (size_t i = 0; g[i] != NULL; i++) {
        size_t used = strlen(in->protected_text);

        json_array_append_new(arr, json_string(g[i]));
        snprintf(in->protected_text + used, sizeof(in->protected_text) - used, "%s%s", i ? " " : "",
                 g[i]);
    }
    json_object_set_new(j, "worktree_protect", arr);
    in->pools_json = json_object();
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
        json_object_set_new(in->pools_json, cfg->pools[p].name, parr);
    }
    json_object_set(j, "worktree_protect_pools", in->pools_json);
}

/* What the reachable provider reports of its engine, into j; the isolation
 * and the limits it does not enforce as text. */
static void info_engine(struct info *in, json_t *j)
{
    const struct sbx_provider_info *pi = &in->pi;

    json_object_set_new(j, "engine", json_string(pi->engine));
    json_object_set_new(j, "userns", pi->userns < 0 ? json_null() : json_boolean(pi->userns));
    json_object_set_new(j, "disk_limit", json_string(pi->disk_limit));
    in->backlog = sbx_removal_backlog(in->oi, NULL);
    json_object_set_new(j, "removal_backlog",
                        in->backlog < 0 ? json_null() : json_integer(in->backlog));
    json_object_set_new(j, "nested_containers",
                        pi->nested[0] ? json_string(pi->nested) : json_null());
    json_object_set_new(j, "seccomp", pi->seccomp[0] ? json_string(pi->seccomp) : json_null());
    json_object_set_new(j, "worktree", pi->worktree[0] ? json_string(pi->worktree) : json_null());
    sbx_caps_describe(in->oi, &in->pi, &in->cfg->limits, j, in->isolation, sizeof(in->isolation));
    sbx_caps_text(sbx_caps_wanted(&in->cfg->limits) &
                      ~sbx_caps_enforced(sbx_instance_provider(in->oi)->flags, &in->pi) &
                      (SBX_CAP_MEMORY | SBX_CAP_CPUS | SBX_CAP_PIDS | SBX_CAP_DISK),
                  in->unenforced, sizeof(in->unenforced));
}

/* The configuration in force and the provider, the JSON object's first fields. */
static json_t *info_config_json(const struct info *in)
{
    const struct sbx_config *cfg = in->cfg;
    json_t *j;

    j = json_pack("{s:s, s:s?, s:s, s:s?, s:s, s:s, s:{s:f, s:I, s:I, s:I, s:I, s:I}, s:i}",
                  "version", SBX_VERSION, "config", cfg->path, "plugin_dir", in->dir, "state_dir",
                  in->state, "image", cfg->image, "provider", in->provider, "limits", "cpus",
                  cfg->limits.cpus, "memory", (json_int_t)cfg->limits.memory, "disk",
                  (json_int_t)cfg->limits.disk, "pids", (json_int_t)cfg->limits.pids, "idle",
                  (json_int_t)cfg->limits.idle, "max", (json_int_t)cfg->limits.max, "max_sandboxes",
                  cfg->box.max_sandboxes);
    json_object_set_new(j, "policy_dir",
                        in->policy_dir ? json_string(in->policy_dir) : json_null());
    json_object_set_new(j, "libexec_dir", in->libexec ? json_string(in->libexec) : json_null());
    json_object_set_new(j, "image_definition",
                        in->definition ? json_string(in->definition) : json_null());
    return j;
}

/* The text of the reachable provider's engine and of what a worktree keeps. */
static void info_print_engine(const struct info *in)
{
    const struct sbx_provider_info *pi = &in->pi;
    const char *pname;
    json_t *parr;

    printf("engine:      %s\nuser ns:     %s\ndisk cap:    %s\n", pi->engine,
           pi->userns < 0 ? "unknown"
           : pi->userns   ? "on"
                          : "OFF (see docs/operations.md)",
           pi->disk_limit[0] ? pi->disk_limit : "not reported");
    if (in->backlog >= 0) {
        printf("removal:     %d sandbox%s killed and waiting for the engine's removal "
               "(in the background; /healthz says so past %d)\n",
               in->backlog, in->backlog == 1 ? "" : "es", SBX_REMOVAL_BACKLOG_MAX);
    }
    printf("nested:      %s\n", pi->nested[0] ? pi->nested : "none");
    printf("seccomp:     %s\n", pi->seccomp[0] ? pi->seccomp : "not reported");
    printf("isolation:   %s\n", in->isolation);
    printf("worktree:    %s\n", pi->worktree[0] ? pi->worktree : "plain bind mount");
    printf("protected:   %s (read-only inside; made inside: quarantined)\n",
           in->protected_text[0] ? in->protected_text : "none (worktree.protect = [])");
    json_object_foreach(in->pools_json, pname, parr)
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
    printf("git:         the sandbox's own .git; the host takes back the task's branch "
           "only\n");
}

/* The text of all of it (j for the box's part, info_box.c). */
static void info_print_text(const struct info *in, json_t *j)
{
    const struct sbx_config *cfg = in->cfg;
    char mem[32];
    char disk[32];

    sbx_size_format(cfg->limits.memory, mem, sizeof(mem));
    sbx_size_format(cfg->limits.disk, disk, sizeof(disk));
    printf("sbx %s\nconfig:      %s\nplugin dir:  %s\npolicy dir:  %s\nhelpers:     %s\n"
           "state dir:   %s\nimage:       %s\ndefinition:  %s\n"
           "limits:      %.2f CPUs, %s memory, %s disk, %lld pids, idle %llds, max %llds%s%s%s\n"
           "box:         at most %d sandboxes\nprovider:    %s\n",
           SBX_VERSION, cfg->path ? cfg->path : "(built-in defaults)", in->dir,
           in->policy_dir ? in->policy_dir : "(not found)", in->libexec ? in->libexec : "?",
           in->state ? in->state : "?", cfg->image,
           in->definition ? in->definition : "(none found)", cfg->limits.cpus, mem, disk,
           (long long)cfg->limits.pids, (long long)cfg->limits.idle, (long long)cfg->limits.max,
           in->unenforced[0] ? " (NOT ENFORCED: " : "", in->unenforced,
           in->unenforced[0] ? ")" : "", cfg->box.max_sandboxes, in->provider);
    sbx_info_box(cfg, in->state, j, 1);
    if (in->oi != NULL) {
        info_print_engine(in);
    }
    else {
        printf("engine:      unreachable: %s\n", sbx_error_msg(in->err));
    }
}

int sbx_cmd_info(struct sbx_cli *cli, int argc, char **argv)
{
    struct info in = {.pi = {.userns = -1}, .backlog = -1};
    const char *provider = NULL;
    json_t *j;
    int json = 0;
    int rc = SBX_EXIT_OK;

    if (info_parse(argc, argv, &provider, &json) < 0) {
        return SBX_EXIT_USAGE;
    }
    in.cfg = sbx_cli_config(cli);
    in.dir = in.cfg ? sbx_cli_plugin_dir(cli) : NULL;
    if (in.dir == NULL) {
        return SBX_EXIT_USAGE;
    }
    in.provider = provider ? provider : in.cfg->provider;
    in.state = sbx_state_dir(in.cfg->state_dir, NULL);
    in.policy_dir = sbx_policy_dir_resolve(in.cfg->policy_dir, NULL);
    in.libexec = sbx_asset_dir(SBX_ASSET_LIBEXEC);
    in.definition = sbx_image_def_find(NULL, NULL);
    in.oi = sbx_instance_open(in.cfg, in.dir, in.provider, SBX_PLUGIN_PROVIDER, &in.err);
    if (in.oi != NULL && sbx_instance_provider(in.oi)->info != NULL) {
        sbx_instance_provider(in.oi)->info(in.oi->ctx, &in.pi, NULL);
    }
    j = info_config_json(&in);
    sbx_info_box(in.cfg, in.state, j, 0);
    info_protect(&in, j);
    if (in.oi != NULL) {
        info_engine(&in, j);
    }
    else {
        json_object_set_new(j, "provider_error", json_string(sbx_error_msg(in.err)));
        rc = SBX_EXIT_FAIL;
    }
    if (json) {
        char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

        printf("%s\n", s);
        free(s);
    }
    else {
        info_print_text(&in, j);
    }
    json_decref(j);
    json_decref(in.pools_json);
    sbx_error_free(&in.err);
    sbx_instance_close(in.oi);
    free(in.state);
    free(in.policy_dir);
    free(in.libexec);
    free(in.definition);
    return rc;
}
