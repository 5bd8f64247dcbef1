/* scale.c - the fleet autoscaler's shared rows on PostgreSQL (docs/runner.md,
 * "Several boxes"): the leader lock, the alerts and scale-ups the leader
 * decided (fleet_scale) and the fleet's spend (fleet_spend).
 *
 * The leader holds a session advisory lock on a connection it keeps: a box
 * that dies or loses that connection loses the lock, and another box takes it
 * at its next beat. Every decision runs in one transaction under a second,
 * transaction-level lock and writes its row before it commits, so a decision
 * always sees every decision before it, whoever the leader was. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/xalloc.h"

/* pg_advisory_xact_lock key of the decisions */
#define DECIDE_LOCK 0x73627821

/* A leader whose box is dead (its lease lapsed: paused, cut off) but whose
 * session still holds the lock is deposed: its backend is terminated, which
 * frees the lock; a box takes it at its next beat. Only the backend that
 * holds the lock and that fleet_leader names is touched. 1 when it did. */
static int depose(struct sbx_store *st, int64_t now, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    char sql[600];
    int rc;

    snprintf(sql, sizeof(sql),
             "SELECT pg_terminate_backend(l.pid) FROM pg_locks l JOIN fleet_leader f ON f.pid = "
             "l.pid WHERE l.locktype = 'advisory' AND l.classid = 0 AND l.objid = %d AND "
             "l.objsubid = 1 AND l.granted AND NOT EXISTS (SELECT 1 FROM boxes b WHERE b.id = "
             "f.box AND b.lease_until > $1)",
             SBX_LEADER_LOCK);
    q = sbx_q_prepare(st, sql, err);
    if (q == NULL) {
        return -1;
    }
    sbx_q_int64(q, 1, now);
    rc = sbx_q_step(q, "depose a dead leader", err);
    return rc < 0 ? -1 : rc;
}

int sbx_store_leader_hold(struct sbx_store *st, const char *box, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    cleanup_q struct sbx_q *m = NULL;
    char sql[400];
    int rc;

    if (sbx_store_need_pg(st, "the fleet's leader lock", err) < 0) {
        return -1;
    }
    if (!sbx_store_id_ok(box)) {
        return sbx_error_set(err, EINVAL, "store: the leader lock needs a box id");
    }
    /* held already (pg_locks of this session: 2), else try (1 got it, 0 not):
     * a second try by the holder would stack the lock, never needed */
    snprintf(sql, sizeof(sql),
             "SELECT CASE WHEN EXISTS (SELECT 1 FROM pg_locks WHERE locktype = 'advisory' AND "
             "classid = 0 AND objid = %d AND objsubid = 1 AND pid = pg_backend_pid() AND granted) "
             "THEN 2 WHEN pg_try_advisory_lock(%d) THEN 1 ELSE 0 END",
             SBX_LEADER_LOCK, SBX_LEADER_LOCK);
    q = sbx_q_prepare(st, sql, err);
    if (q == NULL || sbx_q_step(q, "take the leader lock", err) != 1) {
        return -1;
    }
    rc = (int)sbx_q_col_int64(q, 0);
    if (rc == 2) {
        return 1;
    }
    if (rc == 0) {
        return depose(st, sbx_store_now(), err) < 0 ? -1 : 0;
    }
    /* a new leader: which box, on which backend (for depose) */
    m = sbx_q_prepare(st,
                      "INSERT INTO fleet_leader (id, box, pid, since) VALUES (1, $1, "
                      "pg_backend_pid(), $2) ON CONFLICT (id) DO UPDATE SET box = excluded.box, "
                      "pid = excluded.pid, since = excluded.since",
                      err);
    if (m == NULL) {
        return -1;
    }
    sbx_q_text(m, 1, box);
    sbx_q_int64(m, 2, sbx_store_now());
    if (sbx_q_step(m, "record the leader", err) < 0) {
        return -1;
    }
    return 1;
}

static int decide_lock(struct sbx_store *st, sbx_error_t **err)
{
    char lock[64];

    snprintf(lock, sizeof(lock), "SELECT pg_advisory_xact_lock(%d)", DECIDE_LOCK);
    if (sbx_store_begin(st, err) < 0) {
        return -1;
    }
    if (sbx_store_exec(st, lock, err) < 0) {
        sbx_store_rollback(st);
        return -1;
    }
    return 0;
}

