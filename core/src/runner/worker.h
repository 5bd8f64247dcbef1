/* worker.h - the worker threads that run jobs and end tasks (worker.c; a
 * job's output, which they append to: output.h). */
#ifndef SBX_RUNNER_WORKER_H
#define SBX_RUNNER_WORKER_H

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

#endif
