/* adopt.h - (added, issue 31) the keeper's task in its private runner (adopt.c):
 * a task its process started, handed to the runner, which then holds it as it
 * holds a task its own job started and kept (docs/tasks.md, "The keeper"). */
#ifndef SBX_RUNNER_ADOPT_H
#define SBX_RUNNER_ADOPT_H

#include "sandbox/task.h"
#include "util/error.h"

struct sbx_runner;

/* Before sbx_runner_run (the scheduler is the loop's alone): task, started by
 * this process (its sandbox up), becomes a kept task of r owned by r's unix
 * socket client, in its pool, with its row READY. r ends it (sbx_task_end) once
 * it is asked to or its own timer stopped it, and the task must not be used by
 * the caller after that. -1 with err: nothing changed (the caller ends it). */
int sbx_runner_task_adopt(struct sbx_runner *r, struct sbx_task *task, sbx_error_t **err);
/* 1 while r holds the task ready (not ending, not gone), 2 when it was asked to
 * end it (POST /v1/tasks/{id}/end) but has not begun; 0 otherwise. Any thread. */
int sbx_runner_task_live(struct sbx_runner *r, const char *id);
/* Stops the task (its commands cancelled, reason given) and asks r to end it;
 * 0 when r holds no such ready task. Any thread. */
int sbx_runner_task_stop(struct sbx_runner *r, const char *id, const char *reason);
/* The task held for the caller (its `running` count: not ended meanwhile), or
 * NULL when r holds no such ready task; sbx_runner_task_unhold lets it go. */
struct sbx_task *sbx_runner_task_hold(struct sbx_runner *r, const char *id);
void sbx_runner_task_unhold(struct sbx_runner *r, const char *id);

#endif
