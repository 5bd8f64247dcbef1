/* task_life.c - starting a task, running its commands, ending it. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "plugin/host.h"
#include "sandbox/owner.h"
#include "sandbox/statedir.h"
#include "sandbox/task.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/xalloc.h"

/* Stops the timer thread without waiting out its sleep. */
static void timer_quit(struct sbx_task *t)
{
    if (t->timer_on) {
        pthread_mutex_lock(&t->mu);
        t->timer_quit = 1;
        pthread_cond_broadcast(&t->timer_cv);
        pthread_mutex_unlock(&t->mu);
        pthread_join(t->timer, NULL);
        t->timer_on = 0;
    }
}

static void free_task(struct sbx_task *t)
{
    timer_quit(t);
    if (t->have_lease) {
        sbx_lease_clear(&t->lease);
    }
    sbx_instance_close(t->cred);
    sbx_instance_close(t->prov);
    if (t->slot_fd >= 0) {
        close(t->slot_fd); /* releases the slot lock */
    }
    pthread_mutex_destroy(&t->mu);
    pthread_cond_destroy(&t->timer_cv);
    free(t->image);
    free(t->worktree);
    free(t->state);
    free(t->dir);
    free(t);
}

static int check_worktree(const char *w, char **out, sbx_error_t **err)
{
    char *real = realpath(w, NULL);

    if (real == NULL) {
        return sbx_error_set(err, SBX_E_USAGE, "--worktree %s: %s", w, strerror(errno));
    }
    if (strcmp(real, "/") == 0) {
        free(real);
        return sbx_error_set(err, SBX_E_USAGE, "--worktree /: refusing to mount the host root");
    }
    *out = real;
    return 0;
}

static int acquire_lease(struct sbx_task *t, const char *plugin_dir, const char *name,
                         sbx_error_t **err)
{
    struct sbx_cred_scope scope = {.task_id = t->id, .job_id = t->job, .path = NULL};

    t->cred = sbx_instance_open(t->cfg, plugin_dir, name, SBX_PLUGIN_CREDENTIAL, err);
    if (t->cred == NULL) {
        return -1;
    }
    if (sbx_instance_credential(t->cred)->acquire(t->cred->ctx, &scope, &t->lease, err) < 0) {
        sbx_lease_clear(&t->lease);
        return sbx_error_wrap(err, "credentials '%s' for task %s", name, t->id);
    }
    t->have_lease = 1;
    return 0;
}

