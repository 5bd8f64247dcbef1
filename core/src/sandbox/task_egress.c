/* task_egress.c - a task's egress socket (docs/architecture.md, Egress topology): wiring it at
 * start, again after a runner restart, the job its log lines carry, its counters. */
#include "sandbox/task_egress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "egress/ca_bundle.h"
#include "egress/egress.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/xalloc.h"

#define RULES_FILE "egress.rules"
#define RULES_MAX 4096 /* rules one task may have */

/* <task dir>/egress.rules: the allow-list, one rule per line (rules hold no newline
 * and no secret). A task that cannot save it still runs; it only cannot get its
 * egress back after a runner restart. */
void sbx_task_egress_save(const struct sbx_task *t)
{
    cleanup_free char *path = xasprintf("%s/%s", t->dir, RULES_FILE);
    cleanup_free char *tmp = xasprintf("%s.tmp", path);
    FILE *f = fopen(tmp, "w");
    int ok = f != NULL;

    for (size_t i = 0; ok && t->egress_allow != NULL && t->egress_allow[i] != NULL; i++) {
        ok = fprintf(f, "%s\n", t->egress_allow[i]) > 0;
    }
    if (f != NULL && fclose(f) != 0) {
        ok = 0;
    }
    if (!ok || rename(tmp, path) < 0) {
        sbx_warn("task %s: cannot save %s (%s): its egress will not survive a runner restart",
                 t->id, path, strerror(errno));
        unlink(tmp);
    }
}

static char **load_rules(const struct sbx_task *t, sbx_error_t **err)
{
    cleanup_free char *path = xasprintf("%s/%s", t->dir, RULES_FILE);
    FILE *f = fopen(path, "r");
    char **rules;
    size_t n = 0;
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    int too_many = 0;

    if (f == NULL) {
        sbx_error_set(err, SBX_E_GENERIC, "%s: %s", path, strerror(errno));
        return NULL;
    }
    rules = xcalloc(RULES_MAX + 1, sizeof(char *));
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n') {
            line[--len] = '\0';
        }
        if (n == RULES_MAX) {
            too_many = 1;
            break;
        }
        rules[n++] = xstrdup(line);
    }
    free(line);
    fclose(f);
    if (too_many) {
        for (size_t i = 0; i < n; i++) {
            free(rules[i]);
        }
        free(rules);
        sbx_error_set(err, SBX_E_GENERIC, "%s: more than %d rules", path, RULES_MAX);
        return NULL;
    }
    return rules;
}

int sbx_task_egress_wire(struct sbx_task *t, const struct sbx_task_opts *o, char **relay,
                         sbx_error_t **err)
{
    *relay = sbx_libexec_path("sbx-relay");
    if (*relay == NULL) {
        return sbx_error_set(err, SBX_E_GENERIC,
                             "egress: helper sbx-relay not found (set "
                             "SBX_LIBEXEC_DIR)");
    }
    if (o->egress != NULL) {
        t->egress = o->egress;
    }
    else {
        cleanup_free char *log =
            t->cfg->egress.log ? xstrdup(t->cfg->egress.log) : xasprintf("%s/egress.log", t->state);

        t->egress = sbx_egress_start_log(t->cfg, log, err);
        if (t->egress == NULL) {
            return -1;
        }
        t->own_egress = 1;
    }
    t->egress_dir = xasprintf("%s/egress", t->dir);
    if (sbx_egress_add(t->egress, t->egress_dir, t->job, t->id, t->id,
                       (const char *const *)t->egress_allow, err) < 0) {
        free(t->egress_dir);
        t->egress_dir = NULL;
        return -1;
    }
    sbx_task_egress_save(t);
    return 0;
}

int sbx_task_egress_rewire(struct sbx_task *t, const struct sbx_task_opts *o, sbx_error_t **err)
{
    char **rules;

    if (o->egress == NULL) {
        return 0;
    }
    rules = load_rules(t, err);
    if (rules == NULL) {
        return -1;
    }
    t->egress_allow = rules;
    t->egress = o->egress;
    t->egress_dir = xasprintf("%s/egress", t->dir);
    if (sbx_egress_add(t->egress, t->egress_dir, t->job, t->id, t->id,
                       (const char *const *)t->egress_allow, err) < 0) {
        free(t->egress_dir);
        t->egress_dir = NULL;
        t->egress = NULL;
        return -1;
    }
    return 0;
}

int sbx_task_egress_claim(struct sbx_task *t, sbx_error_t **err)
{
    if (t->egress == NULL || t->egress_dir == NULL) {
        return 0;
    }
    if (sbx_egress_rebind(t->egress, t->egress_dir, t->job, t->id,
                          (const char *const *)t->egress_allow, err) < 0) {
        return sbx_error_wrap(err, "task %s: egress rules of the claimed sandbox", t->id);
    }
    sbx_task_egress_save(t);
    return 0;
}

void sbx_task_set_job(struct sbx_task *t, const char *job)
{
    pthread_mutex_lock(&t->mu);
    snprintf(t->job, sizeof(t->job), "%s", job);
    pthread_mutex_unlock(&t->mu);
    if (t->egress != NULL && t->egress_dir != NULL) {
        sbx_egress_set_job(t->egress, t->egress_dir, job);
    }
}

void sbx_task_egress_counts(struct sbx_task *t, int64_t *allowed, int64_t *denied)
{
    struct sbx_egress_summary sum = {0};

    *allowed = 0;
    *denied = 0;
    if (t->egress != NULL && t->egress_dir != NULL &&
        sbx_egress_summary(t->egress, t->egress_dir, &sum) == 0) {
        *allowed = (int64_t)sum.allowed;
        *denied = (int64_t)sum.denied;
        return;
    }
    pthread_mutex_lock(&t->mu); /* ended: the final counts */
    *allowed = t->egress_allowed;
    *denied = t->egress_denied;
    pthread_mutex_unlock(&t->mu);
}

int sbx_task_egress_env(struct sbx_task *t, struct sbx_kv *env, size_t *n, sbx_error_t **err)
{
    const char *bundle = t->cfg->egress.ca_bundle;

    *n = 0;
    for (size_t i = 0; i < sbx_task_n_proxy_env; i++) {
        env[(*n)++] = sbx_task_proxy_env[i];
    }
    for (size_t i = 0; i < t->cfg->n_pools; i++) {
        if (strcmp(t->cfg->pools[i].name, t->pool) == 0 && t->cfg->pools[i].ca_bundle != NULL) {
            bundle = t->cfg->pools[i].ca_bundle;
        }
    }
    if (bundle == NULL || t->egress_dir == NULL) {
        return 0;
    }
    if (sbx_ca_bundle_install(bundle, t->egress_dir, err) < 0) {
        return sbx_error_wrap(err, "task %s: extra CAs", t->id);
    }
    for (size_t i = 0; i < sbx_ca_bundle_n_env; i++) {
        env[(*n)++] = sbx_ca_bundle_env[i];
    }
    return 0;
}
