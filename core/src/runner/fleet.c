/* fleet.c - one box of a fleet on the shared PostgreSQL queue (docs/runner.md,
 * "Several boxes"): the box row and its lease, the wake-up on a submit
 * (LISTEN/NOTIFY), claiming jobs into this box's scheduler, reaping lost
 * boxes, and what a box does when it learns that it was lost itself.
 *
 * (changed, issue 31) The loop decides; every store call of a running box
 * (the claim, the beat, a new registration, the leader's work) is a call of
 * the store thread (storeq.h). Only the start (registration, LISTEN, the
 * first view) uses the runner's own connection, before the API listens. The
 * LISTEN connection is a second one, polled by the loop (a non-blocking read
 * of what arrived, sbx_store_drain). */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "runner/jobstate.h"
#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/rtask.h"
#include "runner/api_int.h"
#include "runner/fleet.h"
#include "runner/health.h"
#include "runner/jobs.h"
#include "runner/recover.h"
#include "runner/storepool.h"
#include "runner/storeq.h"
#include "sbx/sbx_util.h"
#include "sandbox/statedir.h"
#include "sbx_build.h"
#include "util/log.h"
#include "util/xalloc.h"

struct runner_fleet {
    char id[64];
    int64_t epoch;
    int64_t lease_ms;
    struct sbx_box_rec row;
    struct sbx_store *listen; /* LISTEN sbx_queue */
    struct event *listen_ev, *beat_ev;
    uint64_t claims, lost;
    struct runner_store_pool *pool; /* (added) the workers' connections */
    struct runner_lead *lead;       /* (added) fleetlead.c */
    json_t *view;                   /* (added) sbx_store_fleet_json at the last beat */
    /* (added) since when (monotonic ms) every renewal of this box's lease has
     * succeeded; 0 after a failed one. Another box is reaped only after one
     * whole lease of those: when the database comes back from an outage, no
     * box could renew meanwhile, and the first to reconnect must not take the
     * others' jobs before they had a beat of their own to renew. */
    int64_t renewed_since; /* (changed) the beat's call's (one at a time) */
    /* (added) calls of the store thread in flight (storeq.h): one claim and
     * one beat at a time; a claim asked for meanwhile runs after it */
    int claiming, claim_again, beating;
};

/* box.id, else the id this box generated once and kept in its state dir. */
static int box_id(struct sbx_runner *r, char *out, size_t len, sbx_error_t **err)
{
    char *state;
    char *path;
    FILE *f;
    unsigned char rnd[6];
    int fd;

    if (r->cfg->box.id != NULL) {
        snprintf(out, len, "%s", r->cfg->box.id);
        return 0;
    }
    state = sbx_state_dir(r->cfg->state_dir, err);
    if (state == NULL) {
        return -1;
    }
    path = xasprintf("%s/box-id", state);
    free(state);
    f = fopen(path, "r");
    if (f != NULL) {
        char line[80] = "";

        if (fgets(line, sizeof(line), f) != NULL) {
            line[strcspn(line, "\n")] = '\0';
        }
        fclose(f);
        if (sbx_id_valid(line, SBX_ID_TASK) && strlen(line) < 64) {
            snprintf(out, len, "%s", line);
            free(path);
            return 0;
        }
        free(path);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "runner: %s/box-id does not hold a box id; remove it or set box.id",
                             r->cfg->state_dir ? r->cfg->state_dir : "the state directory");
    }
    fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    if (fd < 0 || read(fd, rnd, sizeof(rnd)) != (ssize_t)sizeof(rnd)) {
        if (fd >= 0) {
            close(fd);
        }
        free(path);
        return sbx_error_set(err, errno ? errno : EIO, "runner: cannot read /dev/urandom");
    }
    close(fd);
    snprintf(out, len, "box-%02x%02x%02x%02x%02x%02x", rnd[0], rnd[1], rnd[2], rnd[3], rnd[4],
             rnd[5]);
    f = fopen(path, "wx");
    if (f == NULL || fprintf(f, "%s\n", out) < 0 || fclose(f) != 0) {
        sbx_error_set(err, errno, "runner: cannot keep the box id in %s", path);
        free(path);
        return -1;
    }
    free(path);
    return 0;
}

