/* hooks.h - wait alerts, webhooks and the hook commands (hooks.c). */
#ifndef SBX_RUNNER_HOOKS_H
#define SBX_RUNNER_HOOKS_H

struct sbx_runner;
struct sbx_sched_alert;
struct sbx_scale_decision;

void runner_alerts_tick(struct sbx_runner *r);
/* (added) Fires one wait alert (webhook, alert_command) with the autoscaler's
 * decision d, and runs scale_up_command when d is a scale-up; in detached
 * threads. task: the job's task, NULL to look it up on this box. */
void runner_alert_fire(struct sbx_runner *r, const struct sbx_sched_alert *al, const char *task,
                       const struct sbx_scale_decision *d);
/* Runs argv (no shell) with extra env "K=V" strings and without the variables
 * named in hide (NULL-terminated, may be NULL: the tokens); waits up to 60 s. */
int runner_run_hook(const char *what, char *const argv[], char *const env[], char *const *hide);
/* Splits a config command line on whitespace (no shell, no quoting). */
char **runner_split_command(const char *cmd);
void runner_strv_free(char **v);

#endif
