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

void sbx_spike_credentials(const struct sbx_spike_ctx *s, struct sbx_spike_row *row)
{
    const char *bar = "only short-lived task secrets inside";
    struct sbx_open_instance *prov = NULL;
    struct sbx_open_instance *cred = NULL;
    struct needles runner = {0};
    struct needles values = {0};
    struct sbx_task_opts o = {.provider = s->provider, .pool = "agent", .ephemeral = 1};
    struct sbx_task *t = NULL;
    struct bg_exec bg = {0};
    sbx_error_t *err = NULL;
    struct sbx_scan_hits hits[2 * MAX_NEEDLES] = {{0}};
    const char *all[2 * MAX_NEEDLES];
    struct sbx_secret_scan scan = {.needles = all, .exec_args = "sleep 3", .hits = hits};
    long env_runner = 0;
    long env_values_outside = 0;
    long env_values_exec = 0;
    long inspect_hits = 0;
    long fs_hits = 0;
    int scanned;
    int revoked;
    pthread_t th;

    if (s->credentials == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          "no credential instance given (--credentials NAME)", "-");
        return;
    }
    prov = sbx_instance_load(s->cfg, s->plugin_dir, s->provider, SBX_PLUGIN_PROVIDER, &err);
    if (prov == NULL || sbx_instance_provider(prov)->scan_secrets == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_CANNOT, bar,
                          prov == NULL ? sbx_error_msg(err)
                                       : "the provider cannot scan a sandbox for secrets "
                                         "(no scan_secrets op)",
                          "-");
        sbx_instance_close(prov);
        sbx_error_free(&err);
        return;
    }
    sbx_instance_close(prov);
    /* the runner's own credentials: the values behind the plugin's *_env options */
    cred = sbx_instance_load(s->cfg, s->plugin_dir, s->credentials, SBX_PLUGIN_CREDENTIAL, &err);
    if (cred == NULL) {
        sbx_spike_row_set(row, SBX_SPIKE_FAIL, bar, sbx_error_msg(err),
                          "credential instance "
                          "unusable");
        sbx_error_free(&err);
        return;
    }
    for (size_t i = 0; i < cred->opts->n; i++) {
        const struct sbx_opt_value *ov = &cred->opts->v[i];
        size_t kl = strlen(ov->decl->key);

        if (ov->present && ov->str != NULL && kl > 4 &&
            strcmp(ov->decl->key + kl - 4, "_env") == 0) {
            add_needle(&runner, getenv(ov->str));
        }
    }
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
    bg.t = t;
    pthread_create(&th, NULL, bg_main, &bg);
    usleep(800 * 1000);
    for (size_t i = 0; i < runner.n; i++) {
        all[scan.n_needles++] = runner.v[i];
    }
    for (size_t i = 0; i < values.n; i++) {
        all[scan.n_needles++] = values.v[i];
    }
    scanned = sbx_task_scan_secrets(t, &scan, &err) == 0;
    for (size_t i = 0; i < scan.n_needles; i++) {
        if (i < runner.n) {
            env_runner += hits[i].exec_env + hits[i].other_env;
        }
        else {
            env_values_exec += hits[i].exec_env;
            env_values_outside += hits[i].other_env;
        }
        inspect_hits += hits[i].metadata;
        fs_hits += hits[i].files;
    }
    pthread_join(th, NULL);
    (void)discard;
    revoked = sbx_task_end(t, "spike", NULL, err == NULL ? &err : NULL) == 0;
    sbx_instance_close(cred);
    {
        int ok = scanned && env_runner == 0 && env_values_outside == 0 && inspect_hits == 0 &&
                 fs_hits == 0 && revoked && env_values_exec > 0 && scan.processes > 0;

        sbx_spike_row_set(row, ok ? SBX_SPIKE_PASS : SBX_SPIKE_FAIL, bar,
                          ok    ? NULL
                          : err ? sbx_error_msg(err)
                                : "a credential was found outside "
                                  "the task's exec, or the lease was not revoked",
                          "runner credentials: %ld in %ld processes' environments, %ld in "
                          "inspect, %ld in %lld filesystem bytes; lease values: %zu, in the "
                          "exec's environment %s, elsewhere %ld; lease revoked: %s",
                          env_runner, scan.processes, inspect_hits, fs_hits,
                          (long long)scan.file_bytes, values.n, env_values_exec ? "yes" : "NO",
                          env_values_outside, revoked ? "yes" : "NO");
    }
    json_object_set_new(row->raw, "runner_credentials_checked", json_integer((json_int_t)runner.n));
    json_object_set_new(row->raw, "lease_values", json_integer((json_int_t)values.n));
    json_object_set_new(row->raw, "processes", json_integer(scan.processes));
    json_object_set_new(row->raw, "filesystem_bytes", json_integer(scan.file_bytes));
    json_object_set_new(row->raw, "filesystem_hits", json_integer(fs_hits));
    json_object_set_new(row->raw, "inspect_hits", json_integer(inspect_hits));
    json_object_set_new(row->raw, "revoked", json_boolean(revoked));
    sbx_error_free(&err);
}
