/* task.c - task rows and the recovery at daemon start. */
#include "store/states.h"
#include "store/store_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "util/cleanup.h"
#include "util/xalloc.h"

#define TASK_COLUMNS                                                                               \
    "id, sandbox_id, provider, pool, state, in_flight, created_at, last_activity, ended_at, "      \
    "reason"

static int task_state_parse(const char *name)
{
    for (int i = SBX_TASK_STARTING; i <= SBX_TASK_INTERRUPTED; i++) {
        if (name != NULL && strcmp(name, sbx_task_state_name((enum sbx_task_state)i)) == 0) {
            return i;
        }
    }
    return -1;
}

static void row_to_task(struct sbx_q *s, struct sbx_task_rec *out)
{
    int st;

    memset(out, 0, sizeof(*out));
    out->id = sbx_q_col_strdup(s, 0);
    out->sandbox_id = sbx_q_col_strdup(s, 1);
    out->provider = sbx_q_col_strdup(s, 2);
    out->pool = sbx_q_col_strdup(s, 3);
    st = task_state_parse(sbx_q_col_text(s, 4));
    out->state = st < 0 ? SBX_TASK_INTERRUPTED : (enum sbx_task_state)st;
    out->in_flight = (int)sbx_q_col_int64(s, 5);
    out->created_at = sbx_q_col_int64(s, 6);
    out->last_activity = sbx_q_col_int64(s, 7);
    out->ended_at = sbx_q_col_int64(s, 8);
    out->reason = sbx_q_col_strdup(s, 9);
}

int sbx_store_task_put(struct sbx_store *st, const struct sbx_task_rec *t, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = NULL;
    int64_t now = sbx_store_now();

    if (t == NULL || !sbx_id_valid(t->id, SBX_ID_NAME)) {
        return sbx_error_set(err, EINVAL,
                             "store: task id must be 1-63 characters of "
                             "[A-Za-z0-9._:-]");
    }
    if ((t->sandbox_id && !sbx_store_text_ok(t->sandbox_id)) ||
        (t->provider && !sbx_store_text_ok(t->provider)) ||
        (t->reason && !sbx_store_text_ok(t->reason)) ||
        (t->pool && strcmp(t->pool, "ci") != 0 && strcmp(t->pool, "agent") != 0) ||
        (unsigned)t->state > SBX_TASK_INTERRUPTED) {
        return sbx_error_set(err, EINVAL,
                             "store: task %s: bad sandbox id, provider, pool, "
                             "state or reason",
                             t->id);
    }
    s = sbx_q_prepare(
        st,
        "INSERT INTO tasks (" TASK_COLUMNS ", box) VALUES ($1, $2, $3, $4, $5, $6, $7, "
        "$8, $9, $10, $11) ON CONFLICT (id) DO UPDATE SET sandbox_id = excluded.sandbox_id, "
        "provider = excluded.provider, pool = excluded.pool, state = excluded.state, "
        "in_flight = excluded.in_flight, created_at = excluded.created_at, "
        "last_activity = excluded.last_activity, ended_at = excluded.ended_at, "
        "reason = excluded.reason, box = excluded.box",
        err);
    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, t->id);
    sbx_q_text(s, 11, st->box);
    sbx_q_text(s, 2, t->sandbox_id);
    sbx_q_text(s, 3, t->provider);
    sbx_q_text(s, 4, t->pool);
    sbx_q_text(s, 5, sbx_task_state_name(t->state));
    sbx_q_int64(s, 6, t->in_flight ? 1 : 0);
    sbx_q_int64(s, 7, t->created_at ? t->created_at : now);
    sbx_q_int64(s, 8, t->last_activity ? t->last_activity : now);
    sbx_q_int64(s, 9, t->ended_at);
    sbx_q_text(s, 10, t->reason);
    if (sbx_q_step(s, "put task", err) < 0) {
        return -1;
    }
    return 0;
}

