/* probe.c - the thread behind a probe of the runner (probe.h): run, keep the
 * answer under the lock, wait until the next run or the stop. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "runner/probe.h"
#include "util/monowait.h"
#include "util/xalloc.h"

struct runner_probe {
    const struct runner_probe_ops *ops;
    void *ctx;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int stop;
    int64_t first_next; /* after a first run by the starter: when the thread's is */
    struct runner_probe_view now;
};

/* One run, its answer kept and given to done; the time of the next run. */
static int64_t probe_once(struct runner_probe *p)
{
    char msg[RUNNER_PROBE_MSG];
    int rc, wait_ms;

    p->now.in_flight_since = sbx_mono_ms();
    pthread_mutex_unlock(&p->mu);
    rc = p->ops->run(p->ctx, msg, sizeof(msg));
    pthread_mutex_lock(&p->mu);
    p->now.in_flight_since = 0;
    p->now.done_at = sbx_mono_ms();
    memcpy(p->now.msg, msg, sizeof(msg));
    wait_ms = p->ops->done(p->ctx, rc, msg);
    return p->now.done_at + wait_ms;
}

static void *probe_main(void *arg)
{
    struct runner_probe *p = arg;

    pthread_mutex_lock(&p->mu);
    if (p->first_next > 0) { /* the first run was the starter's */
        sbx_cond_wait_until_ms(&p->cv, &p->mu, p->first_next, &p->stop);
    }
    while (!p->stop) {
        int64_t at = probe_once(p);

        sbx_cond_wait_until_ms(&p->cv, &p->mu, at, &p->stop);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct runner_probe *runner_probe_start(const struct runner_probe_ops *ops, void *ctx,
                                        int first_run, const char *what, sbx_error_t **err)
{
    struct runner_probe *p = xcalloc(1, sizeof(*p));

    p->ops = ops;
    p->ctx = ctx;
    pthread_mutex_init(&p->mu, NULL);
    sbx_cond_init_mono(&p->cv);
    if (first_run) {
        pthread_mutex_lock(&p->mu);
        p->first_next = probe_once(p);
        pthread_mutex_unlock(&p->mu);
    }
    if (pthread_create(&p->th, NULL, probe_main, p) != 0) {
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        sbx_error_set(err, SBX_E_GENERIC, "runner: cannot start %s", what);
        return NULL;
    }
    return p;
}

void runner_probe_stop(struct runner_probe *p)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

void runner_probe_read(struct runner_probe *p, struct runner_probe_view *v)
{
    pthread_mutex_lock(&p->mu);
    *v = p->now;
    pthread_mutex_unlock(&p->mu);
}
