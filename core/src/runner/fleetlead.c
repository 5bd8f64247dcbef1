/* fleetlead.c - the fleet's one autoscaler (docs/runner.md, "Several boxes"
 * and "Autoscaler and spend caps").
 *
 * At each beat every box of a fleet tries to be the leader: the box whose
 * own connection holds the session advisory lock SBX_LEADER_LOCK. A leader
 * that dies or loses that connection loses the lock; another box takes it at
 * its next beat. Only the leader alerts and scales, from the shared rows:
 * the wait is the oldest queued job's age per pool in the shared queue, the
 * box count comes from the live box rows, and every alert, scale-up and the
 * spend are rows (store/scale.c), so a new leader continues from them and the
 * spend caps hold for the fleet. Each decision and its row are written in one
 * transaction under a lock: two boxes never both add a box.
 *
 * (changed) Runs on the store thread at the fleet's beat (fleet.c,
 * storeq.h); what the loop reads of it (/metrics) is under l->mu, and the
 * scheduler's slots per pool are copied by the loop before the beat
 * (runner_lead_prepare). What it read is kept for /metrics until the next
 * beat: a scrape never queries the database. (changed, issue 31) It keeps
 * what it needs of the runner (the configuration, the store's location, the
 * box's id), given at runner_lead_new, and the store probe at each beat: no
 * struct sbx_runner. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "runner/fleet.h"
#include "runner/health.h"
#include "runner/hooks.h"
#include "sched/sched.h"
#include "store/store.h"
#include "util/log.h"
#include "util/xalloc.h"

#define ALERTS_MAX 16

static int64_t wall_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct runner_lead {
    const struct sbx_config *cfg;
    const char *store_path;
    const char *box;           /* the fleet's (fleet.c), outlives the lead */
    pthread_mutex_t mu;        /* (added) what /metrics reads below */
    int slots[SBX_POOL_COUNT]; /* (added) the loop's copy (runner_lead_prepare) */
    struct sbx_store *conn;    /* holds the leader lock while this box leads */
    int leader;
    /* the last beat's fleet view, for /metrics (valid while leader) */
    struct {
        int64_t queued, wait_ms;
        int boxes;
    } pools[SBX_POOL_COUNT];
    int live, paid;
    int64_t scale_ups;
    double spend_day, spend_month;
    uint64_t alerts; /* alerts this box fired as the leader */
};

struct decide_ctx {
    const struct sbx_config *cfg;
    int slots;
    enum sbx_pool pool;
    int alerted; /* a job of the pool crossed alert_after at this beat */
    struct sbx_scale_decision d;
};

static int pool_slots(struct sbx_sched *sched, enum sbx_pool pool)
{
    struct sbx_sched_snapshot *snap = sbx_sched_snapshot(sched);
    int n = snap->pools[pool].served ? snap->pools[pool].max_sandboxes : snap->box_max_sandboxes;

    sbx_sched_snapshot_free(snap);
    return n > 0 ? n : 1;
}

struct runner_lead *runner_lead_new(const struct sbx_config *cfg, const char *store_path,
                                    const char *box)
{
    struct runner_lead *l = xcalloc(1, sizeof(*l));

    l->cfg = cfg;
    l->store_path = store_path;
    l->box = box;
    pthread_mutex_init(&l->mu, NULL);
    return l;
}

void runner_lead_prepare(struct runner_lead *l, struct sbx_sched *sched)
{
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        l->slots[p] = pool_slots(sched, (enum sbx_pool)p);
    }
}

/* Under the store's lock: spend accrued to now, then the decision. Like one
 * box, the fleet scales only when a job crosses alert_after. */
static void decide(void *arg, struct sbx_fleet_scale *fs)
{
    struct decide_ctx *c = arg;
    const struct sbx_config *cfg = c->cfg;
    struct sbx_spend sp = {.at = fs->spend_at, .day = fs->spend_day, .month = fs->spend_month};
    struct sbx_scale_in in = {0};
    int paid = fs->live > fs->promised ? fs->live : fs->promised;

    sbx_spend_accrue(&sp, cfg->runner.box_hour_price * (double)paid / 3600000.0, fs->now);
    fs->spend_at = sp.at;
    fs->spend_day = sp.day;
    fs->spend_month = sp.month;
    in.now = fs->now;
    in.queued = (size_t)fs->queued;
    in.heavy = (size_t)fs->heavy;
    in.oldest = fs->oldest;
    in.current = fs->pool_live;
    in.paid = paid;
    in.max_sandboxes = c->slots;
    in.scaled = fs->scaled;
    in.last_scale_up = fs->last_scale_up;
    in.alert_after_ms = cfg->runner.alert_after * 1000;
    in.cooldown_ms = cfg->runner.cooldown * 1000;
    in.max_boxes = cfg->runner.max_boxes;
    in.price = cfg->runner.box_hour_price;
    in.day_cap = cfg->runner.spend_day_cap;
    in.month_cap = cfg->runner.spend_month_cap;
    in.spent_day = sp.day;
    in.spent_month = sp.month;
    c->d.pool = c->pool;
    sbx_scale_decide(&in, &c->d);
    if (c->d.action == SBX_SCALE_UP && !c->alerted) {
        c->d.action = SBX_SCALE_NONE; /* only a new alert scales */
    }
    if (c->d.action == SBX_SCALE_UP && cfg->runner.scale_up_command == NULL) {
        snprintf(c->d.reason, sizeof(c->d.reason),
                 "%d box(es) wanted but runner.scale_up_command is not set", c->d.wanted);
        c->d.action = SBX_SCALE_NONE;
    }
    fs->up = c->d.action == SBX_SCALE_UP;
    fs->current = c->d.current;
    fs->wanted = c->d.wanted;
    fs->paid = paid + (c->d.wanted - c->d.current);
    snprintf(fs->reason, sizeof(fs->reason), "%s", c->d.reason);
}

