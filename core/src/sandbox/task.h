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
    const char *task_id;        /* NULL: generated */
    const char *job_id;         /* NULL: same as the task id */
    const char *provider;       /* instance name; NULL: config `provider` */
    const char *credentials;    /* credential instance name, or NULL */
    const char *worktree;       /* host directory mounted at /workspace, or NULL */
    const char *pool;           /* "ci" or "agent"; NULL: "agent" */
    const char *const *argv;    /* the first command, for policy; may be NULL */
    const volatile int *cancel; /* set by a signal handler while starting, or NULL */
    int ephemeral;              /* `sbx run`: no record is kept after the end */
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
    /* (added) Told what the start waits for (memory or a slot, with the
     * numbers), and asked with NULL between lines whether to go on;
     * NULL: the lines go to stderr. Returning -1 gives up. */
    int (*on_wait)(void *ud, const char *line);
    void *wait_ud;
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
};

struct sbx_task {
    const struct sbx_config *cfg;
    char *state; /* state directory */
    char *dir;   /* task directory */
    char id[80];
    char job[80];
    char sandbox[256];
    char pool[16];
    char slot_class[16];
    char *image;
    char *worktree;
    int ephemeral;
    struct sbx_open_instance *prov;
    struct sbx_open_instance *cred;
    struct sbx_lease lease;
    int have_lease;
    struct sbx_redactor *redactor; /* the lease's values, for output */
    struct sbx_limits limits;
    char **egress_allow;          /* the policy's host rules, NULL-terminated */
    struct sbx_egress *egress;    /* the proxy this task's socket is on, or NULL */
    int own_egress;               /* started (and stopped) by this task */
    char *egress_dir;             /* host dir with this sandbox's proxy socket */
    char *agent_dir;              /* (added) host dir of the sandbox's exec agent socket */
    struct sbx_agent_link *agent; /* (added) the host end of that agent, or NULL */
    const char *last_exec_path;   /* (added) "agent" or "engine": how the last exec ran */
    char *decided_by;             /* "policies/limits.lua, ..." for the record */
    uint32_t unenforced;          /* enum sbx_cap asked for and not enforced (unisolated) */
    int slot_fd;
    int64_t created_at;
    int64_t started_at;
    int64_t ended_at;

    pthread_mutex_t mu;
    int running;           /* execs in flight */
    int64_t last_activity; /* last exec start or end */
    struct sbx_exec_slot *execs;
    int last_exit;     /* -1 none */
    volatile int stop; /* the core decided to end the task */
    char stop_reason[256];
    int64_t egress_allowed;
    int64_t egress_denied;

    pthread_t timer;
    int timer_on;
    volatile int timer_quit;
    pthread_cond_t timer_cv; /* wakes the timer at once when it must quit */
};

int sbx_task_start(const struct sbx_config *cfg, const char *plugin_dir,
                   const struct sbx_task_opts *o, struct sbx_task **out, sbx_error_t **err);
/* Runs one command; *status is its exit status. -1 when sbx failed (the
 * command may have been cut off: cancelled, sandbox lost, limit reached). */
int sbx_task_exec(struct sbx_task *t, const char *const *argv, const struct sbx_kv *env,
                  size_t n_env, sbx_output_fn out, void *ud, struct sbx_exec_slot *slot,
                  int *status, sbx_error_t **err);
/* (added) Runs one prepared exec: through the sandbox's exec agent when it
 * has one and it answers, else through the provider (task_agent.c). Sets
 * slot->path. Same return as the provider's exec. */
int sbx_task_exec_run(struct sbx_task *t, const struct sbx_exec_spec *spec,
                      struct sbx_exec_slot *slot, int *status, sbx_error_t **err);
/* (added) Listens for the sandbox's exec agent in t->dir/agent (t->agent_dir,
 * t->agent) when the provider starts the egress relay; 0 also when none. */
int sbx_task_agent_dir(struct sbx_task *t, sbx_error_t **err);
/* (added) Closes the agent's host end (free_task). */
void sbx_task_agent_free(struct sbx_task *t);
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
/* The record of docs/architecture.md (Records). */
json_t *sbx_task_record(struct sbx_task *t, const char *state);
int sbx_task_record_write(struct sbx_task *t, const char *state, sbx_error_t **err);
/* The timer thread (task.c): maximum lifetime, idle, lease renewal. */
void *sbx_task_timer_main(void *arg);
/* Removes sandboxes whose owner is provably gone; returns how many. */
int sbx_task_reap_orphans(struct sbx_open_instance *prov, const char *state);

#endif
