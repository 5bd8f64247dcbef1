/* jobtab.c - the runner's jobs and tasks in memory: a hash of jobs by id over
 * the list the loop walks, the list of tasks (of rtask.h), and the trim of ended jobs' output.
 * Callers hold r->mu where jobs.h says so. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runner/state.h"
#include "runner/hooks.h"
#include "runner/jobs.h"
#include "runner/rjob.h"
#include "runner/rtask.h"
#include "util/xalloc.h"

/* Finished jobs whose output stays in memory (their records stay in the
 * store): runner.keep_output, this without a configuration. */
#define KEEP_FINISHED 1000

static size_t bucket_of(const char *id)
{
    uint32_t h = 2166136261u; /* FNV-1a */

    for (const unsigned char *p = (const unsigned char *)id; *p != '\0'; p++) {
        h = (h ^ *p) * 16777619u;
    }
    return h % RUNNER_BUCKETS;
}

struct rjob *runner_jobtab_find(const struct runner_jobtab *tab, const char *id)
{
    for (struct rjob *j = tab->buckets[bucket_of(id)]; j != NULL; j = *rjob_hash_link(j)) {
        if (strcmp(rjob_id(j), id) == 0) {
            return j;
        }
    }
    return NULL;
}

void runner_jobtab_link(struct runner_jobtab *tab, struct rjob *j)
{
    size_t b = bucket_of(rjob_id(j));

    *rjob_list_link(j) = tab->jobs;
    tab->jobs = j;
    *rjob_hash_link(j) = tab->buckets[b];
    tab->buckets[b] = j;
    tab->n_jobs++;
}

static void job_unhash(struct runner_jobtab *tab, struct rjob *j)
{
    for (struct rjob **pp = &tab->buckets[bucket_of(rjob_id(j))]; *pp != NULL;
         pp = rjob_hash_link(*pp)) {
        if (*pp == j) {
            *pp = *rjob_hash_link(j);
            return;
        }
    }
}

struct rtask *runner_jobtab_task(const struct runner_jobtab *tab, const char *id)
{
    return rtask_list_find(tab->tasks, id);
}

void runner_jobtab_add_task(struct runner_jobtab *tab, struct rtask *t)
{
    rtask_list_push(&tab->tasks, t);
}

int runner_jobtab_remove_task(struct runner_jobtab *tab, struct rtask *t)
{
    return rtask_list_unlink(&tab->tasks, t);
}

size_t runner_jobtab_trim(struct runner_jobtab *tab, size_t keep)
{
    size_t ended = 0, gone = 0;

    for (struct rjob **pp = &tab->jobs; *pp != NULL;) {
        struct rjob *j = *pp;

        if (rjob_state(j) >= SBX_JOB_FINISHED && rjob_released(j) && *rjob_streams(j) == NULL &&
            ++ended > keep) {
            *pp = rjob_next(j);
            job_unhash(tab, j);
            runner_job_free(j);
            tab->n_jobs--;
            gone++;
            continue;
        }
        pp = rjob_list_link(j);
    }
    return gone;
}

struct rjob *runner_job_find(struct sbx_runner *r, const char *id)
{
    return runner_jobtab_find(&r->tab, id);
}

void runner_job_link(struct sbx_runner *r, struct rjob *j)
{
    runner_jobtab_link(&r->tab, j);
}

struct rtask *runner_task_find(struct sbx_runner *r, const char *id)
{
    return runner_jobtab_task(&r->tab, id);
}

/* Drops the output of ended jobs past the newest runner.keep_output (their records
 * stay in the store). Loop thread, from the tick: O(jobs in memory). */
void runner_trim_finished(struct sbx_runner *r)
{
    size_t keep =
        r->cfg->runner.keep_output > 0 ? (size_t)r->cfg->runner.keep_output : KEEP_FINISHED;

    pthread_mutex_lock(&r->mu);
    runner_jobtab_trim(&r->tab, keep);
    pthread_mutex_unlock(&r->mu);
}

void runner_lock(struct sbx_runner *r)
{
    pthread_mutex_lock(&r->mu);
}

void runner_unlock(struct sbx_runner *r)
{
    pthread_mutex_unlock(&r->mu);
}

int runner_stopping(struct sbx_runner *r)
{
    int stopping;

    pthread_mutex_lock(&r->mu);
    stopping = r->stopping;
    pthread_mutex_unlock(&r->mu);
    return stopping;
}

struct event_base *runner_base(struct sbx_runner *r)
{
    return r->base;
}
