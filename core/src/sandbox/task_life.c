/* task_life.c - a started task's life: its commands (with output redaction), its end
 * on every path, re-adopting a task whose sandbox survived its owner; and the helpers
 * task_start.c shares (init, free, the timer's stop, the proxy variables). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cred/guard.h"
#include "cred/redact.h"
#include "plugin/host.h"
#include "egress/ca_bundle.h"
#include "egress/egress.h"
#include "policy/policy.h"
#include "sandbox/admit.h"
#include "sandbox/caps.h"
#include "sandbox/owner.h"
#include "sandbox/proto.h"
#include "sandbox/pty_session.h"
#include "sandbox/statedir.h"
#include "sandbox/files.h"
#include "sandbox/task_int.h"
#include "sandbox/task_egress.h"
#include "sandbox/view.h"
#include "sandbox/wtwatch.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/xalloc.h"

/* Stops the timer thread without waiting out its sleep. */
void sbx_task_timer_quit(struct sbx_task *t)
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

void sbx_task_free(struct sbx_task *t)
{
    sbx_task_wtwatch_stop(t);
    sbx_task_timer_quit(t);
    if (t->egress != NULL && t->egress_dir != NULL) {
        sbx_egress_remove(t->egress, t->egress_dir, NULL);
        sbx_ca_bundle_remove(t->egress_dir);
        rmdir(t->egress_dir);
    }
    if (t->own_egress) {
        sbx_egress_stop(t->egress);
    }
    free(t->egress_dir);
    sbx_task_agent_free(t);
    sbx_redactor_destroy(t->redactor);
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
    for (size_t i = 0; t->egress_allow != NULL && t->egress_allow[i] != NULL; i++) {
        free(t->egress_allow[i]);
    }
    free(t->egress_allow);
    free(t->decided_by);
    json_decref(t->wt_events);
    free(t->image);
    free(t->worktree);
    free(t->state);
    free(t->dir);
    free(t);
}

/* Output of a task with a lease passes through one redacting stream per
 * stream kind, so a value split across reads is still caught. */
struct redact_out {
    sbx_output_fn out;
    void *ud;
    struct sbx_redact_stream *s[2];
};

struct redact_sink_ud {
    struct redact_out *r;
    int stream;
};

static int redact_sink_stream(void *userdata, const char *data, size_t len)
{
    struct redact_sink_ud *u = userdata;

    return u->r->out(u->r->ud, u->stream, data, len);
}

static int redact_on_output(void *userdata, int stream, const char *data, size_t len)
{
    struct redact_out *r = userdata;

    return sbx_redact_stream_write(r->s[stream == 2 ? 1 : 0], data, len, NULL) < 0 ? 1 : 0;
}

/* What a started and an adopted task share before anything can fail. */
void sbx_task_init(struct sbx_task *t, const struct sbx_config *cfg, const struct sbx_task_opts *o)
{
    pthread_mutex_init(&t->mu, NULL);
    pthread_cond_init(&t->timer_cv, NULL);
    t->cfg = cfg;
    t->slot_fd = -1;
    t->last_exit = -1;
    t->ephemeral = o->ephemeral;
    t->limits = cfg->limits;
    /* (changed) --from; then pools.POOL.image > the instance's image > `image` */
    t->image = xstrdup(o->image ? o->image : sbx_config_image(cfg, o->pool, o->provider));
    snprintf(t->pool, sizeof(t->pool), "%s", o->pool ? o->pool : "agent");
    snprintf(t->slot_class, sizeof(t->slot_class), "%s", o->slot_class ? o->slot_class : "light");
}

/* The egress wiring's variables, set on the sandbox when the provider wires
 * the proxy socket in (docs/egress.md). */
const struct sbx_kv sbx_task_proxy_env[] = {
    {"HTTP_PROXY", "http://127.0.0.1:3128"},
    {"HTTPS_PROXY", "http://127.0.0.1:3128"},
    {"http_proxy", "http://127.0.0.1:3128"},
    {"https_proxy", "http://127.0.0.1:3128"},
    {"NO_PROXY", "localhost,127.0.0.1,::1"},
    {"no_proxy", "localhost,127.0.0.1,::1"},
    {"NODE_USE_ENV_PROXY", "1"},
};
const size_t sbx_task_n_proxy_env = sizeof(sbx_task_proxy_env) / sizeof(sbx_task_proxy_env[0]);

static int kv_has(const struct sbx_kv *kv, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(kv[i].name, name) == 0) {
            return 1;
        }
    }
    return 0;
}

struct sbx_kv *sbx_exec_env_merge(const char *task_id, const struct sbx_kv *env, size_t n_env,
                                  const struct sbx_kv *lease, size_t n_lease, int egress_wired,
                                  size_t *n)
{
    struct sbx_kv *all = xcalloc(n_env + n_lease + 1, sizeof(*all));
    size_t k = 0;

    for (size_t i = 0; i < n_env; i++) {
        if (kv_has(lease, n_lease, env[i].name)) {
            sbx_warn("task %s: variable %s is set by the credential lease; its value stays",
                     task_id, env[i].name);
            continue;
        }
        if (egress_wired && kv_has(sbx_task_proxy_env, sbx_task_n_proxy_env, env[i].name)) {
            sbx_warn("task %s: variable %s is set by the egress wiring; its value stays", task_id,
                     env[i].name);
            continue;
        }
        all[k++] = env[i];
    }
    for (size_t i = 0; i < n_lease; i++) {
        all[k++] = lease[i];
    }
    *n = k;
    return all;
}

