/* fleet.c - boxes, claims and lost boxes on the shared PostgreSQL store
 * (docs/runner.md, "Several boxes").
 *
 * A box is a row with a lease: it renews it every lease/3; a box whose lease
 * lapsed is dead to the others, and the first box to notice reaps it in one
 * transaction (its claimed jobs go back to the queue, its running jobs end
 * `interrupted: box lost`, its tasks end) and bumps its epoch, so that the
 * dead box's next renewal fails and it learns it was lost. Every claim takes
 * a new token from one sequence; a reap gives each running job of the dead
 * box a new token too, so every later write of the dead box about those jobs
 * (fenced by its old token) is refused.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/xalloc.h"

/* pg_advisory_xact_lock key base of the claim of a pool (+ pool index) */
/* (added) a claim's transaction idle this long: its box stopped mid-claim */
#define CLAIM_IDLE "3s"
#define CLAIM_LOCK 0x73627810
/* rows a claim looks at past a parked heavy job */
#define CLAIM_WINDOW 64

#define BOX_COLUMNS "id, pools, capacity, api, version, started_at, heartbeat, lease_until, epoch"

int sbx_store_need_pg(struct sbx_store *st, const char *what, sbx_error_t **err)
{
    if (st->pg == NULL) {
        return sbx_error_set(err, EINVAL,
                             "store: %s: %s needs the shared PostgreSQL store (runner.database)",
                             st->path, what);
    }
    return 0;
}

void sbx_box_rec_clear(struct sbx_box_rec *b)
{
    if (b == NULL) {
        return;
    }
    free(b->id);
    json_decref(b->pools);
    json_decref(b->capacity);
    free(b->api);
    free(b->version);
    memset(b, 0, sizeof(*b));
}

void sbx_box_rec_free_array(struct sbx_box_rec *b, size_t n)
{
    for (size_t i = 0; b != NULL && i < n; i++) {
        sbx_box_rec_clear(&b[i]);
    }
    free(b);
}

static void row_to_box(struct sbx_q *q, struct sbx_box_rec *b)
{
    const char *t;

    memset(b, 0, sizeof(*b));
    b->id = sbx_q_col_strdup(q, 0);
    t = sbx_q_col_text(q, 1);
    b->pools = t ? json_loads(t, 0, NULL) : NULL;
    t = sbx_q_col_text(q, 2);
    b->capacity = t ? json_loads(t, 0, NULL) : NULL;
    b->api = sbx_q_col_strdup(q, 3);
    b->version = sbx_q_col_strdup(q, 4);
    b->started_at = sbx_q_col_int64(q, 5);
    b->heartbeat = sbx_q_col_int64(q, 6);
    b->lease_until = sbx_q_col_int64(q, 7);
    b->epoch = sbx_q_col_int64(q, 8);
}

int sbx_store_box_register(struct sbx_store *st, const struct sbx_box_rec *b, int64_t lease_ms,
                           int64_t *epoch, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    char *pools = NULL;
    char *cap = NULL;
    int64_t now = sbx_store_now();
    int rc;

    if (sbx_store_need_pg(st, "registering a box", err) < 0) {
        return -1;
    }
    if (b == NULL || !sbx_store_id_ok(b->id) || !json_is_array(b->pools) ||
        !json_is_object(b->capacity) || b->api == NULL || !sbx_store_text_ok(b->api) ||
        b->version == NULL || !sbx_store_text_ok(b->version) || lease_ms <= 0) {
        return sbx_error_set(err, EINVAL,
                             "store: a box needs an id, pools, capacity, api, "
                             "version and a lease");
    }
    q = sbx_q_prepare(st,
                      "INSERT INTO boxes (" BOX_COLUMNS ") VALUES ($1, $2, $3, $4, $5, $6, $6, "
                      "CAST($6 AS BIGINT) + CAST($7 AS BIGINT), 1) ON CONFLICT (id) DO UPDATE SET "
                      "pools = excluded.pools, "
                      "capacity = excluded.capacity, api = excluded.api, version = "
                      "excluded.version, started_at = excluded.started_at, heartbeat = "
                      "excluded.heartbeat, lease_until = excluded.lease_until, epoch = "
                      "boxes.epoch + 1 RETURNING epoch",
                      err);
    if (q == NULL) {
        return -1;
    }
    pools = json_dumps(b->pools, JSON_COMPACT);
    cap = json_dumps(b->capacity, JSON_COMPACT);
    sbx_q_text(q, 1, b->id);
    sbx_q_text(q, 2, pools);
    sbx_q_text(q, 3, cap);
    sbx_q_text(q, 4, b->api);
    sbx_q_text(q, 5, b->version);
    sbx_q_int64(q, 6, now);
    sbx_q_int64(q, 7, lease_ms);
    rc = sbx_q_step(q, "register box", err);
    free(pools);
    free(cap);
    if (rc != 1) {
        return -1;
    }
    *epoch = sbx_q_col_int64(q, 0);
    return 0;
}