static int fleet_register(struct sbx_runner *r, struct sbx_store *st, sbx_error_t **err)
{
    struct runner_fleet *f = r->fleet;

    if (sbx_store_box_register(st, &f->row, f->lease_ms, &f->epoch, err) < 0) {
        return sbx_error_wrap(err, "runner: registering box %s", f->id);
    }
    return 0;
}

/* (added) fleet_lost's new registration: a call of the store thread, before
 * the next beat's (they run in order); (changed) the leader's connection
 * (arg) is closed there too, never on the loop */
static void register_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    sbx_error_t *err = NULL;

    runner_lead_resign(arg);
    if (fleet_register(r, st, &err) < 0) {
        sbx_error_log("%s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
}

static void register_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    (void)r;
    (void)req;
    (void)arg;
    (void)late;
}

/* (changed) A claim is one call of the store thread (storeq.h): it decides
 * with a copy of the scheduler's state taken by the loop when it handed the
 * call over (sbx_sched_fit_copy) and takes at most one job per pool, as the
 * loop did (a job claimed waits in this box's queue, and what waits here
 * starts before anything is claimed); the loop queues what came back. */
struct claim_call {
    struct sbx_runner *r;
    struct sbx_sched *fit;
    struct sbx_job_rec rec[SBX_POOL_COUNT];
    int got[SBX_POOL_COUNT];
};

static int claim_fit(void *ctx, const struct sbx_job_rec *job)
{
    struct claim_call *c = ctx;
    struct sbx_runner *r = c->r;
    int live;

    /* (added) its task still lives on this box (ending, say): passed over
     * until the loop removed it; never a second task of one id here */
    pthread_mutex_lock(&r->mu);
    live = runner_task_find(r, job->task ? job->task : job->id) != NULL;
    pthread_mutex_unlock(&r->mu);
    if (live) {
        return 0;
    }
    return sbx_sched_claim_fit(c->fit, (enum sbx_pool)sbx_pool_parse(job->pool),
                               (enum sbx_job_class)sbx_job_class_parse(job->cls), job->limits.cpus,
                               job->limits.memory);
}

static void claim_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct claim_call *c = arg;
    const char *box = runner_fleet_box(r);

    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        sbx_error_t *err = NULL;
        int rc = sbx_store_claim(st, box, sbx_pool_name((enum sbx_pool)p), claim_fit, c, &c->rec[p],
                                 &err);

        if (rc < 0) {
            sbx_error_log("runner: claim: %s", sbx_error_msg(err));
            sbx_error_free(&err);
        }
        c->got[p] = rc == 1;
    }
}

static void claim_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct claim_call *c = arg;
    struct runner_fleet *f = r->fleet;
    int claimed = 0;

    (void)req;
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        struct sbx_job_rec *rec = &c->rec[p];
        sbx_error_t *err = NULL;
        struct rjob *j;

        if (!c->got[p]) {
            continue;
        }
        if (late) { /* the runner stops: its recovery requeues the claim */
            sbx_job_rec_clear(rec);
            continue;
        }
        j = runner_job_from_rec(rec);
        rjob_set_token(j, rec->token);
        {
            struct sbx_sched_job sj =
                runner_sched_job(j, rec->limits.cpus, rec->limits.memory, rec->queued_at);

            if (runner_job_find(r, rjob_id(j)) != NULL ||
                sbx_sched_submit(r->sched, &sj, &err) < 0) {
                /* it ends cancelled: a call of the store thread */
                runner_job_end_write(r, rjob_id(j), rjob_token(j), SBX_JOB_CANCELLED,
                                     err ? sbx_error_msg(err) : "the job id is in use on this box");
                sbx_error_free(&err);
                runner_job_free(j);
                sbx_job_rec_clear(rec);
                continue;
            }
        }
        pthread_mutex_lock(&r->mu);
        runner_job_move_held(r, j, RJOB_QUEUED); /* the claim wrote its record */
        runner_job_link(r, j);
        pthread_mutex_unlock(&r->mu);
        f->claims++;
        claimed++;
        sbx_job_rec_clear(rec);
    }
    sbx_sched_fit_free(c->fit);
    free(c);
    if (late) {
        return;
    }
    f->claiming = 0;
    if (claimed > 0) {
        runner_schedule(r);
    }
    if (f->claim_again || claimed > 0) {
        /* asked for meanwhile, or more may fit now (one per pool per call) */
        f->claim_again = 0;
        runner_fleet_claim(r);
    }
}

