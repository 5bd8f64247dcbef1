/* task.h - one task: one fresh sandbox for its whole life, its commands are
 * execs inside it (docs/architecture.md, Tasks). Used in-process by `sbx run` and by the
 * per-task keeper behind `sbx task start` / `sbx exec`. */
#ifndef SBX_SANDBOX_TASK_H
#define SBX_SANDBOX_TASK_H

#include <jansson.h>
#include <pthread.h>
#include <stdint.h>

#include "config/config.h"
#include "plugin/instance.h"
#include "sbx/sbx_credential.h"
#include "sbx/sbx_provider.h"

struct sbx_egress;

struct sbx_task_opts {
    const char *task_id;     /* NULL: generated */
    const char *job_id;      /* NULL: same as the task id */
    const char *provider;    /* instance name; NULL: config `provider` */
    const char *credentials; /* credential instance name, or NULL */
    /* (added) the API client the lease is for ({client} of the path
     * template); NULL: "local" (the CLI, `sbx run` without serve) */
    const char *client;
    const char *worktree;    /* host directory mounted at /workspace, or NULL */
    const char *pool;        /* "ci" or "agent"; NULL: "agent" */
    const char *const *argv; /* the first command, for policy; may be NULL */
    /* set while starting, or NULL: by a signal handler (sbx run) or another
     * thread (a runner's job cancel), read atomically (changed, issue 31) */
    const volatile int *cancel;
    int ephemeral; /* `sbx run`: no record is kept after the end */
    /* The box's egress proxy (`sbx serve`); NULL: the task runs its own for
     * its lifetime when the provider wires the proxy socket in. */
    struct sbx_egress *egress;
    /* Narrower limits for this task (each field 0 = the configured one);
     * never above the configured caps. */
    const struct sbx_limits *limits;
    int nested_containers; /* ask for containers inside the sandbox (spec.nested_containers) */
    /* (added for the runner) */
    const char *slot_class; /* "light" or "heavy" for the sbx.class label; NULL: light */
    int no_reap;            /* skip orphan reaping and the slot lock: the caller (the
                             * runner) owns the box's slots and reaps itself */
    /* (added, issue 31) with no_reap: take the slot lock all the same (a private
     * runner's job: other sbx processes of the box hold slots too) */
    int slot_lock;
    /* (added) Told what the start waits for (memory or a slot, with the
     * numbers), and asked with NULL between lines whether to go on;
     * NULL: the lines go to stderr. Returning -1 gives up. */
    int (*on_wait)(void *ud, const char *line);
    void *wait_ud;
    /* (added) a warm sandbox of the runner's pool (docs/runner.md, Warm pool):
     * no task yet, so its egress denies everything until sbx_task_claim() */
    int warm;
    /* (added) `--from SNAP`, `fork`: the image of a snapshot (its "ref") instead of the
     * configured image; NULL: config `image` (docs/tasks.md, "Snapshots and forks") */
    const char *image;
};

struct sbx_agent_link;

/* A running exec, for cancellation. */
struct sbx_exec_slot {
    struct sbx_exec_ctl ctl;
    struct sbx_exec_slot *next;
    /* (added) while the exec agent runs it: the write end of a pipe that
     * cancels it (set under t->mu by task_agent.c), else 0 */
    int agent_cancel_fd;
    const char *path; /* (added) "agent" or "engine" once it ran */
    /* (added) a terminal (pty.c): the pty slave's descriptor + 1, given to the
     * command as stdin, stdout and stderr; 0: none. Only the exec agent runs it. */
    int tty_slave1;
    /* (added) a kept terminal session's shell (pty_session.c): not counted as a
     * running command for the idle limit (its attached clients are) */
    int kept;
};

/* Opaque outside core/src/sandbox/ (task_int.h): read it with the accessors below. */
struct sbx_task;

int sbx_task_start(const struct sbx_config *cfg, const char *plugin_dir,
                   const struct sbx_task_opts *o, struct sbx_task **out, sbx_error_t **err);
/* (added, task_claim.c) Gives the warm task t (started with o->warm) to the
 * task o describes: its id and job, the policy decided again for it, its
 * egress rules on the sandbox's socket, its credential lease, its record
 * (`warm: true`). 0: claimed; 1: the shapes differ (limits, provider,
 * worktree, sidecar, or the warm task was stopped): nothing changed, end t
 * and start cold; -1 with *err: t is unusable, end it. */
int sbx_task_claim(struct sbx_task *t, const char *plugin_dir, const struct sbx_task_opts *o,
                   sbx_error_t **err);
/* (added) 1 when t is a claimed warm sandbox (the records' "warm") */
int sbx_task_warm(const struct sbx_task *t);
/* (added) 1 when its claim set other memory, CPUs or pids on the running
 * sandbox (the records' "resized") */
int sbx_task_resized(const struct sbx_task *t);
/* Runs one command; *status is its exit status. -1 when sbx failed (the
 * command may have been cut off: cancelled, sandbox lost, limit reached). */