static void lead_drop(struct runner_lead *l, const char *why)
{
    if (l->leader) {
        sbx_warn("runner: box %s is no longer the fleet's leader: %s", l->box, why);
    }
    pthread_mutex_lock(&l->mu);
    l->leader = 0;
    pthread_mutex_unlock(&l->mu);
}

/* The leader's work at a beat: alerts, then one decision per pool. */
static void lead(struct runner_lead *l)
{
    const struct sbx_config *cfg = l->cfg;
    struct sbx_fleet_alert al[ALERTS_MAX];
    struct decide_ctx ctx[SBX_POOL_COUNT];
    size_t n = 0;
    sbx_error_t *err = NULL;

    if (sbx_store_fleet_alerts(l->conn, wall_ms() - cfg->runner.alert_after * 1000, l->box, al,
                               ALERTS_MAX, &n, &err) < 0) {
        sbx_error_log("runner: fleet alerts: %s", sbx_error_msg(err));
        sbx_error_free(&err);
        return;
    }
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        struct sbx_fleet_scale fs;
        int rc;

        memset(&ctx[p], 0, sizeof(ctx[p]));
        ctx[p].cfg = cfg;
        ctx[p].slots = l->slots[p];
        ctx[p].pool = (enum sbx_pool)p;
        for (size_t i = 0; i < n; i++) {
            ctx[p].alerted |= sbx_pool_parse(al[i].pool) == p;
        }
        rc = sbx_store_fleet_scale(l->conn, sbx_pool_name((enum sbx_pool)p), l->box,
                                   cfg->runner.cooldown * 1000, decide, &ctx[p], &fs, &err);
        if (rc < 0) {
            sbx_error_log("runner: fleet autoscaler: %s", sbx_error_msg(err));
            sbx_error_free(&err);
            ctx[p].d.action = SBX_SCALE_NONE;
            continue;
        }
        pthread_mutex_lock(&l->mu);
        l->pools[p].queued = fs.queued;
        l->pools[p].wait_ms = fs.oldest > 0 ? fs.now - fs.oldest : 0;
        l->pools[p].boxes = fs.pool_live;
        l->live = fs.live;
        l->paid = fs.live > fs.promised ? fs.live : fs.promised;
        l->scale_ups = fs.scale_ups;
        l->spend_day = fs.spend_day;
        l->spend_month = fs.spend_month;
        pthread_mutex_unlock(&l->mu);
        if (rc == 1) {
            sbx_warn("runner: fleet leader %s: scale-up of pool %s to %d box(es): %s", l->box,
                     sbx_pool_name((enum sbx_pool)p), ctx[p].d.wanted, ctx[p].d.reason);
        }
    }
    for (size_t i = 0; i < n; i++) {
        int p = sbx_pool_parse(al[i].pool);
        struct sbx_sched_alert a = {0};

        if (p < 0) {
            continue;
        }
        snprintf(a.id, sizeof(a.id), "%s", al[i].id);
        a.pool = (enum sbx_pool)p;
        a.cls =
            sbx_job_class_parse(al[i].cls) == SBX_CLASS_HEAVY ? SBX_CLASS_HEAVY : SBX_CLASS_LIGHT;
        a.enqueued_at = al[i].queued_at;
        a.wait_ms = wall_ms() - al[i].queued_at;
        sbx_warn("runner: job %s has waited %.0fs in pool %s of the fleet (runner.alert_after "
                 "%llds); autoscaler: %s",
                 a.id, (double)a.wait_ms / 1000.0, al[i].pool, (long long)cfg->runner.alert_after,
                 ctx[p].d.reason);
        runner_alert_fire(cfg, &a, al[i].task, &ctx[p].d);
        ctx[p].d.action = SBX_SCALE_NONE; /* the scale-up goes with the first alert only */
        pthread_mutex_lock(&l->mu);
        l->alerts++;
        pthread_mutex_unlock(&l->mu);
    }
}

