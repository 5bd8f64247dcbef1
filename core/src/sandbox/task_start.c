/* task_start.c - starting a task: a sequence of named phases (task_int.h), each with its
 * undo. A phase that fails leaves nothing of its own behind; the phases done before it are
 * undone last first, one log line names the phase that failed, and the task is freed. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cred/redact.h"
#include "egress/egress.h"
#include "plugin/host.h"
#include "policy/policy.h"
#include "sandbox/admit.h"
#include "sandbox/caps.h"
#include "sandbox/owner.h"
#include "sandbox/proto.h"
#include "sandbox/keeper.h"
#include "sandbox/statedir.h"
#include "sandbox/task_egress.h"
#include "sandbox/task_int.h"
#include "sandbox/view.h"
#include "sandbox/wtgit.h"
#include "sandbox/wtscan.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/xalloc.h"

static uint32_t pflags(const struct sbx_task *t)
{
    return sbx_instance_provider(t->prov)->flags;
}

/* Takes each requested limit that is set and not above the cap. */
static void narrow_limits(struct sbx_limits *cap, const struct sbx_limits *want)
{
    if (want->cpus > 0 && want->cpus < cap->cpus) {
        cap->cpus = want->cpus;
    }
    if (want->memory > 0 && want->memory < cap->memory) {
        cap->memory = want->memory;
    }
    if (want->disk > 0 && want->disk < cap->disk) {
        cap->disk = want->disk;
    }
    if (want->pids > 0 && want->pids < cap->pids) {
        cap->pids = want->pids;
    }
    if (want->idle > 0 && want->idle < cap->idle) {
        cap->idle = want->idle;
    }
    if (want->max > 0 && want->max < cap->max) {
        cap->max = want->max;
    }
}

/* Policy decides the limits, the egress allow-list and the slot class; any
 * failure denies the task (fail closed). */
int sbx_task_decide(struct sbx_task *t, const struct sbx_task_opts *o, const char *provider,
                    sbx_error_t **err)
{
    struct sbx_policy_decision d = {0};
    struct sbx_job_desc job = {0};
    struct sbx_policy *pol;
    char *dir = sbx_policy_dir_resolve(t->cfg->policy_dir, err);

    if (dir == NULL) {
        return -1;
    }
    pol = sbx_policy_load(dir, t->cfg, err);
    free(dir);
    if (pol == NULL) {
        return sbx_error_wrap(err, "policy");
    }
    job.id = t->job;
    job.task = t->id;
    job.pool = t->pool;
    job.workdir = t->worktree;
    job.provider = provider;
    job.argv = o->argv;
    if (o->limits != NULL) {
        job.requested = *o->limits;
    }
    if (sbx_policy_decide(pol, &job, &d, err) < 0) {
        sbx_policy_destroy(pol);
        return sbx_error_wrap(err, "policy denied task %s", t->id);
    }
    sbx_policy_destroy(pol);
    t->limits = d.limits;
    if (o->limits != NULL) {
        narrow_limits(&t->limits, o->limits);
    }
    snprintf(t->slot_class, sizeof(t->slot_class), "%s", d.slot_class);
    t->egress_allow = xcalloc(d.n_egress_allow + 1, sizeof(char *));
    for (size_t i = 0; i < d.n_egress_allow; i++) {
        t->egress_allow[i] = xstrdup(d.egress_allow[i]);
    }
    t->decided_by = xasprintf("%s, %s, %s", d.decided_by[SBX_POLICY_LIMITS],
                              d.decided_by[SBX_POLICY_EGRESS], d.decided_by[SBX_POLICY_SLOTS]);
    sbx_policy_decision_fini(&d);
    return 0;
}

/* The box's budget (admit.h) with the task's CPU quota clamped below the box's CPUs. */
static int clamp_cpus(struct sbx_task *t, struct sbx_box_budget *b, sbx_error_t **err)
{
    if (sbx_box_budget(t->cfg, NULL, 0, b, err) < 0) {
        return sbx_error_wrap(err, "task %s: admission", t->id);
    }
    if (t->limits.cpus > b->cpu_max) {
        sbx_debug("task %s: cpus %.3g clamped to %.3g (the box has %.3g, box.cpu_reserve %.3g)",
                  t->id, t->limits.cpus, b->cpu_max, b->cpus, b->cpu_reserve);
        t->limits.cpus = b->cpu_max;
    }
    return 0;
}

