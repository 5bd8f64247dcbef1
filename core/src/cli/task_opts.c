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
        sbx_error_t *err = NULL;

        if (c == '?') {
            goto fail;
        }
        if (mode == 2 && c != 'e' && c != 'j') {
            fprintf(stderr, "sbx: error: exec: '%s' is an option of 'sbx task start'\n",
                    argv[optind - 1]);
            goto fail;
        }
        switch (c) {
        case 't':
            o->task.task_id = optarg;
            break;
        case 'p':
            o->task.provider = optarg;
            break;
        case 'c':
            o->task.credentials = optarg;
            break;
        case 'w':
            o->task.worktree = optarg;
            break;
        case 'P':
            if (strcmp(optarg, "ci") != 0 && strcmp(optarg, "agent") != 0) {
                fprintf(stderr, "sbx: error: %s: --pool '%s': use ci or agent\n", name, optarg);
                goto fail;
            }
            o->task.pool = optarg;
            break;
        case 'e':
            if (mode == 0) {
                fprintf(stderr, "sbx: error: task start: --env belongs to 'sbx exec'\n");
                goto fail;
            }
            o->env = xrealloc(o->env, (o->n_env + 1) * sizeof(*o->env));
            if (sbx_env_arg_parse(optarg, &o->env[o->n_env], &err) < 0) {
                fprintf(stderr, "sbx: error: %s: %s\n", name, err->msg);
                sbx_error_free(&err);
                goto fail;
            }
            o->n_env++;
            break;
        case 'j':
            o->json = 1;
            break;
        case 'F':
            if (mode != 0) {
                fprintf(stderr, "sbx: error: %s: --from belongs to 'sbx task start'\n", name);
                goto fail;
            }
            o->from = optarg;
            break;
        default:
            goto fail;
        }
    }
    if (optind < argc) {
        if (mode == 0) {
            fprintf(stderr, "sbx: error: task start: unexpected argument '%s'\n", argv[optind]);
            goto fail;
        }
        if (strcmp(argv[optind - 1], "--") != 0) {
            fprintf(stderr, "sbx: error: %s: put the command after '--' (sbx %s ... -- %s)\n", name,
                    name, argv[optind]);
            goto fail;
        }
        o->cmd = argv + optind;
    }
    if (o->cmd != NULL && (o->cmd[0] == NULL || o->cmd[0][0] == '\0')) {
        o->cmd = NULL;
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
