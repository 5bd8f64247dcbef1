/* docker_claim.c - the worktree of a claimed warm sandbox (docs/runner.md,
 * "Warm pool"). A warm sandbox is created before any task, so it cannot bind
 * a worktree. Instead its view directory is made a shared mount point on the
 * host and bound at /workspace with rslave propagation; when a task claims
 * the sandbox, its view of the worktree (idmapped when the engine remaps
 * users, as at create) is mounted on that point, and the running sandbox sees
 * it at /workspace. Unmounting the view directory (the core, at the task's
 * end) takes both away. A claim whose memory, CPUs or pids differ from the
 * warm sandbox's sets them with the engine's update call. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>

#include "docker.h"
#include "docker_idmap.h"

int dk_claim_prepare(struct dk_ctx *c, const char *view_dir, sbx_error_t **err)
{
    /* empty until the claim, and the sandbox's working directory meanwhile:
     * its (remapped) root must be able to enter it */
    if (chmod(view_dir, 0755) < 0) {
        return c->host->error_set(err, SBX_E_ENGINE, "docker: warm view %s: chmod: %s", view_dir,
                                  strerror(errno));
    }
    if (mount(view_dir, view_dir, NULL, MS_BIND, NULL) < 0) {
        return c->host->error_set(err, SBX_E_ENGINE, "docker: warm view %s: bind: %s", view_dir,
                                  strerror(errno));
    }
    if (mount(NULL, view_dir, NULL, MS_SHARED, NULL) < 0) {
        int e = errno;

        dk_worktree_release(view_dir);
        return c->host->error_set(err, SBX_E_ENGINE, "docker: warm view %s: make shared: %s",
                                  view_dir, strerror(e));
    }
    return 0;
}

int dk_claim_worktree(void *ctx, const char *sandbox_id, const char *worktree, const char *view_dir,
                      sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    struct sbx_sandbox_spec s = {.task_id = sandbox_id, .worktree = worktree, .view_dir = view_dir};
    const char *src = NULL;
    char why[512];
    int viewed = 0;

    if (worktree == NULL || view_dir == NULL) {
        return c->host->error_set(err, SBX_E_USAGE, "docker: claim of %.12s: no worktree or view",
                                  sandbox_id);
    }
    /* the same choice as at create: idmapped, pinned or (auto, no remap) plain */
    if (dk_worktree_source(c, &s, &src, &viewed, err) < 0) {
        return -1;
    }
    if (!viewed && dk_pinned_bind(worktree, view_dir, why, sizeof(why)) < 0) {
        return c->host->error_set(err, SBX_E_ENGINE, "docker: worktree %s: %s", worktree, why);
    }
    return 0;
}

int dk_update_limits(void *ctx, const char *sandbox_id, const struct sbx_limits *l,
                     sbx_error_t **err)
{
    struct dk_ctx *c = ctx;
    json_t *body;
    json_t *reply = NULL;
    long status = 0;
    char path[256];
    int r = 0;

    if (sandbox_id == NULL || l == NULL || l->memory <= 0 || l->cpus <= 0) {
        return c->host->error_set(err, SBX_E_USAGE, "docker: update: no sandbox or no limits");
    }
    snprintf(path, sizeof(path), "/containers/%.128s/update", sandbox_id);
    /* the same fields as at create (docker.c): memory with no swap beside it */
    body = json_pack("{s:I, s:I, s:I, s:I}", "NanoCpus", (json_int_t)(l->cpus * 1e9 + 0.5),
                     "Memory", (json_int_t)l->memory, "MemorySwap", (json_int_t)l->memory,
                     "PidsLimit", (json_int_t)l->pids);
    if (dk_request(c, "POST", path, body, &status, &reply, err) < 0) {
        json_decref(body);
        return -1;
    }
    json_decref(body);
    if (status != 200) {
        r = c->host->error_set(err, SBX_E_ENGINE, "docker: update of %.12s: HTTP %ld: %s",
                               sandbox_id, status, dk_reply_message(reply));
    }
    json_decref(reply);
    return r;
}