int sbx_task_clamp_cpus(struct sbx_task *t, sbx_error_t **err)
{
    struct sbx_box_budget b;

    return clamp_cpus(t, &b, err);
}

/* The CPU clamp, then an embedded task takes a slot only while its memory fits beside
 * the others' (the runner's scheduler admits its own jobs: no_reap). */
static int admit(struct sbx_task *t, const struct sbx_task_opts *o, sbx_error_t **err)
{
    struct sbx_box_budget b;
    struct sbx_admit_req req = {0};

    if (clamp_cpus(t, &b, err) < 0) {
        return -1;
    }
    if (o->no_reap && !o->slot_lock) {
        return 0;
    }
    req.task = t->id;
    req.max_slots = t->cfg->box.max_sandboxes;
    req.memory = sbx_admit_task_memory(t->limits.memory, o->nested_containers);
    req.budget = &b;
    req.cancel = o->cancel;
    req.on_wait = o->on_wait;
    req.wait_ud = o->wait_ud;
    t->slot_fd = sbx_slot_acquire(t->state, &req, err);
    return t->slot_fd < 0 ? -1 : 0;
}

int sbx_task_lease(struct sbx_task *t, const char *plugin_dir, const char *name, const char *client,
                   sbx_error_t **err)
{
    /* (changed, ABI 1.4) the client and the pool go to the plugin: its path
     * template binds the secrets to them (docs/credentials.md, The model) */
    struct sbx_cred_scope scope = {.task_id = t->id,
                                   .job_id = t->job,
                                   .path = NULL,
                                   .client = client != NULL ? client : SBX_CRED_CLIENT_LOCAL,
                                   .pool = t->pool};

    t->cred = sbx_instance_open(t->cfg, plugin_dir, name, SBX_PLUGIN_CREDENTIAL, err);
    if (t->cred == NULL) {
        return -1;
    }
    if (sbx_instance_credential(t->cred)->acquire(t->cred->ctx, &scope, &t->lease, err) < 0) {
        sbx_lease_clear(&t->lease);
        return sbx_error_wrap(err, "credentials '%s' for task %s", name, t->id);
    }
    t->have_lease = 1;
    t->redactor = sbx_redactor_from_lease(&t->lease);
    return 0;
}

/* ---- the phases --------------------------------------------------------- */

/* The pool, the task id (given or new) and the job id. */
static int phase_identity(struct sbx_task_start *s, sbx_error_t **err)
{
    struct sbx_task *t = s->t;
    const struct sbx_task_opts *o = s->o;

    if (strcmp(t->pool, "ci") != 0 && strcmp(t->pool, "agent") != 0) {
        return sbx_error_set(err, SBX_E_USAGE, "--pool %s: use ci or agent", t->pool);
    }
    if (o->task_id != NULL) {
        if (!sbx_id_valid(o->task_id, SBX_ID_TASK)) {
            return sbx_error_set(err, SBX_E_USAGE,
                                 "task id '%s': use 1-64 letters, digits, '-', '_' "
                                 "or '.', starting with a letter or digit",
                                 o->task_id);
        }
        snprintf(t->id, sizeof(t->id), "%s", o->task_id);
    }
    else {
        sbx_task_id_new(t->id, sizeof(t->id));
    }
    snprintf(t->job, sizeof(t->job), "%s", o->job_id ? o->job_id : t->id);
    snprintf(t->dir_id, sizeof(t->dir_id), "%s", t->id);
    return 0;
}

/* The state directory and the worktree (view.h checks where it may be). */
static int phase_state(struct sbx_task_start *s, sbx_error_t **err)
{
    struct sbx_task *t = s->t;

    t->state = sbx_state_dir(t->cfg->state_dir, err);
    if (t->state == NULL) {
        return -1;
    }
    if (s->o->worktree != NULL &&
        sbx_worktree_check(s->o->worktree, t->state, &t->worktree, err) < 0) {
        return -1;
    }
    t->dir = sbx_task_dir(t->state, t->id);
    return 0;
}

/* Whether a live task of this id exists: its keeper answers, or (an `sbx run --task`
 * has no keeper) its record names an owner that lives. */
