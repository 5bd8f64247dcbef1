/* metrics.c - a scheduler snapshot as Prometheus text (format 0.0.4) and as
 * JSON. Only served pools appear, always with every series (zeros included),
 * so that absent() and rate() work. No per-job labels: slot holders are in
 * the JSON, not in metrics (unbounded series). */
#include "sched/sched.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static void family(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* ms -> "S.mmm" seconds */
static void put_secs(FILE *f, int64_t ms)
{
    if (ms < 0) {
        fprintf(f, "-");
        ms = -ms;
    }
    fprintf(f, "%lld.%03lld", (long long)(ms / 1000), (long long)(ms % 1000));
}

#define FOR_SERVED(snap, p)                                                                        \
    for (const struct sbx_sched_pool_snap *p = (snap)->pools; p < (snap)->pools + SBX_POOL_COUNT;  \
         p++)                                                                                      \
        if (p->served)

/* The queues: jobs waiting, the oldest one's enqueue time and wait. */
static void queue_metrics(FILE *f, const struct sbx_sched_snapshot *snap)
{
    family(f, "sbx_queue_jobs", "gauge", "Jobs waiting for a slot, by pool and class.");
    FOR_SERVED(snap, p)
    {
        fprintf(f, "sbx_queue_jobs{pool=\"%s\",class=\"light\"} %zu\n", sbx_pool_name(p->pool),
                p->n_queued - p->n_queued_heavy);
        fprintf(f, "sbx_queue_jobs{pool=\"%s\",class=\"heavy\"} %zu\n", sbx_pool_name(p->pool),
                p->n_queued_heavy);
    }
    family(f, "sbx_queue_oldest_enqueued_timestamp_seconds", "gauge",
           "Unix time the oldest queued job of the pool was enqueued (0 if the queue is empty).");
    FOR_SERVED(snap, p)
    {
        fprintf(f, "sbx_queue_oldest_enqueued_timestamp_seconds{pool=\"%s\"} ",
                sbx_pool_name(p->pool));
        put_secs(f, p->oldest_enqueued_at);
        fputc('\n', f);
    }
    family(f, "sbx_queue_oldest_wait_seconds", "gauge",
           "Wait so far of the oldest queued job of the pool (0 if the queue is empty).");
    FOR_SERVED(snap, p)
    {
        fprintf(f, "sbx_queue_oldest_wait_seconds{pool=\"%s\"} ", sbx_pool_name(p->pool));
        put_secs(f, p->oldest_wait_ms);
        fputc('\n', f);
    }
}

/* The slots: busy and idle, and the heavy slot's state. */
static void slot_metrics(FILE *f, const struct sbx_sched_snapshot *snap)
{
    family(f, "sbx_slots", "gauge", "Sandbox slots of this box by pool and state.");
    FOR_SERVED(snap, p)
    {
        fprintf(f, "sbx_slots{pool=\"%s\",state=\"busy\"} %d\n", sbx_pool_name(p->pool),
                p->running);
        fprintf(f, "sbx_slots{pool=\"%s\",state=\"idle\"} %d\n", sbx_pool_name(p->pool),
                p->max_sandboxes > p->running ? p->max_sandboxes - p->running : 0);
    }
    family(f, "sbx_heavy_slot", "gauge",
           "The pool's exclusive heavy slot: 1 for its current state (disabled: the box takes no "
           "heavy jobs).");
    FOR_SERVED(snap, p)
    {
        const char *state = !snap->heavy_allowed ? "disabled" : p->heavy_busy ? "busy" : "idle";
        static const char *const states[] = {"busy", "idle", "disabled"};

        for (int i = 0; i < 3; i++) {
            fprintf(f, "sbx_heavy_slot{pool=\"%s\",state=\"%s\"} %d\n", sbx_pool_name(p->pool),
                    states[i], strcmp(states[i], state) == 0);
        }
    }
}

