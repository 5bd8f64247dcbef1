/* task_int.h - the task struct and the functions the files of core/src/sandbox/ share
 * about it (task.c, task_life.c, task_start.c, task_egress.c, task_agent.c, keeper.c).
 * Outside this folder a task is opaque (task.h); only the sandbox's own unit tests
 * include this. */
#ifndef SBX_SANDBOX_TASK_INT_H
#define SBX_SANDBOX_TASK_INT_H

#include <jansson.h>
#include <stdatomic.h>
#include <time.h>

#include "sandbox/task.h"

struct sbx_task {
    const struct sbx_config *cfg;
    char *state; /* state directory */
    char *dir;   /* task directory */
    char id[80];
    char job[80];
    char dir_id[80]; /* (added) the name of dir: the id it started with (warm: w-...) */
    int warm;        /* (added) 1: a warm sandbox claimed by this task */
    int resized;     /* (added) warm, claimed with other limits set by the engine's update */
    int warm_view;   /* (added) warm: its view dir is /workspace's shared mount point */
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
    int last_exit;   /* -1 none */
    atomic_int stop; /* the core decided to end the task: (changed, issue 31)
                      * atomic, set under mu, read without it by the exec,
                      * files, terminal and port paths */
    char stop_reason[256];
    int64_t egress_allowed;
    int64_t egress_denied;

    pthread_t timer;
    int timer_on;
    atomic_int timer_quit;   /* (changed, issue 31) atomic, was volatile */
    unsigned timer_checks;   /* (added) the timer's provider checks done (under mu) */
    pthread_cond_t timer_cv; /* wakes the timer at once when it must quit */
    json_t *wt_events;       /* (added) what the worktree's checks found, each once (task_wt.c) */
    struct sbx_wtwatch *wtwatch; /* (added) the worktree watched while the task runs (wtwatch.h) */
    /* (added, issue 31) the exec_path the record shows (task_life.c); under mu */
    const char *recorded_exec_path;
    /* (added, issue 30) files/pause (files.c): frozen by the provider's pause; under mu
     * (changed, issue 31: sbx_task_record too reads them under it) */
    int paused;
    int64_t paused_at;    /* when it was paused (Unix seconds) */
    int64_t paused_total; /* seconds paused before, for the record */
    /* (added) the kept terminal session (pty_session.c), or NULL; under mu */
    struct sbx_tty_session *session;
};

/* (added) Runs one prepared exec: through the sandbox's exec agent when it
 * has one and it answers, else through the provider (task_agent.c). Sets
 * slot->path. Same return as the provider's exec. */
int sbx_task_exec_run(struct sbx_task *t, const struct sbx_exec_spec *spec,
                      struct sbx_exec_slot *slot, int *status, sbx_error_t **err);
/* (added) Listens for the sandbox's exec agent in t->dir/agent (t->agent_dir,
 * t->agent) when the provider starts the egress relay; 0 also when none. */
int sbx_task_agent_dir(struct sbx_task *t, sbx_error_t **err);
/* (added) Closes the agent's host end (sbx_task_free). */
void sbx_task_agent_free(struct sbx_task *t);
/* Writes <task dir>/task.json (the record of docs/architecture.md, Records) with the
 * state given, atomically (a temporary file renamed). */
int sbx_task_record_write(struct sbx_task *t, const char *state, sbx_error_t **err);
/* (added) The same, not synced to the disk (a claimed warm sandbox's record:
 * recovery removes its directory whatever it holds, docs/runner.md). */
int sbx_task_record_write_nosync(struct sbx_task *t, const char *state, sbx_error_t **err);
/* The timer thread (task.c): maximum lifetime, idle, lease renewal. */
void *sbx_task_timer_main(void *arg);

/* (added) After a command (and at the end): the host takes back the task's branch
 * and quarantines what it must not run (task_wt.c; docs/tasks.md, "Worktrees"). */
void sbx_task_worktree_after(struct sbx_task *t);
/* (added) <task dir>/since: when the task's directories were made (CLOCK_REALTIME),
 * what the worktree's scan counts changes from. */
int sbx_task_since_write(const char *dir);
int sbx_task_since_read(const char *dir, struct timespec *ts);
/* (added) The task's worktree.protect globs (the configuration's, else the default). */
const char *const *sbx_task_protect(const struct sbx_task *t);
/* (added) Logs one finding about the worktree and adds it to the record, once. */
void sbx_task_worktree_note(struct sbx_task *t, const char *what);
/* (added) Starts watching the task's worktree (wtwatch.h); a watcher that cannot
 * be had is logged and recorded, and the checks after each command remain. */
void sbx_task_wtwatch_start(struct sbx_task *t);
/* (added) Stops it (none: a no-op). */
void sbx_task_wtwatch_stop(struct sbx_task *t);

/* ---- shared by task_life.c and task_start.c ------------------------------- */

/* What a started and an adopted task share before anything can fail. */
void sbx_task_init(struct sbx_task *t, const struct sbx_config *cfg, const struct sbx_task_opts *o);
/* Frees what the task still holds (the sandbox is not touched). */
void sbx_task_free(struct sbx_task *t);
/* Stops the timer thread without waiting out its sleep. */
void sbx_task_timer_quit(struct sbx_task *t);
/* The egress wiring's variables, set on the sandbox when the provider wires the proxy
 * socket in (docs/egress.md). */
