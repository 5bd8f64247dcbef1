/* worker.c - one thread per running job: start (or wait for) its task's
 * sandbox, run the command, record the end, end a one-command task. Workers
 * write the store through their own connection and reach the loop's data
 * only under r->mu or with runner_post(). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runner/runner.h"
#include "runner/jobstate.h"
#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/rtask.h"
#include "runner/rmetrics.h"
#include "runner/jobs.h"
#include "runner/output.h"
#include "runner/storepool.h"
#include "runner/dbwait.h"
#include "runner/worker.h"
#include "runner/warm.h"
#include "sandbox/caps.h"
#include "util/log.h"
#include "util/xalloc.h"

struct worker {
    struct sbx_runner *r;
    struct rjob *j;
    struct rtask *t;
    int64_t t0;     /* the worker started (ms, monotonic) */
    int got_output; /* its first output was logged */
    /* (added) the steps from the grant to the first output (us, monotonic;
     * 0: not reached), logged once at debug level (docs/runner.md, Warm pool) */
    int64_t us_grant, us_claim, us_claimed, us_stored, us_exec;
    /* (added) this job started the task's sandbox: its READY row goes in the
     * job's ready batch */
    int put_ready;
    struct sbx_task_rec tr;
    int warm_held; /* (added) it took a warm sandbox: runner_warm_claim_done is due */
};

/* stream: 1 stdout, 2 stderr; appended to j's output (output.h) under r->mu */
static void output_append(struct sbx_runner *r, struct rjob *j, int stream, const char *data,
                          size_t len)
{
    if (len == 0) {
        return;
    }
    pthread_mutex_lock(&r->mu);
    runner_output_add(rjob_output(j), stream, data, len);
    pthread_mutex_unlock(&r->mu);
}