/* The jobs: the wait histogram, starts, finishes and wait alerts. */
static void job_metrics(FILE *f, const struct sbx_sched_snapshot *snap)
{
    family(f, "sbx_job_wait_seconds", "histogram", "Time from enqueue to slot grant, by pool.");
    FOR_SERVED(snap, p)
    {
        for (int b = 0; b < SBX_SCHED_WAIT_BUCKETS; b++) {
            fprintf(f, "sbx_job_wait_seconds_bucket{pool=\"%s\",le=\"%g\"} %llu\n",
                    sbx_pool_name(p->pool), sbx_sched_wait_bounds[b],
                    (unsigned long long)p->wait_buckets[b]);
        }
        fprintf(f, "sbx_job_wait_seconds_bucket{pool=\"%s\",le=\"+Inf\"} %llu\n",
                sbx_pool_name(p->pool), (unsigned long long)p->wait_count);
        fprintf(f, "sbx_job_wait_seconds_sum{pool=\"%s\"} %.3f\n", sbx_pool_name(p->pool),
                p->wait_sum);
        fprintf(f, "sbx_job_wait_seconds_count{pool=\"%s\"} %llu\n", sbx_pool_name(p->pool),
                (unsigned long long)p->wait_count);
    }
    family(f, "sbx_jobs_started_total", "counter", "Jobs granted a slot, by pool.");
    FOR_SERVED(snap, p)
    {
        fprintf(f, "sbx_jobs_started_total{pool=\"%s\"} %llu\n", sbx_pool_name(p->pool),
                (unsigned long long)p->started);
    }
    family(f, "sbx_jobs_finished_total", "counter",
           "Jobs that left their slot, by pool and "
           "result.");
    FOR_SERVED(snap, p)
    {
        for (int r = 0; r < SBX_RESULT_COUNT; r++) {
            fprintf(f, "sbx_jobs_finished_total{pool=\"%s\",result=\"%s\"} %llu\n",
                    sbx_pool_name(p->pool), sbx_job_result_name((enum sbx_job_result)r),
                    (unsigned long long)p->finished[r]);
        }
    }
    family(f, "sbx_job_wait_alerts_total", "counter",
           "Jobs whose wait reached runner.alert_after (each counted once), by pool.");
    FOR_SERVED(snap, p)
    {
        fprintf(f, "sbx_job_wait_alerts_total{pool=\"%s\"} %llu\n", sbx_pool_name(p->pool),
                (unsigned long long)p->alerts);
    }
}

/* The fleet: boxes, spend and its caps, draining. */
static void fleet_metrics(FILE *f, const struct sbx_sched_snapshot *snap)
{
    family(f, "sbx_boxes", "gauge", "Boxes serving the pool, as known to the autoscaler.");
    FOR_SERVED(snap, p)
    {
        fprintf(f, "sbx_boxes{pool=\"%s\"} %d\n", sbx_pool_name(p->pool), p->boxes);
    }
    family(f, "sbx_spend_dollars", "gauge", "Box spend accrued in the current UTC period.");
    fprintf(f, "sbx_spend_dollars{period=\"day\"} %.4f\n", snap->spend_day);
    fprintf(f, "sbx_spend_dollars{period=\"month\"} %.4f\n", snap->spend_month);
    family(f, "sbx_spend_cap_dollars", "gauge",
           "Spend caps (runner.spend_day_cap, "
           "runner.spend_month_cap).");
    fprintf(f, "sbx_spend_cap_dollars{period=\"day\"} %.4f\n", snap->spend_day_cap);
    fprintf(f, "sbx_spend_cap_dollars{period=\"month\"} %.4f\n", snap->spend_month_cap);
    family(f, "sbx_draining", "gauge", "1 when this box grants no new slots (scale-in).");
    fprintf(f, "sbx_draining %d\n", snap->draining);
}

char *sbx_sched_metrics(const struct sbx_sched_snapshot *snap)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);

    if (f == NULL) {
        abort();
    }
    queue_metrics(f, snap);
    slot_metrics(f, snap);
    job_metrics(f, snap);
    fleet_metrics(f, snap);
    if (fclose(f) != 0) {
        abort();
    }
    return buf;
}

static json_t *secs_or_null(int64_t ms)
{
    return ms ? json_real((double)ms / 1000.0) : json_null();
}