int sbx_store_box_renew(struct sbx_store *st, const char *id, int64_t epoch, int64_t lease_ms,
                        sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    int64_t now = sbx_store_now();

    if (sbx_store_need_pg(st, "renewing a box's lease", err) < 0) {
        return -1;
    }
    q = sbx_q_prepare(
        st,
        "UPDATE boxes SET heartbeat = $3, lease_until = CAST($3 AS BIGINT) + CAST($4 AS BIGINT) "
        "WHERE id = $1 AND epoch = $2 AND lease_until > 0",
        err);
    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, id);
    sbx_q_int64(q, 2, epoch);
    sbx_q_int64(q, 3, now);
    sbx_q_int64(q, 4, lease_ms);
    if (sbx_q_step(q, "renew the box's lease", err) < 0) {
        return -1;
    }
    if (sbx_q_changes(q) == 0) {
        return sbx_error_set(err, ESTALE,
                             "store: box %s lost its lease (another box reaped it): its jobs "
                             "were given back or ended",
                             id);
    }
    return 0;
}

int sbx_store_box_list(struct sbx_store *st, struct sbx_box_rec **out, size_t *n, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    struct sbx_box_rec *recs = NULL;
    size_t count = 0;
    int rc;

    *out = NULL;
    *n = 0;
    if (sbx_store_need_pg(st, "listing boxes", err) < 0) {
        return -1;
    }
    q = sbx_q_prepare(st, "SELECT " BOX_COLUMNS " FROM boxes ORDER BY id", err);
    if (q == NULL) {
        return -1;
    }
    while ((rc = sbx_q_step(q, "list boxes", err)) == 1) {
        recs = xrealloc(recs, (count + 1) * sizeof(*recs));
        row_to_box(q, &recs[count++]);
    }
    if (rc < 0) {
        sbx_box_rec_free_array(recs, count);
        return -1;
    }
    *out = recs;
    *n = count;
    return 0;
}

/* One statement of the reap, counting its rows into *count. */
static int reap_step(struct sbx_store *st, const char *sql, const char *box, int64_t now,
                     size_t *count, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = sbx_q_prepare(st, sql, err);

    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, box);
    sbx_q_int64(q, 2, now);
    if (sbx_q_step(q, "reap a lost box", err) < 0) {
        return -1;
    }
    if (count != NULL) {
        *count += (size_t)sbx_q_changes(q);
    }
    return 0;
}