static int task_live(const struct sbx_task *t)
{
    cleanup_free char *rec = xasprintf("%s/task.json", t->dir);
    /* (changed, issue 31) the keeper's runner's socket */
    cleanup_free char *sock = sbx_keeper_runner_socket(t->state, t->id);
    int live = -1;

    if (sock != NULL) {
        sbx_error_t *cerr = NULL;

        /* a socket nobody answers is a killed keeper's: its sandbox is an
         * orphan that the reaping removes */
        live = sbx_unix_connect(sock, &cerr);
        sbx_error_free(&cerr);
        if (live >= 0) {
            close(live);
        }
    }
    if (live < 0) {
        json_t *r = json_load_file(rec, 0, NULL);
        const char *st = json_string_value(json_object_get(r, "state"));
        const char *holder = json_string_value(json_object_get(r, "owner"));

        if (st != NULL && strcmp(st, "ended") != 0 && holder != NULL && sbx_owner_alive(holder)) {
            live = 1;
        }
        json_decref(r);
    }
    return live >= 0;
}

/* The id is free: no live task has it; an ended task's leftovers go. */
static int phase_claim(struct sbx_task_start *s, sbx_error_t **err)
{
    struct sbx_task *t = s->t;

    if (access(t->dir, F_OK) != 0) {
        return 0;
    }
    if (task_live(t)) {
        return sbx_error_set(err, SBX_E_USAGE, "task '%s' already exists (sbx task end %s)", t->id,
                             t->id);
    }
    sbx_task_dir_remove(t->state, t->id); /* an ended task's leftovers */
    return 0;
}

static int phase_policy(struct sbx_task_start *s, sbx_error_t **err)
{
    if (sbx_task_decide(s->t, s->o, s->provider, err) < 0) {
        return -1;
    }
    if (s->o->warm) { /* no task yet: nothing goes out until a claim sets its rules */
        for (size_t i = 0; s->t->egress_allow[i] != NULL; i++) {
            free(s->t->egress_allow[i]);
            s->t->egress_allow[i] = NULL;
        }
    }
    return 0;
}

static int phase_provider(struct sbx_task_start *s, sbx_error_t **err)
{
    s->t->prov = sbx_instance_open(s->t->cfg, s->plugin_dir, s->provider, SBX_PLUGIN_PROVIDER, err);
    return s->t->prov == NULL ? -1 : 0;
}

static void undo_provider(struct sbx_task_start *s)
{
    sbx_instance_close(s->t->prov);
    s->t->prov = NULL;
}

/* Fail closed: what the policy asks for and the provider does not enforce. */
static int phase_caps(struct sbx_task_start *s, sbx_error_t **err)
{
    return sbx_caps_check(s->t->prov, s->t->id, &s->t->limits, &s->t->unenforced, err);
}

static int phase_reap(struct sbx_task_start *s, sbx_error_t **err)
{
    (void)err;
    if (!s->o->no_reap) {
        sbx_task_reap_orphans(s->t->prov, s->t->state);
    }
    return 0;
}

/* The task directory (after the reaping, which removes an orphan's leftovers of this
 * id), the provider's own directory in it, and where the provider may mount its view
 * of the worktree (view.h). */