/* Claims every job this box can start now, oldest first per pool, into its
 * scheduler; each carries its claim's token to every later write. */
void runner_fleet_claim(struct sbx_runner *r)
{
    struct runner_fleet *f = r->fleet;
    struct claim_call *c;

    if (f == NULL || r->stopping || !runner_image_ready(r->image, NULL, 0)) {
        return; /* (added) a box without its image claims nothing */
    }
    if (f->claiming) {
        f->claim_again = 1;
        return;
    }
    c = xcalloc(1, sizeof(*c));
    c->r = r;
    c->fit = sbx_sched_fit_copy(r->sched);
    f->claiming = 1;
    runner_sq_call(r, NULL, claim_work, claim_done, c);
}

/* This box was reaped while it could not renew (paused, cut off): its jobs
 * now belong to the queue or ended `box lost`. It stops what it still runs
 * (the fenced writes of those jobs are refused), drops what it had claimed,
 * and joins again as a new epoch. */
static void fleet_lost(struct sbx_runner *r)
{
    struct runner_fleet *f = r->fleet;

    f->lost++;
    sbx_warn("runner: box %s lost its lease: stopping its jobs and destroying their sandboxes; "
             "the shared queue holds their records",
             f->id);
    pthread_mutex_lock(&r->mu);
    for (struct rjob *j = r->tab.jobs; j != NULL; j = rjob_next(j)) {
        if (rjob_state(j) == SBX_JOB_QUEUED) {
            sbx_sched_cancel(r->sched, rjob_id(j), NULL);
            runner_job_move_held(r, j, RJOB_INTERRUPTED); /* the reap requeued its record */
            rjob_release(j);
        }
        else if (rjob_state(j) == SBX_JOB_RUNNING) {
            runner_job_cancel(j);
            rjob_mark_lost(j);
            rjob_cancel_exec(j);
        }
    }
    for (struct rtask *t = r->tab.tasks; t != NULL; t = rtask_next(t)) {
        if (rtask_sandbox(t) != NULL) {
            sbx_task_stop(rtask_sandbox(t), "box lost");
        }
    }
    pthread_cond_broadcast(&r->cond);
    pthread_mutex_unlock(&r->mu);
    runner_sq_call(r, NULL, register_work, register_done, f->lead);
}

/* The fleet as /metrics shows it, read once per beat: a scrape never queries
 * the database. NULL when it could not be read (the last view stays). */
static json_t *fleet_view(struct sbx_store *st)
{
    sbx_error_t *err = NULL;
    json_t *v = sbx_store_fleet_json(st, &err);

    sbx_error_free(&err);
    return v;
}

static int64_t fleet_mono_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* (changed) A beat is one call of the store thread (storeq.h), one at a
 * time: renew, reap, the LISTEN connection when it is gone, the leader's
 * work (fleetlead.c), the fleet's view; the loop then acts on it (a lost
 * lease, the new view, the LISTEN event) and claims. */
struct beat_call {
    int lost;        /* the renewal was refused: this box was reaped */
    int want_listen; /* the loop has no LISTEN connection */
    struct sbx_store *listen;
    int sock;
    json_t *view;
};