static int64_t mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t mono_us(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

/* (added, issue 31) The job's task runs in a warm sandbox it claimed. */
static int warm_sandbox(const struct worker *w)
{
    struct sbx_task *sandbox = rtask_sandbox(w->t);

    return sandbox != NULL && sbx_task_warm(sandbox);
}

/* One line per job at its first output (or its exit status when it printed
 * nothing): where the time from the grant went. The bench reads the
 * "warm claim to first output" of its lines (bench/warm_vs_docker.sh). */
static void log_first_output(struct worker *w, const char *what)
{
    int64_t now = mono_us();
    int64_t from = w->us_claim ? w->us_claim : w->us_grant;

    if (w->got_output) {
        return;
    }
    w->got_output = 1;
    if (w->warm_held) {
        w->warm_held = 0;
        runner_warm_claim_done(w->r, rjob_req(w->j)->pool);
    }
    sbx_debug("runner: job %s: %s to first output %.1f ms (%s; grant to claim %.1f ms, claim "
              "%.1f ms, store %.1f ms, exec start %.1f ms, first output %.1f ms after the grant)",
              rjob_id(w->j), w->us_claim && warm_sandbox(w) ? "warm claim" : "ready",
              (double)(now - from) / 1000.0, what,
              w->us_claim ? (double)(w->us_claim - w->us_grant) / 1000.0 : 0.0,
              w->us_claimed ? (double)(w->us_claimed - w->us_claim) / 1000.0 : 0.0,
              w->us_exec
                  ? (double)(w->us_stored - (w->us_claimed ? w->us_claimed : w->us_grant)) / 1000.0
                  : 0.0,
              w->us_exec ? (double)(w->us_exec - w->us_stored) / 1000.0 : 0.0,
              (double)(now - w->us_grant) / 1000.0);
}

/* (added, issue 31) sbx_runner_opts.output_wait: holds the command (its output
 * reader) while appending len would drop bytes a follower has not had, until
 * followers catch up, go, or the job is cancelled. Before any follower came, it
 * waits for the first (the client follows right after its submit). */
static void output_wait(struct sbx_runner *r, struct rjob *j, size_t len)
{
    if (!r->output_wait) {
        return;
    }
    pthread_mutex_lock(&r->mu);
    for (;;) {
        size_t total = runner_output_total(rjob_output(j));
        size_t acked = rjob_output_acked(j);
        size_t behind = total - acked;

        if (behind == 0 || behind + len <= SBX_RUNNER_MAX_OUTPUT || runner_job_cancelled(j) ||
            r->stopping) {
            break;
        }
        pthread_cond_wait(&r->cond, &r->mu);
    }
    pthread_mutex_unlock(&r->mu);
}

static int on_output(void *ud, int stream, const char *data, size_t len)
{
    struct worker *w = ud;

    if (!w->got_output) {
        log_first_output(w, "output");
    }
    output_wait(w->r, w->j, len);
    output_append(w->r, w->j, stream, data, len);
    runner_post(w->r, RMSG_OUTPUT, rjob_id(w->j), SBX_RESULT_OK);
    return 0;
}

/* The job's variables for sbx_task_exec (pointing into env); NULL when none. */
static struct sbx_kv *env_kv(json_t *env, size_t *n)
{
    struct sbx_kv *kv;
    const char *k;
    json_t *v;

    *n = 0;
    if (env == NULL || json_object_size(env) == 0) {
        return NULL;
    }
    kv = xcalloc(json_object_size(env), sizeof(*kv));
    json_object_foreach(env, k, v)
    {
        kv[*n].name = k;
        kv[*n].value = json_string_value(v);
        (*n)++;
    }
    return kv;
}

static void store_warn(sbx_error_t **err)
{
    if (*err != NULL) {
        sbx_warn("runner: store: %s", sbx_error_msg(*err));
        sbx_error_free(err);
    }
}

/* The worktree is checked again just before it is mounted: it must still
 * resolve below runner.worktree_roots to the same path (a directory of the
 * path swapped for a symlink since the submit, or a job recovered from before
 * the roots, is refused). */
static int worktree_still_ok(struct sbx_runner *r, const struct rjob *j, sbx_error_t **err)
{
    char why[512];
    char *again = NULL;
    int code;

    if (rjob_req(j)->worktree == NULL) {
        return 0;
    }
    code = sbx_confine_dir(&r->confine, rjob_req(j)->worktree, &again, why, sizeof(why));
    if (code == 0 && strcmp(again, rjob_req(j)->worktree) != 0) {
        snprintf(why, sizeof(why), "worktree \"%.200s\": now resolves to %.200s",
                 rjob_req(j)->worktree, again);
        code = 403;
    }
    free(again);
    return code == 0 ? 0 : sbx_error_set(err, SBX_E_USAGE, "%s", why);
}

/* (added) The warm sandbox taken for this job at its grant, claimed for its
 * task (docs/runner.md, Warm pool): 0 and *out when claimed, 1 to start
 * cold (none, another shape, or the claim failed: that sandbox goes). */
static int claim_warm(struct worker *w, const struct sbx_task_opts *o, struct sbx_task **out)
{
    struct sbx_runner *r = w->r;
    struct sbx_task *warm = rjob_take_warm(w->j);
    sbx_error_t *err = NULL;
    int rc;

    if (warm == NULL) {
        runner_warm_count(r, rjob_req(w->j)->pool, 0);
        return 1;
    }
    int64_t t0 = mono_ms();

    w->us_claim = mono_us();
    rc = sbx_task_claim(warm, r->plugin_dir, o, &err);
    w->us_claimed = mono_us();
    if (rc == 0) {
        sbx_debug("runner: job %s: claimed warm sandbox %.12s in %lld ms", rjob_id(w->j),
                  sbx_task_sandbox(warm), (long long)(mono_ms() - t0));
        runner_warm_count(r, rjob_req(w->j)->pool, 1);
        *out = warm;
        return 0;
    }
    if (rc < 0) {
        sbx_warn("runner: job %s: claiming a warm sandbox: %s; starting one cold", rjob_id(w->j),
                 sbx_error_msg(err));
        sbx_error_free(&err);
    }
    runner_warm_count(r, rjob_req(w->j)->pool, 0);
    runner_warm_end(r, warm);
    return 1;
}

/* The holder job creates the sandbox; the others wait for it. */
static int task_ready(struct worker *w, struct sbx_store *st, char *why, size_t whylen)
{
    struct sbx_runner *r = w->r;
    struct rjob *j = w->j;
    const struct rjob_req *q = rjob_req(j);
    struct rtask *t = w->t;
    sbx_error_t *err = NULL;
    int creator;

    pthread_mutex_lock(&r->mu);
    creator = rtask_starts_for(t, rjob_id(j));
    pthread_mutex_unlock(&r->mu);
    if (creator) {
        struct sbx_task_rec tr = {
            .id = (char *)rtask_id(t),
            .provider = q->provider ? q->provider : r->cfg->provider,
            .pool = (char *)sbx_pool_name(rtask_pool(t)),
            .state = SBX_TASK_STARTING,
        };
        struct sbx_task_opts o = {
            .task_id = rtask_id(t),
            .job_id = rjob_id(j),
            .provider = q->provider,
            .credentials = q->credentials,
            .image = rjob_image(j), /* (added) `from` a snapshot; NULL: the configured */
            .client = q->owner,     /* "": a job from before clients */
            .worktree = q->worktree,
            .pool = sbx_pool_name(q->pool),
            .argv = (const char *const *)q->argv,
            .cancel = rjob_cancel_flag(j),
            .ephemeral = 1,
            .slot_class = sbx_job_class_name(q->cls),
            /* (changed, issue 31) a one_shot runner's task reaps gone owners as
             * an embedded start does (its recovery does not) */
            .no_reap = !r->one_shot,
            .slot_lock = r->slot_lock, /* (added, issue 31) */
            .egress = r->egress,
        };
        struct sbx_task *task = NULL;
        int rc;

        /* (changed) a claim writes no row before it: the sandbox is there, the
         * job's grant is durable, and the task's READY row goes with the job's
         * ready writes (worker_main); a cold start's STARTING row comes first,
         * for recovery to find a start cut short */
        rc = worktree_still_ok(r, j, &err) < 0 ? -1 : claim_warm(w, &o, &task);
        if (rc < 0 && rjob_warm(j) != NULL) { /* refused before the claim: the warm one goes */
            runner_warm_end(r, rjob_take_warm(j));
        }
        if (rc != 0) {
            sbx_error_t *perr = NULL;

            sbx_store_task_put(st, &tr, &perr);
            store_warn(&perr);
        }
        if (rc == 1) {
            rc = sbx_task_start(r->cfg, r->plugin_dir, &o, &task, &err);
        }
        if (rc == 0) { /* its row goes with the job's ready writes (ready_batch) */
            runner_task_move(r, t, RTASK_READY, &(struct rtask_move){.t = task}, NULL);
            w->tr = tr;
            w->tr.sandbox_id = (char *)sbx_task_sandbox(task);
            w->tr.state = SBX_TASK_READY;
            w->put_ready = 1;
        }
        else {
            runner_task_move(r, t, RTASK_FAILED,
                             &(struct rtask_move){.st = st, .reason = sbx_error_msg(err)}, NULL);
            sbx_error_free(&err);
        }
    }
    pthread_mutex_lock(&r->mu);
    while (rtask_state(t) == RT_STARTING && !runner_job_cancelled(j)) {
        pthread_cond_wait(&r->cond, &r->mu);
    }
    if (rtask_state(t) != RT_READY) {
        snprintf(why, whylen, "sandbox: %s",
                 rtask_state(t) == RT_FAILED ? rtask_fail_reason(t) : "task ended");
        pthread_mutex_unlock(&r->mu);
        return -1;
    }
    pthread_mutex_unlock(&r->mu);
    return 0;
}

/* (changed) The job's ready writes, one transaction and one commit before
 * its command starts: the task's READY row (when this job started or claimed
 * the sandbox), the job's ready step (fenced: a box that lost the job learns
 * it here), its isolation and "warm", its lease id, the exec in flight. The
 * commit is relaxed for a one-command task (docs/runner.md, Store and
 * recovery): its grant is durable already, and these rows go together or not
 * at all, so a recovery finds the job running and interrupts it either way;
 * for a kept task, which recovery may re-adopt, it is a full commit. */
static void ready_batch(struct worker *w, struct sbx_store *st, struct sbx_task *task)
{
    struct rjob *j = w->j;
    struct rtask *t = w->t;
    sbx_error_t *err = NULL;
    int relaxed = !rtask_keep(t);
    int batch = sbx_store_batch_begin(st, relaxed, &err) == 0;

    store_warn(&err);
    if (w->put_ready) {
        sbx_store_task_put(st, &w->tr, &err);
        store_warn(&err);
    }
    runner_job_move(w->r, j, RJOB_READY,
                    &(struct rjob_move){.st = st,
                                        .task = rtask_id(t),
                                        .provider = sbx_task_provider_name(task),
                                        .image = sbx_task_image(task)},
                    &err);
    store_warn(&err);
    {
        json_t *iso = json_object();

        sbx_task_isolation(task, iso);
        /* (added) the record's "warm" (store/record.c) */
        json_object_set_new(iso, "warm", json_boolean(sbx_task_warm(task)));
        json_object_set_new(iso, "resized", json_boolean(sbx_task_resized(task)));
        sbx_store_job_set_isolation(st, rjob_id(j), iso, &err);
        store_warn(&err);
        json_decref(iso);
    }
    if (sbx_task_lease_id(task) != NULL) { /* the lease id only, never a value */
        const char *ids[1] = {sbx_task_lease_id(task)};

        sbx_store_job_set_leases(st, rjob_id(j), ids, 1, &err);
        store_warn(&err);
    }
    sbx_store_task_exec(st, rtask_id(t), 1, 0, &err);
    store_warn(&err);
    if (batch) {
        sbx_store_batch_end(st, relaxed, &err);
        store_warn(&err);
    }
}

/* task_ready, and the sandbox start time when this job started the sandbox */
static int task_ready_timed(struct worker *w, struct sbx_store *st, char *why, size_t whylen)
{
    int64_t t0 = sbx_mono_ms();
    int creator;
    int rc;

    pthread_mutex_lock(&w->r->mu);
    creator = rtask_starts_for(w->t, rjob_id(w->j));
    pthread_mutex_unlock(&w->r->mu);
    rc = task_ready(w, st, why, whylen);
    if (rc == 0 && creator) {
        rm_sandbox_start(w->r->metrics, rjob_req(w->j)->pool, sbx_mono_ms() - t0);
    }
    return rc;
}

/* How a job ended, as its worker finds out (worker_main). */
struct job_end {
    enum sbx_job_state end_state; /* finished or cancelled */
    enum sbx_job_result result;
    char reason[512];
    int status;
    int64_t allowed, denied; /* its egress decisions */
    int exec_marked;         /* the task's exec in flight is to be cleared */
    const char *exec_path;   /* how the command ran (static text) */
};

/* No store connection for the job (err says why): it ends without one. */
static void end_without_store(struct worker *w, sbx_error_t **err, struct job_end *e)
{
    struct sbx_runner *r = w->r;
    struct rjob *j = w->j;
    struct rtask *t = w->t;
    int creator;

    snprintf(e->reason, sizeof(e->reason), "runner: %s", sbx_error_msg(*err));
    sbx_error_free(err);
    pthread_mutex_lock(&r->mu);
    creator = rtask_starts_for(t, rjob_id(j));
    pthread_mutex_unlock(&r->mu);
    if (creator) { /* (added) its sandbox never starts: the jobs waiting for it stop */
        runner_task_move(r, t, RTASK_FAILED, &(struct rtask_move){.reason = e->reason}, NULL);
    }
}

/* Executes j's command in task unless it was cancelled: its exit status, or
 * why it did not run. Returns whether it ran. */
static int exec_command(struct worker *w, struct sbx_task *task, struct job_end *e)
{
    struct sbx_runner *r = w->r;
    struct rjob *j = w->j;
    sbx_error_t *err = NULL;
    size_t n_env = 0;
    struct sbx_kv *env;
    json_t *wt_events;
    int rc;

    pthread_mutex_lock(&r->mu);
    rjob_set_executing(j, !runner_job_cancelled(j));
    pthread_mutex_unlock(&r->mu);
    if (!rjob_executing(j)) {
        return 0;
    }
    env = env_kv(rjob_req(j)->env, &n_env);
    w->us_exec = mono_us();
    rc = sbx_task_exec(task, (const char *const *)rjob_req(j)->argv, env, n_env, on_output, w,
                       rjob_slot(j), &e->status, &err);
    free(env);
    log_first_output(w, "its exit status");
    e->exec_path = sbx_task_last_exec_path(task); /* written with the end */
    wt_events = sbx_task_worktree_events(task);   /* (added, issue 31) */
    pthread_mutex_lock(&r->mu);
    rjob_set_executing(j, 0);
    rjob_set_wt_events(j, wt_events);
    pthread_mutex_unlock(&r->mu);
    if (rc < 0) {
        /* as `sbx run` (docs/architecture.md, Exit status): a command that cannot
         * be executed is 126, one not found 127; other failures have
         * no exit status (125 for the client) */
        e->status = err && err->code == SBX_E_NOEXEC  ? 126
                    : err && err->code == SBX_E_NOCMD ? 127
                                                      : -1;
        snprintf(e->reason, sizeof(e->reason), "%s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    else {
        e->result = e->status == 0 ? SBX_RESULT_OK : SBX_RESULT_FAILED;
    }
    return 1;
}

/* j's command in its task's ready sandbox: the sandbox's READY row stored,
 * the job's egress counted apart, the run timed; the task's exec is cleared
 * with the job's end. */
static void run_in_task(struct worker *w, struct sbx_store *st, struct job_end *e)
{
    struct sbx_runner *r = w->r;
    struct rjob *j = w->j;
    struct rtask *t = w->t;
    struct sbx_task *task = rtask_sandbox(t);
    int64_t run0 = sbx_mono_ms();
    int64_t allowed0 = 0;
    int64_t denied0 = 0;

    sbx_debug("runner: job %s: sandbox ready %lld ms after its grant", rjob_id(j),
              (long long)(mono_ms() - w->t0));
    ready_batch(w, st, task);
    w->us_stored = mono_us();
    /* this job's egress: its log lines carry its id, its record its own counts
     * (added, issue 31: a keeper's task keeps its own id there and in its record,
     * as its execs did before the keeper was a runner) */
    if (!r->adopted_only) {
        sbx_task_set_job(task, rjob_id(j));
    }
    sbx_task_egress_counts(task, &allowed0, &denied0);
    if (exec_command(w, task, e)) {
        rm_job_run(r->metrics, rjob_req(j)->pool, sbx_mono_ms() - run0);
    }
    e->exec_marked = 1;
    sbx_task_egress_counts(task, &e->allowed, &e->denied);
    /* a connection decided before this job and refused during it moves a count
     * from allowed to denied: never below 0 */
    e->allowed = e->allowed > allowed0 ? e->allowed - allowed0 : 0;
    e->denied = e->denied > denied0 ? e->denied - denied0 : 0;
}

/* A cancelled job's end, and why: its box lost it, the runner stops, or a
 * client asked. */
static void end_cancelled(struct sbx_runner *r, struct rjob *j, struct job_end *e)
{
    int lost;
    int stopping;

    pthread_mutex_lock(&r->mu);
    lost = rjob_lost(j);
    stopping = r->stopping;
    pthread_mutex_unlock(&r->mu);
    e->end_state = SBX_JOB_CANCELLED;
    e->result = SBX_RESULT_CANCELLED;
    snprintf(e->reason, sizeof(e->reason), "%s",
             lost       ? "box lost"
             : stopping ? "runner stopped"
                        : "cancelled by request");
    e->status = -1;
}

/* (changed) the exec's end and the job's end: one full commit, written
 * again as a whole while the database is down (dbwait.c); no write
 * without a connection (st NULL: in memory only) */
static void record_end(struct worker *w, struct sbx_store *st, const struct job_end *e)
{
    struct sbx_runner *r = w->r;
    struct rjob *j = w->j;
    struct rtask *t = w->t;
    sbx_error_t *err = NULL;

    if (runner_job_move(r, j, e->end_state == SBX_JOB_CANCELLED ? RJOB_CANCELLED : RJOB_FINISHED,
                        &(struct rjob_move){.st = st,
                                            .memory = st == NULL,
                                            .retry = 1,
                                            .exec_task = e->exec_marked ? rtask_id(t) : NULL,
                                            .exec_path = e->exec_path,
                                            .exit_status = e->status,
                                            .reason = e->reason[0] ? e->reason : NULL,
                                            .egress_allowed = e->allowed,
                                            .egress_denied = e->denied},
                        &err) > 0) {
        /* fenced: a box that lost the job learns it here; the record
         * stays the survivor's; the task's own row is still this box's */
        store_warn(&err);
        if (e->exec_marked) {
            sbx_store_task_exec(st, rtask_id(t), 0, 0, &err);
            store_warn(&err);
        }
    }
    store_warn(&err);
}

/* The job leaves its task: the loop told of its end, and the task's sandbox
 * ended when this was its last job and the task is not kept. Gives st back. */
static void leave_task(struct worker *w, struct sbx_store *st, const struct job_end *e)
{
    struct sbx_runner *r = w->r;
    struct rjob *j = w->j;
    struct rtask *t = w->t;
    sbx_error_t *err = NULL;
    struct sbx_task *sandbox; /* the task's, when this job ends it */
    int last;

    pthread_mutex_lock(&r->mu);
    rtask_job_ended(t, rjob_id(j), e->result);
    rtask_leave(t);
    last = rtask_running(t) == 0 && (!rtask_keep(t) || rtask_state(t) != RT_READY) &&
           runner_task_move_held(r, t, RTASK_ENDING) == 0;
    sandbox = last ? rtask_take_sandbox(t) : NULL; /* ended below: nobody else reaches it */
    pthread_mutex_unlock(&r->mu);
    sbx_info("runner: job %s %s (exit %d)%s%s", rjob_id(j), sbx_job_state_name(e->end_state),
             e->status, e->reason[0] ? ": " : "", e->reason);
    /* (changed) the job's end is known before its sandbox goes: its client
     * is told now (j is the loop's from here on); the slot stays held until
     * the sandbox is removed (RMSG_TASK_ENDED) */
    runner_post(r, RMSG_JOB_DONE, rjob_id(j), e->result);
    if (sandbox != NULL) {
        sbx_task_end(sandbox, e->reason[0] ? e->reason : "ended", NULL, NULL);
        runner_task_move(r, t, RTASK_GONE, &(struct rtask_move){.st = st}, &err);
        store_warn(&err);
    }
    runner_store_put(r, st);
    if (last) {
        runner_post_task_ended(r, t, e->result);
    }
}

/* A worker thread: one job from its task's sandbox to its recorded end. */
static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct sbx_runner *r = w->r;
    struct rjob *j = w->j;
    sbx_error_t *err = NULL;
    struct sbx_store *st = runner_store_get_wait(r, rjob_id(j), &err); /* (changed) */
    struct job_end e = {.end_state = SBX_JOB_FINISHED, .result = SBX_RESULT_FAILED, .status = -1};

    if (st == NULL) {
        end_without_store(w, &err, &e);
    }
    else if (task_ready_timed(w, st, e.reason, sizeof(e.reason)) == 0 && !runner_job_cancelled(j)) {
        run_in_task(w, st, &e);
    }
    if (runner_job_cancelled(j)) {
        end_cancelled(r, j, &e);
    }
    if (w->warm_held) { /* it never ran its command */
        w->warm_held = 0;
        runner_warm_claim_done(r, rjob_req(j)->pool);
    }
    rm_egress(r->metrics, rjob_req(j)->pool, e.allowed, e.denied);
    record_end(w, st, &e);
    leave_task(w, st, &e);
    runner_worker_gone(r); /* (changed, issue 31) a stopping runner goes at once */
    free(w);
    return NULL;
}

static void *ender_main(void *arg)
{
    struct worker *w = arg;
    struct sbx_runner *r = w->r;
    struct rtask *t = w->t;
    sbx_error_t *err = NULL;
    struct sbx_store *st = runner_store_get(r, &err);
    struct sbx_task *sandbox;
    char reason[256];
    int stopping;

    store_warn(&err);
    pthread_mutex_lock(&r->mu);
    sandbox = rtask_take_sandbox(t); /* ended here: nobody else reaches it */
    stopping = r->stopping;
    pthread_mutex_unlock(&r->mu);
    if (!sbx_task_stopped(sandbox, reason, sizeof(reason))) {
        /* (added, issue 31) a keeper's runner: ended by `sbx task end` */
        snprintf(reason, sizeof(reason), "%s",
                 stopping          ? "runner stopped"
                 : r->adopted_only ? "ended by sbx task end"
                                   : "ended by request");
    }
    sbx_task_end(sandbox, reason, NULL, NULL);
    runner_task_move(r, t, RTASK_GONE, &(struct rtask_move){.st = st, .reason = reason}, &err);
    store_warn(&err);
    runner_store_put(r, st);
    sbx_info("runner: task %s ended: %s", rtask_id(t), reason);
    runner_post_task_ended(r, t, SBX_RESULT_OK);
    runner_worker_gone(r); /* (changed, issue 31) */
    free(w);
    return NULL;
}

static int spawn(struct sbx_runner *r, void *(*fn)(void *), struct worker *w, int locked)
{
    pthread_t th;
    pthread_attr_t a;
    int rc;

    pthread_attr_init(&a);
    pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
    if (!locked) {
        pthread_mutex_lock(&r->mu);
    }
    r->workers++;
    if (!locked) {
        pthread_mutex_unlock(&r->mu);
    }
    rc = pthread_create(&th, &a, fn, w);
    pthread_attr_destroy(&a);
    if (rc != 0) {
        if (!locked) {
            pthread_mutex_lock(&r->mu);
        }
        r->workers--;
        if (!locked) {
            pthread_mutex_unlock(&r->mu);
        }
        sbx_error_log("runner: pthread_create: %s", strerror(rc));
        free(w);
        return -1;
    }
    return 0;
}

int runner_worker_start(struct sbx_runner *r, struct rjob *j)
{
    struct worker *w = xcalloc(1, sizeof(*w));

    w->r = r;
    w->j = j;
    w->t = rjob_rtask(j);
    w->t0 = mono_ms();
    w->us_grant = mono_us();
    w->warm_held = rjob_warm(j) != NULL;
    return spawn(r, worker_main, w, 0);
}

/* Called with r->mu held (the tick). */
int runner_task_ender_start(struct sbx_runner *r, struct rtask *t)
{
    struct worker *w = xcalloc(1, sizeof(*w));

    w->r = r;
    w->t = t;
    return spawn(r, ender_main, w, 1);
}

/* (added, issue 31) Under r->mu (the tick, and a keeper's stop): t's ender
 * starts now when t is due to end (rtask_due_to_end); a task no thread could
 * end is kept ready, tried again at the next tick. */
void runner_task_end_if_due(struct sbx_runner *r, struct rtask *t, int stopping)
{
    if (rtask_due_to_end(t, stopping)) {
        runner_task_move_held(r, t, RTASK_ENDING);
        if (runner_task_ender_start(r, t) < 0) {
            runner_task_move_held(r, t, RTASK_KEPT); /* retried at the next tick */
        }
    }
}
