/* storepool.c - the store connections of a fleet box's workers, reused
 * (docs/runner.md, "Several boxes").
 *
 * On SQLite a worker opens the file for its job and closes it: that costs
 * microseconds. On PostgreSQL a connection costs a TCP or unix-socket connect,
 * a SCRAM login and the schema check, a few milliseconds each time, so a fleet
 * box keeps the connections its workers give back (up to STORE_POOL_MAX idle
 * ones) and hands them to the next worker. A connection is kept only when it
 * is still connected and holds no open transaction (sbx_store_reusable); one
 * the server dropped (a restart) is closed and a new one opened. (changed,
 * issue 31) The pool keeps the store's location, the password's variable and
 * the box's id it was made with: it knows nothing of the runner, whose
 * runner_store_get/put (fleet.c) use it on a fleet box. */
#include <pthread.h>
#include <stdlib.h>

#include "runner/storepool.h"
#include "store/store.h"
#include "util/xalloc.h"

#define STORE_POOL_MAX 16

struct runner_store_pool {
    pthread_mutex_t mu;
    char *location, *password_env, *box; /* where its connections go, whose rows */
    struct sbx_store *idle[STORE_POOL_MAX];
    size_t n;
    uint64_t opened, reused;
};

struct runner_store_pool *runner_store_pool_new(const char *location, const char *password_env,
                                                const char *box)
{
    struct runner_store_pool *p = xcalloc(1, sizeof(*p));

    pthread_mutex_init(&p->mu, NULL);
    p->location = xstrdup(location);
    p->password_env = password_env != NULL ? xstrdup(password_env) : NULL;
    p->box = box != NULL ? xstrdup(box) : NULL;
    return p;
}

void runner_store_pool_free(struct runner_store_pool *p)
{
    if (p == NULL) {
        return;
    }
    for (size_t i = 0; i < p->n; i++) {
        sbx_store_close(p->idle[i]);
    }
    pthread_mutex_destroy(&p->mu);
    free(p->location);
    free(p->password_env);
    free(p->box);
    free(p);
}

void runner_store_pool_counts(struct runner_store_pool *p, uint64_t *opened, uint64_t *reused)
{
    pthread_mutex_lock(&p->mu);
    *opened = p->opened;
    *reused = p->reused;
    pthread_mutex_unlock(&p->mu);
}

struct sbx_store *runner_store_pool_get(struct runner_store_pool *p, sbx_error_t **err)
{
    struct sbx_store *st = NULL;

    for (;;) {
        pthread_mutex_lock(&p->mu);
        st = p->n > 0 ? p->idle[--p->n] : NULL;
        pthread_mutex_unlock(&p->mu);
        if (st == NULL) {
            break;
        }
        if (sbx_store_reusable(st)) {
            pthread_mutex_lock(&p->mu);
            p->reused++;
            pthread_mutex_unlock(&p->mu);
            return st;
        }
        sbx_store_close(st); /* the server dropped it: the next, or a new one */
    }
    st = sbx_store_open_ex(p->location, p->password_env, err);
    if (st == NULL) {
        return NULL;
    }
    sbx_store_set_box(st, p->box);
    pthread_mutex_lock(&p->mu);
    p->opened++;
    pthread_mutex_unlock(&p->mu);
    return st;
}

void runner_store_pool_put(struct runner_store_pool *p, struct sbx_store *st)
{
    if (st == NULL) {
        return;
    }
    if (sbx_store_reusable(st)) {
        pthread_mutex_lock(&p->mu);
        if (p->n < STORE_POOL_MAX) {
            p->idle[p->n++] = st;
            st = NULL;
        }
        pthread_mutex_unlock(&p->mu);
    }
    sbx_store_close(st);
}