static int phase_dirs(struct sbx_task_start *s, sbx_error_t **err)
{
    struct sbx_task *t = s->t;

    if (sbx_mkdirs(t->dir, 0700, err) < 0) {
        goto fail;
    }
    /* the provider's own host-side files of this sandbox (spec.provider_dir) */
    s->provider_dir = xasprintf("%s/provider", t->dir);
    if (sbx_mkdirs(s->provider_dir, 0755, err) < 0 || chmod(s->provider_dir, 0755) < 0) {
        if (err != NULL && *err == NULL) {
            sbx_error_set(err, SBX_E_GENERIC, "%s: %s", s->provider_dir, strerror(errno));
        }
        goto fail;
    }
    /* (added) a warm sandbox gets its view dir too: the worktree comes at claim */
    if ((t->worktree != NULL || (s->o->warm && sbx_instance_provider(t->prov)->claim_worktree)) &&
        (pflags(t) & SBX_PROVIDER_WORKTREE_VIEW) != 0) {
        s->view_dir = xasprintf("%s/" SBX_VIEW_NAME, t->dir);
        sbx_view_release(t->dir);
        if (sbx_mkdirs(s->view_dir, 0700, err) < 0) {
            goto fail;
        }
    }
    if (t->worktree != NULL && sbx_task_since_write(t->dir) < 0) {
        sbx_error_set(err, SBX_E_GENERIC, "%s/since: %s", t->dir, strerror(errno));
        goto fail;
    }
    /* (added) the caches, then what replaces the worktree's .git inside (wtgit.h) */
    {
        struct sbx_mount *git = NULL;
        size_t n_git = 0;

        if (t->worktree != NULL && sbx_wtgit_prepare(t->worktree, t->dir, &git, &n_git, err) < 0) {
            goto fail;
        }
        if (t->worktree != NULL) {
            sbx_protect_mounts(t->worktree, sbx_task_protect(t), &git, &n_git);
        }
        s->n_mounts = t->cfg->n_caches + n_git;
        s->n_git_mounts = n_git;
        s->mounts = xcalloc(s->n_mounts + 1, sizeof(*s->mounts));
        for (size_t i = 0; i < t->cfg->n_caches; i++) {
            s->mounts[i] = t->cfg->caches[i];
        }
        for (size_t i = 0; i < n_git; i++) {
            s->mounts[t->cfg->n_caches + i] = git[i];
        }
        free(git); /* the strings are s->mounts' now */
    }
    return 0;

fail:
    sbx_task_dir_remove(t->state, t->dir_id);
    return -1;
}

static void undo_dirs(struct sbx_task_start *s)
{
    sbx_task_dir_remove(s->t->state, s->t->dir_id);
}

static int phase_admit(struct sbx_task_start *s, sbx_error_t **err)
{
    return admit(s->t, s->o, err);
}

static void undo_admit(struct sbx_task_start *s)
{
    if (s->t->slot_fd >= 0) {
        close(s->t->slot_fd); /* releases the slot lock */
        s->t->slot_fd = -1;
    }
}

int sbx_task_bind_credentials(struct sbx_task_start *s, sbx_error_t **err)
{
    if (s->o->credentials == NULL) {
        return 0;
    }
    if (sbx_task_lease(s->t, s->plugin_dir, s->o->credentials, s->o->client, err) < 0) {
        sbx_task_unbind_credentials(s);
        return -1;
    }
    return 0;
}

void sbx_task_unbind_credentials(struct sbx_task_start *s)
{
    struct sbx_task *t = s->t;

    if (t->have_lease) {
        sbx_instance_credential(t->cred)->revoke(t->cred->ctx, &t->lease, NULL);
        sbx_lease_clear(&t->lease);
        t->have_lease = 0;
    }
    sbx_redactor_destroy(t->redactor);
    t->redactor = NULL;
    sbx_instance_close(t->cred);
    t->cred = NULL;
}

int sbx_task_bind_egress(struct sbx_task_start *s, sbx_error_t **err)
{
    if ((pflags(s->t) & SBX_PROVIDER_EGRESS_SOCKET) == 0) {
        return 0;
    }
    if (sbx_task_egress_wire(s->t, s->o, &s->relay, err) < 0) {
        sbx_task_unbind_egress(s);
        return -1;
    }
    return 0;
}

void sbx_task_unbind_egress(struct sbx_task_start *s)
{
    struct sbx_task *t = s->t;

    if (t->egress != NULL && t->egress_dir != NULL) {
        sbx_egress_remove(t->egress, t->egress_dir, NULL);
        rmdir(t->egress_dir);
    }
    free(t->egress_dir);
    t->egress_dir = NULL;
    if (t->own_egress) {
        sbx_egress_stop(t->egress);
        t->own_egress = 0;
    }
    t->egress = NULL;
    free(s->relay);
    s->relay = NULL;
}

int sbx_task_bind_agent(struct sbx_task_start *s, sbx_error_t **err)
{
    return sbx_task_agent_dir(s->t, err);
}

void sbx_task_unbind_agent(struct sbx_task_start *s)
{
    sbx_task_agent_free(s->t);
}

static int phase_record(struct sbx_task_start *s, sbx_error_t **err)
{
    s->t->created_at = (int64_t)s->now;
    return sbx_task_record_write(s->t, "starting", err);
}