static json_t *pool_json(const struct sbx_sched_snapshot *snap, const struct sbx_sched_pool_snap *p)
{
    json_t *queued = json_array();
    json_t *slots = json_array();

    for (size_t i = 0; i < p->n_queued; i++) {
        const struct sbx_sched_queued *q = &p->queued[i];

        json_array_append_new(queued,
                              json_pack("{s:s, s:s, s:s, s:o, s:f, s:b}", "id", q->id, "task",
                                        q->task, "class", sbx_job_class_name(q->cls), "enqueued_at",
                                        secs_or_null(q->enqueued_at), "wait",
                                        (double)q->wait_ms / 1000.0, "alerted", q->alerted));
    }
    for (int i = 0; i < p->max_sandboxes; i++) {
        const struct sbx_sched_slot *sl = &p->slots[i];

        if (!sl->busy) {
            json_array_append_new(slots,
                                  json_pack("{s:i, s:s}", "index", sl->index, "state", "idle"));
            continue;
        }
        json_array_append_new(
            slots, json_pack("{s:i, s:s, s:s, s:s, s:s, s:f, s:I, s:o, s:f}", "index", sl->index,
                             "state", "busy", "job", sl->id, "task", sl->task, "class",
                             sbx_job_class_name(sl->cls), "cpus", sl->cpus, "memory",
                             (json_int_t)sl->memory, "since", secs_or_null(sl->since), "held_for",
                             (double)(snap->now - sl->since) / 1000.0));
    }
    return json_pack("{s:s, s:f, s:f, s:I, s:I, s:i, s:i, s:s, s:i, s:I, s:I, s:o, s:f, s:o, "
                     "s:o, s:{s:b, s:o}}",
                     "pool", sbx_pool_name(p->pool), "cpus", p->cpus, "cpus_used", p->cpus_used,
                     "memory", (json_int_t)p->memory, "memory_used", (json_int_t)p->memory_used,
                     "max_sandboxes", p->max_sandboxes, "running", p->running, "heavy_slot",
                     !snap->heavy_allowed ? "disabled"
                     : p->heavy_busy      ? "busy"
                                          : "idle",
                     "boxes", p->boxes, "queue_length", (json_int_t)p->n_queued, "queue_heavy",
                     (json_int_t)p->n_queued_heavy, "oldest_enqueued_at",
                     secs_or_null(p->oldest_enqueued_at), "oldest_wait",
                     (double)p->oldest_wait_ms / 1000.0, "queued", queued, "slots", slots,
                     "autoscale", "capped", p->scale_capped, "reason",
                     p->scale_reason[0] ? json_string(p->scale_reason) : json_null());
}

char *sbx_sched_snapshot_json(const struct sbx_sched_snapshot *snap)
{
    json_t *pools = json_array();
    json_t *root;
    char *text;

    FOR_SERVED(snap, p)
    {
        json_array_append_new(pools, pool_json(snap, p));
    }
    root = json_pack(
        "{s:f, s:{s:f, s:I, s:I, s:i, s:b, s:o, s:b}, s:I, s:{s:i, s:i, s:f, s:f, "
        "s:f, s:f, s:f}, s:o}",
        "now", (double)snap->now / 1000.0, "box", "cpus", snap->box.cpus, "memory",
        (json_int_t)snap->box.memory, "host_reserve", (json_int_t)snap->host_reserve,
        "max_sandboxes", snap->box_max_sandboxes, "heavy_allowed", snap->heavy_allowed,
        "heavy_refusal", snap->heavy_allowed ? json_null() : json_string(snap->heavy_refusal),
        "draining", snap->draining, "alert_after", (json_int_t)snap->alert_after, "autoscaler",
        "paid_boxes", snap->paid_boxes, "max_boxes", snap->max_boxes, "box_hour_price",
        snap->box_hour_price, "spend_day", snap->spend_day, "spend_day_cap", snap->spend_day_cap,
        "spend_month", snap->spend_month, "spend_month_cap", snap->spend_month_cap, "pools", pools);
    if (root == NULL) {
        abort();
    }
    text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    if (text == NULL) {
        abort();
    }
    return text;
}