int sbx_store_reap(struct sbx_store *st, int64_t now, struct sbx_reap *out, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    char **dead = NULL;
    size_t n_dead = 0;
    int rc;
    int r = 0;

    memset(out, 0, sizeof(*out));
    if (sbx_store_need_pg(st, "reaping lost boxes", err) < 0) {
        return -1;
    }
    if (now == 0) {
        now = sbx_store_now();
    }
    if (sbx_store_begin(st, err) < 0) {
        return -1;
    }
    /* FOR UPDATE SKIP LOCKED: two boxes never reap the same box twice */
    q = sbx_q_prepare(st,
                      "SELECT id FROM boxes WHERE lease_until > 0 AND lease_until < $1 "
                      "ORDER BY id FOR UPDATE SKIP LOCKED",
                      err);
    if (q == NULL) {
        goto fail;
    }
    sbx_q_int64(q, 1, now);
    while ((rc = sbx_q_step(q, "find lost boxes", err)) == 1) {
        dead = xrealloc(dead, (n_dead + 1) * sizeof(*dead));
        dead[n_dead++] = sbx_q_col_strdup(q, 0);
    }
    if (rc < 0) {
        goto fail;
    }
    for (size_t i = 0; i < n_dead; i++) {
        const char *b = dead[i];

        /* claimed, not started: back to the queue, with a new token (so the
         * old box's writes about it fail until another claim takes it) */
        if (reap_step(st,
                      "UPDATE jobs SET box = NULL, token = nextval('sbx_fence') "
                      "WHERE box = $1 AND state = 'queued'",
                      b, now, &out->requeued, err) < 0 ||
            reap_step(st,
                      "UPDATE jobs SET state = 'interrupted', reason = 'box lost', "
                      "finished_at = $2, token = nextval('sbx_fence') "
                      "WHERE box = $1 AND state = 'running'",
                      b, now, &out->interrupted, err) < 0 ||
            reap_step(st,
                      "UPDATE tasks SET state = 'interrupted', in_flight = 0, "
                      "reason = 'box lost', ended_at = $2 "
                      "WHERE box = $1 AND state IN ('starting', 'ready')",
                      b, now, &out->tasks, err) < 0 ||
            reap_step(st,
                      "UPDATE boxes SET lease_until = 0, epoch = epoch + 1 "
                      "WHERE id = $1",
                      b, now, &out->boxes, err) < 0) {
            goto fail;
        }
    }
    r = sbx_store_commit(st, err);
    if (r < 0) {
        goto fail;
    }
    for (size_t i = 0; i < n_dead; i++) {
        free(dead[i]);
    }
    free(dead);
    return 0;
fail:
    sbx_store_rollback(st);
    for (size_t i = 0; i < n_dead; i++) {
        free(dead[i]);
    }
    free(dead);
    memset(out, 0, sizeof(*out));
    return -1;
}

/* One claimer of a pool at a time (a few ms): every claim takes the oldest
 * job the box can run, so the pool's claims follow submit order across
 * boxes. SKIP LOCKED passes over a row a cancel is ending right now.
 * (changed) The lock is tried, never waited for: a box whose claim holds
 * it while paused (SIGSTOP, a partition) must not stall every other box's
 * loop behind it; the others claim at their next beat or notification.
 * And a claim's transaction never idles: the server ends one that idles
 * CLAIM_IDLE (its box stopped mid-claim), which frees the lock.
 * 1 when this transaction holds the pool's lock, 0 when another box does. */
static int claim_lock(struct sbx_store *st, const char *pool, sbx_error_t **err)
{
    cleanup_q struct sbx_q *lk = NULL;
    char lock[96];

    if (sbx_store_exec(st, "SET LOCAL idle_in_transaction_session_timeout = '" CLAIM_IDLE "'",
                       err) < 0) {
        return -1;
    }
    snprintf(lock, sizeof(lock), "SELECT CASE WHEN pg_try_advisory_xact_lock(%d) THEN 1 ELSE 0 END",
             CLAIM_LOCK + (strcmp(pool, "agent") == 0));
    lk = sbx_q_prepare(st, lock, err);
    if (lk == NULL || sbx_q_step(lk, "take the pool's claim lock", err) != 1) {
        return -1;
    }
    return sbx_q_col_int64(lk, 0) != 0;
}

/* The pool's oldest unclaimed queued jobs (up to CLAIM_WINDOW), locked; on
 * error *rows and *n hold what was read. */
static int claim_window(struct sbx_store *st, const char *pool, struct sbx_job_rec **rows,
                        size_t *n, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    size_t k = 0;
    int rc = 0;

    q = sbx_q_prepare(st,
                      "SELECT " SBX_JOB_COLUMNS " FROM jobs WHERE state = 'queued' AND box IS NULL "
                      "AND pool = $1 ORDER BY seq LIMIT $2 FOR UPDATE SKIP LOCKED",
                      err);
    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, pool);
    sbx_q_int64(q, 2, CLAIM_WINDOW);
    *rows = xcalloc(CLAIM_WINDOW, sizeof(**rows));
    while (k < CLAIM_WINDOW && (rc = sbx_q_step(q, "find queued jobs", err)) == 1) {
        sbx_store_row_to_job(q, &(*rows)[k++]);
        *n = k;
    }
    return rc < 0 ? -1 : 0;
}

