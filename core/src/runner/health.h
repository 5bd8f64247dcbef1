/* health.h - the probes that keep requests off a slow engine or database
 * (health.c, storeprobe.c) and the image check before work (image_check.c). */
#ifndef SBX_RUNNER_HEALTH_H
#define SBX_RUNNER_HEALTH_H

#include <stddef.h>

#include "util/error.h"

struct sbx_runner;
struct sbx_store_gate;

/* (added) image_check.c: the configured image is in the engine (pulled by
 * digest when missing) before the box grants or claims a job. ready: 1, else
 * 0 with what it waits for in why (may be NULL). */
int runner_image_start(struct sbx_runner *r, sbx_error_t **err);
int runner_image_ready(struct sbx_runner *r, char *why, size_t len);
void runner_image_free(struct sbx_runner *r);

/* health.c: a thread probes the engine every interval_ms (a list of the
 * default provider), so no request ever waits on a slow engine */
int runner_health_start(struct sbx_runner *r, int interval_ms, sbx_error_t **err);
void runner_health_free(struct sbx_runner *r);
/* 0 when the last probe answered in time, else -1 with why */
int runner_health_engine(struct sbx_runner *r, char *why, size_t len);
/* (added) sandboxes killed and waiting for the engine's removal at the last
 * probe, -1: unknown (sandbox/backlog.h) */
int runner_health_backlog(struct sbx_runner *r);

/* (added) storeprobe.c: a thread reads the store every interval_ms on its
 * own connection and keeps the loop connection's gate, so that no request
 * waits on a stalled database (docs/runner.md, A slow or silent database) */
int runner_storeprobe_start(struct sbx_runner *r, int interval_ms, sbx_error_t **err);
void runner_storeprobe_free(struct sbx_runner *r);
/* 0 when the last read answered, else -1 with why; *age_s: seconds since */
int runner_storeprobe_state(struct sbx_runner *r, char *why, size_t len, double *age_s);
/* 1 while a call of the box passed its deadline and the probe has not seen
 * the database answer since (the loop's calls fail at once meanwhile) */
int runner_store_stalled(struct sbx_runner *r);
/* (added) The gate the probe keeps, for the store thread's connection. */
struct sbx_store_gate *runner_store_gate(struct sbx_runner *r);

#endif
