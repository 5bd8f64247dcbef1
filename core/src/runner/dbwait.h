/* dbwait.h - a job's end written again while the database is down (dbwait.c). */
#ifndef SBX_RUNNER_DBWAIT_H
#define SBX_RUNNER_DBWAIT_H

#include "util/error.h"

struct sbx_runner;
struct sbx_store;

/* dbwait.c (added): write(st, arg, err), a job's end in one transaction of
 * its own (it rolls back what it began when it fails), run again while the
 * database is down; 0, or -1 with *err (another failure, such as a fenced
 * write, or the database stayed down). */
int runner_store_retry(struct sbx_runner *r, struct sbx_store *st, const char *job_id,
                       int (*write)(struct sbx_store *st, void *arg, sbx_error_t **err), void *arg,
                       sbx_error_t **err);

/* (added) A store connection for a worker, asked for again every
 * DBWAIT_STEP_MS while none can be had (the database restarting), as long as
 * a job's end write would wait; NULL with *err after that. Without it a job
 * that started while the database was away ended in memory only and its
 * record stayed `running` (test_fleet_pgrestart). */
struct sbx_store *runner_store_get_wait(struct sbx_runner *r, const char *job_id,
                                        sbx_error_t **err);

#endif
