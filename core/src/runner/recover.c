/* recover.c - the runner's start after a crash or a restart (docs/runner.md,
 * "Store and recovery"): queued jobs are re-submitted in submit order, tasks
 * whose sandbox survived with no command in flight are re-adopted, the rest
 * are cleaned up. The runner process owns its sandboxes (sbx.owner), so a
 * previous runner's sandboxes are orphans once it is gone. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/instance.h"
#include "runner/jobstate.h"
#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/jobs.h"
#include "runner/recover.h"
#include "runner/rtask.h"
#include "runner/worker.h"
#include "runner/warm.h"
#include "sandbox/owner.h"
#include "sandbox/snapshot.h"
#include "sandbox/statedir.h"
#include "sandbox/view.h"
#include "util/log.h"
#include "util/xalloc.h"

struct provs {
    struct sbx_runner *r;
    char *names[8];
    struct sbx_open_instance *inst[8];
    size_t n;
};

static struct sbx_open_instance *prov_get(struct provs *p, const char *name)
{
    sbx_error_t *err = NULL;

    if (name == NULL) {
        name = p->r->cfg->provider;
    }
    for (size_t i = 0; i < p->n; i++) {
        if (strcmp(p->names[i], name) == 0) {
            return p->inst[i];
        }
    }
    if (p->n == 8) {
        return NULL;
    }
    p->inst[p->n] = sbx_instance_open(p->r->cfg, p->r->plugin_dir, name, SBX_PLUGIN_PROVIDER, &err);
    if (p->inst[p->n] == NULL) {
        sbx_warn("runner: recovery: provider '%s': %s", name, sbx_error_msg(err));
        sbx_error_free(&err);
        return NULL;
    }
    p->names[p->n] = xstrdup(name);
    return p->inst[p->n++];
}

struct found {
    const char *want; /* sandbox id to find */
    int present;
    char **ids;   /* orphans collected (owner gone) */
    char **tasks; /* each one's sbx.task label, or NULL */
    size_t n;
};

static void on_sandbox(void *ud, const char *id, const struct sbx_kv *labels, size_t n)
{
    struct found *f = ud;
    const char *owner = NULL;
    const char *task = NULL;

    if (f->want != NULL && (strcmp(id, f->want) == 0 || strncmp(id, f->want, strlen(id)) == 0 ||
                            strncmp(f->want, id, strlen(f->want)) == 0)) {
        f->present = 1;
    }
    for (size_t i = 0; i < n; i++) {
        if (strcmp(labels[i].name, "sbx.owner") == 0) {
            owner = labels[i].value;
        }
        else if (strcmp(labels[i].name, "sbx.task") == 0) {
            task = labels[i].value;
        }
    }
    if (owner != NULL && f->want == NULL && !sbx_owner_alive(owner)) {
        f->ids = xrealloc(f->ids, (f->n + 1) * sizeof(char *));
        f->tasks = xrealloc(f->tasks, (f->n + 1) * sizeof(char *));
        f->ids[f->n] = xstrdup(id);
        f->tasks[f->n++] = task ? xstrdup(task) : NULL;
    }
}

static void found_clear(struct found *f)
{
    for (size_t i = 0; i < f->n; i++) {
        free(f->ids[i]);
        free(f->tasks[i]);
    }
    free(f->ids);
    free(f->tasks);
}

static int present(void *ctx, const char *provider, const char *sandbox_id)
{
    struct sbx_open_instance *pi = prov_get(ctx, provider);
    struct found f = {.want = sandbox_id};
    sbx_error_t *err = NULL;

    if (pi == NULL || sandbox_id == NULL) {
        return -1;
    }
    if (sbx_instance_provider(pi)->list(pi->ctx, "sbx.owner", NULL, on_sandbox, &f, &err) < 0) {
        sbx_warn("runner: recovery: listing sandboxes: %s", sbx_error_msg(err));
        sbx_error_free(&err);
        found_clear(&f);
        return -1;
    }
    found_clear(&f);
    return f.present;
}

/* 1 when this runner holds the task (a kept task re-adopted at recovery:
 * its sandbox's labels still name the runner that is gone). */
