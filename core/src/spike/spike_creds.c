/* spike_creds.c - the spike's "only short-lived credentials inside"
 * criterion: while a task holds a lease, no credential of the runner (the
 * machine identity's client id and secret) is anywhere in the sandbox (every
 * process's environment, the filesystem, the engine's metadata), the lease's
 * values are only in the environment of the task's own exec, and the lease is
 * revoked when the task ends. The access token never leaves the credential
 * plugin, so it cannot be inside. Looking inside is the provider's optional
 * scan_secrets op; a provider without it cannot be measured. */
#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin/instance.h"
#include "sandbox/task.h"
#include "spike/spike_int.h"
#include "util/xalloc.h"

#define MAX_NEEDLES 64

struct needles {
    const char *v[MAX_NEEDLES];
    size_t n;
    size_t maxlen;
};

static void add_needle(struct needles *nd, const char *v)
{
    if (v != NULL && strlen(v) >= 4 && nd->n < MAX_NEEDLES) {
        nd->v[nd->n++] = v;
        if (strlen(v) > nd->maxlen) {
            nd->maxlen = strlen(v);
        }
    }
}

struct bg_exec {
    struct sbx_task *t;
    int status;
    int r;
};

static void *bg_main(void *arg)
{
    static const char *const argv[] = {"sleep", "3", NULL};
    struct bg_exec *b = arg;
    sbx_error_t *err = NULL;

    b->r = sbx_task_exec(b->t, argv, NULL, 0, NULL, NULL, NULL, &b->status, &err);
    sbx_error_free(&err);
    return NULL;
}

static int discard(void *ud, int stream, const char *d, size_t n)
{
    (void)ud, (void)stream, (void)d, (void)n;
    return 0;
}

/* What the scan found. */
struct creds_found {
    long env_runner;         /* runner credentials in any process's environment */
    long env_values_outside; /* lease values in another process's environment */
    long env_values_exec;    /* lease values in the task's exec's environment */
    long inspect_hits;
    long fs_hits;
    int scanned;
};

/* 1 when the provider can look inside a sandbox (scan_secrets); else the
 * row says why not. */
static int provider_scans(const struct sbx_spike_ctx *s, struct sbx_spike_row *row, const char *bar,
                          sbx_error_t **err)
{
    struct sbx_open_instance *prov =
        sbx_instance_load(s->cfg, s->plugin_dir, s->provider, SBX_PLUGIN_PROVIDER, err);

    if (prov == NULL || sbx_instance_provider(prov)->scan_secrets == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          prov == NULL ? sbx_error_msg(*err)
                                       : "the provider cannot scan a sandbox for secrets "
                                         "(no scan_secrets op)",
                          "-");
        sbx_instance_close(prov);
        sbx_error_free(err);
        return 0;
    }
    sbx_instance_close(prov);
    return 1;
}

/* The runner's own credentials: the values behind the plugin's *_env options. */
static void runner_needles(const struct sbx_open_instance *cred, struct needles *runner)
{
    for (size_t i = 0; i < cred->opts->n; i++) {
        const struct sbx_opt_value *ov = &cred->opts->v[i];
        size_t kl = strlen(ov->decl->key);

        if (ov->present && ov->str != NULL && kl > 4 &&
            strcmp(ov->decl->key + kl - 4, "_env") == 0) {
            add_needle(runner, getenv(ov->str));
        }
    }
}

/* Scans the task while an exec of it runs, for scan's needles: the first
 * n_runner are the runner's credentials, the others the lease's values. */
static void scan_task(struct sbx_task *t, size_t n_runner, struct sbx_secret_scan *scan,
                      struct creds_found *c, sbx_error_t **err)
{
    struct bg_exec bg = {.t = t};
    pthread_t th;

    pthread_create(&th, NULL, bg_main, &bg);
    usleep(800 * 1000);
    c->scanned = sbx_task_scan_secrets(t, scan, err) == 0;
    for (size_t i = 0; i < scan->n_needles; i++) {
        const struct sbx_scan_hits *h = &scan->hits[i];

        if (i < n_runner) {
            c->env_runner += h->exec_env + h->other_env;
        }
        else {
            c->env_values_exec += h->exec_env;
            c->env_values_outside += h->other_env;
        }
        c->inspect_hits += h->metadata;
        c->fs_hits += h->files;
    }
    pthread_join(th, NULL);
}

