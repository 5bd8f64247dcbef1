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
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "config/config.h"
#include "runner/health.h"
#include "runner/probe.h"
#include "store/store.h"
#include "util/monowait.h"
#include "util/xalloc.h"

#define STOREPROBE_DOWN_MS 250

struct runner_storeprobe {
    const struct sbx_config *cfg;
    const char *store_path;
    struct sbx_store *loop; /* the loop's connection: its gate is ours */
    int interval_ms;
    struct sbx_store *conn; /* the probe's own connection; probe thread only */
    struct sbx_store_gate gate;
    struct runner_probe *probe; /* probe.h: the thread, the last answer */
};

/* One read of the store on the probe's connection: 0 it answered in time
 * (msg ""), 1 it answered late or not at all (a stall: the gate closes), 2 it
 * failed at once (a refused connection: nothing waits on it, the gate stays
 * as it is). */
static int probe_run(void *arg, char *msg, size_t len)
{
    struct runner_storeprobe *p = arg;
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

/* Under the probe's lock: the gate follows a stall or an answer; a store
 * that did not answer is read again soon. */
static int probe_done(void *arg, int rc, const char *msg)
{
    struct runner_storeprobe *p = arg;

    if (rc != 2) {
        sbx_store_gate_set(&p->gate, rc == 1);
    }
    return msg[0] != '\0' && p->interval_ms > STOREPROBE_DOWN_MS ? STOREPROBE_DOWN_MS
                                                                 : p->interval_ms;
}

static const struct runner_probe_ops storeprobe_ops = {.run = probe_run, .done = probe_done};

struct runner_storeprobe *runner_storeprobe_start(const struct sbx_config *cfg,
                                                  const char *store_path, struct sbx_store *loop,
                                                  int interval_ms, sbx_error_t **err)
{
    struct runner_storeprobe *p = xcalloc(1, sizeof(*p));

    p->cfg = cfg;
    p->store_path = store_path;
    p->loop = loop;
    p->interval_ms = interval_ms;
    /* the loop's connection answers to the gate from now on; the first
     * answer before the API listens: /healthz never says "not yet" */
    sbx_store_set_gate(loop, &p->gate);
    p->probe = runner_probe_start(&storeprobe_ops, p, 1, "the store probe thread", err);
    if (p->probe == NULL) {
        sbx_store_set_gate(loop, NULL);
        sbx_store_close(p->conn);
        free(p);
        return NULL;
    }
    return p;
}

void runner_storeprobe_free(struct runner_storeprobe *p)
{
    if (p == NULL) {
        return;
    }
    runner_probe_stop(p->probe); /* a probe in flight ends within the call's deadline */
    sbx_store_set_gate(p->loop, NULL);
    sbx_store_close(p->conn);
    free(p);
}

int runner_storeprobe_state(struct runner_storeprobe *p, char *why, size_t len, double *age_s)
{
    struct runner_probe_view v;
    int64_t now = sbx_mono_ms();

    *age_s = 0;
    if (p == NULL) {
        snprintf(why, len, "the store probe is not running");
        return -1;
    }
    runner_probe_read(p->probe, &v);
    *age_s = (double)(now - v.done_at) / 1000;
    if (v.in_flight_since != 0 && now - v.in_flight_since > sbx_store_pg_deadline_ms()) {
        snprintf(why, len, "the store has not answered for %lld ms",
                 (long long)(now - v.in_flight_since));
        return -1;
    }
    if (sbx_store_gate_down(&p->gate) != 0 && v.msg[0] == '\0') {
        snprintf(why, len, "a call of the box passed its deadline; waiting for the next probe");
        return -1;
    }
    snprintf(why, len, "%s", v.msg);
    return v.msg[0] ? -1 : 0;
}

int runner_store_stalled(struct runner_storeprobe *p)
{
    return p != NULL && sbx_store_gate_down(&p->gate) != 0;
}

struct sbx_store_gate *runner_store_gate(struct runner_storeprobe *p)
{
    return p != NULL ? &p->gate : NULL;
}