int sbx_store_fleet_alerts(struct sbx_store *st, int64_t before, const char *leader,
                           struct sbx_fleet_alert *out, size_t max, size_t *n, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    int64_t now = sbx_store_now();
    int rc;

    *n = 0;
    if (sbx_store_need_pg(st, "a fleet alert", err) < 0 || decide_lock(st, err) < 0) {
        return -1;
    }
    /* an alert row lives while its job waits: the table holds at most the
     * queued jobs that were alerted */
    if (sbx_store_exec(st,
                       "DELETE FROM fleet_scale a WHERE a.kind = 'alert' AND NOT EXISTS (SELECT 1 "
                       "FROM jobs j WHERE j.id = a.job AND j.state = 'queued')",
                       err) < 0) {
        goto fail;
    }
    q = sbx_q_prepare(st,
                      "SELECT id, task, pool, class, queued_at FROM jobs j WHERE state = 'queued' "
                      "AND queued_at <= $1 AND NOT EXISTS (SELECT 1 FROM fleet_scale a WHERE "
                      "a.kind = 'alert' AND a.job = j.id) ORDER BY seq LIMIT $2",
                      err);
    if (q == NULL) {
        goto fail;
    }
    sbx_q_int64(q, 1, before);
    sbx_q_int64(q, 2, (int64_t)max);
    while (*n < max && (rc = sbx_q_step(q, "find waiting jobs", err)) == 1) {
        struct sbx_fleet_alert *a = &out[*n];

        snprintf(a->id, sizeof(a->id), "%s", sbx_q_col_text(q, 0) ? sbx_q_col_text(q, 0) : "");
        snprintf(a->task, sizeof(a->task), "%s", sbx_q_col_text(q, 1) ? sbx_q_col_text(q, 1) : "");
        snprintf(a->pool, sizeof(a->pool), "%s", sbx_q_col_text(q, 2) ? sbx_q_col_text(q, 2) : "");
        snprintf(a->cls, sizeof(a->cls), "%s", sbx_q_col_text(q, 3) ? sbx_q_col_text(q, 3) : "");
        a->queued_at = sbx_q_col_int64(q, 4);
        (*n)++;
    }
    if (rc < 0) {
        goto fail;
    }
    for (size_t i = 0; i < *n; i++) {
        cleanup_q struct sbx_q *ins =
            sbx_q_prepare(st,
                          "INSERT INTO fleet_scale (at, kind, pool, job, leader) VALUES ($1, "
                          "'alert', $2, $3, $4)",
                          err);

        if (ins == NULL) {
            goto fail;
        }
        sbx_q_int64(ins, 1, now);
        sbx_q_text(ins, 2, out[i].pool);
        sbx_q_text(ins, 3, out[i].id);
        sbx_q_text(ins, 4, leader);
        if (sbx_q_step(ins, "record an alert", err) < 0) {
            goto fail;
        }
    }
    if (sbx_store_commit(st, err) < 0) {
        goto fail;
    }
    return 0;
fail:
    sbx_store_rollback(st);
    *n = 0;
    return -1;
}

/* One row of integers: $1 is t (when not NULL), the next $ is i. */
static int read_row(struct sbx_store *st, const char *sql, const char *what, const char *t,
                    int64_t i, int64_t *out, int n_out, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = sbx_q_prepare(st, sql, err);
    int rc;

    if (q == NULL) {
        return -1;
    }
    if (t != NULL) {
        sbx_q_text(q, 1, t);
    }
    sbx_q_int64(q, t != NULL ? 2 : 1, i);
    rc = sbx_q_step(q, what, err);
    if (rc < 0) {
        return -1;
    }
    for (int k = 0; k < n_out; k++) {
        out[k] = rc == 1 && !sbx_q_col_null(q, k) ? sbx_q_col_int64(q, k) : 0;
    }
    return rc;
}

/* What a decision sees, read inside its transaction: the pool's queue, the
 * live boxes, the scale-ups and the fleet's spend. */
static int fleet_read_state(struct sbx_store *st, const char *pool, int64_t window_ms,
                            struct sbx_fleet_scale *fs, sbx_error_t **err)
{
    cleanup_q struct sbx_q *sp = NULL;
    int64_t v[3];
    char like[32];
    int rc;

