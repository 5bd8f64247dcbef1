/* task_opts.h - the options shared by `sbx run`, `sbx task start` and
 * `sbx exec` (docs/architecture.md, Tasks). */
#ifndef SBX_CLI_TASK_OPTS_H
#define SBX_CLI_TASK_OPTS_H

#include "sandbox/task.h"

#define SBX_TASK_OPTS_HELP                                                                         \
    "Options:\n"                                                                                   \
    "  --task ID            task id (default: generated, t-<12 hex>)\n"                            \
    "  --provider NAME      provider instance (default: config 'provider', docker)\n"              \
    "  --credentials NAME   credential instance whose lease goes into every command's\n"           \
    "                       environment (values are redacted from output)\n"                       \
    "  --worktree DIR       host directory mounted at /workspace (the only host mount\n"           \
    "                       besides the read-only caches); under user remapping its\n"             \
    "                       owner is root inside (idmapped mount, docs/tasks.md); a\n"             \
    "                       repository gets its own .git inside and the host takes\n"              \
    "                       back only its branch (or detached HEAD) and each\n"                    \
    "                       submodule's HEAD; worktree.protect paths read-only;\n"                 \
    "                       on opensandbox only with its option host_mounts\n"                     \
    "  --pool ci|agent      slot pool (default agent)\n"                                           \
    "  --from SNAP          (task start) start from snapshot SNAP's files (sbx snapshot ls)\n"

struct sbx_task_cli {
    struct sbx_task_opts task;
    struct sbx_kv *env;
    size_t n_env;
    char **cmd; /* after "--", NULL-terminated, or NULL */
    int json;
    const char *from;   /* (added) task start --from SNAP */
    char from_ref[160]; /* (added) its image, once resolved (cmd_snapshot.c) */
};

/* mode 0: task start (no command), 1: run, 2: exec (only --env, --json). Prints the
 * error itself; returns -1 on bad usage. */
int sbx_task_cli_parse(struct sbx_task_cli *o, int argc, char **argv, int mode);
void sbx_task_cli_fini(struct sbx_task_cli *o);
/* Checks K=V; fills kv (pointing into s, which it modifies). */
int sbx_env_arg_parse(char *s, struct sbx_kv *kv, sbx_error_t **err);

#endif