int sbx_store_task_get(struct sbx_store *st, const char *id, struct sbx_task_rec *out,
                       sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = NULL;
    int rc;

    if (id == NULL) {
        return sbx_error_set(err, EINVAL, "store: no task id given");
    }
    s = sbx_q_prepare(st, "SELECT " TASK_COLUMNS " FROM tasks WHERE id = $1", err);
    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, id);
    rc = sbx_q_step(s, "get task", err);
    if (rc == 0) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "store: no task '%s'", id);
    }
    if (rc < 0) {
        return -1;
    }
    sbx_task_rec_clear(out);
    row_to_task(s, out);
    return 0;
}

static int task_update(struct sbx_store *st, const char *id, const char *sql, int64_t a,
                       const char *text, int64_t at, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = NULL;

    if (id == NULL) {
        return sbx_error_set(err, EINVAL, "store: no task id given");
    }
    s = sbx_q_prepare(st, sql, err);
    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, id);
    sbx_q_int64(s, 2, a);
    sbx_q_text(s, 3, text);
    sbx_q_int64(s, 4, at ? at : sbx_store_now());
    if (sbx_q_step(s, "update task", err) < 0) {
        return -1;
    }
    if (sbx_q_changes(s) == 0) {
        struct sbx_task_rec t = {0};

        if (sbx_store_task_get(st, id, &t, err) < 0) {
            return -1;
        }
        sbx_error_set(err, EINVAL, "store: task %s is %s", id, sbx_task_state_name(t.state));
        sbx_task_rec_clear(&t);
        return -1;
    }
    return 0;
}

int sbx_store_task_exec(struct sbx_store *st, const char *id, int in_flight, int64_t at,
                        sbx_error_t **err)
{
    return task_update(st, id,
                       "UPDATE tasks SET in_flight = $2, last_activity = $4, "
                       "reason = COALESCE($3, reason) WHERE id = $1 AND " SBX_FROM_TASK_LIVE_SQL,
                       in_flight ? 1 : 0, NULL, at, err);
}

int sbx_store_task_end(struct sbx_store *st, const char *id, enum sbx_task_state state,
                       const char *reason, int64_t at, sbx_error_t **err)
{
    if ((unsigned)state > SBX_TASK_INTERRUPTED ||
        (sbx_task_edge_of(SBX_TASK_STEP_END)->to & SBX_STATE_BIT(state)) == 0) {
        return sbx_error_set(err, EINVAL,
                             "store: task %s: a task ends ended or interrupted, "
                             "not %s",
                             id ? id : "(null)", sbx_task_state_name(state));
    }
    if (reason != NULL && !sbx_store_text_ok(reason)) {
        return sbx_error_set(err, EINVAL, "store: task %s: bad reason", id ? id : "(null)");
    }
    return task_update(
        st, id,
        state == SBX_TASK_ENDED
            ? "UPDATE tasks SET state = 'ended', in_flight = 0, "
              "reason = $3, ended_at = $4 WHERE id = $1 AND $2 = 0 AND " SBX_FROM_TASK_LIVE_SQL
            : "UPDATE tasks SET state = 'interrupted', in_flight = 0, "
              "reason = $3, ended_at = $4 WHERE id = $1 AND $2 = 0 AND " SBX_FROM_TASK_LIVE_SQL,
        0, reason, at, err);
}

/* ---- recovery ---- */

static void add_task(struct sbx_recovered_task **arr, size_t *n, const char *task,
                     const char *sandbox, const char *provider, const char *job)
{
    struct sbx_recovered_task *t;

    *arr = xrealloc(*arr, (*n + 1) * sizeof(**arr));
    t = &(*arr)[(*n)++];
    t->task_id = task ? xstrdup(task) : NULL;
    t->sandbox_id = sandbox ? xstrdup(sandbox) : NULL;
    t->provider = provider ? xstrdup(provider) : NULL;
    t->job_id = job ? xstrdup(job) : NULL;
}

