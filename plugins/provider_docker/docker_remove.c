/* docker_remove.c - a sandbox's removal off the job's path (docs/operations.md,
 * "Removal in the background"). The destroy op kills the container (the
 * sandbox runs nothing more once it returns) and leaves the engine's removal
 * (DELETE ?force=1&v=1: its writable layer, its filesystem, its anonymous
 * volumes) to one worker thread of the process. The queue is bounded: past
 * DK_REMOVE_QUEUE a destroy removes at once itself. Creation never waits on
 * it. When the process's last instance of the provider closes (the CLI at
 * its end; a runner's health probe keeps one open), what is still queued is
 * removed first (at most DK_REMOVE_DRAIN_S); a sandbox whose owner died unremoved is an
 * orphan the next sbx removes. The backlog shows in sbx info and /healthz
 * from the engine (killed sandboxes still there, core/src/sandbox/backlog.c).
 * (added) Between removals the worker removes stale btrfs qgroups when due
 * (docker_qgroup.c). */
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "docker.h"

#define DK_REMOVE_QUEUE 256
#define DK_REMOVE_DRAIN_S 120

struct rm_item {
    struct rm_item *next;
    char id[72];
    char socket[108];
    char api[16];
    const struct sbx_host_api *host;
    const struct sbx_options *opts;
};

static pthread_mutex_t rm_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t rm_cv = PTHREAD_COND_INITIALIZER;   /* work queued */
static pthread_cond_t rm_done = PTHREAD_COND_INITIALIZER; /* queue emptied */
static struct rm_item *rm_head, *rm_tail;
static int rm_n;       /* queued + in progress */
static int rm_started; /* the worker runs */
static int rm_users;   /* open instances (dk_remove_hold) */
static pthread_t rm_th;
static const struct sbx_host_api *rm_host; /* the core's host API (static) */
static char rm_current[72];                /* the removal in progress, or "" */

/* DELETE with retries while the engine says a removal is in progress. */
int dk_remove_now(struct dk_ctx *c, const char *id, sbx_error_t **err)
{
    json_t *reply = NULL;
    long status = 0;
    char path[256];

    snprintf(path, sizeof(path), "/containers/%s?force=1&v=1", id);
    for (int attempt = 0; attempt < 20; attempt++) {
        if (dk_request(c, "DELETE", path, NULL, &status, &reply, err) < 0) {
            return -1;
        }
        /* 409: removal already in progress */
        if (status != 409) {
            break;
        }
        json_decref(reply);
        reply = NULL;
        struct timespec ts = {0, 100 * 1000 * 1000};

        nanosleep(&ts, NULL);
    }
    if (status != 204 && status != 404 && status != 409) {
        c->host->error_set(err, SBX_E_ENGINE, "docker: remove %.12s: HTTP %ld: %s", id, status,
                           dk_reply_message(reply));
        json_decref(reply);
        return -1;
    }
    json_decref(reply);
    return 0;
}

static void *rm_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&rm_mu);
    for (;;) {
        struct rm_item *it;
        struct dk_ctx c;
        sbx_error_t *err = NULL;

        while (rm_head == NULL) {
            /* (added) between removals: stale btrfs qgroups when due */
            int64_t w = dk_qgroup_wait();

            if (w < 0) {
                pthread_cond_wait(&rm_cv, &rm_mu);
            }
            else if (w == 0) {
                pthread_mutex_unlock(&rm_mu);
                dk_qgroup_run_due(rm_host, 0);
                pthread_mutex_lock(&rm_mu);
            }
            else {
                struct timespec until;

                clock_gettime(CLOCK_REALTIME, &until);
                until.tv_sec += w;
                pthread_cond_timedwait(&rm_cv, &rm_mu, &until);
            }
        }
        it = rm_head;
        rm_head = it->next;
        if (rm_head == NULL) {
            rm_tail = NULL;
        }
        snprintf(rm_current, sizeof(rm_current), "%s", it->id);
        pthread_mutex_unlock(&rm_mu);
        memset(&c, 0, sizeof(c));
        c.host = it->host;
        c.opts = it->opts;
        c.socket = it->socket;
        snprintf(c.api, sizeof(c.api), "%s", it->api);
        int64_t t0 = dk_now_ms();
        int rc = dk_remove_now(&c, it->id, &err);

        it->host->log(DK_NAME, SBX_LOG_DEBUG, "removed %.12s in the background in %" PRId64 " ms",
                      it->id, dk_now_ms() - t0);
        if (rc < 0) {
            /* the sandbox is killed; the next orphan sweep retries */
            it->host->log(DK_NAME, SBX_LOG_WARN, "removing sandbox %.12s in the background: %s",
                          it->id, err ? err->msg : "?");
            it->host->error_free(&err);
        }
        else {
            dk_qgroup_removed();
        }
        free(it);
        pthread_mutex_lock(&rm_mu);
        rm_current[0] = '\0';
        if (--rm_n == 0) {
            pthread_cond_broadcast(&rm_done);
        }
    }
    return NULL;
}

