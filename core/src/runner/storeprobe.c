/* storeprobe.c - the store side of GET /healthz, and the gate of the loop's
 * store connection (docs/runner.md, "A slow or silent database").
 *
 * A thread reads the store every interval on its own connection (every
 * STOREPROBE_DOWN_MS while it is down) and keeps the answer and its time, so
 * /healthz and the status page answer from what the box already knows and
 * never wait on the database. On PostgreSQL it also keeps the gate
 * (sbx_store_set_gate) of the loop's connection: a call of the loop that
 * passed its deadline closes it, and every call of the loop then fails at
 * once (the API answers 503 with Retry-After) until this probe finds the
 * database answering again and opens it. The loop so waits on a stalled
 * database once per stall, for one deadline, never per request. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config/config.h"
#include "runner/health.h"
#include "store/store.h"
#include "util/monowait.h"
#include "util/xalloc.h"

#define STOREPROBE_DOWN_MS 250

struct runner_storeprobe {
    const struct sbx_config *cfg;
    const char *store_path;
    struct sbx_store *loop; /* the loop's connection: its gate is ours */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv; /* CLOCK_MONOTONIC */
    int interval_ms;
    int stop;
    int64_t in_flight_since; /* ms, 0: no probe running */
    int64_t done_at;         /* ms of the last answer, 0: none yet */
    char msg[400];           /* "" ok, else why */
    struct sbx_store *conn;  /* the probe's own connection; probe thread only */
    struct sbx_store_gate gate;
};

/* One read of the store on the probe's connection: 0 it answered in time
 * (msg ""), 1 it answered late or not at all (a stall: the gate closes), 2 it
 * failed at once (a refused connection: nothing waits on it, the gate stays
 * as it is). */
static int probe(struct runner_storeprobe *p, char *msg, size_t len)
{
    sbx_error_t *err = NULL;
    int64_t t0 = sbx_mono_ms(), took;

    msg[0] = '\0';
    if (p->conn == NULL) {
        p->conn = sbx_store_open_ex(p->store_path, p->cfg->runner.database_password_env, &err);
    }
    if (p->conn != NULL && sbx_store_ping(p->conn, &err) == 0) {
        /* an answer slower than half the deadline is no answer: the gate
         * opens only for a database that answers in time again, else the
         * loop would wait a whole deadline after each opening */
        took = sbx_mono_ms() - t0;
        if (took > sbx_store_pg_deadline_ms() / 2) {
            snprintf(msg, len, "the store answered in %lld ms (slower than %d ms)", (long long)took,
                     sbx_store_pg_deadline_ms() / 2);
            return 1;
        }
        return 0;
    }
    snprintf(msg, len, "%s", sbx_error_msg(err));
    /* a connection past its deadline is reset by its next call; one the
     * server dropped too: a new one at the next probe either way */
    if (p->conn != NULL && sbx_store_down(p->conn)) {
        sbx_store_close(p->conn);
        p->conn = NULL;
    }
    sbx_error_free(&err);
    return sbx_mono_ms() - t0 > sbx_store_pg_deadline_ms() / 2 ? 1 : 2;
}

static void *storeprobe_main(void *arg)
{
    struct runner_storeprobe *p = arg;
    char msg[sizeof(p->msg)];
    int rc;

    pthread_mutex_lock(&p->mu);
    while (!p->stop) {
        int64_t at;

        p->in_flight_since = sbx_mono_ms();
        pthread_mutex_unlock(&p->mu);
        rc = probe(p, msg, sizeof(msg));
        pthread_mutex_lock(&p->mu);
        p->in_flight_since = 0;
        p->done_at = sbx_mono_ms();
        memcpy(p->msg, msg, sizeof(p->msg));
        if (rc != 2) {
            sbx_store_gate_set(&p->gate, rc == 1);
        }
        at =
            p->done_at + (msg[0] != '\0' && p->interval_ms > STOREPROBE_DOWN_MS ? STOREPROBE_DOWN_MS
                                                                                : p->interval_ms);
        sbx_cond_wait_until_ms(&p->cv, &p->mu, at, &p->stop);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

struct runner_storeprobe *runner_storeprobe_start(const struct sbx_config *cfg,
                                                  const char *store_path, struct sbx_store *loop,
                                                  int interval_ms, sbx_error_t **err)
{
    struct runner_storeprobe *p = xcalloc(1, sizeof(*p));

    p->cfg = cfg;
    p->store_path = store_path;
    p->loop = loop;
    p->interval_ms = interval_ms;
    pthread_mutex_init(&p->mu, NULL);
    sbx_cond_init_mono(&p->cv);
    /* the first answer before the API listens: /healthz never says "not yet" */
    probe(p, p->msg, sizeof(p->msg));
    p->done_at = sbx_mono_ms();
    sbx_store_set_gate(loop, &p->gate);
    if (pthread_create(&p->th, NULL, storeprobe_main, p) != 0) {
        sbx_store_set_gate(loop, NULL);
        sbx_store_close(p->conn);
        pthread_mutex_destroy(&p->mu);
        pthread_cond_destroy(&p->cv);
        free(p);
        sbx_error_set(err, SBX_E_GENERIC, "runner: cannot start the store probe thread");
        return NULL;
    }
    return p;
}

void runner_storeprobe_free(struct runner_storeprobe *p)
{
    if (p == NULL) {
        return;
    }
    pthread_mutex_lock(&p->mu);
    p->stop = 1;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->th, NULL); /* a probe in flight ends within the call's deadline */
    sbx_store_set_gate(p->loop, NULL);
    sbx_store_close(p->conn);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
    free(p);
}

int runner_storeprobe_state(struct runner_storeprobe *p, char *why, size_t len, double *age_s)
{
    int64_t now = sbx_mono_ms();
    int rc = -1;

    *age_s = 0;
    if (p == NULL) {
        snprintf(why, len, "the store probe is not running");
        return -1;
    }
    pthread_mutex_lock(&p->mu);
    *age_s = (double)(now - p->done_at) / 1000;
    if (p->in_flight_since != 0 && now - p->in_flight_since > sbx_store_pg_deadline_ms()) {
        snprintf(why, len, "the store has not answered for %lld ms",
                 (long long)(now - p->in_flight_since));
    }
    else if (sbx_store_gate_down(&p->gate) != 0 && p->msg[0] == '\0') {
        snprintf(why, len, "a call of the box passed its deadline; waiting for the next probe");
    }
    else {
        snprintf(why, len, "%s", p->msg);
        rc = p->msg[0] ? -1 : 0;
    }
    pthread_mutex_unlock(&p->mu);
    return rc;
}

int runner_store_stalled(struct runner_storeprobe *p)
{
    return p != NULL && sbx_store_gate_down(&p->gate) != 0;
}

struct sbx_store_gate *runner_store_gate(struct runner_storeprobe *p)
{
    return p != NULL ? &p->gate : NULL;
}