int runner_lead_beat(struct runner_lead *l, struct runner_storeprobe *probe)
{
    sbx_error_t *err = NULL;
    int rc;

    if (runner_store_stalled(probe)) {
        return -1; /* (added) no wait on a database known stalled: the next beat */
    }
    if (l->conn == NULL) {
        l->conn = sbx_store_open_ex(l->store_path, l->cfg->runner.database_password_env, &err);
        if (l->conn == NULL) {
            sbx_error_free(&err); /* the database is away: the next beat */
            lead_drop(l, "its connection to the database failed");
            return 0;
        }
    }
    rc = sbx_store_leader_hold(l->conn, l->box, &err);
    if (rc < 0) {
        sbx_error_log("runner: the fleet's leader lock: %s", sbx_error_msg(err));
        sbx_error_free(&err);
        sbx_store_close(l->conn); /* the lock goes with the connection */
        l->conn = NULL;
        lead_drop(l, "its connection to the database failed");
        return 0;
    }
    if (rc == 0) {
        lead_drop(l, "another box holds the lock");
        return 0;
    }
    if (!l->leader) {
        sbx_warn("runner: box %s is the fleet's leader (it alerts and scales for the fleet)",
                 l->box);
        pthread_mutex_lock(&l->mu);
        l->leader = 1;
        pthread_mutex_unlock(&l->mu);
    }
    lead(l);
    return 1;
}

/* This box gave up its lease (lost it, or stops): another box leads. */
void runner_lead_free(struct runner_lead *l)
{
    if (l == NULL) {
        return;
    }
    sbx_store_close(l->conn);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

void runner_lead_resign(struct runner_lead *l)
{
    if (l == NULL) {
        return;
    }
    lead_drop(l, "it lost its lease");
    sbx_store_close(l->conn);
    l->conn = NULL;
}

void runner_lead_metrics(struct runner_lead *lp, FILE *f)
{
    struct runner_lead copy;
    struct runner_lead *l = &copy;

    if (lp == NULL) {
        return; /* the fleet did not start */
    }
    pthread_mutex_lock(&lp->mu); /* (added) the store thread writes it at the beat */
    memcpy(&copy, lp, sizeof(copy));
    pthread_mutex_unlock(&lp->mu);
    fprintf(f,
            "# HELP sbx_fleet_leader 1 while this box is the fleet's leader (its autoscaler).\n"
            "# TYPE sbx_fleet_leader gauge\nsbx_fleet_leader{box=\"%s\"} %d\n",
            l->box, l->leader);
    if (!l->leader) {
        return;
    }
    fprintf(f, "# HELP sbx_fleet_wait_seconds The oldest queued job's wait in the shared queue "
               "(leader).\n# TYPE sbx_fleet_wait_seconds gauge\n");
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        fprintf(f, "sbx_fleet_wait_seconds{pool=\"%s\"} %.3f\n", sbx_pool_name((enum sbx_pool)p),
                (double)l->pools[p].wait_ms / 1000.0);
    }
    fprintf(f, "# HELP sbx_fleet_boxes Live boxes serving the pool (leader).\n"
               "# TYPE sbx_fleet_boxes gauge\n");
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        fprintf(f, "sbx_fleet_boxes{pool=\"%s\"} %d\n", sbx_pool_name((enum sbx_pool)p),
                l->pools[p].boxes);
    }
    fprintf(f,
            "# HELP sbx_fleet_boxes_live Boxes whose lease runs (leader).\n"
            "# TYPE sbx_fleet_boxes_live gauge\nsbx_fleet_boxes_live %d\n"
            "# HELP sbx_fleet_boxes_paid Boxes the fleet pays for, those asked for included "
            "(leader).\n# TYPE sbx_fleet_boxes_paid gauge\nsbx_fleet_boxes_paid %d\n"
            "# HELP sbx_fleet_scale_ups_total Scale-ups recorded in the fleet (leader).\n"
            "# TYPE sbx_fleet_scale_ups_total counter\nsbx_fleet_scale_ups_total %lld\n"
            "# HELP sbx_fleet_alerts_total Wait alerts this box fired as the leader.\n"
            "# TYPE sbx_fleet_alerts_total counter\nsbx_fleet_alerts_total %llu\n"
            "# HELP sbx_fleet_spend_dollars The fleet's spend so far (leader).\n"
            "# TYPE sbx_fleet_spend_dollars gauge\n"
            "sbx_fleet_spend_dollars{period=\"day\"} %.4f\n"
            "sbx_fleet_spend_dollars{period=\"month\"} %.4f\n",
            l->live, l->paid, (long long)l->scale_ups, (unsigned long long)l->alerts, l->spend_day,
            l->spend_month);
}
