/* snapshot.c - a copy of the scheduler's state for the queue view and metrics. */
#include "sched/sched_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static void snap_pool(const struct sbx_sched *s, const struct sched_pool *p, int64_t now,
                      struct sbx_sched_pool_snap *o)
{
    size_t k = 0;
    const struct sched_job *h = p->queue[SBX_CLASS_HEAVY].head;
    const struct sched_job *l = p->queue[SBX_CLASS_LIGHT].head;

    (void)s;
    o->served = p->served;
    o->cpus = (double)p->mcpu / 1000.0;
    o->cpus_used = (double)p->mcpu_used / 1000.0;
    o->memory = p->memory;
    o->memory_used = p->memory_used;
    o->max_sandboxes = p->max_sandboxes;
    o->running = p->running;
    o->heavy_busy = p->heavy != NULL;
    o->n_queued = p->queue[0].n + p->queue[1].n;
    o->n_queued_heavy = p->queue[SBX_CLASS_HEAVY].n;
    o->queued = xcalloc(o->n_queued ? o->n_queued : 1, sizeof(*o->queued));
    /* merge the two FIFO lists by sequence: oldest first */
    while (h != NULL || l != NULL) {
        const struct sched_job *j;
        struct sbx_sched_queued *q = &o->queued[k++];

        if (l == NULL || (h != NULL && h->seq < l->seq)) {
            j = h;
            h = h->next;
        }
        else {
            j = l;
            l = l->next;
        }
        memcpy(q->id, j->id, sizeof(q->id));
        memcpy(q->task, j->task, sizeof(q->task));
        q->cls = j->cls;
        q->enqueued_at = j->enqueued_at;
        q->wait_ms = now - j->enqueued_at;
        q->alerted = j->alerted;
        if (o->oldest_enqueued_at == 0 || j->enqueued_at < o->oldest_enqueued_at) {
            o->oldest_enqueued_at = j->enqueued_at;
        }
    }
    o->oldest_wait_ms = o->oldest_enqueued_at ? now - o->oldest_enqueued_at : 0;
    o->slots = xcalloc(p->max_sandboxes > 0 ? (size_t)p->max_sandboxes : 1, sizeof(*o->slots));
    for (int i = 0; i < p->max_sandboxes; i++) {
        const struct sched_job *j = p->slots[i];

        o->slots[i].index = i;
        if (j != NULL) {
            o->slots[i].busy = 1;
            memcpy(o->slots[i].id, j->id, sizeof(o->slots[i].id));
            memcpy(o->slots[i].task, j->task, sizeof(o->slots[i].task));
            o->slots[i].cls = j->cls;
            o->slots[i].cpus = (double)j->mcpu / 1000.0;
            o->slots[i].memory = j->memory;
            o->slots[i].since = j->granted_at;
        }
    }
    o->started = p->started;
    memcpy(o->finished, p->finished, sizeof(o->finished));
    o->alerts = p->alerts;
    memcpy(o->wait_buckets, p->wait_buckets, sizeof(o->wait_buckets));
    o->wait_count = p->wait_count;
    o->wait_sum = p->wait_sum;
    o->boxes = p->boxes;
    o->scale_capped = p->last.capped;
    memcpy(o->scale_reason, p->last.reason, sizeof(o->scale_reason));
}

struct sbx_sched_snapshot *sbx_sched_snapshot(struct sbx_sched *s)
{
    struct sbx_sched_snapshot *snap = xcalloc(1, sizeof(*snap));
    int64_t now = s->clock(s->clock_ctx);

    sbx_sched_spend_accrue(s, now);
    snap->now = now;
    snap->box = s->box;
    snap->host_reserve = s->host_reserve;
    snap->box_max_sandboxes = s->box_max_sandboxes;
    snap->heavy_allowed = s->heavy_refusal[0] == '\0';
    snprintf(snap->heavy_refusal, sizeof(snap->heavy_refusal), "%s", s->heavy_refusal);
    snap->draining = s->draining;
    snap->alert_after = s->alert_after_ms / 1000;
    snap->paid_boxes = sbx_sched_paid_boxes(s);
    snap->max_boxes = s->max_boxes;
    snap->box_hour_price = s->box_hour_price;
    snap->spend_day = s->spend_day;
    snap->spend_month = s->spend_month;
    snap->spend_day_cap = s->spend_day_cap;
    snap->spend_month_cap = s->spend_month_cap;
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        snap->pools[i].pool = (enum sbx_pool)i;
        snap_pool(s, &s->pools[i], now, &snap->pools[i]);
    }
    return snap;
}

void sbx_sched_snapshot_free(struct sbx_sched_snapshot *snap)
{
    if (snap == NULL) {
        return;
    }
    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        free(snap->pools[i].queued);
        free(snap->pools[i].slots);
    }
    free(snap);
}