/* The oldest that fits; a job the box cannot run yet stops the claim
 * (FIFO), except one that fit() lets younger jobs pass (a parked heavy).
 * *pick stays -1 when none does. */
static int claim_pick(struct sbx_store *st, sbx_claim_fit_fn fit, void *ctx,
                      struct sbx_job_rec *rows, size_t n, int64_t *pick, sbx_error_t **err)
{
    for (size_t i = 0; i < n && *pick < 0; i++) {
        int f = fit(ctx, &rows[i]);

        if (f > 0) {
            /* (added) its task id: the client's, and held by no other job
             * nor live anywhere (store/owner.c), else passed over */
            int t = sbx_store_claim_task_check(st, &rows[i], err);

            if (t < 0) {
                return -1;
            }
            if (t == 1) {
                *pick = (int64_t)i;
            }
        }
        else if (f < 0) {
            break;
        }
    }
    return 0;
}

/* Gives the picked row to box with a new token and commits; the row moves
 * to *out. */
static int claim_take(struct sbx_store *st, const char *box, struct sbx_job_rec *row,
                      struct sbx_job_rec *out, sbx_error_t **err)
{
    cleanup_q struct sbx_q *u = NULL;

    u = sbx_q_prepare(st,
                      "UPDATE jobs SET box = $2, token = nextval('sbx_fence') WHERE seq = $1 "
                      "RETURNING token",
                      err);
    if (u == NULL) {
        return -1;
    }
    sbx_q_int64(u, 1, row->seq);
    sbx_q_text(u, 2, box);
    if (sbx_q_step(u, "claim a job", err) != 1 || sbx_store_commit(st, err) < 0) {
        return -1;
    }
    sbx_job_rec_clear(out);
    *out = *row;
    out->token = sbx_q_col_int64(u, 0);
    free(out->box);
    out->box = xstrdup(box);
    memset(row, 0, sizeof(*row));
    return 0;
}

int sbx_store_claim(struct sbx_store *st, const char *box, const char *pool, sbx_claim_fit_fn fit,
                    void *ctx, struct sbx_job_rec *out, sbx_error_t **err)
{
    struct sbx_job_rec *rows = NULL;
    size_t n = 0;
    int64_t pick = -1;
    int rc;

    if (sbx_store_need_pg(st, "claiming a job", err) < 0) {
        return -1;
    }
    if (!sbx_store_id_ok(box) || pool == NULL ||
        (strcmp(pool, "ci") != 0 && strcmp(pool, "agent") != 0)) {
        return sbx_error_set(err, EINVAL, "store: a claim needs a box id and a pool");
    }
    if (sbx_store_begin(st, err) < 0) {
        return -1;
    }
    rc = claim_lock(st, pool, err);
    if (rc < 0) {
        goto fail;
    }
    if (rc == 0) {
        return sbx_store_commit(st, err) < 0 ? -1 : 0; /* another box is claiming */
    }
    if (claim_window(st, pool, &rows, &n, err) < 0 ||
        claim_pick(st, fit, ctx, rows, n, &pick, err) < 0) {
        goto fail;
    }
    if (pick < 0) {
        sbx_job_rec_free_array(rows, n);
        return sbx_store_commit(st, err) < 0 ? -1 : 0;
    }
    if (claim_take(st, box, &rows[pick], out, err) < 0) {
        goto fail;
    }
    sbx_job_rec_free_array(rows, n);
    return 1;
fail:
    if (err != NULL && *err == NULL) {
        sbx_store_fail(st, err, "claim a job");
    }
    sbx_store_rollback(st);
    sbx_job_rec_free_array(rows, n);
    return -1;
}

/* ---- the shared queue's wake-up (LISTEN/NOTIFY) ---- */

#define CHANNEL "sbx_queue"

