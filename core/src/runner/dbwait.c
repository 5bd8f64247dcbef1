/* dbwait.c - a job's end is not lost while the fleet's database is down
 * (docs/runner.md, "Several boxes"): a worker whose end write failed because
 * the connection is down writes it again, the whole transaction it belongs
 * to, every DBWAIT_STEP_MS until the
 * database is back (at most DBWAIT_MAX_S; DBWAIT_STOP_S once the runner
 * stops). Worker threads only: they hold their own store connection. */
#include <stdlib.h>
#include <time.h>

#include "runner/dbwait.h"
#include "runner/jobs.h"
#include "runner/storepool.h"
#include "util/log.h"

#define DBWAIT_STEP_MS 250
#define DBWAIT_MAX_S 300
#define DBWAIT_STOP_S 5

int runner_store_retry(struct sbx_runner *r, struct sbx_store *st, const char *job_id,
                       int (*write)(struct sbx_store *st, void *arg, sbx_error_t **err), void *arg,
                       sbx_error_t **err)
{
    long waited = 0;

    for (;;) {
        int stopping;

        if (write(st, arg, err) == 0) {
            if (waited > 0) {
                sbx_info("runner: job %s: its end was written once the database was back (%.1f s)",
                         job_id, (double)waited / 1000);
            }
            return 0;
        }
        stopping = runner_stopping(r);
        /* written again while the store is down, and after any failure of the
         * store itself (SBX_E_GENERIC: a lost connection may already be
         * reopened when it is looked at); a refusal (ESTALE: another box holds
         * the job, EINVAL: not its state, SBX_E_NOTFOUND) is final */
        if (!(sbx_store_down(st) || (*err != NULL && (*err)->code == SBX_E_GENERIC)) ||
            waited >= (stopping ? DBWAIT_STOP_S : DBWAIT_MAX_S) * 1000L) {
            return -1;
        }
        if (waited == 0) {
            sbx_warn("runner: job %s: the database is unavailable (%s); its end is written again "
                     "every %d ms until it is back",
                     job_id, sbx_error_msg(*err), DBWAIT_STEP_MS);
        }
        sbx_error_free(err);
        {
            struct timespec ts = {0, DBWAIT_STEP_MS * 1000L * 1000L};

            nanosleep(&ts, NULL);
        }
        waited += DBWAIT_STEP_MS;
    }
}

/* (added) Stops waiting: the budget is spent (shorter once the runner stops). */
static int wait_over(struct sbx_runner *r, long waited)
{
    int stopping;

    stopping = runner_stopping(r);
    return waited >= (stopping ? DBWAIT_STOP_S : DBWAIT_MAX_S) * 1000L;
}

struct sbx_store *runner_store_get_wait(struct sbx_runner *r, const char *job_id, sbx_error_t **err)
{
    long waited = 0;

    for (;;) {
        struct sbx_store *st = runner_store_get(r, err);

        if (st != NULL) {
            if (waited > 0) {
                sbx_info("runner: job %s: a database connection once it was back (%.1f s)", job_id,
                         (double)waited / 1000);
            }
            return st;
        }
        if (wait_over(r, waited)) {
            return NULL;
        }
        if (waited == 0) {
            sbx_warn("runner: job %s: no database connection (%s); trying again every %d ms",
                     job_id, sbx_error_msg(*err), DBWAIT_STEP_MS);
        }
        sbx_error_free(err);
        {
            struct timespec ts = {0, DBWAIT_STEP_MS * 1000L * 1000L};

            nanosleep(&ts, NULL);
        }
        waited += DBWAIT_STEP_MS;
    }
}