/* The provider creates the sandbox from what the phases before decided. */
static int phase_create(struct sbx_task_start *s, sbx_error_t **err)
{
    struct sbx_task *t = s->t;
    char owner[160];
    char created[32];
    struct tm tm;
    int egress = t->egress_dir != NULL;
    struct sbx_kv env[32];
    size_t n_env = 0;

    if (egress && sbx_task_egress_env(t, env, &n_env, err) < 0) {
        return -1;
    }
    sbx_owner_self(owner, sizeof(owner));
    gmtime_r(&s->now, &tm);
    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);

    int bad_scope = 0;
    const char *scope = sbx_owner_test_scope(&bad_scope);
    struct sbx_kv labels[] = {
        {"sbx.task", t->id},  {"sbx.job", t->job},   {"sbx.created", created},
        {"sbx.owner", owner}, {"sbx.pool", t->pool}, {"sbx.class", t->slot_class},
        {"sbx.test", scope},
    };
    struct sbx_sandbox_spec spec = {
        .task_id = t->id,
        .job_id = t->job,
        .image = t->image,
        .worktree = t->worktree,
        .mounts = s->mounts,
        .n_mounts = s->n_mounts,
        .limits = t->limits,
        .labels = labels,
        .n_labels = sizeof(labels) / sizeof(labels[0]) - (scope == NULL),
        .egress_allow = (const char *const *)t->egress_allow,
        .egress_dir = t->egress_dir,
        .egress_relay = egress ? s->relay : NULL,
        .env = egress ? env : NULL,
        .n_env = n_env,
        .nested_containers = s->o->nested_containers,
        .provider_dir = s->provider_dir,
        .agent_dir = t->agent_dir,
        .view_dir = s->view_dir,
        .view_later = t->worktree == NULL && s->view_dir != NULL,
    };

    if (bad_scope) {
        return sbx_error_set(err, SBX_E_USAGE,
                             "SBX_TEST_LABEL: 1 to 63 characters of A-Z a-z 0-9 _ . - expected");
    }
    while (t->egress_allow[spec.n_egress_allow] != NULL) {
        spec.n_egress_allow++;
    }
    if (sbx_instance_provider(t->prov)->create(t->prov->ctx, &spec, t->sandbox, sizeof(t->sandbox),
                                               err) < 0) {
        t->sandbox[0] = '\0';
        return sbx_error_wrap(err, "task %s: creating the sandbox", t->id);
    }
    return 0;
}

static void undo_create(struct sbx_task_start *s)
{
    struct sbx_task *t = s->t;
    sbx_error_t *e = NULL;

    if (t->sandbox[0] != '\0' &&
        sbx_instance_provider(t->prov)->destroy(t->prov->ctx, t->sandbox, &e) < 0) {
        sbx_error_log("task %s: removing sandbox %.12s: %s", t->id, t->sandbox, sbx_error_msg(e));
        sbx_error_free(&e);
    }
    t->sandbox[0] = '\0';
    sbx_view_release(t->dir); /* the sandbox is gone: its view of the worktree too */
}

static int phase_running(struct sbx_task_start *s, sbx_error_t **err)
{
    s->t->warm_view = s->t->worktree == NULL && s->view_dir != NULL;
    s->t->started_at = time(NULL);
    s->t->last_activity = s->t->started_at;
    return sbx_task_record_write(s->t, "running", err);
}

/* Maximum lifetime, idle, lease renewal (task.c); a task without it still runs. */
static int phase_timer(struct sbx_task_start *s, sbx_error_t **err)
{
    (void)err;
    if (pthread_create(&s->t->timer, NULL, sbx_task_timer_main, s->t) == 0) {
        s->t->timer_on = 1;
    }
    if (s->t->worktree != NULL) {
        sbx_task_wtwatch_start(s->t); /* (added) */
    }
    return 0;
}

static void undo_timer(struct sbx_task_start *s)
{
    sbx_task_wtwatch_stop(s->t);
    sbx_task_timer_quit(s->t);
}

/* ---- the sequence --------------------------------------------------------- */