static void beat_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    struct beat_call *c = arg;
    struct runner_fleet *f = r->fleet;
    struct sbx_reap reap;
    sbx_error_t *err = NULL;

    if (sbx_store_box_renew(st, f->id, f->epoch, f->lease_ms, &err) < 0) {
        f->renewed_since = 0;
        c->lost = err->code == ESTALE;
        if (!c->lost) {
            sbx_error_log("runner: %s", sbx_error_msg(err));
        }
        sbx_error_free(&err);
    }
    else if (f->renewed_since == 0) {
        f->renewed_since = fleet_mono_ms();
    }
    if (f->renewed_since == 0 || fleet_mono_ms() - f->renewed_since < f->lease_ms) {
        /* not one whole lease of renewals yet (started, or back from an
         * outage): reaping waits */
    }
    else if (sbx_store_reap(st, 0, &reap, &err) < 0) {
        sbx_error_log("runner: %s", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    else if (reap.boxes > 0) {
        sbx_warn("runner: %zu box(es) lost their lease: %zu job(s) back in the queue, %zu "
                 "interrupted (box lost), %zu task(s) ended",
                 reap.boxes, reap.requeued, reap.interrupted, reap.tasks);
    }
    if (c->want_listen && !runner_store_stalled(r->storeprobe)) {
        c->listen = sbx_store_open_ex(r->store_path, r->cfg->runner.database_password_env, &err);
        c->sock = c->listen != NULL ? sbx_store_listen(c->listen, &err) : -1;
        if (c->sock < 0) {
            sbx_error_free(&err); /* the database is still away: the next beat */
            sbx_store_close(c->listen);
            c->listen = NULL;
        }
    }
    if (!c->lost) {
        runner_lead_beat(f->lead, r->storeprobe);
    }
    c->view = runner_store_stalled(r->storeprobe) ? NULL : fleet_view(st);
}

static void on_notify(evutil_socket_t fd, short what, void *arg);

static void beat_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    struct beat_call *c = arg;
    struct runner_fleet *f = r->fleet;

    (void)req;
    if (!late) {
        f->beating = 0;
        if (c->lost) {
            fleet_lost(r);
        }
        if (c->listen != NULL && f->listen == NULL) {
            f->listen = c->listen;
            c->listen = NULL;
            f->listen_ev = event_new(r->base, c->sock, EV_READ | EV_PERSIST, on_notify, r);
            event_add(f->listen_ev, NULL);
        }
        if (c->view != NULL) {
            json_decref(f->view);
            f->view = c->view;
            c->view = NULL;
        }
        runner_fleet_claim(r);
    }
    sbx_store_close(c->listen);
    json_decref(c->view);
    free(c);
}

/* Every lease/3: renew, reap the boxes whose lease lapsed (once this box has
 * renewed its own for a whole lease), claim. */
static void on_beat(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_runner *r = arg;
    struct runner_fleet *f = r->fleet;
    struct beat_call *c;

    (void)fd;
    (void)what;
    if (f->beating) {
        return; /* the last one still waits on the database */
    }
    c = xcalloc(1, sizeof(*c));
    c->want_listen = f->listen == NULL;
    runner_lead_prepare(f->lead, r->sched);
    f->beating = 1;
    runner_sq_call(r, NULL, beat_work, beat_done, c);
}

static void listen_close(struct runner_fleet *f)
{
    if (f->listen_ev != NULL) {
        event_free(f->listen_ev);
        f->listen_ev = NULL;
    }
    sbx_store_close(f->listen);
    f->listen = NULL;
}

/* A submit somewhere in the fleet: claim now, not at the next beat. */
static void on_notify(evutil_socket_t fd, short what, void *arg)
{
    struct sbx_runner *r = arg;
    sbx_error_t *err = NULL;

    (void)fd;
    (void)what;
    if (sbx_store_drain(r->fleet->listen, &err) < 0) {
        /* the database went away: the beat listens again once it is back,
         * and claims meanwhile */
        sbx_error_log("runner: %s (claims wait for the beat until it is back)", sbx_error_msg(err));
        sbx_error_free(&err);
        listen_close(r->fleet);
        return;
    }
    runner_fleet_claim(r);
}

static int fleet_listen(struct sbx_runner *r, sbx_error_t **err)
{
    struct runner_fleet *f = r->fleet;
    int sock;

    f->listen = sbx_store_open_ex(r->store_path, r->cfg->runner.database_password_env, err);
    if (f->listen == NULL) {
        return -1;
    }
    sock = sbx_store_listen(f->listen, err);
    if (sock < 0) {
        listen_close(f);
        return -1;
    }
    f->listen_ev = event_new(r->base, sock, EV_READ | EV_PERSIST, on_notify, r);
    event_add(f->listen_ev, NULL);
    return 0;
}