static void creds_report(struct sbx_spike_row *row, const char *bar, const struct creds_found *c,
                         const struct sbx_secret_scan *scan, size_t n_runner, size_t n_values,
                         int revoked, const sbx_error_t *err)
{
    int ok = c->scanned && c->env_runner == 0 && c->env_values_outside == 0 &&
             c->inspect_hits == 0 && c->fs_hits == 0 && revoked && c->env_values_exec > 0 &&
             scan->processes > 0;

    sbx_spike_row_set(row, ok ? SBX_SPIKE_PASS : SBX_SPIKE_FAIL, bar,
                      ok    ? NULL
                      : err ? sbx_error_msg(err)
                            : "a credential was found outside "
                              "the task's exec, or the lease was not revoked",
                      "runner credentials: %ld in %ld processes' environments, %ld in "
                      "inspect, %ld in %lld filesystem bytes; lease values: %zu, in the "
                      "exec's environment %s, elsewhere %ld; lease revoked: %s",
                      c->env_runner, scan->processes, c->inspect_hits, c->fs_hits,
                      (long long)scan->file_bytes, n_values, c->env_values_exec ? "yes" : "NO",
                      c->env_values_outside, revoked ? "yes" : "NO");
    json_object_set_new(row->raw, "runner_credentials_checked", json_integer((json_int_t)n_runner));
    json_object_set_new(row->raw, "lease_values", json_integer((json_int_t)n_values));
    json_object_set_new(row->raw, "processes", json_integer(scan->processes));
    json_object_set_new(row->raw, "filesystem_bytes", json_integer(scan->file_bytes));
    json_object_set_new(row->raw, "filesystem_hits", json_integer(c->fs_hits));
    json_object_set_new(row->raw, "inspect_hits", json_integer(c->inspect_hits));
    json_object_set_new(row->raw, "revoked", json_boolean(revoked));
}

void sbx_spike_credentials(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    const char *bar = "only short-lived task secrets inside";
    struct sbx_open_instance *cred = NULL;
    struct needles runner = {0};
    struct needles values = {0};
    struct sbx_task_opts o = {.provider = s->provider, .pool = "agent", .ephemeral = 1};
    struct sbx_task *t = NULL;
    sbx_error_t *err = NULL;
    struct sbx_scan_hits hits[2 * MAX_NEEDLES] = {{0}};
    const char *all[2 * MAX_NEEDLES];
    struct sbx_secret_scan scan = {.needles = all, .exec_args = "sleep 3", .hits = hits};
    struct creds_found found = {0};
    int revoked;

    if (s->credentials == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          "no credential instance given (--credentials NAME)", "-");
        return;
    }
    if (!provider_scans(s, row, bar, &err)) {
        return;
    }
    cred = sbx_instance_load(s->cfg, s->plugin_dir, s->credentials, SBX_PLUGIN_CREDENTIAL, &err);
    if (cred == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar, sbx_error_msg(err),
                          "credential instance "
                          "unusable");
        sbx_error_free(&err);
        return;
    }
    runner_needles(cred, &runner);
    o.credentials = s->credentials;
    fprintf(stderr, "spike: %s: credentials inside a sandbox\n", s->provider);
    if (sbx_task_start(s->cfg, s->plugin_dir, &o, &t, &err) < 0) {
        sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar, sbx_error_msg(err),
                          "task with credentials "
                          "did not start");
        sbx_error_free(&err);
        sbx_instance_close(cred);
        return;
    }
    for (size_t i = 0; sbx_task_held_lease(t) != NULL && i < sbx_task_held_lease(t)->n_secrets;
         i++) {
        add_needle(&values, sbx_task_held_lease(t)->secrets[i].value);
    }
    for (size_t i = 0; i < runner.n; i++) {
        all[scan.n_needles++] = runner.v[i];
    }
    for (size_t i = 0; i < values.n; i++) {
        all[scan.n_needles++] = values.v[i];
    }
    scan_task(t, runner.n, &scan, &found, &err);
    (void)discard;
    revoked = sbx_task_end(t, "spike", NULL, err == NULL ? &err : NULL) == 0;
    sbx_instance_close(cred);
    creds_report(row, bar, &found, &scan, runner.n, values.n, revoked, err);
    sbx_error_free(&err);
}
