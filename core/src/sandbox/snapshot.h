/* snapshot.h - snapshots of a task's filesystem and what they are made of (docs/tasks.md,
 * "Snapshots and forks"): the provider's snapshot op, the lease's values kept out, one
 * record per snapshot in <state>/snapshots/<id>.json, the per-pool quota
 * (snapshot.quota) and the age (snapshot.max_age). */
#ifndef SBX_SANDBOX_SNAPSHOT_H
#define SBX_SANDBOX_SNAPSHOT_H

#include <jansson.h>

#include "sandbox/task.h"

/* 1 when id is a snapshot id: "s-" and 12 lower-case hex digits. */
int sbx_snapshot_id_valid(const char *id);
/* Snapshots t's sandbox for who ("local" or an API client); fork_of: the task a fork
 * will start from it, or NULL. Refused past the pool's quota, for a provider without
 * the op, and when the image would hold a value of t's lease. *rec: the record. */
int sbx_task_snapshot(struct sbx_task *t, const char *who, int for_fork, json_t **rec,
                      sbx_error_t **err);
/* The record of snapshot id, or NULL with a one-line error (bad id, unknown). */
json_t *sbx_snapshot_get(const char *state, const char *id, sbx_error_t **err);
/* Every record, oldest first (pool NULL: of every pool). */
json_t *sbx_snapshot_list(const char *state, const char *pool);
/* Removes snapshot id: its image (through its provider instance) and its record. */
int sbx_snapshot_remove(const struct sbx_config *cfg, const char *plugin_dir, const char *state,
                        const char *id, sbx_error_t **err);
/* Removes the snapshots created before now - age (age 0: none); their ids are
 * appended to removed (may be NULL). Returns how many, or -1 when one failed (the
 * others are still removed; err names the first). */
int sbx_snapshot_prune(const struct sbx_config *cfg, const char *plugin_dir, const char *state,
                       int64_t age, json_t *removed, sbx_error_t **err);

#endif
