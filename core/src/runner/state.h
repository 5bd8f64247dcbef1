/* state.h - the runner itself (struct sbx_runner): (changed, issue 31 item 3)
 * the composition of its modules' parts (each declared in its module's
 * header, most opaque: auth.h, health.h, status.h, rmetrics.h, fleet.h,
 * warm.h, storeq.h; the job table in jobs.h), the loop and the lock. Only the
 * files that assemble or drive the runner include it; a module that needs the
 * lock or the loop alone calls runner_lock()/runner_base() (jobs.h). A job
 * and a task are opaque: rjob.h, rtask.h (changed, issue 31). */
#ifndef SBX_RUNNER_STATE_H
#define SBX_RUNNER_STATE_H

#include <event2/event.h>
#include <event2/http.h>
#include <jansson.h>
#include <pthread.h>

#include "runner/api_limits.h"
#include "runner/jobs.h"
#include "runner/smallbox.h"
#include "runner/endpoint.h"
#include "sandbox/task.h"
#include "store/store.h"
#include "util/confine.h"

struct runner_metrics;

struct sbx_runner {
    struct runner_listener lis[2]; /* unix, tcp */
    struct runner_fwd *fwds;       /* (added) forwards in flight (forward.c) */
    const struct sbx_config *cfg;
    char *plugin_dir;
    char *store_path;
    struct sbx_runner_endpoint ep;
    struct runner_auth *auth;   /* the API's clients (auth.h) */
    struct sbx_confine confine; /* runner.worktree_roots */
    struct event_base *base;
    struct evhttp *http_unix, *http_tcp;
    struct event *wake, *tick, *alert_ev;
    int alert_interval_ms;
    int slot_lock;             /* (added, issue 31) sbx_runner_opts.slot_lock */
    int one_shot;              /* (added, issue 31) sbx_runner_opts.one_shot */
    int output_wait;           /* (added, issue 31) sbx_runner_opts.output_wait */
    unsigned long alert_ticks; /* (added) alert timer runs done (atomic: sbx_runner_alert_ticks) */
    struct sbx_sched *sched;
    struct sbx_store *store;
    struct sbx_egress *egress; /* the box's egress proxy: every task's socket is on it */
    struct sbx_policy *policy; /* under mu; swapped by sbx_runner_reload_policy */
    char *policy_dir;

    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct runner_jobtab tab;       /* the jobs and tasks in memory (jobs.h), under mu */
    struct rmsg *msgs, **msgs_tail; /* runner.c */
    int workers;                    /* threads alive */
    int stopping;                   /* under mu (the loop alone writes it, and reads it without) */

    struct runner_metrics *metrics; /* (added) rmetrics.h */
    /* (added) limits.cpus/memory clamped per pool on a small box (runner.c) */
    struct runner_pool_limits pools;      /* smallbox.h */
    struct runner_health *health;         /* (added) health.c */
    struct runner_storeprobe *storeprobe; /* (added) storeprobe.c */
    struct runner_sq *sq;                 /* (added) storeq.c: the store thread (fleet) */
    struct runner_fleet *fleet;           /* (added) fleet.c: NULL on SQLite (one box) */
    struct runner_status *status;         /* (added) status.c: the status page's sessions */
    struct runner_warm *warm;             /* (added) warm.c, under mu */
    struct runner_image *image;           /* (added) image_check.c: the image before work */
    int adopted_only; /* (added, issue 31) a keeper's runner: no task but its adopted one */
};

#endif
