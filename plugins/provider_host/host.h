/* host.h - provider_host: commands as plain processes on the box, in the
 * task's worktree, with no isolation at all (ADR 0287 decision 13's "box with
 * worktrees", the column `sbx spike` compares the sandboxes against). It
 * declares no capability, so the core runs it only for an instance configured
 * `unisolated = true` (docs/plugins.md walks through this source). */
#ifndef SBX_PROVIDER_HOST_H
#define SBX_PROVIDER_HOST_H

#include <pthread.h>
#include <sys/types.h>

#include "sbx/sbx_provider.h"
#include "sbx/sbx_util.h"

#define HX_NAME "provider_host"
#define HX_ID_MAX 128

/* One exec in flight in this process: cancel() and destroy() kill its group. */
struct hx_run {
    pid_t pgid; /* 0 until the child runs, then its process group */
    int done;   /* the group was killed or reaped: never signal it again */
    char sandbox[HX_ID_MAX];
    struct hx_run *next;
};

struct hx_ctx {
    const struct sbx_host_api *host;
    const char *instance;
    char *root; /* <root>/<sandbox id>/ holds each sandbox (host_store.c) */
    pthread_mutex_t mu;
    struct hx_run *runs; /* execs in flight, under mu */
};

/* host_store.c: sandboxes on disk, so another sbx process can reach them */
/* host-<task id>-<8 hex digits>, the task id by the SDK's SBX_ID_TASK rule */
int hx_id_valid(const char *id);
int hx_root_prepare(struct hx_ctx *c, sbx_error_t **err);
int hx_store_create(struct hx_ctx *c, const struct sbx_sandbox_spec *spec, char *id, size_t id_size,
                    sbx_error_t **err);
/* The directory commands run in (the worktree, or the sandbox's own work
 * directory); malloc'd. */
char *hx_store_cwd(struct hx_ctx *c, const char *id, sbx_error_t **err);
int hx_store_remove(struct hx_ctx *c, const char *id, sbx_error_t **err);
int hx_store_list(struct hx_ctx *c, const char *key, const char *value, sbx_sandbox_fn fn, void *ud,
                  sbx_error_t **err);

/* host_exec.c */
int hx_exec(void *ctx, const char *sandbox_id, const struct sbx_exec_spec *spec,
            struct sbx_exec_ctl *ctl, int *exit_status, sbx_error_t **err);
void hx_cancel(void *ctx, struct sbx_exec_ctl *ctl);
/* Kills the groups of this sandbox's execs in flight (destroy). */
void hx_kill_sandbox(struct hx_ctx *c, const char *sandbox_id);

#endif