/* With the task's redactor: the command's output goes through a redacting stream
 * per fd (ro, su) before out. Under t->mu. */
static void redact_begin(struct sbx_task *t, struct redact_out *ro, struct redact_sink_ud su[2],
                         struct sbx_exec_spec *spec, sbx_output_fn out, void *ud)
{
    if (t->redactor != NULL) {
        ro->out = out;
        ro->ud = ud;
        su[0].r = ro;
        su[0].stream = 1;
        su[1].r = ro;
        su[1].stream = 2;
        ro->s[0] = sbx_redact_stream_new(t->redactor, redact_sink_stream, &su[0]);
        ro->s[1] = sbx_redact_stream_new(t->redactor, redact_sink_stream, &su[1]);
        spec->on_output = redact_on_output;
        spec->output_userdata = ro;
    }
}

/* What the redacting streams still hold goes out; they are freed. */
static void redact_end(struct redact_out *ro)
{
    if (ro->s[0] != NULL) {
        sbx_redact_stream_finish(ro->s[0], NULL);
        sbx_redact_stream_finish(ro->s[1], NULL);
        sbx_redact_stream_free(ro->s[0]);
        sbx_redact_stream_free(ro->s[1]);
    }
}

/* The exec (r, *status) is over: its slot leaves the task's list, the task's
 * counters and last exit follow, and a stopped task's error says why. Under
 * t->mu; 1 when the task's record must be rewritten (its exec path changed). */
static int exec_over(struct sbx_task *t, struct sbx_exec_slot *slotp, int r, const int *status,
                     sbx_error_t **err)
{
    int rewrite = 0;

    for (struct sbx_exec_slot **pp = &t->execs; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == slotp) {
            *pp = slotp->next;
            break;
        }
    }
    t->running -= !slotp->kept;
    t->last_activity = time(NULL);
    if (r == 0) {
        t->last_exit = *status;
    }
    if (slotp->path != NULL) {
        t->last_exec_path = slotp->path;
        /* (added, issue 31) a kept task's record says how execs run: rewritten
         * only when that changes, before the exec returns (what the keeper did) */
        if (!t->ephemeral && t->recorded_exec_path != slotp->path) {
            t->recorded_exec_path = slotp->path;
            rewrite = 1;
        }
    }
    if (r < 0 && t->stop && err != NULL) {
        /* the core stopped the task: say why, not how the stream broke */
        sbx_error_free(err);
        sbx_error_set(err, SBX_E_CANCELLED, "task %s stopped: %s", t->id, t->stop_reason);
    }
    return rewrite;
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
    struct redact_out ro = {0};
    struct redact_sink_ud su[2];
    int rewrite;
    int r;

    if (argv == NULL || argv[0] == NULL || argv[0][0] == '\0') {
        return sbx_error_set(err, SBX_E_USAGE, "empty command");
    }
    all = sbx_exec_env_merge(
        t->id, env, n_env, t->have_lease ? t->lease.secrets : NULL,
        t->have_lease ? t->lease.n_secrets : 0,
        (sbx_instance_provider(t->prov)->flags & SBX_PROVIDER_EGRESS_SOCKET) != 0, &n_all);
    spec.argv = argv;
    spec.env = all;
    spec.n_env = n_all;
    spec.on_output = out;
    spec.output_userdata = ud;
    if (t->have_lease && sbx_cred_guard_check(argv, err) < 0) {
        free(all);
        return sbx_error_wrap(err, "task %s holds credentials", t->id);
    }

    pthread_mutex_lock(&t->mu);
    if (t->stop) {
        pthread_mutex_unlock(&t->mu);
        free(all);
        return sbx_error_set(err, SBX_E_CANCELLED, "task %s is ending: %s", t->id, t->stop_reason);
    }
    if (sbx_task_paused_refuse(t, err) < 0) { /* (added, issue 30) files.c */
        pthread_mutex_unlock(&t->mu);
        free(all);
        return -1;
    }
    t->running += !slotp->kept; /* (added) a kept session: its clients count (pty_session.c) */
    t->last_activity = time(NULL);
    redact_begin(t, &ro, su, &spec, out, ud);
    slotp->next = t->execs;
    t->execs = slotp;
    pthread_mutex_unlock(&t->mu);

    r = sbx_task_exec_run(t, &spec, slotp, status, err);
    sbx_task_worktree_after(t); /* (added) the task's branch back; what the host must not run */
    /* a command that took the sandbox past a measured limit (the disk
     * watchdog) fails, and the task ends */
    if (sbx_task_check(t, 1) < 0 && r == 0) {
        r = -1;
    }

    pthread_mutex_lock(&t->mu);
    rewrite = exec_over(t, slotp, r, status, err);
    pthread_mutex_unlock(&t->mu);
    if (rewrite && sbx_task_record_write(t, "running", NULL) < 0) {
        pthread_mutex_lock(&t->mu);
        t->recorded_exec_path = NULL; /* tried again at the next exec */
        pthread_mutex_unlock(&t->mu);
    }
    sbx_wtwatch_idle(t->wtwatch); /* (added) a .git made while it ran, checked now */
    redact_end(&ro);
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
    sbx_tty_session_reap(t); /* (added) its kept terminal session's shell was cancelled */
    sbx_task_timer_quit(t);
    if (t->sandbox[0] != '\0' &&
        sbx_instance_provider(t->prov)->destroy(t->prov->ctx, t->sandbox, &e) < 0) {
        sbx_error_log("task %s: removing sandbox %.12s: %s", t->id, t->sandbox, sbx_error_msg(e));
        if (err != NULL && *err == NULL) {
            *err = e;
            e = NULL;
        }
        sbx_error_free(&e);
        r = -1;
    }
    sbx_view_release(t->dir); /* the sandbox is gone: its view of the worktree too */
    sbx_task_wtwatch_stop(t); /* nothing inside writes any more: the last scan below */
    if (t->sandbox[0] != '\0') {
        sbx_task_worktree_after(t); /* (added) once more, with nothing left running inside */
    }
    if (t->have_lease) {
        if (sbx_instance_credential(t->cred)->revoke(t->cred->ctx, &t->lease, &e) < 0) {
            sbx_error_log("task %s: revoking credential lease %s: %s", t->id, t->lease.id,
                          sbx_error_msg(e));
            sbx_error_free(&e);
            r = -1;
        }
    }
    if (t->egress != NULL && t->egress_dir != NULL) {
        struct sbx_egress_summary sum = {0};

        if (sbx_egress_remove(t->egress, t->egress_dir, &sum) == 0) {
            pthread_mutex_lock(&t->mu); /* (changed, issue 31) read under it */
            t->egress_allowed = (int64_t)sum.allowed;
            t->egress_denied = (int64_t)sum.denied;
            pthread_mutex_unlock(&t->mu);
        }
        sbx_ca_bundle_remove(t->egress_dir);
        rmdir(t->egress_dir);
        free(t->egress_dir);
        t->egress_dir = NULL;
    }
    t->ended_at = time(NULL);
    if (sbx_task_record_write(t, "ended", &e) < 0) {
        sbx_error_free(&e);
    }
    if (record != NULL) {
        *record = sbx_task_record(t, "ended");
    }
    if (t->ephemeral) {
        sbx_task_dir_remove(t->state, t->dir_id);
    }
    sbx_task_free(t);
    return r;
}

