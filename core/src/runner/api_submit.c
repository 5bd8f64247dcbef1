/* api_submit.c - a POST /v1/jobs body parsed and checked into a job
 * (runner_parse_submit, api_int.h; **(added, issue 31)** from api.c): strict
 * fields, the command, the task id, pool and class, the provider and
 * credential instances, the worktree confined below runner.worktree_roots,
 * the labels and the command's variables. Only r->cfg and r->confine are
 * read. */
#include <sbx/sbx_util.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runner/state.h"
#include "runner/rjob.h"
#include "runner/api_int.h"
#include "sandbox/statedir.h"
#include "util/envname.h"
#include "util/xalloc.h"

static const char *const submit_fields[] = {"argv",   "task",     "pool",     "class",
                                            "labels", "worktree", "provider", "credentials",
                                            "env",    "from",     NULL};

static int opt_string(json_t *o, const char *key, const char **out, char *msg, size_t len)
{
    json_t *v = json_object_get(o, key);

    *out = NULL;
    if (v == NULL || json_is_null(v)) {
        return 0;
    }
    if (!json_is_string(v)) {
        snprintf(msg, len, "field '%s' must be a string", key);
        return -1;
    }
    *out = json_string_value(v);
    return 0;
}

static int labels_ok(json_t *labels, char *msg, size_t len)
{
    const char *k;
    json_t *v;

    if (!json_is_object(labels)) {
        snprintf(msg, len, "field 'labels' must be an object of strings");
        return -1;
    }
    if (json_object_size(labels) > 64) {
        snprintf(msg, len, "field 'labels': at most 64 labels");
        return -1;
    }
    json_object_foreach(labels, k, v)
    {
        size_t n = strlen(k);

        if (n == 0 || n > 63 ||
            strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789._/-") != n) {
            snprintf(msg, len, "label '%.80s': names are 1-63 of [A-Za-z0-9._/-]", k);
            return -1;
        }
        if (!json_is_string(v) || strlen(json_string_value(v)) > 256) {
            snprintf(msg, len, "label '%s' must be a string of at most 256 bytes", k);
            return -1;
        }
    }
    return 0;
}

/* The command's variables: names as `sbx run --env` takes them
 * (util/envname.h), string values. */
static int env_ok(json_t *env, char *msg, size_t len)
{
    const char *k;
    json_t *v;

    if (!json_is_object(env)) {
        snprintf(msg, len, "field 'env' must be an object of NAME: \"value\" strings");
        return -1;
    }
    json_object_foreach(env, k, v)
    {
        if (!sbx_env_name_valid(k, strlen(k))) {
            snprintf(msg, len, "env.%.80s: invalid variable name (" SBX_ENV_NAME_RULE ")", k);
            return -1;
        }
        if (!json_is_string(v)) {
            snprintf(msg, len, "env.%.80s: the value must be a string", k);
            return -1;
        }
    }
    return 0;
}

/* Every field of the submit body o is one of submit_fields: 0, or -1 with the
 * reason in msg. */
static int fields_known(json_t *o, char *msg, size_t mlen)
{
    const char *k;
    json_t *v;

    json_object_foreach(o, k, v)
    {
        size_t i = 0;

        while (submit_fields[i] != NULL && strcmp(submit_fields[i], k) != 0) {
            i++;
        }
        if (submit_fields[i] == NULL) {
            snprintf(msg, mlen,
                     "unknown field '%.80s' (allowed: argv, task, pool, class, "
                     "labels, worktree, provider, credentials, env, from)",
                     k);
            return -1;
        }
    }
    return 0;
}

/* argv (NULL: not given): the command, a non-empty array of at most 4096
 * strings whose first is not empty. 0, or -1 with the reason in msg. */
static int argv_ok(json_t *argv, char *msg, size_t mlen)
{
    if (argv == NULL) {
        snprintf(msg, mlen, "field 'argv' is required (the command, an array of strings)");
        return -1;
    }
    if (!json_is_array(argv) || json_array_size(argv) == 0 || json_array_size(argv) > 4096) {
        snprintf(msg, mlen, "field 'argv' must be a non-empty array of at most 4096 strings");
        return -1;
    }
    for (size_t i = 0; i < json_array_size(argv); i++) {
        if (!json_is_string(json_array_get(argv, i))) {
            snprintf(msg, mlen, "field 'argv': element %zu must be a string", i);
            return -1;
        }
    }
    if (json_string_value(json_array_get(argv, 0))[0] == '\0') {
        snprintf(msg, mlen, "field 'argv': the command name is empty");
        return -1;
    }
    return 0;
}

/* A submit's optional strings, borrowed from its body (NULL: not given). */
struct submit_strings {
    const char *task, *pool, *cls, *wt, *prov, *cred, *from;
};

/* The optional strings of the submit body o into *s, checked: the task id, the
 * pool, the class, the provider and credential instances of the
 * configuration, and the worktree, confined below runner.worktree_roots and
 * resolved into *real_wt (the caller frees it). 0, or the HTTP status with the
 * reason in msg. */