extern const struct sbx_kv sbx_task_proxy_env[];
extern const size_t sbx_task_n_proxy_env;

/* ---- starting a task: named phases, each with its undo (task_start.c) ----- */

/* One start in progress: the task and what its phases hand to later ones. */
struct sbx_task_start {
    struct sbx_task *t;
    const struct sbx_task_opts *o;
    const char *plugin_dir;
    const char *provider;     /* the provider instance's name */
    time_t now;               /* the start's time: created_at, the sbx.created label */
    char *provider_dir;       /* the provider's own host-side files of the sandbox */
    char *view_dir;           /* where the provider may mount its view of the worktree, or NULL */
    char *relay;              /* the host path of sbx-relay once the egress is bound */
    struct sbx_mount *mounts; /* (added) the caches, then the worktree's git mounts (wtgit.h) */
    size_t n_mounts;
    size_t n_git_mounts; /* (added) the last n_git_mounts of mounts are wtgit's */
};

/* In the order sbx_task_start runs them. */
enum sbx_task_phase_id {
    SBX_TASK_PHASE_IDENTITY,    /* pool, task id, job id */
    SBX_TASK_PHASE_STATE,       /* state directory, worktree check */
    SBX_TASK_PHASE_CLAIM,       /* no live task has the id; an ended one's leftovers go */
    SBX_TASK_PHASE_POLICY,      /* limits, egress allow-list, slot class */
    SBX_TASK_PHASE_PROVIDER,    /* the provider instance */
    SBX_TASK_PHASE_CAPS,        /* fail closed on what the provider does not enforce */
    SBX_TASK_PHASE_REAP,        /* orphans of dead owners (not with no_reap) */
    SBX_TASK_PHASE_DIRS,        /* task dir, the provider's dir, worktree view dir */
    SBX_TASK_PHASE_ADMIT,       /* CPU clamp, the slot lock (not with no_reap) */
    SBX_TASK_PHASE_CREDENTIALS, /* the credential lease, when o->credentials */
    SBX_TASK_PHASE_EGRESS,      /* the egress socket, when the provider wires it */
    SBX_TASK_PHASE_AGENT,       /* the exec agent's host socket, with the egress relay */
    SBX_TASK_PHASE_RECORD,      /* the "starting" record */
    SBX_TASK_PHASE_CREATE,      /* the provider creates the sandbox */
    SBX_TASK_PHASE_RUNNING,     /* the "running" record */
    SBX_TASK_PHASE_TIMER,       /* lifetime, idle, lease renewal */
    SBX_TASK_PHASE_N
};

/* A phase that fails leaves nothing of its own behind; undo (NULL: nothing to undo but
 * memory, which sbx_task_free takes) takes back what a phase that succeeded did. */
struct sbx_task_phase {
    const char *name; /* in the log line of a failed start */
    int (*run)(struct sbx_task_start *s, sbx_error_t **err);
    void (*undo)(struct sbx_task_start *s);
};

extern const struct sbx_task_phase sbx_task_phases[SBX_TASK_PHASE_N];

/* Runs the phases [first, end). When one fails: logs (info) "task ID: start failed in
 * phase 'NAME': why", undoes the ones of this call that succeeded, last first, and
 * returns -1. */
int sbx_task_phases_run(struct sbx_task_start *s, enum sbx_task_phase_id first,
                        enum sbx_task_phase_id end, sbx_error_t **err);
/* Undoes the phases [first, end), last first. */
void sbx_task_phases_undo(struct sbx_task_start *s, enum sbx_task_phase_id first,
                          enum sbx_task_phase_id end);
/* Frees what the phases handed on (not the task). */
void sbx_task_start_fini(struct sbx_task_start *s);

/* What the phases use, for a sandbox given to its task after it was created too: the
 * policy decides t's limits, egress allow-list and slot class for o (fail closed); the
 * CPU quota clamped below the box's CPUs; the credential lease of instance `name`
 * (t->cred, t->lease, t->redactor; on failure t->cred may be open: the caller's undo
 * closes it). */
int sbx_task_decide(struct sbx_task *t, const struct sbx_task_opts *o, const char *provider,
                    sbx_error_t **err);
int sbx_task_clamp_cpus(struct sbx_task *t, sbx_error_t **err);
/* Takes the lease of credential instance `name` for t, on behalf of client
 * (NULL: "local", the CLI; "": a job that predates clients). */
int sbx_task_lease(struct sbx_task *t, const char *plugin_dir, const char *name, const char *client,
                   sbx_error_t **err);

/* The binding phases, callable apart from creating a sandbox (a sandbox started ahead
 * of its task gets its task's lease, egress socket and exec agent when it is claimed):
 * each binds nothing when the task or provider does not ask for it, and its unbind
 * takes back only what it bound. */
int sbx_task_bind_credentials(struct sbx_task_start *s, sbx_error_t **err);
void sbx_task_unbind_credentials(struct sbx_task_start *s);
int sbx_task_bind_egress(struct sbx_task_start *s, sbx_error_t **err);
void sbx_task_unbind_egress(struct sbx_task_start *s);
int sbx_task_bind_agent(struct sbx_task_start *s, sbx_error_t **err);
void sbx_task_unbind_agent(struct sbx_task_start *s);

#endif
