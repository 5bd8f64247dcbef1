/* docker_agent.c - an exec through the core's exec agent in the sandbox
 * (spec->run_agent), with the disk watchdog around it as around an engine
 * exec: in watchdog mode the writable layer is measured every disk_interval
 * seconds while the command runs, and a command over the cap is cancelled. */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "docker.h"

struct agent_watch {
    struct dk_ctx *c;
    const char *id;
    struct sbx_exec_ctl *ctl;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int64_t limit;
    int64_t seen; /* bytes when the cap was crossed, else 0 */
};

/* The writable layer's size, or -1; *limit from the sbx.disk label. */
static int64_t layer_size(struct dk_ctx *c, const char *id, int64_t *limit)
{
    json_t *reply = NULL;
    long status = 0;
    char path[256];
    sbx_error_t *err = NULL;
    int64_t v = -1;

    snprintf(path, sizeof(path), "/containers/%s/json?size=1", id);
    if (dk_request(c, "GET", path, NULL, &status, &reply, &err) < 0) {
        c->host->error_free(&err);
        return -1;
    }
    if (status == 200 && json_is_integer(json_object_get(reply, "SizeRw"))) {
        const char *l = json_string_value(json_object_get(
            json_object_get(json_object_get(reply, "Config"), "Labels"), "sbx.disk"));

        v = json_integer_value(json_object_get(reply, "SizeRw"));
        *limit = l ? strtoll(l, NULL, 10) : 0;
    }
    json_decref(reply);
    return v;
}

static void *watch_main(void *arg)
{
    struct agent_watch *w = arg;

    pthread_mutex_lock(&w->mu);
    while (!w->done) {
        struct timespec until;
        int64_t used;

        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += w->c->disk_interval;
        pthread_cond_timedwait(&w->cv, &w->mu, &until);
        if (w->done) {
            break;
        }
        pthread_mutex_unlock(&w->mu);
        used = layer_size(w->c, w->id, &w->limit);
        pthread_mutex_lock(&w->mu);
        if (w->limit > 0 && used > w->limit) {
            w->seen = used;
            __atomic_store_n(&w->ctl->cancelled, 1, __ATOMIC_RELEASE);
            break;
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int dk_exec_agent(struct dk_ctx *c, const char *id, const struct sbx_exec_spec *spec,
                  struct sbx_exec_ctl *ctl, int *exit_status, sbx_error_t **err)
{
    struct agent_watch w = {.c = c, .id = id, .ctl = ctl};
    pthread_t th;
    int watching = 0;
    int r;

    if (c->disk_mode == DK_DISK_WATCHDOG && ctl != NULL) {
        pthread_mutex_init(&w.mu, NULL);
        pthread_cond_init(&w.cv, NULL);
        watching = pthread_create(&th, NULL, watch_main, &w) == 0;
        if (!watching) {
            /* no guard, no agent: the engine path has its own watchdog */
            pthread_mutex_destroy(&w.mu);
            pthread_cond_destroy(&w.cv);
            return 1;
        }
    }
    r = spec->run_agent(spec->agent_userdata, ctl, exit_status, err);
    if (watching) {
        pthread_mutex_lock(&w.mu);
        w.done = 1;
        pthread_cond_signal(&w.cv);
        pthread_mutex_unlock(&w.mu);
        pthread_join(th, NULL);
        pthread_mutex_destroy(&w.mu);
        pthread_cond_destroy(&w.cv);
        if (w.seen > 0) {
            if (err != NULL) {
                c->host->error_free(err);
            }
            return c->host->error_set(err, SBX_E_ENGINE,
                                      "disk cap exceeded: the sandbox wrote "
                                      "%" PRId64 " bytes, its limit is %" PRId64 " bytes",
                                      w.seen, w.limit);
        }
    }
    return r;
}