void sbx_task_exec_cancel(struct sbx_task *t, struct sbx_exec_slot *slot)
{
    pthread_mutex_lock(&t->mu);
    for (struct sbx_exec_slot *s = t->execs; s != NULL; s = s->next) {
        if (s == slot) {
            __atomic_store_n(&s->ctl.cancelled, 1, __ATOMIC_RELEASE);
            if (s->agent_cancel_fd > 0 && write(s->agent_cancel_fd, "", 1) < 0) {
                /* already signalled */
            }
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
    sbx_error_t *caps_err = NULL;

    sbx_task_init(t, cfg, o);
    if (o->task_id == NULL || !sbx_id_valid(o->task_id, SBX_ID_TASK) || sandbox == NULL ||
        sandbox[0] == '\0') {
        sbx_error_set(err, SBX_E_USAGE,
                      "adopting a task: a valid task id and sandbox id are "
                      "required");
        goto fail;
    }
    snprintf(t->id, sizeof(t->id), "%s", o->task_id);
    snprintf(t->job, sizeof(t->job), "%s", o->job_id ? o->job_id : t->id);
    snprintf(t->sandbox, sizeof(t->sandbox), "%s", sandbox);
    snprintf(t->dir_id, sizeof(t->dir_id), "%s", t->id);
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
    /* this process owns the task now: sweeps keep its view of the worktree */
    sbx_task_record_reown(t->dir);
    if (sbx_caps_check(t->prov, t->id, &t->limits, &t->unenforced, &caps_err) < 0) {
        /* the sandbox exists: keep it, and its record says what is missing */
        sbx_warn("task %s: %s", t->id, sbx_error_msg(caps_err));
        sbx_error_free(&caps_err);
    }
    if ((sbx_instance_provider(t->prov)->flags & SBX_PROVIDER_EGRESS_SOCKET) != 0 &&
        o->egress != NULL) {
        sbx_error_t *e = NULL;

        if (sbx_task_egress_rewire(t, o, &e) < 0) {
            sbx_warn("task %s: egress not restored (%s): the sandbox has no way out", o->task_id,
                     sbx_error_msg(e));
            sbx_error_free(&e);
        }
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
    sbx_task_free(t);
    return -1;
}
