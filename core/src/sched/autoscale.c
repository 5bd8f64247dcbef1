/* autoscale.c - the scale-up decision, cooldown, max boxes and spend caps.
 *
 * Spend is accrued from the paid box count over the injected clock and resets
 * at UTC midnight (day) and on the 1st of the month, UTC (month). A scale-up
 * is allowed only when every paid box, the new ones included, could run to
 * the end of the current day and month without passing either cap: the caps
 * then hold even if nothing scales in. */
#include "sched/sched_internal.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#define DAY_MS (86400LL * 1000)

int sbx_sched_paid_boxes(const struct sbx_sched *s)
{
    int paid = 1; /* this box */

    for (int i = 0; i < SBX_POOL_COUNT; i++) {
        if (s->pools[i].served && s->pools[i].boxes > 1) {
            paid += s->pools[i].boxes - 1;
        }
    }
    return paid;
}

void sbx_sched_spend_init(struct sbx_sched *s, int64_t now)
{
    s->spend_at = now;
    s->spend_day = 0;
    s->spend_month = 0;
}

static int64_t floor_div(int64_t a, int64_t b)
{
    int64_t q = a / b;

    return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

/* ms of the first instant of the next UTC month after t */
static int64_t next_month_start(int64_t t_ms)
{
    time_t t = (time_t)floor_div(t_ms, 1000);
    struct tm tm;

    gmtime_r(&t, &tm);
    tm.tm_mday = 1;
    tm.tm_hour = tm.tm_min = tm.tm_sec = 0;
    tm.tm_mon += 1;
    return (int64_t)timegm(&tm) * 1000;
}

void sbx_spend_accrue(struct sbx_spend *sp, double rate, int64_t now)
{
    while (now > sp->at) {
        int64_t day_end = (floor_div(sp->at, DAY_MS) + 1) * DAY_MS;
        int64_t month_end = next_month_start(sp->at);

        if (now < day_end) {
            double add = rate * (double)(now - sp->at);

            sp->day += add;
            sp->month += add;
            sp->at = now;
            break;
        }
        sp->month += rate * (double)(day_end - sp->at);
        sp->day = 0;
        if (day_end >= month_end) {
            sp->month = 0;
        }
        sp->at = day_end;
    }
}

void sbx_sched_spend_accrue(struct sbx_sched *s, int64_t now)
{
    struct sbx_spend sp = {.at = s->spend_at, .day = s->spend_day, .month = s->spend_month};

    sbx_spend_accrue(&sp, s->box_hour_price * (double)sbx_sched_paid_boxes(s) / 3600000.0, now);
    s->spend_at = sp.at;
    s->spend_day = sp.day;
    s->spend_month = sp.month;
}

int sbx_sched_boxes_set(struct sbx_sched *s, enum sbx_pool pool, int boxes, sbx_error_t **err)
{
    if ((unsigned)pool >= SBX_POOL_COUNT || !s->pools[pool].served) {
        return sbx_error_set(err, EINVAL, "autoscaler: pool %d is not served by this box",
                             (int)pool);
    }
    if (boxes < 1) {
        return sbx_error_set(err, EINVAL,
                             "autoscaler: pool '%s' needs at least this box (got "
                             "%d boxes)",
                             sbx_pool_name(pool), boxes);
    }
    sbx_sched_spend_accrue(s, s->clock(s->clock_ctx));
    s->pools[pool].boxes = boxes;
    return 0;
}

/* How many paid boxes the cap allows over the rest of the period. */
static int64_t cap_boxes(double cap, double spent, double price, int64_t ms_left)
{
    double hours = (double)ms_left / 3600000.0;
    double n;

    if (hours <= 0) {
        return INT_MAX;
    }
    n = floor((cap - spent) / (price * hours) + 1e-9);
    if (n < 0) {
        return 0;
    }
    return n > INT_MAX ? INT_MAX : (int64_t)n;
}

void sbx_scale_decide(const struct sbx_scale_in *in, struct sbx_scale_decision *out)
{
    int64_t now = in->now;
    int64_t extra, room, by_day, by_month, by_max;
    const char *why = NULL;

    out->action = SBX_SCALE_NONE;
    out->capped = 0;
    out->reason[0] = '\0';
    out->current = out->wanted = in->current;
    if (in->queued == 0) {
        snprintf(out->reason, sizeof(out->reason), "queue empty");
        return;
    }
    if (now - in->oldest < in->alert_after_ms) {
        snprintf(out->reason, sizeof(out->reason),
                 "oldest wait %llds is under "
                 "runner.alert_after (%llds)",
                 (long long)((now - in->oldest) / 1000), (long long)(in->alert_after_ms / 1000));
        return;
    }
    if (in->scaled && now - in->last_scale_up < in->cooldown_ms) {
        snprintf(out->reason, sizeof(out->reason),
                 "cooldown: %llds left of runner.cooldown "
                 "(%llds)",
                 (long long)((in->cooldown_ms - (now - in->last_scale_up) + 999) / 1000),
                 (long long)(in->cooldown_ms / 1000));
        return;
    }
    extra = ((int64_t)in->queued + in->max_sandboxes - 1) /
            (in->max_sandboxes > 0 ? in->max_sandboxes : 1);
    if ((int64_t)in->heavy > extra) {
        extra = (int64_t)in->heavy;
    }
    if (!(in->price > 0)) {
        out->capped = 1;
        snprintf(out->reason, sizeof(out->reason),
                 "runner.box_hour_price is not set: the "
                 "spend caps cannot be checked, so no box is added");
        return;
    }
    by_max = (int64_t)in->max_boxes - in->paid;
    by_day = cap_boxes(in->day_cap, in->spent_day, in->price,
                       (floor_div(now, DAY_MS) + 1) * DAY_MS - now) -
             in->paid;
    by_month = cap_boxes(in->month_cap, in->spent_month, in->price, next_month_start(now) - now) -
               in->paid;
    room = extra;
    if (by_max < room) {
        room = by_max;
        why = "runner.max_boxes";
    }
    if (by_day < room) {
        room = by_day;
        why = "the day spend cap";
    }
    if (by_month < room) {
        room = by_month;
        why = "the month spend cap";
    }
    if (room < 0) {
        room = 0;
    }
    if (why != NULL) {
        out->capped = 1;
        snprintf(out->reason, sizeof(out->reason),
                 "%s %lld box(es) wanted, %lld allowed by %s "
                 "(paid boxes %d of max %d; spent $%.2f of $%.2f today, $%.2f of $%.2f this "
                 "month)",
                 room > 0 ? "capped:" : "no scale-up:", (long long)extra, (long long)room, why,
                 in->paid, in->max_boxes, in->spent_day, in->day_cap, in->spent_month,
                 in->month_cap);
    }
    else {
        snprintf(out->reason, sizeof(out->reason),
                 "%zu queued (%zu heavy), oldest waited %llds: "
                 "add %lld box(es)",
                 in->queued, in->heavy, (long long)((now - in->oldest) / 1000), (long long)extra);
    }
    if (room == 0) {
        return;
    }
    out->action = SBX_SCALE_UP;
    out->wanted = in->current + (int)room;
}

static void decide(struct sbx_sched *s, enum sbx_pool pool, struct sbx_scale_decision *out)
{
    int64_t now = s->clock(s->clock_ctx);
    struct sched_pool *p;
    struct sbx_scale_in in = {0};

    memset(out, 0, sizeof(*out));
    out->action = SBX_SCALE_NONE;
    out->pool = pool;
    if ((unsigned)pool >= SBX_POOL_COUNT || !s->pools[pool].served) {
        snprintf(out->reason, sizeof(out->reason), "pool is not served by this box");
        return;
    }
    p = &s->pools[pool];
    for (int c = 0; c < 2; c++) {
        const struct sched_job *h = p->queue[c].head;

        if (h != NULL && (in.oldest == 0 || h->enqueued_at < in.oldest)) {
            in.oldest = h->enqueued_at;
        }
    }
    sbx_sched_spend_accrue(s, now);
    in.now = now;
    in.queued = p->queue[0].n + p->queue[1].n;
    in.heavy = p->queue[SBX_CLASS_HEAVY].n;
    in.current = p->boxes;
    in.paid = sbx_sched_paid_boxes(s);
    in.max_sandboxes = p->max_sandboxes;
    in.scaled = p->scaled;
    in.last_scale_up = p->last_scale_up;
    in.alert_after_ms = s->alert_after_ms;
    in.cooldown_ms = s->cooldown_ms;
    in.max_boxes = s->max_boxes;
    in.price = s->box_hour_price;
    in.day_cap = s->spend_day_cap;
    in.month_cap = s->spend_month_cap;
    in.spent_day = s->spend_day;
    in.spent_month = s->spend_month;
    sbx_scale_decide(&in, out);
    if (out->action == SBX_SCALE_UP) {
        p->last_scale_up = now;
        p->scaled = 1;
    }
}

void sbx_sched_autoscale(struct sbx_sched *s, enum sbx_pool pool, struct sbx_scale_decision *out)
{
    decide(s, pool, out);
    if ((unsigned)pool < SBX_POOL_COUNT) {
        s->pools[pool].last = *out;
    }
}