const struct sbx_task_phase sbx_task_phases[SBX_TASK_PHASE_N] = {
    [SBX_TASK_PHASE_IDENTITY] = {"identity", phase_identity, NULL},
    [SBX_TASK_PHASE_STATE] = {"state directory", phase_state, NULL},
    [SBX_TASK_PHASE_CLAIM] = {"task id", phase_claim, NULL},
    [SBX_TASK_PHASE_POLICY] = {"policy", phase_policy, NULL},
    [SBX_TASK_PHASE_PROVIDER] = {"provider", phase_provider, undo_provider},
    [SBX_TASK_PHASE_CAPS] = {"capabilities", phase_caps, NULL},
    [SBX_TASK_PHASE_REAP] = {"orphans", phase_reap, NULL},
    [SBX_TASK_PHASE_DIRS] = {"directories", phase_dirs, undo_dirs},
    [SBX_TASK_PHASE_ADMIT] = {"admission", phase_admit, undo_admit},
    [SBX_TASK_PHASE_CREDENTIALS] = {"credentials", sbx_task_bind_credentials,
                                    sbx_task_unbind_credentials},
    [SBX_TASK_PHASE_EGRESS] = {"egress", sbx_task_bind_egress, sbx_task_unbind_egress},
    [SBX_TASK_PHASE_AGENT] = {"exec agent", sbx_task_bind_agent, sbx_task_unbind_agent},
    [SBX_TASK_PHASE_RECORD] = {"record", phase_record, NULL},
    [SBX_TASK_PHASE_CREATE] = {"sandbox", phase_create, undo_create},
    [SBX_TASK_PHASE_RUNNING] = {"running", phase_running, NULL},
    [SBX_TASK_PHASE_TIMER] = {"timer", phase_timer, undo_timer},
};

void sbx_task_phases_undo(struct sbx_task_start *s, enum sbx_task_phase_id first,
                          enum sbx_task_phase_id end)
{
    for (int i = (int)end - 1; i >= (int)first; i--) {
        if (sbx_task_phases[i].undo != NULL) {
            sbx_task_phases[i].undo(s);
        }
    }
}

int sbx_task_phases_run(struct sbx_task_start *s, enum sbx_task_phase_id first,
                        enum sbx_task_phase_id end, sbx_error_t **err)
{
    for (int i = (int)first; i < (int)end; i++) {
        sbx_error_t *e = NULL;

        if (sbx_task_phases[i].run(s, err != NULL ? err : &e) < 0) {
            sbx_info("task %s: start failed in phase '%s': %s", s->t->id[0] ? s->t->id : "?",
                     sbx_task_phases[i].name, sbx_error_msg(err != NULL ? *err : e));
            sbx_error_free(&e);
            sbx_task_phases_undo(s, first, (enum sbx_task_phase_id)i);
            return -1;
        }
    }
    return 0;
}

void sbx_task_start_fini(struct sbx_task_start *s)
{
    if (s->mounts != NULL) {
        size_t first = s->n_mounts - s->n_git_mounts;

        for (size_t i = first; i < s->n_mounts; i++) {
            free((char *)s->mounts[i].host);
            free((char *)s->mounts[i].path);
        }
        free(s->mounts);
        s->mounts = NULL;
        s->n_mounts = s->n_git_mounts = 0;
    }
    free(s->provider_dir);
    free(s->relay);
    free(s->view_dir);
    s->provider_dir = NULL;
    s->relay = NULL;
    s->view_dir = NULL;
}

int sbx_task_start(const struct sbx_config *cfg, const char *plugin_dir,
                   const struct sbx_task_opts *o, struct sbx_task **out, sbx_error_t **err)
{
    struct sbx_task_start s = {
        .t = xcalloc(1, sizeof(*s.t)),
        .o = o,
        .plugin_dir = plugin_dir,
        .provider = o->provider ? o->provider : cfg->provider,
        .now = time(NULL),
    };

    sbx_task_init(s.t, cfg, o);
    if (sbx_task_phases_run(&s, 0, SBX_TASK_PHASE_N, err) < 0) {
        sbx_task_start_fini(&s);
        sbx_task_free(s.t);
        return -1;
    }
    sbx_task_start_fini(&s);
    sbx_info("task %s: sandbox %.12s ready in %lds", s.t->id, s.t->sandbox,
             (long)(s.t->started_at - s.t->created_at));
    *out = s.t;
    return 0;
}
