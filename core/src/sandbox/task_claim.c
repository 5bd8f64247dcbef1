/* task_claim.c - a warm sandbox becomes a task's (docs/runner.md, "Warm
 * pool"). The runner starts warm tasks with no task of their own: their egress
 * socket denies everything, they hold no lease. A claim gives one to exactly
 * one task, once: the policy decides again for that task, and what it decides
 * goes where the sandbox sees it (the egress rules on its socket, the lease's
 * values in each exec's environment); a sandbox whose shape differs from what
 * the task needs is not claimed (the caller starts one cold). The sandbox's
 * labels keep the warm id: its owner is the runner either way (the orphan rule
 * of docs/architecture.md, Labels, does not look at the task). */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "plugin/host.h"
#include "sandbox/task.h"
#include "sandbox/task_int.h"
#include "sandbox/wtgit.h"
#include "sandbox/statedir.h"
#include "sandbox/task_egress.h"
#include "sandbox/view.h"
#include "util/log.h"
#include "util/xalloc.h"

static int64_t claim_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void free_rules(struct sbx_task *t)
{
    for (size_t i = 0; t->egress_allow != NULL && t->egress_allow[i] != NULL; i++) {
        free(t->egress_allow[i]);
    }
    free(t->egress_allow);
    t->egress_allow = NULL;
    free(t->decided_by);
    t->decided_by = NULL;
}

/* The limits the sandbox was created with are the ones the task gets. */
static int same_shape(const struct sbx_limits *a, const struct sbx_limits *b)
{
    double d = a->cpus - b->cpus;

    return d < 0.0005 && d > -0.0005 && a->memory == b->memory && a->pids == b->pids &&
           a->disk == b->disk;
}

/* (added) Only the memory, CPUs or pids differ: the provider's update call
 * sets the task's on the running sandbox (the record says "resized"). 0:
 * resized; 1: another shape (the disk differs, or no update op): start cold;
 * -1 with *err: the update failed (the caller ends the sandbox, starts cold). */
static int resize(struct sbx_task *t, const struct sbx_limits *created, sbx_error_t **err)
{
    const struct sbx_provider_ops *ops = sbx_instance_provider(t->prov);
    int64_t t0 = claim_ms();

    if (created->disk != t->limits.disk || ops->update_limits == NULL) {
        sbx_debug("task %s: warm sandbox %.12s has another shape (disk %lld/%lld%s)", t->id,
                  t->sandbox, (long long)created->disk, (long long)t->limits.disk,
                  ops->update_limits == NULL ? ", the provider cannot resize" : "");
        return 1;
    }
    if (ops->update_limits(t->prov->ctx, t->sandbox, &t->limits, err) < 0) {
        return sbx_error_wrap(err, "task %s: resizing warm sandbox %.12s", t->id, t->sandbox);
    }
    t->resized = 1;
    sbx_debug("task %s: claim: warm sandbox %.12s resized in %lld ms (cpus %.3g -> %.3g, memory "
              "%lld -> %lld, pids %lld -> %lld)",
              t->id, t->sandbox, (long long)(claim_ms() - t0), created->cpus, t->limits.cpus,
              (long long)created->memory, (long long)t->limits.memory, (long long)created->pids,
              (long long)t->limits.pids);
    return 0;
}

/* The task's worktree, checked as at start, mounted by the provider on the
 * sandbox's shared /workspace mount point (its view directory). */
static int claim_worktree(struct sbx_task *t, const char *worktree, sbx_error_t **err)
{
    char *view;
    int rc;

    if (sbx_worktree_check(worktree, t->state, &t->worktree, err) < 0) {
        return -1;
    }
    sbx_task_since_write(t->dir); /* (added) the worktree's scan counts from here */
    view = xasprintf("%s/" SBX_VIEW_NAME, t->dir);
    rc = sbx_instance_provider(t->prov)->claim_worktree(t->prov->ctx, t->sandbox, t->worktree, view,
                                                        err);
    free(view);
    if (rc < 0) {
        return sbx_error_wrap(err, "task %s: worktree of the claimed sandbox", t->id);
    }
    sbx_task_wtwatch_start(t); /* (added) */
    return 0;
}

int sbx_task_claim(struct sbx_task *t, const char *plugin_dir, const struct sbx_task_opts *o,
                   sbx_error_t **err)
{
    const char *provider = o->provider ? o->provider : t->cfg->provider;
    struct sbx_limits created = t->limits;
    int64_t t0 = claim_ms();
    int stopped;

    pthread_mutex_lock(&t->mu);
    stopped = t->stop || t->running > 0;
    pthread_mutex_unlock(&t->mu);
    /* (added) a repository's worktree needs its git mounts at create (wtgit.h): cold */
    if (stopped ||
        (o->worktree != NULL &&
         (!t->warm_view || sbx_wtgit_needs_cold(o->worktree, sbx_task_protect(t)))) ||
        o->nested_containers || strcmp(provider, t->prov->cfg->name) != 0 ||
        strcmp(o->pool ? o->pool : "agent", t->pool)) {
        return 1;
    }
    if (o->task_id == NULL || !sbx_id_valid(o->task_id, SBX_ID_TASK)) {
        return sbx_error_set(err, SBX_E_USAGE, "claiming warm task %s: no valid task id", t->id);
    }
    pthread_mutex_lock(&t->mu);
    snprintf(t->id, sizeof(t->id), "%s", o->task_id);
    snprintf(t->job, sizeof(t->job), "%s", o->job_id ? o->job_id : t->id);
    pthread_mutex_unlock(&t->mu);
    free_rules(t);
    t->limits = t->cfg->limits;
    if (sbx_task_decide(t, o, provider, err) < 0 || sbx_task_clamp_cpus(t, err) < 0) {
        return -1;
    }
    sbx_debug("task %s: claim: policy decided in %lld ms", t->id, (long long)(claim_ms() - t0));
    if (!same_shape(&created, &t->limits)) {
        int rs = resize(t, &created, err); /* 1: another shape (cold), -1: failed */

        if (rs != 0) {
            return rs;
        }
    }
    if (o->slot_class != NULL) {
        snprintf(t->slot_class, sizeof(t->slot_class), "%s", o->slot_class);
    }
    if (o->worktree != NULL && claim_worktree(t, o->worktree, err) < 0) {
        return -1;
    }
    if (sbx_task_egress_claim(t, err) < 0) {
        return -1;
    }
    if (o->credentials != NULL &&
        sbx_task_lease(t, plugin_dir, o->credentials, o->client, err) < 0) {
        return -1;
    }
    sbx_debug("task %s: claim: egress and lease after %lld ms", t->id,
              (long long)(claim_ms() - t0));
    t->ephemeral = o->ephemeral;
    t->warm = 1;
    pthread_mutex_lock(&t->mu);
    t->started_at = time(NULL);
    t->last_activity = t->started_at;
    pthread_mutex_unlock(&t->mu);
    /* not synced: a claimed task is not re-adopted after a crash, and the
     * recovery removes a w- directory whose record names a dead owner or
     * does not parse (runner_warm_sweep) */
    if (sbx_task_record_write_nosync(t, "running", err) < 0) {
        return -1;
    }
    sbx_info("task %s: claimed warm sandbox %.12s (%s)", t->id, t->sandbox, t->dir_id);
    return 0;
}

int sbx_task_warm(const struct sbx_task *t)
{
    return t->warm;
}

int sbx_task_resized(const struct sbx_task *t)
{
    return t->resized;
}
