/* task.c - what a task does beside starting, running commands and ending: reaping
 * orphaned sandboxes, the provider's check (the disk watchdog), the timer (maximum
 * lifetime, idle, lease renewal), stopping, records, and the read-only views of an
 * opaque task (task.h). Starting is task_start.c; execs, the end and re-adoption are
 * task_life.c. */
#include "sandbox/files.h"
#include "sandbox/task_int.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "plugin/host.h"
#include "sandbox/caps.h"
#include "sandbox/owner.h"
#include "sandbox/statedir.h"
#include "sandbox/view.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/units.h"
#include "util/xalloc.h"

static int64_t now_s(void)
{
    return (int64_t)time(NULL);
}

static void iso_time(int64_t t, char *buf, size_t len)
{
    struct tm tm;
    time_t tt = (time_t)t;

    gmtime_r(&tt, &tm);
    strftime(buf, len, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static const struct sbx_provider_ops *pops(const struct sbx_task *t)
{
    return sbx_instance_provider(t->prov);
}

/* ---- orphans ---------------------------------------------------------- */

struct reap_ctx {
    char **ids;
    char **tasks;
    size_t n;
};

static void reap_collect(void *ud, const char *id, const struct sbx_kv *labels, size_t n)
{
    struct reap_ctx *r = ud;
    const char *owner = NULL;
    const char *task = "?";

    for (size_t i = 0; i < n; i++) {
        if (strcmp(labels[i].name, "sbx.owner") == 0) {
            owner = labels[i].value;
        }
        else if (strcmp(labels[i].name, "sbx.task") == 0) {
            task = labels[i].value;
        }
    }
    if (owner == NULL || sbx_owner_alive(owner)) {
        return; /* never touch a sandbox whose owner lives */
    }
    r->ids = xrealloc(r->ids, (r->n + 1) * sizeof(char *));
    r->tasks = xrealloc(r->tasks, (r->n + 1) * sizeof(char *));
    r->ids[r->n] = xstrdup(id);
    r->tasks[r->n] = xstrdup(task);
    r->n++;
}

int sbx_task_reap_orphans(struct sbx_open_instance *prov, const char *state)
{
    const struct sbx_provider_ops *ops = sbx_instance_provider(prov);
    struct reap_ctx r = {0};
    sbx_error_t *err = NULL;
    int removed = 0;
    int bad_scope = 0;
    const char *scope = sbx_owner_test_scope(&bad_scope);

    /* under a test scope only that test's sandboxes (owner.h); a bad one
     * sweeps nothing (the task that follows fails on it) */
    if (bad_scope) {
        return 0;
    }
    if (ops->list(prov->ctx, scope ? "sbx.test" : "sbx.owner", scope, reap_collect, &r, &err) < 0) {
        sbx_warn("orphan check failed: %s", sbx_error_msg(err));
        sbx_error_free(&err);
        return 0;
    }
    for (size_t i = 0; i < r.n; i++) {
        if (ops->destroy(prov->ctx, r.ids[i], &err) < 0) {
            sbx_warn("removing orphaned sandbox of task %s: %s", r.tasks[i], sbx_error_msg(err));
            sbx_error_free(&err);
        }
        else {
            sbx_info("removed the orphaned sandbox of task %s (its owner is gone)", r.tasks[i]);
            removed++;
            if (state != NULL && sbx_id_valid(r.tasks[i], SBX_ID_TASK)) {
                sbx_task_dir_remove(state, r.tasks[i]);
            }
        }
        free(r.ids[i]);
        free(r.tasks[i]);
    }
    free(r.ids);
    free(r.tasks);
    if (state != NULL) {
        sbx_view_sweep(state); /* the views of tasks whose owner is gone */
    }
    return removed;
}

/* ---- the provider's own check (the disk watchdog) ---------------------- */

int sbx_task_check(struct sbx_task *t, int after_exec)
{
    sbx_error_t *e = NULL;
    int first;

    if (pops(t)->check == NULL || t->sandbox[0] == '\0' || t->stop) {
        return 0;
    }
    if (pops(t)->check(t->prov->ctx, t->sandbox, after_exec, &e) == 0) {
        return 0;
    }
    pthread_mutex_lock(&t->mu);
    first = !t->stop; /* the timer and an ending command may both find it */
    pthread_mutex_unlock(&t->mu);
    if (first) {
        sbx_warn("task %s: %s: ending it", t->id, e ? e->msg : "the provider's check failed");
    }
    sbx_task_stop(t, e ? e->msg : "the provider's check failed");
    sbx_error_free(&e);
    return -1;
}

/* ---- the timer: maximum lifetime, idle, lease renewal ------------------ */

void *sbx_task_timer_main(void *arg)
{
    struct sbx_task *t = arg;
    int64_t next_check = 0;

    while (!t->timer_quit) {
        int64_t now = now_s();
        char reason[256] = "";

        /* about once a second, whether or not a command runs */
        if (now >= next_check) {
            next_check = now + 1;
            sbx_task_check(t, 0);
            pthread_mutex_lock(&t->mu);
            t->timer_checks++;
            pthread_mutex_unlock(&t->mu);
        }

        pthread_mutex_lock(&t->mu);
        if (t->limits.max > 0 && now - t->started_at >= t->limits.max) {
            char d[32];

            sbx_duration_format(t->limits.max, d, sizeof(d));
            snprintf(reason, sizeof(reason), "maximum lifetime of %s reached", d);
        }
        else if (t->limits.idle > 0 && t->running == 0 &&
                 now - t->last_activity >= t->limits.idle) {
            char d[32];

            sbx_duration_format(t->limits.idle, d, sizeof(d));
            snprintf(reason, sizeof(reason), "idle for %s", d);
        }
        pthread_mutex_unlock(&t->mu);
        if (reason[0] != '\0' && !t->stop) {
            sbx_info("task %s: %s: stopping it", t->id, reason);
            sbx_task_stop(t, reason);
        }
        if (t->have_lease && t->lease.renew_at > 0 && now >= t->lease.renew_at &&
            sbx_instance_credential(t->cred)->renew != NULL) {
            sbx_error_t *err = NULL;

            if (sbx_instance_credential(t->cred)->renew(t->cred->ctx, &t->lease, &err) < 0) {
                sbx_warn("task %s: renewing credential lease %s: %s", t->id, t->lease.id,
                         sbx_error_msg(err));
                sbx_error_free(&err);
                t->lease.renew_at = now + 30; /* retry, not a storm */
            }
        }
        /* 250 ms, or at once when the task ends (timer_cv) */
        pthread_mutex_lock(&t->mu);
        if (!t->timer_quit) {
            struct timespec ts;

            clock_gettime(CLOCK_REALTIME, &ts);
            ts.tv_nsec += 250 * 1000 * 1000;
            if (ts.tv_nsec >= 1000000000L) {
                ts.tv_sec++;
                ts.tv_nsec -= 1000000000L;
            }
            pthread_cond_timedwait(&t->timer_cv, &t->mu, &ts);
        }
        pthread_mutex_unlock(&t->mu);
    }
    return NULL;
}

void sbx_task_stop(struct sbx_task *t, const char *reason)
{
    pthread_mutex_lock(&t->mu);
    if (!t->stop) {
        snprintf(t->stop_reason, sizeof(t->stop_reason), "%s", reason);
        t->stop = 1;
    }
    for (struct sbx_exec_slot *s = t->execs; s != NULL; s = s->next) {
        __atomic_store_n(&s->ctl.cancelled, 1, __ATOMIC_RELEASE);
        if (pops(t)->cancel != NULL) {
            pops(t)->cancel(t->prov->ctx, &s->ctl);
        }
    }
    pthread_mutex_unlock(&t->mu);
    sbx_task_thaw_for_stop(t); /* (added, issue 30) a frozen sandbox cannot end its commands */
}

/* ---- records ------------------------------------------------------------ */

/* (changed, issue 31) what the record shows of the fields other threads write
 * under mu (pause and resume in files.c, an exec's end in task_life.c, the
 * stop, the worktree's checks, the job id of a kept task's next job, the
 * end's egress counts): copied once, under mu. */
struct record_live {
    char job[sizeof(((struct sbx_task *)0)->job)]; /* sbx_task_set_job: another job's worker */
    int64_t egress_allowed, egress_denied;         /* the end's final counts */
    int paused;
    int64_t paused_secs; /* seconds paused so far; -1 when never paused */
    int last_exit;
    const char *exec_path;
    char reason[sizeof(((struct sbx_task *)0)->stop_reason)];
    json_t *wt_events; /* a copy, or NULL */
};

static void record_live_take(struct sbx_task *t, struct record_live *l)
{
    pthread_mutex_lock(&t->mu);
    snprintf(l->job, sizeof(l->job), "%s", t->job);
    l->egress_allowed = t->egress_allowed;
    l->egress_denied = t->egress_denied;
    l->paused = t->paused;
    l->paused_secs = -1;
    if (t->paused || t->paused_total > 0) {
        l->paused_secs = t->paused_total + (t->paused ? time(NULL) - t->paused_at : 0);
    }
    l->last_exit = t->last_exit;
    l->exec_path = t->last_exec_path;
    snprintf(l->reason, sizeof(l->reason), "%s", t->stop_reason);
    l->wt_events = t->wt_events != NULL ? json_deep_copy(t->wt_events) : NULL;
    pthread_mutex_unlock(&t->mu);
}

json_t *sbx_task_record(struct sbx_task *t, const char *state)
{
    char created[32] = "";
    char started[32] = "";
    char ended[32] = "";
    json_t *leases = json_array();
    json_t *rec;
    struct record_live l;

    record_live_take(t, &l);

    iso_time(t->created_at, created, sizeof(created));
    if (t->started_at > 0) {
        iso_time(t->started_at, started, sizeof(started));
    }
    if (t->ended_at > 0) {
        iso_time(t->ended_at, ended, sizeof(ended));
    }
    if (t->have_lease) {
        json_array_append_new(leases, json_string(t->lease.id));
    }
    if (l.paused && strcmp(state, "running") == 0) { /* (added, issue 30) files.c */
        state = "paused";
    }
    rec = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:{s:f, s:I, s:I, s:I, s:I, s:I}, "
                    "s:s, s:s?, s:s?, s:o, s:s?, s:{s:I, s:I}, s:o, s:s, s:s?}",
                    "id", l.job, "task", t->id, "pool", t->pool, "class", t->slot_class, "provider",
                    t->prov ? t->prov->cfg->name : "?", "image", t->image, "state", state, "limits",
                    "cpus", t->limits.cpus, "memory", (json_int_t)t->limits.memory, "disk",
                    (json_int_t)t->limits.disk, "pids", (json_int_t)t->limits.pids, "idle",
                    (json_int_t)t->limits.idle, "max", (json_int_t)t->limits.max, "created_at",
                    created, "started_at", t->started_at ? started : NULL, "ended_at",
                    t->ended_at ? ended : NULL, "exit_status",
                    l.last_exit >= 0 ? json_integer(l.last_exit) : json_null(), "reason",
                    l.reason[0] ? l.reason : NULL, "egress", "allowed",
                    (json_int_t)l.egress_allowed, "denied", (json_int_t)l.egress_denied,
                    "credential_leases", leases, "sandbox", t->sandbox, "worktree", t->worktree);
    if (t->decided_by != NULL) {
        json_object_set_new(rec, "policy", json_string(t->decided_by));
    }
    /* (added) how the last exec ran: "agent" (the exec agent in the sandbox)
     * or "engine" (the provider's exec, e.g. docker exec) */
    json_object_set_new(rec, "exec_path", l.exec_path ? json_string(l.exec_path) : json_null());
    /* (added) a warm sandbox of the runner's pool claimed by this task */
    json_object_set_new(rec, "warm", json_boolean(t->warm));
    /* (added) ... and given other limits by the engine's update call */
    json_object_set_new(rec, "resized", json_boolean(t->resized));
    /* (added, issue 30) seconds paused so far (docs/tasks.md, "Pause and resume"), once paused */
    if (l.paused_secs >= 0) { /* `sbx run`'s records stay as they were */
        json_object_set_new(rec, "paused_seconds", json_integer(l.paused_secs));
    }
    sbx_caps_record(rec, &t->limits, t->unenforced);
    /* (added) what the worktree's checks found (docs/tasks.md, "Worktrees") */
    if (l.wt_events != NULL) {
        json_object_set_new(rec, "worktree_events", l.wt_events);
    }
    {
        char owner[160];

        /* the process that owns the task (sbx run, or the keeper) */
        sbx_owner_self(owner, sizeof(owner));
        json_object_set_new(rec, "owner", json_string(owner));
    }
    return rec;
}

static int record_write(struct sbx_task *t, const char *state, int sync, sbx_error_t **err)
{
    json_t *rec = sbx_task_record(t, state);
    cleanup_free char *path = xasprintf("%s/task.json", t->dir);
    cleanup_free char *tmp = xasprintf("%s/task.json.tmp", t->dir);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int r = 0;

    if (fd < 0) {
        json_decref(rec);
        return sbx_error_set(err, errno, "writing %s: %s", tmp, strerror(errno));
    }
    if (json_dumpfd(rec, fd, JSON_INDENT(2)) < 0 || write(fd, "\n", 1) != 1 ||
        (sync && fsync(fd) < 0)) {
        r = sbx_error_set(err, EIO, "writing %s: %s", tmp, strerror(errno));
    }
    close(fd);
    json_decref(rec);
    if (r == 0 && rename(tmp, path) < 0) {
        r = sbx_error_set(err, errno, "rename %s: %s", tmp, strerror(errno));
    }
    return r;
}

int sbx_task_record_write(struct sbx_task *t, const char *state, sbx_error_t **err)
{
    return record_write(t, state, 1, err);
}

int sbx_task_record_write_nosync(struct sbx_task *t, const char *state, sbx_error_t **err)
{
    return record_write(t, state, 0, err);
}

/* ---- read-only views (task.h) ------------------------------------------- */

const char *sbx_task_id(const struct sbx_task *t)
{
    return t->id;
}

void sbx_task_job(struct sbx_task *t, char *buf, size_t len)
{
    pthread_mutex_lock(&t->mu);
    snprintf(buf, len, "%s", t->job);
    pthread_mutex_unlock(&t->mu);
}

const char *sbx_task_sandbox(const struct sbx_task *t)
{
    return t->sandbox;
}

const char *sbx_task_pool(const struct sbx_task *t)
{
    return t->pool;
}

const char *sbx_task_state_dir(const struct sbx_task *t)
{
    return t->state;
}

const char *sbx_task_provider_name(const struct sbx_task *t)
{
    return t->prov != NULL ? t->prov->cfg->name : "?";
}

const char *sbx_task_image(const struct sbx_task *t)
{
    return t->image;
}

const char *sbx_task_lease_id(const struct sbx_task *t)
{
    return t->have_lease ? t->lease.id : NULL;
}

const struct sbx_lease *sbx_task_held_lease(const struct sbx_task *t)
{
    return t->have_lease ? &t->lease : NULL;
}

const char *sbx_task_last_exec_path(struct sbx_task *t)
{
    const char *p;

    pthread_mutex_lock(&t->mu);
    p = t->last_exec_path;
    pthread_mutex_unlock(&t->mu);
    return p;
}

void sbx_task_isolation(const struct sbx_task *t, json_t *obj)
{
    sbx_caps_record(obj, &t->limits, t->unenforced);
}

int sbx_task_stopped(struct sbx_task *t, char *buf, size_t len)
{
    int stopped;

    pthread_mutex_lock(&t->mu);
    stopped = t->stop != 0;
    if (stopped && buf != NULL) {
        snprintf(buf, len, "%s", t->stop_reason);
    }
    pthread_mutex_unlock(&t->mu);
    return stopped;
}

unsigned sbx_task_timer_checks(struct sbx_task *t)
{
    unsigned n;

    pthread_mutex_lock(&t->mu);
    n = t->timer_checks;
    pthread_mutex_unlock(&t->mu);
    return n;
}

int sbx_task_scan_secrets(struct sbx_task *t, struct sbx_secret_scan *scan, sbx_error_t **err)
{
    if (pops(t)->scan_secrets == NULL) {
        return sbx_error_set(err, SBX_E_USAGE, "provider '%s' cannot scan a sandbox for secrets",
                             sbx_task_provider_name(t));
    }
    return pops(t)->scan_secrets(t->prov->ctx, t->sandbox, scan, err);
}
