/* storepool.h - the workers' own connections to the store (storepool.c). */
#ifndef SBX_RUNNER_STOREPOOL_H
#define SBX_RUNNER_STOREPOOL_H

#include <stdint.h>

#include "util/error.h"

struct sbx_runner;
struct sbx_store;
struct runner_store_pool;

/* storepool.c (added): a worker's own connection to the store, its rows
 * carrying this box's id: a new one on SQLite, a reused one (or a new one when
 * none is idle) on a fleet box; put gives it back (or closes it). */
struct runner_store_pool *runner_store_pool_new(const char *location, const char *password_env,
                                                const char *box);
void runner_store_pool_free(struct runner_store_pool *p);
void runner_store_pool_counts(struct runner_store_pool *p, uint64_t *opened, uint64_t *reused);
/* (changed, issue 31) The pool's own: an idle connection still usable, else a
 * new one to its location carrying its box; put keeps st when it is reusable
 * and the pool has room, else closes it. */
struct sbx_store *runner_store_pool_get(struct runner_store_pool *p, sbx_error_t **err);
void runner_store_pool_put(struct runner_store_pool *p, struct sbx_store *st);
/* (changed, issue 31) fleet.c: the runner's, with the fleet's pool, or a new
 * connection each time on one box. */
struct sbx_store *runner_store_get(struct sbx_runner *r, sbx_error_t **err);
void runner_store_put(struct sbx_runner *r, struct sbx_store *st);

#endif
