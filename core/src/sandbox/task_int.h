/* task_int.h - the task struct and the functions the files of core/src/sandbox/ share
 * about it (task.c, task_life.c, task_start.c, task_egress.c, task_agent.c). Outside this
 * folder a task is opaque (task.h); only the sandbox's own unit tests include this. */
#ifndef SBX_SANDBOX_TASK_INT_H
#define SBX_SANDBOX_TASK_INT_H

#include "sandbox/task.h"

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
int sbx_task_record_write(struct sbx_task *t, const char *state, sbx_error_t **err);
/* The timer thread (task.c): maximum lifetime, idle, lease renewal. */
void *sbx_task_timer_main(void *arg);

#endif