/* Kills the container now; queues its removal (or removes it now when the
 * queue is full or no worker can run). */
int dk_remove_later(struct dk_ctx *c, const char *id, sbx_error_t **err)
{
    json_t *reply = NULL;
    long status = 0;
    char path[256];
    struct rm_item *it;

    snprintf(path, sizeof(path), "/containers/%s/kill", id);
    if (dk_request(c, "POST", path, NULL, &status, &reply, err) < 0) {
        return -1;
    }
    json_decref(reply);
    if (status == 404) {
        return 0; /* already gone */
    }
    if (status != 204 && status != 409) { /* 409: not running */
        return dk_remove_now(c, id, err);
    }
    pthread_mutex_lock(&rm_mu);
    if (rm_n >= DK_REMOVE_QUEUE || strlen(c->socket) >= sizeof(it->socket) ||
        (!rm_started && pthread_create(&rm_th, NULL, rm_main, NULL) != 0)) {
        pthread_mutex_unlock(&rm_mu);
        return dk_remove_now(c, id, err);
    }
    if (!rm_started) {
        Dl_info di;

        pthread_detach(rm_th);
        rm_started = 1;
        /* the worker's code stays mapped after the plugin's dlclose */
        if (dladdr((void *)rm_main, &di) != 0 && di.dli_fname != NULL) {
            dlopen(di.dli_fname, RTLD_NOW | RTLD_NODELETE | RTLD_NOLOAD);
        }
    }
    it = xcalloc(1, sizeof(*it));
    snprintf(it->id, sizeof(it->id), "%s", id);
    snprintf(it->socket, sizeof(it->socket), "%s", c->socket);
    snprintf(it->api, sizeof(it->api), "%s", c->api);
    it->host = c->host;
    rm_host = c->host;
    it->opts = NULL; /* the instance's options may be gone by then */
    if (rm_tail != NULL) {
        rm_tail->next = it;
    }
    else {
        rm_head = it;
    }
    rm_tail = it;
    rm_n++;
    pthread_cond_signal(&rm_cv);
    pthread_mutex_unlock(&rm_mu);
    return 0;
}

/* id (a container's full id) or a prefix of it is queued or being removed. */
static int same_container(const char *queued, const char *id)
{
    size_t n = strlen(queued);

    return n >= 12 && strncmp(queued, id, n) == 0;
}

int dk_remove_queued(const char *id)
{
    int found;

    pthread_mutex_lock(&rm_mu);
    found = same_container(rm_current, id);
    for (struct rm_item *it = rm_head; it != NULL && !found; it = it->next) {
        found = same_container(it->id, id);
    }
    pthread_mutex_unlock(&rm_mu);
    return found;
}

int dk_remove_pending(void)
{
    int n;

    pthread_mutex_lock(&rm_mu);
    n = rm_n;
    pthread_mutex_unlock(&rm_mu);
    return n;
}

void dk_remove_hold(void)
{
    pthread_mutex_lock(&rm_mu);
    rm_users++;
    pthread_mutex_unlock(&rm_mu);
}

void dk_remove_release(void)
{
    struct timespec until;

    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += DK_REMOVE_DRAIN_S;
    int last;

    pthread_mutex_lock(&rm_mu);
    last = --rm_users == 0;
    if (last) {
        /* the last instance: what is queued goes before it closes */
        while (rm_n > 0) {
            if (pthread_cond_timedwait(&rm_done, &rm_mu, &until) == ETIMEDOUT) {
                break;
            }
        }
    }
    pthread_mutex_unlock(&rm_mu);
    if (last) {
        dk_qgroup_run_due(rm_host, 1); /* the process may end now: one run, if pending */
    }
}
