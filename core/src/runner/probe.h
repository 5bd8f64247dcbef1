/* probe.h - (added, issue 31) the thread behind each of the runner's probes
 * (health.c: the engine; storeprobe.c: the store): it runs the probe, keeps
 * its answer and when it came, and waits for the next, so that a request
 * reads what the box already knows and never waits on the engine or the
 * database. The module that owns the probe says what a run does and what
 * it keeps (struct runner_probe_ops); probe.c owns the thread, the lock and
 * the answer. */
#ifndef SBX_RUNNER_PROBE_H
#define SBX_RUNNER_PROBE_H

#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

#define RUNNER_PROBE_MSG 400

struct runner_probe_ops {
    /* On the probe's thread, without its lock: one probe. msg: "" when it
     * answered, else why (at most len bytes); the return value goes to done. */
    int (*run)(void *ctx, char *msg, size_t len);
    /* Under the probe's lock, after each run and its answer are kept: what
     * the owner keeps of rc (may be NULL); returns the milliseconds until the
     * next run. */
    int (*done)(void *ctx, int rc, const char *msg);
};

/* What a probe knew when it was read. */
struct runner_probe_view {
    int64_t in_flight_since; /* sbx_mono_ms() of the run in flight, 0: none */
    int64_t done_at;         /* sbx_mono_ms() of the last answer, 0: none yet */
    char msg[RUNNER_PROBE_MSG];
};

struct runner_probe;

/* Starts the thread (what names the thread in an error: "the health
 * thread"), whose first run is at once; first_run: the first run is the
 * caller's, before this returns, so that the first read has an answer
 * (storeprobe.c), and the thread's comes when done said. */
struct runner_probe *runner_probe_start(const struct runner_probe_ops *ops, void *ctx,
                                        int first_run, const char *what, sbx_error_t **err);
/* Stops and joins the thread (a run in flight ends first); NULL is a no-op. */
void runner_probe_stop(struct runner_probe *p);
/* A copy of what the probe knows now. */
void runner_probe_read(struct runner_probe *p, struct runner_probe_view *v);

#endif