static int strings_parse(struct sbx_runner *r, json_t *o, struct submit_strings *s, char **real_wt,
                         char *msg, size_t mlen)
{
    int code;

    if (opt_string(o, "task", &s->task, msg, mlen) < 0 ||
        opt_string(o, "pool", &s->pool, msg, mlen) < 0 ||
        opt_string(o, "class", &s->cls, msg, mlen) < 0 ||
        opt_string(o, "worktree", &s->wt, msg, mlen) < 0 ||
        opt_string(o, "provider", &s->prov, msg, mlen) < 0 ||
        opt_string(o, "credentials", &s->cred, msg, mlen) < 0 ||
        opt_string(o, "from", &s->from, msg, mlen) < 0) {
        return 400;
    }
    if (s->task != NULL &&
        (!sbx_id_valid(s->task, SBX_ID_TASK) || strlen(s->task) >= SBX_SCHED_ID_MAX)) {
        snprintf(msg, mlen,
                 "field 'task' '%.80s': use 1-63 letters, digits, '-', '_' or '.', "
                 "starting with a letter or digit",
                 s->task);
        return 400;
    }
    if (s->pool != NULL && sbx_pool_parse(s->pool) < 0) {
        snprintf(msg, mlen, "field 'pool' '%.40s': use ci or agent", s->pool);
        return 400;
    }
    if (s->cls != NULL && sbx_job_class_parse(s->cls) < 0) {
        snprintf(msg, mlen, "field 'class' '%.40s': use light or heavy", s->cls);
        return 400;
    }
    if (s->wt != NULL && (s->wt[0] != '/' || strlen(s->wt) > 4096)) {
        snprintf(msg, mlen, "field 'worktree' must be an absolute path");
        return 400;
    }
    if (s->wt != NULL) {
        code = sbx_confine_dir(&r->confine, s->wt, real_wt, msg, mlen);
        if (code != 0) {
            return code;
        }
    }
    if (s->prov != NULL && sbx_config_instance(r->cfg, s->prov, SBX_PLUGIN_PROVIDER) == NULL) {
        snprintf(msg, mlen,
                 "field 'provider': no provider instance '%.80s' in the "
                 "configuration",
                 s->prov);
        return 400;
    }
    if (s->cred != NULL && sbx_config_instance(r->cfg, s->cred, SBX_PLUGIN_CREDENTIAL) == NULL) {
        snprintf(msg, mlen,
                 "field 'credentials': no credential instance '%.80s' in the "
                 "configuration",
                 s->cred);
        return 400;
    }
    return 0;
}

/* j from a checked submit: a new id, the command, the strings (copied), the
 * resolved worktree (taken) and the variables (a reference, none if empty). */
static void job_fill(struct rjob *j, json_t *argv, const struct submit_strings *s, char *real_wt,
                     json_t *env)
{
    struct rjob_req *q = rjob_req_fill(j); /* (changed, issue 31) rjob.h */

    q->env = env != NULL && json_object_size(env) > 0 ? json_incref(env) : NULL;
    sbx_task_id_new(q->id, sizeof(q->id));
    q->id[0] = 'j'; /* "j-" and 12 hex digits */
    snprintf(q->task, sizeof(q->task), "%s", s->task ? s->task : q->id);
    q->pool = s->pool ? (enum sbx_pool)sbx_pool_parse(s->pool) : SBX_POOL_CI;
    q->cls = s->cls ? (enum sbx_job_class)sbx_job_class_parse(s->cls) : SBX_CLASS_LIGHT;
    q->cls_given = s->cls != NULL;
    q->argv = xcalloc(json_array_size(argv) + 1, sizeof(char *));
    for (size_t i = 0; i < json_array_size(argv); i++) {
        q->argv[i] = xstrdup(json_string_value(json_array_get(argv, i)));
    }
    q->worktree = real_wt;
    q->provider = s->prov ? xstrdup(s->prov) : NULL;
    q->credentials = s->cred ? xstrdup(s->cred) : NULL;
    q->from = s->from ? xstrdup(s->from) : NULL; /* checked with the client (runner_submit_from) */
}

/* Parses and checks a submit body into *j: 0, or the HTTP status with the
 * reason in msg. The worktree is confined below runner.worktree_roots and
 * kept resolved (docs/runner.md, "Worktree roots"). */
int runner_parse_submit(struct sbx_runner *r, const char *body, size_t len, struct rjob *j,
                        json_t **labels, char *msg, size_t mlen)
{
    char *real_wt = NULL;
    int code = 400;
    json_error_t jerr;
    json_t *o = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    struct submit_strings s;
    json_t *argv;
    json_t *env;

    if (o == NULL) {
        snprintf(msg, mlen, "malformed JSON at line %d column %d: %s", jerr.line, jerr.column,
                 jerr.text);
        return 400;
    }
    if (!json_is_object(o)) {
        snprintf(msg, mlen, "the body must be a JSON object");
        goto out;
    }
    argv = json_object_get(o, "argv");
    if (fields_known(o, msg, mlen) < 0 || argv_ok(argv, msg, mlen) < 0) {
        goto out;
    }
    code = strings_parse(r, o, &s, &real_wt, msg, mlen);
    if (code != 0) {
        goto out;
    }
    code = 400;
    *labels = json_object_get(o, "labels");
    if (*labels != NULL && labels_ok(*labels, msg, mlen) < 0) {
        goto out;
    }
    env = json_object_get(o, "env");
    if (json_is_null(env)) {
        env = NULL;
    }
    if (env != NULL && env_ok(env, msg, mlen) < 0) {
        goto out;
    }
    json_incref(*labels);
    job_fill(j, argv, &s, real_wt, env);
    real_wt = NULL;
    code = 0;
out:
    free(real_wt);
    json_decref(o);
    return code;
}
