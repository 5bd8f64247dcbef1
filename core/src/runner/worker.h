/* worker.h - the worker threads that run jobs and end tasks, and a job's
 * output (worker.c). */
#ifndef SBX_RUNNER_WORKER_H
#define SBX_RUNNER_WORKER_H

#include <stddef.h>

struct sbx_runner;
struct rjob;
struct rtask;

int runner_worker_start(struct sbx_runner *r, struct rjob *j);
int runner_task_ender_start(struct sbx_runner *r, struct rtask *t);
/* (added, issue 31) A worker's last act (runner.c): one worker fewer, and a
 * stopping runner's loop woken to leave when it was the last. Touches nothing
 * of r after it. */
void runner_worker_gone(struct sbx_runner *r);
/* stream: 1 stdout, 2 stderr */
/* A job that ended keeps only its bytes: the room for appending goes (under r->mu). */
void runner_output_settle(struct rjob *j);
void runner_output_append(struct sbx_runner *r, struct rjob *j, int stream, const char *data,
                          size_t len);
/* The stream (1 or 2) of the byte at absolute offset off (>= the first kept
 * byte, < out_total) and where its run ends (absolute). Under r->mu. */
int runner_output_stream_at(const struct rjob *j, size_t off, size_t *run_end);

#endif