int sbx_task_exec(struct sbx_task *t, const char *const *argv, const struct sbx_kv *env,
                  size_t n_env, sbx_output_fn out, void *ud, struct sbx_exec_slot *slot,
                  int *status, sbx_error_t **err);
/* The environment one exec gets (sbx_task_exec, in every mode): env without
 * the names the credential lease sets or, when the provider wires the egress
 * proxy in (egress_wired), the proxy variables (theirs win; each dropped name
 * is logged as a warning, never a value); then the lease's values. *n is its
 * length; free() the array only (it points into env and lease). */
struct sbx_kv *sbx_exec_env_merge(const char *task_id, const struct sbx_kv *env, size_t n_env,
                                  const struct sbx_kv *lease, size_t n_lease, int egress_wired,
                                  size_t *n);
/* Re-adopts a task whose sandbox (the provider's id) survived a restart of
 * its owner (the runner's recovery): no new sandbox, no credential lease (a
 * lease does not survive its holder), the timer restarts; with o->egress, its
 * egress socket comes back on that proxy with the rules saved at its start. */
int sbx_task_adopt(const struct sbx_config *cfg, const char *plugin_dir,
                   const struct sbx_task_opts *o, const char *sandbox, struct sbx_task **out,
                   sbx_error_t **err);
/* The job the task now runs (a kept task runs one job after another): its egress log
 * lines carry it from now on. */
void sbx_task_set_job(struct sbx_task *t, const char *job);
/* The task's egress decisions so far (the final ones once it ended; 0 without an
 * egress socket). */
void sbx_task_egress_counts(struct sbx_task *t, int64_t *allowed, int64_t *denied);
/* (added) Read-only views of a task for the runner, the MCP backend, the CLI and the
 * spike (task.c). Strings live as long as the task; none carries a secret value
 * except sbx_task_held_lease, which the spike's credential scan alone uses. */
const char *sbx_task_id(const struct sbx_task *t);
/* The job it runs now (sbx_task_set_job may change it: copied under the lock). */
void sbx_task_job(struct sbx_task *t, char *buf, size_t len);
const char *sbx_task_sandbox(const struct sbx_task *t); /* the provider's id, "" before create */
const char *sbx_task_pool(const struct sbx_task *t);
const char *sbx_task_state_dir(const struct sbx_task *t);
const char *sbx_task_provider_name(const struct sbx_task *t); /* the instance's name */
const char *sbx_task_image(const struct sbx_task *t);
/* The lease's id, or NULL without credentials (never a value). */
const char *sbx_task_lease_id(const struct sbx_task *t);
/* The lease itself, or NULL: secret values, for the spike's check that they stay in. */
const struct sbx_lease *sbx_task_held_lease(const struct sbx_task *t);
/* "agent" or "engine": how the last exec ran; NULL before one ran. */
const char *sbx_task_last_exec_path(struct sbx_task *t);
/* (added, issue 31) A copy of the record's "worktree_events" (what the worktree's
 * checks found so far), or NULL when none: for the runner's job record. */
json_t *sbx_task_worktree_events(struct sbx_task *t);
/* Sets the record's "isolation" (and "unenforced") keys on obj (caps.h). */
void sbx_task_isolation(const struct sbx_task *t, json_t *obj);
/* The provider's optional scan_secrets op on the task's sandbox (the spike's credential
 * check); -1 with err when the provider has none or the scan failed. */
int sbx_task_scan_secrets(struct sbx_task *t, struct sbx_secret_scan *scan, sbx_error_t **err);
/* 1 when the core decided to end the task (timer, check, stop), with the reason
 * copied to buf when buf is not NULL; else 0. */
int sbx_task_stopped(struct sbx_task *t, char *buf, size_t len);
/* (added) How many times the task's timer has asked the provider's check op
 * (about once a second; a test waits for one instead of sleeping). */
unsigned sbx_task_timer_checks(struct sbx_task *t);
/* Cancels one exec started with that slot (from any thread). */
void sbx_task_exec_cancel(struct sbx_task *t, struct sbx_exec_slot *slot);
/* Asks the provider's optional check op whether the sandbox may go on (the
 * Docker disk watchdog); when it may not, stops the task with the provider's
 * message as the reason and returns -1. The timer calls it about once a second
 * (after_exec 0), sbx_task_exec when each command ends (after_exec 1). */
int sbx_task_check(struct sbx_task *t, int after_exec);
/* Cancels every running exec and marks the task to end with `reason`. */
void sbx_task_stop(struct sbx_task *t, const char *reason);
/* Destroys the sandbox, revokes the lease, writes the final record and
 * frees the task. Always frees; returns -1 when cleanup failed. When
 * record is not NULL it receives the final record. */
int sbx_task_end(struct sbx_task *t, const char *reason, json_t **record, sbx_error_t **err);
/* The record of docs/architecture.md (Records). Takes t->mu for a moment:
 * call it without holding it. (changed, issue 31) */
json_t *sbx_task_record(struct sbx_task *t, const char *state);
/* Removes sandboxes whose owner is provably gone; returns how many. */
int sbx_task_reap_orphans(struct sbx_open_instance *prov, const char *state);

#endif