/* Running jobs of a task end interrupted with reason. */
static int interrupt_jobs(struct sbx_store *st, const char *task, const char *reason, int64_t now,
                          size_t *count, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s =
        sbx_q_prepare(st,
                      "UPDATE jobs SET state = 'interrupted', reason = $2, finished_at = $3 "
                      "WHERE task = $1 AND state = 'running'",
                      err);

    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, task);
    sbx_q_text(s, 2, reason);
    sbx_q_int64(s, 3, now);
    if (sbx_q_step(s, "interrupt jobs", err) < 0) {
        return -1;
    }
    *count += (size_t)sbx_q_changes(s);
    return 0;
}

static int end_task(struct sbx_store *st, const char *id, const char *reason, int64_t now,
                    sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = sbx_q_prepare(
        st,
        "UPDATE tasks SET state = 'interrupted', in_flight = 0, reason = $2, ended_at = $3 "
        "WHERE id = $1",
        err);

    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, id);
    sbx_q_text(s, 2, reason);
    sbx_q_int64(s, 3, now);
    if (sbx_q_step(s, "interrupt task", err) < 0) {
        return -1;
    }
    return 0;
}

static int recover_tasks(struct sbx_store *st, sbx_sandbox_present_fn present, void *ctx,
                         int64_t now, struct sbx_recovery *out, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s =
        sbx_q_prepare(st,
                      "SELECT " TASK_COLUMNS " FROM tasks WHERE state IN ('starting', 'ready') "
                      "AND (CAST($1 AS TEXT) IS NULL OR box = $1) ORDER BY created_at, id",
                      err);
    struct sbx_task_rec *tasks = NULL;
    size_t n = 0;
    int rc, r = 0;

    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, st->box);
    while ((rc = sbx_q_step(s, "list tasks", err)) == 1) {
        tasks = xrealloc(tasks, (n + 1) * sizeof(*tasks));
        row_to_task(s, &tasks[n++]);
    }
    if (rc < 0) {
        r = -1;
    }
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct sbx_task_rec *t = &tasks[i];
        int here = 0;

        if (t->state == SBX_TASK_READY && !t->in_flight && t->sandbox_id != NULL &&
            present != NULL) {
            here = present(ctx, t->provider, t->sandbox_id);
        }
        if (here == 1) {
            add_task(&out->adopt, &out->n_adopt, t->id, t->sandbox_id, t->provider, NULL);
            continue;
        }
        if (t->in_flight || t->state == SBX_TASK_STARTING || here < 0) {
            /* the sandbox may still be there: the caller destroys it */
            add_task(&out->cleanup, &out->n_cleanup, t->id, t->sandbox_id, t->provider, NULL);
        }
        r = end_task(st, t->id,
                     t->in_flight ? "runner restarted during an exec"
                     : t->state == SBX_TASK_STARTING
                         ? "runner restarted while the sandbox was created"
                         : "runner restarted; sandbox gone",
                     now, err);
        if (r == 0) {
            r = interrupt_jobs(st, t->id,
                               t->in_flight || t->state == SBX_TASK_STARTING
                                   ? "runner restarted"
                                   : "runner restarted; sandbox gone",
                               now, &out->n_interrupted, err);
        }
    }
    for (size_t i = 0; i < n; i++) {
        sbx_task_rec_clear(&tasks[i]);
    }
    free(tasks);
    return r;
}

/* A fleet box's jobs in a state (store.h, sbx_store_set_box). */
static int jobs_of_box(struct sbx_store *st, enum sbx_job_state state, struct sbx_job_rec **out,
                       size_t *n, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = sbx_q_prepare(
        st, "SELECT " SBX_JOB_COLUMNS " FROM jobs WHERE state = $1 AND box = $2 ORDER BY seq", err);
    struct sbx_job_rec *recs = NULL;
    size_t count = 0;
    int rc;

    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, sbx_job_state_name(state));
    sbx_q_text(s, 2, st->box);
    while ((rc = sbx_q_step(s, "list jobs", err)) == 1) {
        recs = xrealloc(recs, (count + 1) * sizeof(*recs));
        sbx_store_row_to_job(s, &recs[count++]);
    }
    if (rc < 0) {
        sbx_job_rec_free_array(recs, count);
        return -1;
    }
    *out = recs;
    *n = count;
    return 0;
}

