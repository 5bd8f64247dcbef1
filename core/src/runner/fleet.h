/* fleet.h - a box of a fleet on PostgreSQL (fleet.c) and the fleet's one
 * autoscaler (fleetlead.c). */
#ifndef SBX_RUNNER_FLEET_H
#define SBX_RUNNER_FLEET_H

#include <jansson.h>
#include <stdio.h>

#include "util/error.h"

struct sbx_config;
struct sbx_runner;
struct sbx_sched;
struct evhttp_request;

/* fleet.c (added): a box of a fleet on PostgreSQL (docs/runner.md, "Several
 * boxes"). Start registers the box (nothing on SQLite); claim takes what this
 * box can start now from the shared queue. */
int runner_fleet_start(struct sbx_runner *r, sbx_error_t **err);
void runner_fleet_claim(struct sbx_runner *r);
void runner_fleet_free(struct sbx_runner *r);
/* (added) The fleet in GET /v1/queue ("fleet": this box's id and
 * sbx_store_fleet_json, (changed) read by the store thread), then the
 * answer to req (queue as it is on one box); its series in /metrics. */
void runner_fleet_queue(struct sbx_runner *r, struct evhttp_request *req, json_t *queue);
void runner_fleet_metrics(struct sbx_runner *r, FILE *f);
/* This box's id, NULL on one box. */
const char *runner_fleet_box(const struct sbx_runner *r);

/* fleetlead.c (added): the fleet's one autoscaler, the box holding the
 * leader lock. beat: at each fleet beat (creates *l); resign: this box lost
 * its lease (it gives the lock up); metrics: sbx_fleet_leader and, on the
 * leader, the fleet series read at the last beat. */
struct runner_lead;
/* (changed, issue 31) new: with the fleet, keeping cfg, store_path and box
 * (all outlive it); prepare: on the loop before a beat (copies the
 * scheduler's slots); beat: on the store thread, with the box's store probe
 * (health.h; read at each beat: it starts after the fleet): -1 it did not
 * reach the database (the probe says it is stalled), 0 this box does not
 * lead (another holds the lock, or the database failed), 1 it led. */
struct runner_storeprobe;
struct runner_lead *runner_lead_new(const struct sbx_config *cfg, const char *store_path,
                                    const char *box);
void runner_lead_prepare(struct runner_lead *l, struct sbx_sched *sched);
int runner_lead_beat(struct runner_lead *l, struct runner_storeprobe *probe);
void runner_lead_resign(struct runner_lead *l);
void runner_lead_metrics(struct runner_lead *l, FILE *f);
void runner_lead_free(struct runner_lead *l);

#endif