int sbx_store_notify(struct sbx_store *st, sbx_error_t **err)
{
    if (sbx_store_need_pg(st, "notifying the fleet", err) < 0) {
        return -1;
    }
    return sbx_store_exec(st, "NOTIFY " CHANNEL, err);
}

int sbx_store_listen(struct sbx_store *st, sbx_error_t **err)
{
    if (sbx_store_need_pg(st, "listening to the fleet", err) < 0) {
        return -1;
    }
    if (sbx_store_exec(st, "LISTEN " CHANNEL, err) < 0) {
        return -1;
    }
    return PQsocket(st->pg);
}

int sbx_store_drain(struct sbx_store *st, sbx_error_t **err)
{
    PGnotify *n;
    int count = 0;

    if (sbx_store_need_pg(st, "reading notifications", err) < 0) {
        return -1;
    }
    if (!PQconsumeInput(st->pg)) {
        return sbx_store_fail(st, err, "read notifications");
    }
    while ((n = PQnotifies(st->pg)) != NULL) {
        count++;
        PQfreemem(n);
    }
    return count;
}

int sbx_store_job_cancel_queued(struct sbx_store *st, const char *id, const char *reason,
                                sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    struct sbx_job_rec rec = {0};
    int r;

    if (id == NULL || reason == NULL || !sbx_store_text_ok(reason)) {
        return sbx_error_set(err, EINVAL, "store: a cancel needs a job id and a reason");
    }
    q = sbx_q_prepare(st,
                      "UPDATE jobs SET state = 'cancelled', reason = $2, finished_at = $3 "
                      "WHERE id = $1 AND state = 'queued' AND box IS NULL",
                      err);
    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, id);
    sbx_q_text(q, 2, reason);
    sbx_q_int64(q, 3, sbx_store_now());
    if (sbx_q_step(q, "cancel job", err) < 0) {
        return -1;
    }
    if (sbx_q_changes(q) == 1) {
        return 0;
    }
    if (sbx_store_job_get(st, id, &rec, err) < 0) {
        return -1;
    }
    if (rec.state >= SBX_JOB_FINISHED) {
        r = sbx_error_set(err, EINVAL, "job %s already ended (%s)", id,
                          sbx_job_state_name(rec.state));
    }
    else {
        r = sbx_error_set(err, EBUSY, "job %s is held by box %s: cancel it through that box's API",
                          id, rec.box ? rec.box : "(unknown)");
    }
    sbx_job_rec_clear(&rec);
    return r;
}

int sbx_store_pool_boxes(struct sbx_store *st, const char *pool, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    char *needle;
    int rc;

    if (sbx_store_need_pg(st, "counting boxes", err) < 0) {
        return -1;
    }
    q = sbx_q_prepare(st, "SELECT count(*) FROM boxes WHERE lease_until > $2 AND pools LIKE $1",
                      err);
    if (q == NULL) {
        return -1;
    }
    needle = xasprintf("%%\"%s\"%%", pool);
    sbx_q_text(q, 1, needle);
    sbx_q_int64(q, 2, sbx_store_now());
    free(needle);
    rc = sbx_q_step(q, "count boxes", err);
    return rc == 1 ? (int)sbx_q_col_int64(q, 0) : -1;
}

/* ---- the fleet's view (sbx queue, /metrics) ---- */

#define VIEW_MAX_HELD 2000

/* (added) The box whose session holds the leader lock now (store/scale.c),
 * or null: none, or the database could not tell. */
static json_t *fleet_leader(struct sbx_store *st)
{
    cleanup_q struct sbx_q *q = NULL;
    char sql[400];
    json_t *v = json_null();

    snprintf(sql, sizeof(sql),
             "SELECT f.box FROM fleet_leader f JOIN pg_locks l ON l.pid = f.pid WHERE l.locktype "
             "= 'advisory' AND l.classid = 0 AND l.objid = %d AND l.objsubid = 1 AND l.granted",
             SBX_LEADER_LOCK);
    q = sbx_q_prepare(st, sql, NULL);
    if (q != NULL && sbx_q_step(q, "read the leader", NULL) == 1 && sbx_q_col_text(q, 0) != NULL) {
        v = json_string(sbx_q_col_text(q, 0));
    }
    return v;
}

