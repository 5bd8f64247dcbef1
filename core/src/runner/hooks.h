/* hooks.h - wait alerts, webhooks and the hook commands (hooks.c). */
#ifndef SBX_RUNNER_HOOKS_H
#define SBX_RUNNER_HOOKS_H

struct sbx_config;
struct sbx_sched;
struct sbx_sched_alert;
struct sbx_scale_decision;

/* The wait alerts sched has due, each with the autoscaler's decision (a
 * scale-up sets the pool's boxes), fired; task_of(arg, job) names the job's
 * task. Loop thread, on a box of one (a fleet's leader alerts: fleetlead.c). */
void runner_alerts_tick(struct sbx_sched *sched, const struct sbx_config *cfg,
                        const char *(*task_of)(void *arg, const char *job), void *arg);
/* (added) Fires one wait alert (webhook, alert_command) with the autoscaler's
 * decision d, and runs scale_up_command when d is a scale-up; in detached
 * threads. task: the job's task. */
void runner_alert_fire(const struct sbx_config *cfg, const struct sbx_sched_alert *al,
                       const char *task, const struct sbx_scale_decision *d);
/* Runs argv (no shell) with extra env "K=V" strings and without the variables
 * named in hide (NULL-terminated, may be NULL: the tokens); waits up to 60 s. */
int runner_run_hook(const char *what, char *const argv[], char *const env[], char *const *hide);
/* Splits a config command line on whitespace (no shell, no quoting). */
char **runner_split_command(const char *cmd);
void runner_strv_free(char **v);

#endif