int runner_fleet_start(struct sbx_runner *r, sbx_error_t **err)
{
    struct runner_fleet *f;
    struct sbx_sched_snapshot *snap;
    struct timeval beat;

    if (!sbx_store_location_is_pg(r->store_path)) {
        return 0;
    }
    f = xcalloc(1, sizeof(*f));
    r->fleet = f;
    if (box_id(r, f->id, sizeof(f->id), err) < 0) {
        return -1;
    }
    f->pool = runner_store_pool_new(r->store_path, r->cfg->runner.database_password_env, f->id);
    sbx_store_set_box(r->store, f->id);
    f->lead = runner_lead_new(r->cfg, r->store_path, f->id);
    f->lease_ms = r->cfg->runner.lease * 1000;
    /* the scheduler's capacity: box.memory when set, else measured */
    snap = sbx_sched_snapshot(r->sched);
    f->row.capacity =
        json_pack("{s:f, s:I}", "cpus", snap->box.cpus, "memory", (json_int_t)snap->box.memory);
    f->row.id = f->id;
    f->row.pools = json_array();
    for (int p = 0; p < SBX_POOL_COUNT; p++) {
        if (snap->pools[p].served) {
            json_array_append_new(f->row.pools, json_string(sbx_pool_name((enum sbx_pool)p)));
        }
    }
    sbx_sched_snapshot_free(snap);
    f->row.api = r->ep.tcp_host ? xasprintf("tcp:%s:%d", r->ep.tcp_host, r->ep.tcp_port)
                                : xasprintf("unix:%s", r->ep.unix_path);
    f->row.version = SBX_VERSION;
    if (fleet_register(r, r->store, err) < 0) {
        return -1;
    }
    if (fleet_listen(r, err) < 0) {
        return -1;
    }
    f->beat_ev = event_new(r->base, -1, EV_PERSIST, on_beat, r);
    beat.tv_sec = f->lease_ms / 3 / 1000;
    beat.tv_usec = (f->lease_ms / 3 % 1000) * 1000;
    event_add(f->beat_ev, &beat);
    sbx_info("runner: box %s joined the fleet (epoch %lld, lease %llds)", f->id,
             (long long)f->epoch, (long long)r->cfg->runner.lease);
    f->view = fleet_view(r->store);
    return 0;
}

void runner_fleet_free(struct sbx_runner *r)
{
    struct runner_fleet *f = r->fleet;

    if (f == NULL) {
        return;
    }
    listen_close(f);
    if (f->beat_ev != NULL) {
        event_free(f->beat_ev);
    }
    json_decref(f->row.pools);
    json_decref(f->row.capacity);
    free(f->row.api);
    runner_lead_free(f->lead); /* its connection closes: the lock is free */
    runner_store_pool_free(f->pool);
    json_decref(f->view);
    free(f);
    r->fleet = NULL;
}

struct sbx_store *runner_store_get(struct sbx_runner *r, sbx_error_t **err)
{
    if (r->fleet != NULL) {
        return runner_store_pool_get(r->fleet->pool, err);
    }
    return sbx_store_open_ex(r->store_path, r->cfg->runner.database_password_env, err);
}

void runner_store_put(struct sbx_runner *r, struct sbx_store *st)
{
    if (r->fleet != NULL) {
        runner_store_pool_put(r->fleet->pool, st);
    }
    else {
        sbx_store_close(st);
    }
}

const char *runner_fleet_box(const struct sbx_runner *r)
{
    return r->fleet ? r->fleet->id : NULL;
}

static void queue_work(struct sbx_runner *r, struct sbx_store *st, void *arg)
{
    json_t *queue = arg;
    sbx_error_t *err = NULL;
    json_t *fleet = sbx_store_fleet_json(st, &err);

    if (fleet == NULL) {
        fleet = json_pack("{s:s}", "error", sbx_error_msg(err));
        sbx_error_free(&err);
    }
    json_object_set_new(fleet, "box", json_string(r->fleet->id));
    json_object_set_new(queue, "fleet", fleet);
}

static void queue_done(struct sbx_runner *r, struct evhttp_request *req, void *arg, int late)
{
    (void)r;
    if (late) {
        json_decref(arg);
        return;
    }
    runner_reply_json(req, 200, arg);
}

void runner_fleet_queue(struct sbx_runner *r, struct evhttp_request *req, json_t *queue)
{
    if (r->fleet == NULL) {
        runner_reply_json(req, 200, queue);
        return;
    }
    runner_sq_read(r, req, queue_work, queue_done, queue);
}