json_t *sbx_store_fleet_json(struct sbx_store *st, sbx_error_t **err)
{
    cleanup_q struct sbx_q *held = NULL;
    cleanup_q struct sbx_q *queued = NULL;
    struct sbx_box_rec *boxes = NULL;
    size_t n = 0;
    int64_t now;
    json_t *out;
    json_t *arr = json_array();
    json_t *qs = json_object();
    int rc;

    if (sbx_store_box_list(st, &boxes, &n, err) < 0) {
        json_decref(arr);
        json_decref(qs);
        return NULL;
    }
    /* (changed, issue 31) after the list, not before: a box that renewed its
     * lease in between got a negative age (sbx_fleet_box_heartbeat_age_seconds
     * below 0, where test_fleet_jobs once failed); and never below 0 (another
     * box's clock may be ahead) */
    now = sbx_store_now();
    for (size_t i = 0; i < n; i++) {
        int64_t age = now > boxes[i].heartbeat ? now - boxes[i].heartbeat : 0;

        json_array_append_new(
            arr,
            json_pack("{s:s, s:O, s:O, s:s, s:s, s:f, s:b, s:I, s:[]}", "id", boxes[i].id, "pools",
                      boxes[i].pools ? boxes[i].pools : json_null(), "capacity",
                      boxes[i].capacity ? boxes[i].capacity : json_null(), "api", boxes[i].api,
                      "version", boxes[i].version, "heartbeat_age", (double)age / 1000.0, "alive",
                      boxes[i].lease_until > now, "epoch", (json_int_t)boxes[i].epoch, "holds"));
    }
    held = sbx_q_prepare(st,
                         "SELECT box, id, pool, class, state, granted_at FROM jobs WHERE box IS "
                         "NOT NULL AND state IN ('queued', 'running') ORDER BY box, seq LIMIT $1",
                         err);
    queued = sbx_q_prepare(st,
                           "SELECT pool, count(*), min(queued_at) FROM jobs WHERE state = 'queued' "
                           "AND box IS NULL GROUP BY pool ORDER BY pool",
                           err);
    if (held == NULL || queued == NULL) {
        goto fail;
    }
    sbx_q_int64(held, 1, VIEW_MAX_HELD);
    while ((rc = sbx_q_step(held, "list held jobs", err)) == 1) {
        const char *box = sbx_q_col_text(held, 0);
        size_t k;
        json_t *b;

        json_array_foreach(arr, k, b)
        {
            if (strcmp(json_string_value(json_object_get(b, "id")), box) == 0) {
                int64_t g = sbx_q_col_int64(held, 5);

                json_array_append_new(
                    json_object_get(b, "holds"),
                    json_pack("{s:s, s:s, s:s, s:s, s:f}", "job", sbx_q_col_text(held, 1), "pool",
                              sbx_q_col_text(held, 2), "class", sbx_q_col_text(held, 3), "state",
                              strcmp(sbx_q_col_text(held, 4), "queued") == 0 ? "claimed"
                                                                             : "running",
                              /* (changed) the key was missing: every hold was dropped */
                              "held_for", g > 0 ? (double)(now - g) / 1000.0 : 0.0));
                break;
            }
        }
    }
    if (rc < 0) {
        goto fail;
    }
    while ((rc = sbx_q_step(queued, "count queued jobs", err)) == 1) {
        json_object_set_new(qs, sbx_q_col_text(queued, 0),
                            json_pack("{s:I, s:f}", "queued",
                                      (json_int_t)sbx_q_col_int64(queued, 1), "oldest_wait",
                                      (double)(now - sbx_q_col_int64(queued, 2)) / 1000.0));
    }
    if (rc < 0) {
        goto fail;
    }
    sbx_box_rec_free_array(boxes, n);
    out = json_pack("{s:o, s:o}", "boxes", arr, "queue", qs);
    json_object_set_new(out, "leader", fleet_leader(st));
    return out;
fail:
    sbx_box_rec_free_array(boxes, n);
    json_decref(arr);
    json_decref(qs);
    return NULL;
}