static int held(struct sbx_runner *r, const char *task)
{
    int yes;

    if (task == NULL) {
        return 0;
    }
    pthread_mutex_lock(&r->mu);
    yes = runner_task_find(r, task) != NULL;
    pthread_mutex_unlock(&r->mu);
    return yes;
}

int runner_destroy_orphans(struct sbx_runner *r, struct sbx_open_instance *pi, const char *key,
                           const char *value, sbx_error_t **err)
{
    struct found f = {0};
    sbx_error_t *e = NULL;
    int removed = 0;
    int bad_scope = 0;
    const char *scope = sbx_owner_test_scope(&bad_scope);

    if (bad_scope && value == NULL) {
        return 0; /* a bad test scope sweeps nothing (its tasks fail on it) */
    }
    if (scope != NULL && value == NULL) {
        key = "sbx.test"; /* every gone owner's: under a test scope, only that test's (owner.h) */
        value = scope;
    }
    if (sbx_instance_provider(pi)->list(pi->ctx, key, value, on_sandbox, &f, err) < 0) {
        found_clear(&f);
        return sbx_error_wrap(err, "listing sandboxes");
    }
    for (size_t i = 0; i < f.n; i++) {
        if (held(r, f.tasks[i])) {
            continue;
        }
        if (sbx_instance_provider(pi)->destroy(pi->ctx, f.ids[i], &e) < 0) {
            sbx_warn("runner: removing sandbox %.12s (its runner is gone): %s", f.ids[i],
                     sbx_error_msg(e));
            sbx_error_free(&e);
        }
        else {
            sbx_info("runner: removed sandbox %.12s (its runner is gone)", f.ids[i]);
            removed++;
        }
    }
    found_clear(&f);
    return removed;
}

