/* output.h - a job's kept output and the stream of each byte (output.c).
 * **(changed, issue 31)** An opaque struct, made and freed with its job
 * (runner_job_new, runner_job_free: rjob.h). Offsets are absolute: the count
 * of bytes appended before (runner_output_total terms). The caller holds the
 * runner's lock where the job is shared (runner_lock). */
#ifndef SBX_RUNNER_OUTPUT_H
#define SBX_RUNNER_OUTPUT_H

#include <stddef.h>

struct runner_output;

/* An empty output; runner_output_free(NULL) does nothing. */
struct runner_output *runner_output_new(void);
void runner_output_free(struct runner_output *o);

/* Appends len bytes of stream (1 stdout, 2 stderr; anything else is stdout),
 * dropping the oldest past SBX_RUNNER_MAX_OUTPUT (a larger piece keeps its
 * tail). Amortised O(1) per byte. */
void runner_output_add(struct runner_output *o, int stream, const char *data, size_t len);
/* A job that ended keeps only its bytes: the room for appending goes. */
void runner_output_settle(struct runner_output *o);

/* All the bytes ever appended (the end of the kept ones). */
size_t runner_output_total(const struct runner_output *o);
/* The offset of the first kept byte (> 0: older bytes were dropped). */
size_t runner_output_first(const struct runner_output *o);
/* The kept byte at offset off (first <= off <= total), contiguous to the end. */
const char *runner_output_at(const struct runner_output *o, size_t off);

/* Calls fn for each run of one stream (1 or 2) of the kept bytes from offset
 * from (before the first kept byte: from that byte) to the end, in order, with
 * the run's bytes from there; stops at the first fn that returns nonzero. */
typedef int (*runner_output_run_fn)(void *ud, int stream, const char *data, size_t len);
void runner_output_runs(const struct runner_output *o, size_t from, runner_output_run_fn fn,
                        void *ud);

/* What the output holds besides its bytes, to check its bounds (tests). */
struct runner_output_stats {
    size_t room;     /* the bytes' allocation (at most twice the maximum) */
    size_t moved;    /* bytes copied to the front so far (compaction) */
    size_t runs;     /* runs remembered (those of the kept bytes) */
    size_t run_room; /* their allocation, in runs */
};
void runner_output_stats(const struct runner_output *o, struct runner_output_stats *st);

#endif