int sbx_task_start(const struct sbx_config *cfg, const char *plugin_dir,
                   const struct sbx_task_opts *o, struct sbx_task **out, sbx_error_t **err)
{
    struct sbx_task *t = xcalloc(1, sizeof(*t));
    char owner[160];
    char created[32];
    struct tm tm;
    time_t now = time(NULL);
    const char *provider = o->provider ? o->provider : cfg->provider;
    struct sbx_provider_info info = {0};

    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->timer_cv, NULL);
    t->cfg = cfg;
    t->slot_fd = -1;
    t->last_exit = -1;
    t->ephemeral = o->ephemeral;
    t->limits = cfg->limits;
    t->image = xstrdup(cfg->image);
    snprintf(t->pool, sizeof(t->pool), "%s", o->pool ? o->pool : "agent");
    snprintf(t->slot_class, sizeof(t->slot_class), "%s", o->slot_class ? o->slot_class : "light");
    if (strcmp(t->pool, "ci") != 0 && strcmp(t->pool, "agent") != 0) {
        sbx_error_set(err, SBX_E_USAGE, "--pool %s: use ci or agent", t->pool);
        goto fail;
    }
    if (o->task_id != NULL) {
        if (!sbx_task_id_valid(o->task_id)) {
            sbx_error_set(err, SBX_E_USAGE, "task id '%s': use 1-64 letters, digits, '-', '_' "
                          "or '.', starting with a letter or digit", o->task_id);
            goto fail;
        }
        snprintf(t->id, sizeof(t->id), "%s", o->task_id);
    }
    else {
        sbx_task_id_new(t->id, sizeof(t->id));
    }
    snprintf(t->job, sizeof(t->job), "%s", o->job_id ? o->job_id : t->id);
    if (o->worktree != NULL && check_worktree(o->worktree, &t->worktree, err) < 0) {
        goto fail;
    }
    t->state = sbx_state_dir(cfg->state_dir, err);
    if (t->state == NULL) {
        goto fail;
    }
    t->dir = sbx_task_dir(t->state, t->id);
    if (access(t->dir, F_OK) == 0) {
        cleanup_free char *rec = xasprintf("%s/task.json", t->dir);
        cleanup_free char *sock = xasprintf("%s/keeper.sock", t->dir);

        if (access(sock, F_OK) == 0) {
            sbx_error_set(err, SBX_E_USAGE, "task '%s' already exists (sbx task end %s)", t->id,
                          t->id);
            free(t->dir);
            t->dir = NULL;
            goto fail;
        }
        sbx_task_dir_remove(t->state, t->id); /* an ended task's leftovers */
    }
    if (sbx_mkdirs(t->dir, 0700, err) < 0) {
        goto fail;
    }
    t->prov = sbx_instance_open(cfg, plugin_dir, provider, SBX_PLUGIN_PROVIDER, err);
    if (t->prov == NULL) {
        goto fail;
    }
    if (sbx_instance_provider(t->prov)->info != NULL &&
        sbx_instance_provider(t->prov)->info(t->prov->ctx, &info, NULL) == 0 && info.userns == 0) {
        sbx_warn("provider '%s': user namespaces are OFF (%s): container root is host root; "
                 "turn on userns-remap (docs/operations.md)", provider, info.engine);
    }
    if (!o->no_reap) {
        sbx_task_reap_orphans(t->prov, t->state);
        t->slot_fd = sbx_slot_acquire(t->state, cfg->box.max_sandboxes, o->cancel, err);
        if (t->slot_fd < 0) {
            goto fail;
        }
    }
    if (o->credentials != NULL && acquire_lease(t, plugin_dir, o->credentials, err) < 0) {
        goto fail;
    }

    t->created_at = (int64_t)now;
    sbx_owner_self(owner, sizeof(owner));
    gmtime_r(&now, &tm);
    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
    {
        struct sbx_kv labels[] = {
            {"sbx.task", t->id},         {"sbx.job", t->job},     {"sbx.created", created},
            {"sbx.owner", owner},        {"sbx.pool", t->pool},   {"sbx.class", t->slot_class},
        };
        struct sbx_sandbox_spec spec = {
            .task_id = t->id,
            .job_id = t->job,
            .image = t->image,
            .worktree = t->worktree,
            .mounts = cfg->caches,
            .n_mounts = cfg->n_caches,
            .limits = t->limits,
            .labels = labels,
            .n_labels = sizeof(labels) / sizeof(labels[0]),
        };

        if (sbx_task_record_write(t, "starting", err) < 0) {
            goto fail;
        }
        if (sbx_instance_provider(t->prov)->create(t->prov->ctx, &spec, t->sandbox,
                                                   sizeof(t->sandbox), err) < 0) {
            sbx_error_wrap(err, "task %s: creating the sandbox", t->id);
            goto fail;
        }
    }
    t->started_at = time(NULL);
    t->last_activity = t->started_at;
    if (sbx_task_record_write(t, "running", err) < 0) {
        sbx_task_end(t, "recording the task failed", NULL, NULL);
        return -1;
    }
    if (pthread_create(&t->timer, NULL, sbx_task_timer_main, t) == 0) {
        t->timer_on = 1;
    }
    sbx_info("task %s: sandbox %.12s ready in %lds", t->id, t->sandbox,
             (long)(t->started_at - t->created_at));
    *out = t;
    return 0;

fail:
    if (t->have_lease) {
        sbx_instance_credential(t->cred)->revoke(t->cred->ctx, &t->lease, NULL);
    }
    if (t->dir != NULL && t->state != NULL) {
        sbx_task_dir_remove(t->state, t->id);
    }
    free_task(t);
    return -1;
}

int sbx_task_exec(struct sbx_task *t, const char *const *argv, const struct sbx_kv *env,
                  size_t n_env, sbx_output_fn out, void *ud, struct sbx_exec_slot *given,
                  int *status, sbx_error_t **err)
{
    struct sbx_exec_slot local = {0};
    struct sbx_exec_slot *slotp = given ? given : &local;
    struct sbx_kv *all = NULL;
    size_t n_all = 0;
    struct sbx_exec_spec spec = {0};
    int r;

    if (argv == NULL || argv[0] == NULL || argv[0][0] == '\0') {
        return sbx_error_set(err, SBX_E_USAGE, "empty command");
    }
    all = xcalloc(n_env + t->lease.n_secrets + 1, sizeof(*all));
    for (size_t i = 0; i < n_env; i++) {
        all[n_all++] = env[i];
    }
    for (size_t i = 0; t->have_lease && i < t->lease.n_secrets; i++) {
        all[n_all++] = t->lease.secrets[i];
    }
    spec.argv = argv;
    spec.env = all;
    spec.n_env = n_all;
    spec.on_output = out;
    spec.output_userdata = ud;

    pthread_mutex_lock(&t->mu);
    if (t->stop) {
        pthread_mutex_unlock(&t->mu);
        free(all);
        return sbx_error_set(err, SBX_E_CANCELLED, "task %s is ending: %s", t->id,
                             t->stop_reason);
    }
    t->running++;
    t->last_activity = time(NULL);
    slotp->next = t->execs;
    t->execs = slotp;
    pthread_mutex_unlock(&t->mu);

    r = sbx_instance_provider(t->prov)->exec(t->prov->ctx, t->sandbox, &spec, &slotp->ctl, status,
                                             err);

    pthread_mutex_lock(&t->mu);
    for (struct sbx_exec_slot **pp = &t->execs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == slotp) {
            *pp = slotp->next;
            break;
        }
    }
    t->running--;
    t->last_activity = time(NULL);
    if (r == 0) {
        t->last_exit = *status;
    }
    if (r < 0 && t->stop && err != NULL) {
        /* the core stopped the task: say why, not how the stream broke */
        sbx_error_free(err);
        sbx_error_set(err, SBX_E_CANCELLED, "task %s stopped: %s", t->id, t->stop_reason);
    }
    pthread_mutex_unlock(&t->mu);
    free(all);
    return r;
}

