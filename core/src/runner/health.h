/* health.h - the probes that keep requests off a slow engine or database
 * (health.c, storeprobe.c) and the image check before work (image_check.c).
 * Each is its module's own opaque struct, made from the configuration (and
 * the store) alone, a thread behind it; NULL reads as "not running". */
#ifndef SBX_RUNNER_HEALTH_H
#define SBX_RUNNER_HEALTH_H

#include <stddef.h>

#include "util/error.h"

struct sbx_config;
struct sbx_store;
struct sbx_store_gate;
struct runner_health;
struct runner_storeprobe;
struct runner_image;

/* (added) image_check.c: the configured image is in the engine (pulled by
 * digest when missing) before the box grants or claims a job; on_ready(arg)
 * once it is (on the check's thread). ready: 1, else 0 with what it waits
 * for in why (may be NULL); NULL (no check) is ready. */
struct runner_image *runner_image_start(const struct sbx_config *cfg, const char *plugin_dir,
                                        void (*on_ready)(void *arg), void *arg, sbx_error_t **err);
int runner_image_ready(struct runner_image *im, char *why, size_t len);
void runner_image_free(struct runner_image *im);

/* health.c: a thread probes the engine every interval_ms (a list of the
 * default provider), so no request ever waits on a slow engine */
struct runner_health *runner_health_start(const struct sbx_config *cfg, const char *plugin_dir,
                                          int interval_ms, sbx_error_t **err);
void runner_health_free(struct runner_health *h);
/* 0 when the last probe answered in time, else -1 with why */
int runner_health_engine(struct runner_health *h, char *why, size_t len);
/* (added) sandboxes killed and waiting for the engine's removal at the last
 * probe, -1: unknown (sandbox/backlog.h) */
int runner_health_backlog(struct runner_health *h);

/* (added) storeprobe.c: a thread reads the store (store_path) every
 * interval_ms on its own connection and keeps the gate of loop (the loop's
 * connection), so that no request waits on a stalled database (docs/runner.md,
 * A slow or silent database) */
struct runner_storeprobe *runner_storeprobe_start(const struct sbx_config *cfg,
                                                  const char *store_path, struct sbx_store *loop,
                                                  int interval_ms, sbx_error_t **err);
void runner_storeprobe_free(struct runner_storeprobe *p);
/* 0 when the last read answered, else -1 with why; *age_s: seconds since */
int runner_storeprobe_state(struct runner_storeprobe *p, char *why, size_t len, double *age_s);
/* 1 while a call of the box passed its deadline and the probe has not seen
 * the database answer since (the loop's calls fail at once meanwhile) */
int runner_store_stalled(struct runner_storeprobe *p);
/* (added) The gate the probe keeps, for the store thread's connection. */
struct sbx_store_gate *runner_store_gate(struct runner_storeprobe *p);

#endif
