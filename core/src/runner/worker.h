/* worker.h - the worker threads that run jobs and end tasks, and a job's
 * output as they append it (worker.c; the output itself: output.h). */
#ifndef SBX_RUNNER_WORKER_H
#define SBX_RUNNER_WORKER_H

#include <stddef.h>

struct sbx_runner;
struct rjob;
struct rtask;

int runner_worker_start(struct sbx_runner *r, struct rjob *j);
int runner_task_ender_start(struct sbx_runner *r, struct rtask *t);
/* (added, issue 31) Under r->mu: t's ender started when it is due to end
 * (rtask_due_to_end; stopping: the runner stops). */
void runner_task_end_if_due(struct sbx_runner *r, struct rtask *t, int stopping);
/* (added, issue 31) A worker's last act (runner.c): one worker fewer, and a
 * stopping runner's loop woken to leave when it was the last. Touches nothing
 * of r after it. */
void runner_worker_gone(struct sbx_runner *r);
/* stream: 1 stdout, 2 stderr; runner_output_add (output.h) under r->mu */
void runner_output_append(struct sbx_runner *r, struct rjob *j, int stream, const char *data,
                          size_t len);

#endif