int sbx_task_end(struct sbx_task *t, const char *reason, json_t **record, sbx_error_t **err)
{
    sbx_error_t *e = NULL;
    int r = 0;

    if (t == NULL) {
        return 0;
    }
    sbx_task_stop(t, reason ? reason : "ended");
    timer_quit(t);
    if (t->sandbox[0] != '\0' &&
        sbx_instance_provider(t->prov)->destroy(t->prov->ctx, t->sandbox, &e) < 0) {
        sbx_error_log("task %s: removing sandbox %.12s: %s", t->id, t->sandbox,
                      sbx_error_msg(e));
        if (err != NULL && *err == NULL) {
            *err = e;
            e = NULL;
        }
        sbx_error_free(&e);
        r = -1;
    }
    if (t->have_lease) {
        if (sbx_instance_credential(t->cred)->revoke(t->cred->ctx, &t->lease, &e) < 0) {
            sbx_error_log("task %s: revoking credential lease %s: %s", t->id, t->lease.id,
                          sbx_error_msg(e));
            sbx_error_free(&e);
            r = -1;
        }
    }
    t->ended_at = time(NULL);
    if (sbx_task_record_write(t, "ended", &e) < 0) {
        sbx_error_free(&e);
    }
    if (record != NULL) {
        *record = sbx_task_record(t, "ended");
    }
    if (t->ephemeral) {
        sbx_task_dir_remove(t->state, t->id);
    }
    else {
        cleanup_free char *sock = xasprintf("%s/keeper.sock", t->dir);

        unlink(sock);
    }
    free_task(t);
    return r;
}

void sbx_task_exec_cancel(struct sbx_task *t, struct sbx_exec_slot *slot)
{
    pthread_mutex_lock(&t->mu);
    for (struct sbx_exec_slot *s = t->execs; s != NULL; s = s->next) {
        if (s == slot) {
            s->ctl.cancelled = 1;
            if (sbx_instance_provider(t->prov)->cancel != NULL) {
                sbx_instance_provider(t->prov)->cancel(t->prov->ctx, &s->ctl);
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
}

int sbx_task_adopt(const struct sbx_config *cfg, const char *plugin_dir,
                   const struct sbx_task_opts *o, const char *sandbox, struct sbx_task **out,
                   sbx_error_t **err)
{
    struct sbx_task *t = xcalloc(1, sizeof(*t));
    const char *provider = o->provider ? o->provider : cfg->provider;

    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->timer_cv, NULL);
    t->cfg = cfg;
    t->slot_fd = -1;
    t->last_exit = -1;
    t->ephemeral = o->ephemeral;
    t->limits = cfg->limits;
    t->image = xstrdup(cfg->image);
    snprintf(t->pool, sizeof(t->pool), "%s", o->pool ? o->pool : "agent");
    snprintf(t->slot_class, sizeof(t->slot_class), "%s", o->slot_class ? o->slot_class : "light");
    if (o->task_id == NULL || !sbx_task_id_valid(o->task_id) || sandbox == NULL ||
        sandbox[0] == '\0') {
        sbx_error_set(err, SBX_E_USAGE, "adopting a task: a valid task id and sandbox id are "
                      "required");
        goto fail;
    }
    snprintf(t->id, sizeof(t->id), "%s", o->task_id);
    snprintf(t->job, sizeof(t->job), "%s", o->job_id ? o->job_id : t->id);
    snprintf(t->sandbox, sizeof(t->sandbox), "%s", sandbox);
    if (o->worktree != NULL) {
        t->worktree = xstrdup(o->worktree);
    }
    t->state = sbx_state_dir(cfg->state_dir, err);
    if (t->state == NULL) {
        goto fail;
    }
    t->dir = sbx_task_dir(t->state, t->id);
    if (sbx_mkdirs(t->dir, 0700, err) < 0) {
        goto fail;
    }
    t->prov = sbx_instance_open(cfg, plugin_dir, provider, SBX_PLUGIN_PROVIDER, err);
    if (t->prov == NULL) {
        goto fail;
    }
    t->created_at = time(NULL);
    t->started_at = t->created_at;
    t->last_activity = t->started_at;
    if (pthread_create(&t->timer, NULL, sbx_task_timer_main, t) == 0) {
        t->timer_on = 1;
    }
    sbx_info("task %s: re-adopted sandbox %.12s", t->id, t->sandbox);
    *out = t;
    return 0;

fail:
    t->sandbox[0] = '\0';
    free_task(t);
    return -1;
}