/* At recovery: a failed list is a warning (the periodic sweep tries again). */
static void destroy_orphans(struct sbx_runner *r, struct sbx_open_instance *pi, const char *key,
                            const char *value)
{
    sbx_error_t *err = NULL;

    if (runner_destroy_orphans(r, pi, key, value, &err) < 0) {
        sbx_warn("runner: recovery: %s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
}

/* (added, issue 30) A queued job's image when it is a snapshot's (the job came
 * with `from`): a copy, else NULL (the job takes the configured image). */
static char *snapshot_image(struct sbx_runner *r, const char *image)
{
    sbx_error_t *e = NULL;
    char *state = image ? sbx_state_dir(r->cfg->state_dir, &e) : NULL;
    json_t *all = state ? sbx_snapshot_list(state, NULL) : NULL;
    json_t *rec;
    char *out = NULL;
    size_t i;

    json_array_foreach(all, i, rec)
    {
        if (out == NULL &&
            strcmp(json_string_value(json_object_get(rec, "ref")) ?: "", image) == 0) {
            out = xstrdup(image);
        }
    }
    json_decref(all);
    free(state);
    sbx_error_free(&e);
    return out;
}

struct rjob *runner_job_from_rec(const struct sbx_job_rec *rec)
{
    struct rjob *j = runner_job_new();
    struct rjob_req *q = rjob_req_fill(j); /* (changed, issue 31) rjob.h */
    size_t n = json_array_size(rec->argv);

    snprintf(q->id, sizeof(q->id), "%s", rec->id);
    snprintf(q->task, sizeof(q->task), "%s", rec->task ? rec->task : rec->id);
    snprintf(q->owner, sizeof(q->owner), "%s", rec->client ? rec->client : "");
    q->pool = (enum sbx_pool)sbx_pool_parse(rec->pool);
    q->cls = (enum sbx_job_class)sbx_job_class_parse(rec->cls);
    q->argv = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        q->argv[i] = xstrdup(json_string_value(json_array_get(rec->argv, i)));
    }
    q->worktree = rec->worktree ? xstrdup(rec->worktree) : NULL;
    q->provider = rec->provider ? xstrdup(rec->provider) : NULL;
    q->env = rec->env ? json_deep_copy(rec->env) : NULL;
    return j; /* new: its caller moves it (RJOB_QUEUED, RJOB_ADOPTED) */
}

/* The task started its own sandbox: its directory carries its id. */
static int own_dir(struct sbx_runner *r, const char *task)
{
    sbx_error_t *e = NULL;
    char *state = sbx_state_dir(r->cfg->state_dir, &e);
    char *dir = state ? sbx_task_dir(state, task) : NULL;
    int ok = dir != NULL && access(dir, F_OK) == 0;

    sbx_error_free(&e);
    free(dir);
    free(state);
    return ok;
}

static void adopt(struct sbx_runner *r, struct sbx_recovery *rec)
{
    for (size_t i = 0; i < rec->n_adopt; i++) {
        struct sbx_recovered_task *a = &rec->adopt[i];
        struct sbx_task_rec tr = {0};
        struct sbx_task_opts o = {.task_id = a->task_id,
                                  .provider = a->provider,
                                  .ephemeral = 1,
                                  .no_reap = 1,
                                  .egress = r->egress};
        struct sbx_sched_job sj = {.id = a->task_id,
                                   .task = a->task_id,
                                   .cls = SBX_CLASS_LIGHT,
                                   .cpus = r->cfg->limits.cpus,
                                   .memory = r->cfg->limits.memory};
        struct sbx_task *task = NULL;
        struct rtask *t;
        sbx_error_t *err = NULL;

        if (sbx_store_task_get(r->store, a->task_id, &tr, &err) == 0 && tr.pool != NULL) {
            sj.pool = (enum sbx_pool)sbx_pool_parse(tr.pool);
            o.pool = sbx_pool_name(sj.pool);
        }
        sbx_task_rec_clear(&tr);
        sbx_error_free(&err);
        if (!own_dir(r, a->task_id)) {
            /* (added) a claimed warm sandbox (its directory is the warm one's):
             * not re-adopted, the orphan sweep below removes it */
            sbx_store_task_end(r->store, a->task_id, SBX_TASK_INTERRUPTED,
                               "runner restarted; a claimed warm sandbox is not re-adopted", 0,
                               NULL);
            continue;
        }
        if (sbx_task_adopt(r->cfg, r->plugin_dir, &o, a->sandbox_id, &task, &err) < 0 ||
            sbx_sched_adopt(r->sched, &sj, runner_now(r), &err) < 0) {
            sbx_warn("runner: recovery: task %s cannot be re-adopted: %s", a->task_id,
                     sbx_error_msg(err));
            sbx_store_task_end(r->store, a->task_id, SBX_TASK_INTERRUPTED,
                               "runner restarted; could not re-adopt", 0, NULL);
            sbx_error_free(&err);
            if (task != NULL) {
                sbx_task_end(task, "runner restarted; could not re-adopt", NULL, NULL);
            }
            continue;
        }
        t = rtask_new(&(struct rtask_init){
            .id = a->task_id,
            .holder = a->task_id,
            .owner = NULL, /* unknown: the unix socket's alone (submit.c) */
            .pool = sj.pool,
            .keep = 1,
            .holder_result = SBX_RESULT_OK,
        });
        runner_task_move(r, t, RTASK_ADOPTED, &(struct rtask_move){.t = task}, NULL);
        runner_jobtab_add_task(&r->tab, t);
        sbx_info("runner: recovery: task %s re-adopted", rtask_id(t));
    }
    /* running jobs whose command had not started: run it in the re-adopted task */
    for (size_t i = 0; i < rec->n_adopt_jobs; i++) {
        struct rjob *j = runner_job_from_rec(&rec->adopt_jobs[i]);
        struct rtask *t = runner_task_find(r, rjob_req(j)->task);

        if (t == NULL) {
            sbx_store_job_end(r->store, rjob_id(j),
                              &(struct sbx_job_end){
                                  SBX_JOB_INTERRUPTED, -1,
                                  "runner restarted; its task could not be re-adopted", 0, 0, 0},
                              NULL);
            runner_job_free(j);
            continue;
        }
        rjob_set_rtask(j, t);
        runner_job_move(r, j, RJOB_ADOPTED, NULL, NULL);
        rtask_enter(t);
        runner_job_link(r, j);
        if (runner_worker_start(r, j) < 0) {
            rtask_leave(t);
            runner_job_move(r, j, RJOB_INTERRUPTED,
                            &(struct rjob_move){.reason = "runner: cannot start a worker thread"},
                            NULL);
            rjob_release(j);
        }
    }
}

int runner_recover(struct sbx_runner *r, sbx_error_t **err)
{
    struct sbx_recovery rec = {0};
    struct provs p = {.r = r};

    if (sbx_store_recover(r->store, present, &p, &rec, err) < 0) {
        return -1;
    }
    for (size_t i = 0; i < rec.n_cleanup; i++) {
        struct sbx_recovered_task *c = &rec.cleanup[i];
        struct sbx_open_instance *pi = prov_get(&p, c->provider);

        if (pi == NULL) {
            continue;
        }
        if (c->task_id != NULL) {
            destroy_orphans(r, pi, "sbx.task", c->task_id);
        }
        if (c->job_id != NULL) {
            destroy_orphans(r, pi, "sbx.job", c->job_id);
        }
    }
    adopt(r, &rec);
    if (!r->one_shot) { /* (changed, issue 31) a one_shot runner adopts nothing and opens
                         * no provider here: its task's start reaps gone owners, their
                         * task directories too, as an embedded start did */
        prov_get(&p, NULL);
    }
    /* every other sandbox of a gone owner (a previous runner's) goes too,
     * but those of the tasks just re-adopted */
    for (size_t i = 0; i < p.n; i++) {
        destroy_orphans(r, p.inst[i], "sbx.owner", NULL);
    }
    {
        /* worktree views of the tasks not re-adopted (theirs now name this runner) */
        sbx_error_t *e = NULL;
        char *state = sbx_state_dir(r->cfg->state_dir, &e);

        if (state != NULL) {
            sbx_view_sweep(state);
            runner_warm_sweep(state); /* (added) directories of a gone runner's warm sandboxes */
        }
        sbx_error_free(&e);
        free(state);
    }
    for (size_t i = 0; i < rec.n_queued; i++) {
        struct sbx_job_rec *q = &rec.queued[i];
        struct rjob *j = runner_job_from_rec(q);
        struct sbx_sched_job sj;

        rjob_set_image(j, snapshot_image(r, q->image)); /* (added) a job `from` a snapshot */
        sj = (struct sbx_sched_job){
            .id = rjob_id(j),
            .task = rjob_req(j)->task,
            .pool = rjob_req(j)->pool,
            .cls = rjob_req(j)->cls,
            .cpus = r->pools.cpus[rjob_req(j)->pool], /* limits.cpus, clamped on a small box */
            .memory = r->pools.memory[rjob_req(j)->pool],
            .enqueued_at = q->queued_at,
        };
        sbx_error_t *e = NULL;

        if (sbx_sched_submit(r->sched, &sj, &e) < 0) {
            /* the configuration changed under it: end it with the reason */
            sbx_store_job_end(
                r->store, rjob_id(j),
                &(struct sbx_job_end){SBX_JOB_CANCELLED, -1, sbx_error_msg(e), 0, 0, 0}, NULL);
            sbx_warn("runner: recovery: job %s: %s", rjob_id(j), sbx_error_msg(e));
            sbx_error_free(&e);
            runner_job_free(j);
            continue;
        }
        runner_job_move(r, j, RJOB_QUEUED, NULL, NULL);
        runner_job_link(r, j);
    }
    if (rec.n_queued + rec.n_adopt + rec.n_interrupted + rec.n_cleanup > 0) {
        sbx_info("runner: recovery: %zu queued, %zu task(s) re-adopted, %zu job(s) interrupted, "
                 "%zu sandbox(es) to clean",
                 rec.n_queued, rec.n_adopt, rec.n_interrupted, rec.n_cleanup);
    }
    sbx_recovery_clear(&rec);
    for (size_t i = 0; i < p.n; i++) {
        sbx_instance_close(p.inst[i]);
        free(p.names[i]);
    }
    return 0;
}