/* A fleet box's claimed, unstarted jobs go back to the shared queue (with a
 * new token): any box may take them now. */
static int give_back(struct sbx_store *st, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s =
        sbx_q_prepare(st,
                      "UPDATE jobs SET box = NULL, token = nextval('sbx_fence') "
                      "WHERE box = $1 AND state = 'queued'",
                      err);

    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, st->box);
    return sbx_q_step(s, "give jobs back", err) < 0 ? -1 : 0;
}

/* Running jobs left after the tasks: adopted ones are collected, the rest
 * (no task row, or one that had already ended) are interrupted. */
static int recover_jobs(struct sbx_store *st, int64_t now, struct sbx_recovery *out,
                        sbx_error_t **err)
{
    struct sbx_job_rec *running = NULL;
    size_t n = 0;
    int r;

    r = st->box != NULL ? jobs_of_box(st, SBX_JOB_RUNNING, &running, &n, err)
                        : sbx_store_job_list(st, SBX_JOB_RUNNING, &running, &n, err);
    for (size_t i = 0; r == 0 && i < n; i++) {
        struct sbx_job_rec *j = &running[i];
        int adopted = 0;

        for (size_t k = 0; k < out->n_adopt; k++) {
            if (strcmp(out->adopt[k].task_id, j->task) == 0) {
                adopted = 1;
                if (out->adopt[k].job_id == NULL) {
                    out->adopt[k].job_id = xstrdup(j->id);
                }
                break;
            }
        }
        if (adopted) {
            out->adopt_jobs =
                xrealloc(out->adopt_jobs, (out->n_adopt_jobs + 1) * sizeof(*out->adopt_jobs));
            out->adopt_jobs[out->n_adopt_jobs++] = *j;
            memset(j, 0, sizeof(*j));
            continue;
        }
        add_task(&out->cleanup, &out->n_cleanup, j->task, NULL, j->provider, j->id);
        r = sbx_store_job_end(st, j->id,
                              &(struct sbx_job_end){SBX_JOB_INTERRUPTED, -1, "runner restarted",
                                                    j->egress_allowed, j->egress_denied, now},
                              err);
        if (r == 0) {
            out->n_interrupted++;
        }
    }
    sbx_job_rec_free_array(running, n);
    return r;
}

int sbx_store_recover(struct sbx_store *st, sbx_sandbox_present_fn present, void *ctx,
                      struct sbx_recovery *out, sbx_error_t **err)
{
    int64_t now = sbx_store_now();

    memset(out, 0, sizeof(*out));
    if (sbx_store_begin(st, err) < 0) {
        return -1;
    }
    if (recover_tasks(st, present, ctx, now, out, err) < 0 || recover_jobs(st, now, out, err) < 0 ||
        (st->pg != NULL && st->box != NULL
             ? give_back(st, err)
             : sbx_store_job_list(st, SBX_JOB_QUEUED, &out->queued, &out->n_queued, err)) < 0 ||
        sbx_store_commit(st, err) < 0) {
        sbx_store_rollback(st);
        sbx_recovery_clear(out);
        return -1;
    }
    return 0;
}

static void free_tasks(struct sbx_recovered_task *t, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(t[i].task_id);
        free(t[i].sandbox_id);
        free(t[i].provider);
        free(t[i].job_id);
    }
    free(t);
}

void sbx_recovery_clear(struct sbx_recovery *r)
{
    if (r == NULL) {
        return;
    }
    sbx_job_rec_free_array(r->queued, r->n_queued);
    sbx_job_rec_free_array(r->adopt_jobs, r->n_adopt_jobs);
    free_tasks(r->adopt, r->n_adopt);
    free_tasks(r->cleanup, r->n_cleanup);
    memset(r, 0, sizeof(*r));
}