static double box_up(json_t *b)
{
    return json_is_true(json_object_get(b, "alive"));
}

static double box_heartbeat_age(json_t *b)
{
    return json_number_value(json_object_get(b, "heartbeat_age"));
}

static double box_jobs(json_t *b)
{
    return (double)json_array_size(json_object_get(b, "holds"));
}

/* One gauge with a series per box of the view: value(box), with prec decimals. */
static void box_series(FILE *f, json_t *fleet, const char *name, const char *help,
                       double (*value)(json_t *b), int prec)
{
    json_t *b;
    size_t i;

    fprintf(f, "# HELP %s %s\n# TYPE %s gauge\n", name, help, name);
    json_array_foreach(json_object_get(fleet, "boxes"), i, b)
    {
        fprintf(f, "%s{box=\"%s\"} %.*f\n", name, json_string_value(json_object_get(b, "id")), prec,
                value(b));
    }
}

/* Per-box series of the fleet (docs/runner.md, "Several boxes"), from the
 * view of the last beat, and the leader's fleet series (fleetlead.c). */
void runner_fleet_metrics(struct sbx_runner *r, FILE *f)
{
    json_t *fleet;
    json_t *q;
    const char *pool;
    uint64_t opened, reused;

    if (r->fleet == NULL) {
        return;
    }
    runner_store_pool_counts(r->fleet->pool, &opened, &reused);
    fprintf(f,
            "# HELP sbx_fleet_claims_total Jobs this box claimed from the shared queue.\n"
            "# TYPE sbx_fleet_claims_total counter\nsbx_fleet_claims_total %llu\n"
            "# HELP sbx_fleet_lost_total Times this box learnt that it was reaped.\n"
            "# TYPE sbx_fleet_lost_total counter\nsbx_fleet_lost_total %llu\n"
            "# HELP sbx_fleet_store_connections_total Workers' store connections: opened, or "
            "reused from the pool.\n# TYPE sbx_fleet_store_connections_total counter\n"
            "sbx_fleet_store_connections_total{how=\"opened\"} %llu\n"
            "sbx_fleet_store_connections_total{how=\"reused\"} %llu\n",
            (unsigned long long)r->fleet->claims, (unsigned long long)r->fleet->lost,
            (unsigned long long)opened, (unsigned long long)reused);
    {
        unsigned long long calls, late, refused;
        unsigned queued;

        runner_sq_counts(r, &calls, &late, &refused, &queued);
        fprintf(f,
                "# HELP sbx_store_thread_calls_total Store calls handed to the store thread; "
                "requests answered 503 at their deadline (late) or at once (refused).\n"
                "# TYPE sbx_store_thread_calls_total counter\n"
                "sbx_store_thread_calls_total{how=\"handed\"} %llu\n"
                "sbx_store_thread_calls_total{how=\"late\"} %llu\n"
                "sbx_store_thread_calls_total{how=\"refused\"} %llu\n"
                "# HELP sbx_store_thread_queue Store calls waiting for the store thread.\n"
                "# TYPE sbx_store_thread_queue gauge\nsbx_store_thread_queue %u\n",
                calls, late, refused, queued);
    }
    runner_lead_metrics(r->fleet->lead, f);
    fleet = r->fleet->view;
    if (fleet == NULL) {
        return;
    }
    box_series(f, fleet, "sbx_fleet_box_up", "1 while the box's lease runs.", box_up, 0);
    box_series(f, fleet, "sbx_fleet_box_heartbeat_age_seconds",
               "Since the box last renewed its lease.", box_heartbeat_age, 3);
    box_series(f, fleet, "sbx_fleet_box_jobs", "Jobs a box holds (claimed or running).", box_jobs,
               0);
    fprintf(f, "# HELP sbx_fleet_queued Jobs in the shared queue that no box claimed yet.\n"
               "# TYPE sbx_fleet_queued gauge\n");
    json_object_foreach(json_object_get(fleet, "queue"), pool, q)
    {
        fprintf(f, "sbx_fleet_queued{pool=\"%s\"} %lld\n", pool,
                (long long)json_integer_value(json_object_get(q, "queued")));
    }
}