    if (read_row(st,
                 "SELECT count(*), count(*) FILTER (WHERE class = 'heavy'), min(queued_at) FROM "
                 "jobs WHERE state = 'queued' AND pool = $1 AND queued_at <= $2",
                 "read the queue", pool, fs->now, v, 3, err) < 0) {
        return -1;
    }
    fs->queued = v[0];
    fs->heavy = v[1];
    fs->oldest = v[2];
    snprintf(like, sizeof(like), "%%\"%s\"%%", pool);
    if (read_row(st,
                 "SELECT count(*), count(*) FILTER (WHERE pools LIKE $1) FROM boxes WHERE "
                 "lease_until > $2",
                 "count the live boxes", like, fs->now, v, 2, err) < 0) {
        return -1;
    }
    fs->live = (int)v[0];
    fs->pool_live = (int)v[1];
    if ((rc = read_row(st,
                       "SELECT at FROM fleet_scale WHERE kind = 'scale_up' AND pool = $1 AND at <= "
                       "$2 ORDER BY seq DESC LIMIT 1",
                       "read the last scale-up", pool, fs->now, v, 1, err)) < 0) {
        return -1;
    }
    fs->scaled = rc == 1;
    fs->last_scale_up = v[0];
    if (read_row(st,
                 "SELECT coalesce(max(paid), 0), (SELECT count(*) FROM fleet_scale WHERE kind = "
                 "'scale_up') FROM fleet_scale WHERE kind = 'scale_up' AND at > $1",
                 "read the recent scale-ups", NULL, fs->now - window_ms, v, 2, err) < 0) {
        return -1;
    }
    fs->promised = (int)v[0];
    fs->scale_ups = v[1];
    sp = sbx_q_prepare(st, "SELECT at, day, month FROM fleet_spend WHERE id = 1", err);
    if (sp == NULL || (rc = sbx_q_step(sp, "read the spend", err)) < 0) {
        return -1;
    }
    fs->spend_at = rc == 1 ? sbx_q_col_int64(sp, 0) : fs->now;
    fs->spend_day = rc == 1 ? sbx_q_col_double(sp, 1) : 0;
    fs->spend_month = rc == 1 ? sbx_q_col_double(sp, 2) : 0;
    return 0;
}

/* Writes what decide() made of it, in the same transaction: the spend, and
 * the scale-up when it chose one. */
static int fleet_write_decision(struct sbx_store *st, const char *pool, const char *leader,
                                struct sbx_fleet_scale *fs, sbx_error_t **err)
{
    cleanup_q struct sbx_q *w = NULL;
    cleanup_q struct sbx_q *up = NULL;

    w = sbx_q_prepare(st,
                      "INSERT INTO fleet_spend (id, at, day, month) VALUES (1, $1, $2, $3) ON "
                      "CONFLICT (id) DO UPDATE SET at = excluded.at, day = excluded.day, month = "
                      "excluded.month",
                      err);
    if (w == NULL) {
        return -1;
    }
    sbx_q_int64(w, 1, fs->spend_at);
    sbx_q_double(w, 2, fs->spend_day);
    sbx_q_double(w, 3, fs->spend_month);
    if (sbx_q_step(w, "record the spend", err) < 0) {
        return -1;
    }
    if (!fs->up) {
        return 0;
    }
    up = sbx_q_prepare(st,
                       "INSERT INTO fleet_scale (at, kind, pool, leader, current, wanted, paid, "
                       "reason) VALUES ($1, 'scale_up', $2, $3, $4, $5, $6, $7)",
                       err);
    if (up == NULL) {
        return -1;
    }
    sbx_q_int64(up, 1, fs->now);
    sbx_q_text(up, 2, pool);
    sbx_q_text(up, 3, leader);
    sbx_q_int64(up, 4, fs->current);
    sbx_q_int64(up, 5, fs->wanted);
    sbx_q_int64(up, 6, fs->paid);
    sbx_q_text(up, 7, fs->reason);
    if (sbx_q_step(up, "record a scale-up", err) < 0) {
        return -1;
    }
    fs->scale_ups++;
    return 0;
}

int sbx_store_fleet_scale(struct sbx_store *st, const char *pool, const char *leader,
                          int64_t window_ms, sbx_fleet_decide_fn decide, void *ctx,
                          struct sbx_fleet_scale *fs, sbx_error_t **err)
{
    memset(fs, 0, sizeof(*fs));
    if (sbx_store_need_pg(st, "a fleet scale decision", err) < 0) {
        return -1;
    }
    if (pool == NULL || (strcmp(pool, "ci") != 0 && strcmp(pool, "agent") != 0)) {
        return sbx_error_set(err, EINVAL, "store: a scale decision needs a pool");
    }
    if (decide_lock(st, err) < 0) {
        return -1;
    }
    /* one transaction from decide_lock() to the commit */
    fs->now = sbx_store_now();
    if (fleet_read_state(st, pool, window_ms, fs, err) < 0) {
        goto fail;
    }
    decide(ctx, fs);
    if (fleet_write_decision(st, pool, leader, fs, err) < 0) {
        goto fail;
    }
    if (sbx_store_commit(st, err) < 0) {
        goto fail;
    }
    return fs->up ? 1 : 0;
fail:
    sbx_store_rollback(st);
    fs->up = 0;
    return -1;
}
