/* output.h - a job's kept output and the stream of each byte (output.c).
 * The caller holds the runner's lock where the job is shared (runner_lock). */
#ifndef SBX_RUNNER_OUTPUT_H
#define SBX_RUNNER_OUTPUT_H

#include <stddef.h>

struct rjob;

/* Appends len bytes of stream (1 stdout, 2 stderr) to j's output, dropping
 * the oldest past SBX_RUNNER_MAX_OUTPUT. */
void runner_output_add(struct rjob *j, int stream, const char *data, size_t len);
/* A job that ended keeps only its bytes: the room for appending goes. */
void runner_output_settle(struct rjob *j);
/* The stream (1 or 2) of the byte at absolute offset off (>= the first kept
 * byte, < out_total) and where its run ends (absolute). */
int runner_output_stream_at(const struct rjob *j, size_t off, size_t *run_end);

#endif
