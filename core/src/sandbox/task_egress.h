/* task_egress.h - a task's egress socket: wiring it at start, wiring it again when a
 * runner re-adopts the task, the job its log lines carry, its counters. */
#ifndef SBX_SANDBOX_TASK_EGRESS_H
#define SBX_SANDBOX_TASK_EGRESS_H

#include "sandbox/task_int.h"

/* The sandbox's only way out: a socket of the egress proxy (o->egress, or one this task
 * starts) in <task dir>/egress, checked against t->egress_allow, which is also saved
 * to <task dir>/egress.rules for a re-adoption. *relay gets the host path of sbx-relay
 * (the caller frees it). */
int sbx_task_egress_wire(struct sbx_task *t, const struct sbx_task_opts *o, char **relay,
                         sbx_error_t **err);
/* (added) Saves t->egress_allow to <task dir>/egress.rules (a changed allow-list,
 * egress_change.c, survives a runner restart too). */
void sbx_task_egress_save(const struct sbx_task *t);
/* A re-adopted task: the socket again on the runner's proxy (o->egress), with the rules
 * saved at start. The sandbox mounts the directory, so it sees the new socket. */
int sbx_task_egress_rewire(struct sbx_task *t, const struct sbx_task_opts *o, sbx_error_t **err);
/* (added) A claimed warm sandbox: the socket's rules become t->egress_allow (saved
 * too), its log lines name t's job and task, its counts start at zero. */
int sbx_task_egress_claim(struct sbx_task *t, sbx_error_t **err);
/* (added) The sandbox's environment: the proxy variables and, when the pool's or
 * egress.ca_bundle is set, the CA variables after its files are installed in the
 * egress directory (docs/egress.md, "Extra CAs"). env has room for 32 entries; *n is
 * set. */
int sbx_task_egress_env(struct sbx_task *t, struct sbx_kv *env, size_t *n, sbx_error_t **err);

#endif
