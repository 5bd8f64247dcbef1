/* recover.h - the runner's recovery at start and the orphan rule (recover.c). */
#ifndef SBX_RUNNER_RECOVER_H
#define SBX_RUNNER_RECOVER_H

#include "util/error.h"

struct sbx_runner;
struct sbx_job_rec;

int runner_recover(struct sbx_runner *r, sbx_error_t **err);
/* (added) The orphan rule (docs/architecture.md, Labels), the one used by the
 * recovery and by the warm pool's periodic sweep: destroys every sandbox of
 * pi with label key (= value unless NULL) whose sbx.owner process is gone,
 * except one whose sbx.task this runner holds (a kept task re-adopted at
 * recovery). The number removed, or -1 when the list failed. Any thread. */
struct sbx_open_instance;
int runner_destroy_orphans(struct sbx_runner *r, struct sbx_open_instance *pi, const char *key,
                           const char *value, sbx_error_t **err);
/* A job of the store as an rjob (queued or running; no token). */
struct rjob *runner_job_from_rec(const struct sbx_job_rec *rec);

#endif
