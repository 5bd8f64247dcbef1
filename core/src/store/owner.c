/* owner.c - task ids are owned (docs/runner.md, "Task ids"): a task id
 * belongs to the client of the job that named it first, for good and on
 * every box of a fleet (the task_owners table); a job of another client
 * never runs in it. And one task id has at most one live sandbox: a claim
 * passes over a job whose task another job holds (claimed or running) or
 * whose task is live, checked in the claim's own transaction. */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/xalloc.h"

/* pg_advisory_xact_lock(key, hashtext(task)): the claims of one task id, in
 * any pool, one at a time */
#define TASK_LOCK 0x73627830

/* A job of client may use a task of owner: the same client, or the unix
 * socket's `local` for a task from before clients (owner ""). */
int sbx_store_owner_ok(const char *owner, const char *client)
{
    return strcmp(owner, client) == 0 || (owner[0] == '\0' && strcmp(client, "local") == 0);
}

int sbx_store_task_owner(struct sbx_store *st, const char *task, char *out, size_t len,
                         sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    int rc;

    if (task == NULL) {
        return sbx_error_set(err, EINVAL, "store: no task id given");
    }
    q = sbx_q_prepare(st, "SELECT client FROM task_owners WHERE id = $1", err);
    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, task);
    rc = sbx_q_step(q, "read a task's owner", err);
    if (rc == 1) {
        snprintf(out, len, "%s", sbx_q_col_text(q, 0) ? sbx_q_col_text(q, 0) : "");
    }
    return rc;
}

int sbx_store_owner_take(struct sbx_store *st, const char *task, const char *client, int64_t at,
                         sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    char owner[128];
    int rc;

    q = sbx_q_prepare(st,
                      "INSERT INTO task_owners (id, client, created_at) VALUES ($1, $2, $3) "
                      "ON CONFLICT (id) DO NOTHING",
                      err);
    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, task);
    sbx_q_text(q, 2, client);
    sbx_q_int64(q, 3, at ? at : sbx_store_now());
    if (sbx_q_step(q, "record a task's owner", err) < 0) {
        return -1;
    }
    rc = sbx_store_task_owner(st, task, owner, sizeof(owner), err);
    if (rc < 0) {
        return -1;
    }
    if (rc == 0 || !sbx_store_owner_ok(owner, client)) {
        /* the owner is not named: another client's name is not for this one */
        return sbx_error_set(err, EPERM, "task %s belongs to another client; use another task id",
                             task);
    }
    return 0;
}

/* One row of sql ($1 task, $2 job id) exists. */
static int exists(struct sbx_store *st, const char *sql, const char *task, const char *job,
                  char *box, size_t len, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = sbx_q_prepare(st, sql, err);
    int rc;

    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, task);
    sbx_q_text(q, 2, job);
    rc = sbx_q_step(q, "look at a task's jobs", err);
    if (rc == 1 && box != NULL) {
        snprintf(box, len, "%s", sbx_q_col_text(q, 0) ? sbx_q_col_text(q, 0) : "");
    }
    return rc;
}

#define HELD_BY_JOB                                                                                \
    "SELECT box, id, state FROM jobs WHERE task = $1 AND id <> $2 AND box IS NOT NULL AND state "  \
    "IN ('queued', 'running') LIMIT 1"
#define LIVE_TASK                                                                                  \
    "SELECT box FROM tasks WHERE id = $1 AND state IN ('starting', 'ready') "                      \
    "AND CAST($2 AS TEXT) IS NOT NULL"

int sbx_store_claim_task_check(struct sbx_store *st, const struct sbx_job_rec *job,
                               sbx_error_t **err)
{
    cleanup_q struct sbx_q *l = NULL;
    cleanup_q struct sbx_q *c = NULL;
    const char *task = job->task ? job->task : job->id;
    char owner[128];
    char lock[128];
    int rc;

    /* (changed) tried, never waited for (store/fleet.c, the claim): a task id
     * another claim holds right now is passed over, claimed at a later turn */
    snprintf(lock, sizeof(lock),
             "SELECT CASE WHEN pg_try_advisory_xact_lock(%d, hashtext($1)) THEN 1 ELSE 0 END",
             TASK_LOCK);
    l = sbx_q_prepare(st, lock, err);
    if (l == NULL) {
        return -1;
    }
    sbx_q_text(l, 1, task);
    if (sbx_q_step(l, "lock a task id", err) != 1) {
        return -1;
    }
    if (sbx_q_col_int64(l, 0) == 0) {
        return 0;
    }
    rc = sbx_store_task_owner(st, task, owner, sizeof(owner), err);
    if (rc < 0) {
        return -1;
    }
    if (rc == 1 && !sbx_store_owner_ok(owner, job->client ? job->client : "")) {
        /* never starts: ended in this transaction, for the client to see */
        c = sbx_q_prepare(st,
                          "UPDATE jobs SET state = 'cancelled', reason = $2, finished_at = $3 "
                          "WHERE id = $1 AND state = 'queued'",
                          err);
        if (c == NULL) {
            return -1;
        }
        sbx_q_text(c, 1, job->id);
        sbx_q_text(c, 2, "refused: its task belongs to another client");
        sbx_q_int64(c, 3, sbx_store_now());
        return sbx_q_step(c, "refuse a job", err) < 0 ? -1 : 2;
    }
    rc = exists(st, HELD_BY_JOB, task, job->id, NULL, 0, err);
    if (rc == 0) {
        rc = exists(st, LIVE_TASK, task, job->id, NULL, 0, err);
    }
    return rc < 0 ? -1 : rc == 0;
}

int sbx_store_task_busy(struct sbx_store *st, const char *task, const char *job,
                        struct sbx_task_busy *out, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    q = sbx_q_prepare(st,
                      "SELECT id, state, box FROM jobs WHERE task = $1 AND id <> $2 AND state IN "
                      "('queued', 'running') ORDER BY seq LIMIT 1",
                      err);
    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, task);
    sbx_q_text(q, 2, job);
    rc = sbx_q_step(q, "look at a task's jobs", err);
    if (rc < 0) {
        return -1;
    }
    if (rc == 1) {
        snprintf(out->job, sizeof(out->job), "%s", sbx_q_col_text(q, 0));
        out->queued = strcmp(sbx_q_col_text(q, 1), "queued") == 0;
        snprintf(out->box, sizeof(out->box), "%s",
                 sbx_q_col_text(q, 2) ? sbx_q_col_text(q, 2) : "");
        return 1;
    }
    rc = exists(st, LIVE_TASK, task, job, out->box, sizeof(out->box), err);
    if (rc == 1) {
        out->live = 1;
    }
    return rc;
}
