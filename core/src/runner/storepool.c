/* storepool.c - the store connections of a fleet box's workers, reused
 * (docs/runner.md, "Several boxes").
 *
 * On SQLite a worker opens the file for its job and closes it: that costs
 * microseconds. On PostgreSQL a connection costs a TCP or unix-socket connect,
 * a SCRAM login and the schema check, a few milliseconds each time, so a fleet
 * box keeps the connections its workers give back (up to STORE_POOL_MAX idle
 * ones) and hands them to the next worker. A connection is kept only when it
 * is still connected and holds no open transaction (sbx_store_reusable); one
 * the server dropped (a restart) is closed and a new one opened. */
#include <pthread.h>
#include <stdlib.h>

#include "runner/state.h"
#include "runner/fleet.h"
#include "runner/storepool.h"
#include "util/xalloc.h"

#define STORE_POOL_MAX 16

struct runner_store_pool {
    pthread_mutex_t mu;
    struct sbx_store *idle[STORE_POOL_MAX];
    size_t n;
    uint64_t opened, reused;
};

struct runner_store_pool *runner_store_pool_new(void)
{
    struct runner_store_pool *p = xcalloc(1, sizeof(*p));

    pthread_mutex_init(&p->mu, NULL);
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
    free(p);
}

void runner_store_pool_counts(struct runner_store_pool *p, uint64_t *opened, uint64_t *reused)
{
    pthread_mutex_lock(&p->mu);
    *opened = p->opened;
    *reused = p->reused;
    pthread_mutex_unlock(&p->mu);
}

struct sbx_store *runner_store_get(struct sbx_runner *r, sbx_error_t **err)
{
    struct runner_store_pool *p = runner_fleet_pool(r);
    struct sbx_store *st = NULL;

    while (p != NULL) {
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
    st = sbx_store_open_ex(r->store_path, r->cfg->runner.database_password_env, err);
    if (st == NULL) {
        return NULL;
    }
    sbx_store_set_box(st, runner_fleet_box(r));
    if (p != NULL) {
        pthread_mutex_lock(&p->mu);
        p->opened++;
        pthread_mutex_unlock(&p->mu);
    }
    return st;
}

void runner_store_put(struct sbx_runner *r, struct sbx_store *st)
{
    struct runner_store_pool *p = runner_fleet_pool(r);

    if (st == NULL) {
        return;
    }
    if (p != NULL && sbx_store_reusable(st)) {
        pthread_mutex_lock(&p->mu);
        if (p->n < STORE_POOL_MAX) {
            p->idle[p->n++] = st;
            st = NULL;
        }
        pthread_mutex_unlock(&p->mu);
    }
    sbx_store_close(st);
}
