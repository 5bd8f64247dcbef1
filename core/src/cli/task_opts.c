/* task_opts.c - parsing the task options shared by run, task start, exec. */
#include "cli/task_opts.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/args.h"
#include "util/envname.h"
#include "util/xalloc.h"

int sbx_env_arg_parse(char *s, struct sbx_kv *kv, sbx_error_t **err)
{
    char *eq = strchr(s, '=');

    if (eq == NULL || eq == s) {
        return sbx_error_set(err, SBX_E_USAGE, "bad --env '%.*s': expected NAME=VALUE", eq ? 0 : 64,
                             s);
    }
    if (!sbx_env_name_valid(s, (size_t)(eq - s))) {
        return sbx_error_set(err, SBX_E_USAGE, "bad --env name '%.*s': " SBX_ENV_NAME_RULE,
                             (int)(eq - s), s);
    }
    *eq = '\0';
    kv->name = s;
    kv->value = eq + 1;
    return 0;
}

/* One option c (its value in optarg) of a command of mode into o. -1 having
 * said why. */
static int task_cli_option(struct sbx_task_cli *o, int c, int mode, const char *name)
{
    sbx_error_t *err = NULL;

    switch (c) {
    case 't':
        o->task.task_id = optarg;
        return 0;
    case 'p':
        o->task.provider = optarg;
        return 0;
    case 'c':
        o->task.credentials = optarg;
        return 0;
    case 'w':
        o->task.worktree = optarg;
        return 0;
    case 'P':
        if (strcmp(optarg, "ci") != 0 && strcmp(optarg, "agent") != 0) {
            fprintf(stderr, "sbx: error: %s: --pool '%s': use ci or agent\n", name, optarg);
            return -1;
        }
        o->task.pool = optarg;
        return 0;
    case 'e':
        if (mode == 0) {
            fprintf(stderr, "sbx: error: task start: --env belongs to 'sbx exec'\n");
            return -1;
        }
        o->env = xrealloc(o->env, (o->n_env + 1) * sizeof(*o->env));
        if (sbx_env_arg_parse(optarg, &o->env[o->n_env], &err) < 0) {
            fprintf(stderr, "sbx: error: %s: %s\n", name, err->msg);
            sbx_error_free(&err);
            return -1;
        }
        o->n_env++;
        return 0;
    case 'j':
        o->json = 1;
        return 0;
    case 'F':
        if (mode != 0) {
            fprintf(stderr, "sbx: error: %s: --from belongs to 'sbx task start'\n", name);
            return -1;
        }
        o->from = optarg;
        return 0;
    default:
        return -1;
    }
}

/* The command after the options (argv[optind...], after "--"): o->cmd, NULL
 * when none or empty. -1 having said why. */
static int task_cli_command(struct sbx_task_cli *o, int argc, char **argv, int mode,
                            const char *name)
{
    if (optind < argc) {
        if (mode == 0) {
            fprintf(stderr, "sbx: error: task start: unexpected argument '%s'\n", argv[optind]);
            return -1;
        }
        if (strcmp(argv[optind - 1], "--") != 0) {
            fprintf(stderr, "sbx: error: %s: put the command after '--' (sbx %s ... -- %s)\n", name,
                    name, argv[optind]);
            return -1;
        }
        o->cmd = argv + optind;
    }
    if (o->cmd != NULL && (o->cmd[0] == NULL || o->cmd[0][0] == '\0')) {
        o->cmd = NULL;
    }
    return 0;
}

int sbx_task_cli_parse(struct sbx_task_cli *o, int argc, char **argv, int mode)
{
    static const struct option all[] = {
        {"task", required_argument, NULL, 't'},
        {"provider", required_argument, NULL, 'p'},
        {"credentials", required_argument, NULL, 'c'},
        {"worktree", required_argument, NULL, 'w'},
        {"pool", required_argument, NULL, 'P'},
        {"env", required_argument, NULL, 'e'},
        {"json", no_argument, NULL, 'j'},
        {"from", required_argument, NULL, 'F'}, /* (added) task start --from SNAP */
        {NULL, 0, NULL, 0},
    };
    const char *name = mode == 0 ? "task start" : mode == 1 ? "run" : "exec";
    struct sbx_args a = {.cmd = name,
                         .help = mode == 0 ? "task" : name,
                         .opts = all,
                         .in_order = 1,
                         .argc = argc,
                         .argv = argv};
    int c;

    memset(o, 0, sizeof(*o));
    while ((c = sbx_args_next(&a)) != -1) {
        if (c == '?') {
            goto fail;
        }
        if (mode == 2 && c != 'e' && c != 'j') {
            fprintf(stderr, "sbx: error: exec: '%s' is an option of 'sbx task start'\n",
                    argv[optind - 1]);
            goto fail;
        }
        if (task_cli_option(o, c, mode, name) < 0) {
            goto fail;
        }
    }
    if (task_cli_command(o, argc, argv, mode, name) < 0) {
        goto fail;
    }
    return 0;
fail:
    sbx_task_cli_fini(o);
    return -1;
}

void sbx_task_cli_fini(struct sbx_task_cli *o)
{
    free(o->env);
    o->env = NULL;
    o->n_env = 0;
}
