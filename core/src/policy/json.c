/* json.c - policy jobs from JSON and decisions to JSON (jansson). */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/policy.h"
#include "util/units.h"
#include "util/xalloc.h"

/* The job and everything it points to, in one owner. */
struct owned_job {
    struct sbx_job_desc job; /* first: the public pointer */
    char *strings[6];
    char **argv;
    struct sbx_kv *labels;
};

void sbx_policy_job_free(struct sbx_job_desc *job)
{
    struct owned_job *o = (struct owned_job *)job;

    if (o == NULL) {
        return;
    }
    for (size_t i = 0; i < 6; i++) {
        free(o->strings[i]);
    }
    for (size_t i = 0; o->argv != NULL && o->argv[i] != NULL; i++) {
        free(o->argv[i]);
    }
    free(o->argv);
    for (size_t i = 0; i < o->job.n_labels; i++) {
        free((char *)o->labels[i].name);
        free((char *)o->labels[i].value);
    }
    free(o->labels);
    free(o);
}

static int fail(struct owned_job *o, sbx_error_t **err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(struct owned_job *o, sbx_error_t **err, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    sbx_policy_job_free(&o->job);
    return sbx_error_set(err, SBX_E_USAGE, "job: %s", msg);
}

/* A requested limit: a number, or a size/duration/CPU string. */
static int requested_value(const char *key, const json_t *v, struct sbx_limits *r, char *why,
                           size_t why_len)
{
    sbx_error_t *e = NULL;
    int64_t i = 0;
    int rc = 0;

    if (strcmp(key, "cpus") == 0) {
        double d = 0;

        if (json_is_number(v)) {
            d = json_number_value(v);
        }
        else if (json_is_string(v)) {
            rc = sbx_cpus_parse(json_string_value(v), &d, &e);
        }
        else {
            snprintf(why, why_len, "'requested.cpus' must be a number");
            return -1;
        }
        if (rc == 0 && !(d > 0 && d <= 1024)) {
            snprintf(why, why_len, "'requested.cpus' is out of range (0, 1024]");
            return -1;
        }
        r->cpus = d;
    }
    else {
        int64_t *slot = strcmp(key, "memory") == 0 ? &r->memory
                        : strcmp(key, "disk") == 0 ? &r->disk
                        : strcmp(key, "pids") == 0 ? &r->pids
                        : strcmp(key, "idle") == 0 ? &r->idle
                        : strcmp(key, "max") == 0  ? &r->max
                                                   : NULL;
        int duration = strcmp(key, "idle") == 0 || strcmp(key, "max") == 0;

        if (slot == NULL) {
            snprintf(why, why_len,
                     "unknown key 'requested.%s' (allowed: cpus, memory, disk, "
                     "pids, idle, max)",
                     key);
            return -1;
        }
        if (json_is_integer(v)) {
            i = json_integer_value(v);
        }
        else if (json_is_string(v) && strcmp(key, "pids") != 0) {
            rc = duration ? sbx_duration_parse(json_string_value(v), &i, &e)
                          : sbx_size_parse(json_string_value(v), &i, &e);
        }
        else {
            snprintf(why, why_len, "'requested.%s' must be a whole number%s", key,
                     strcmp(key, "pids") == 0 ? "" : " or a string such as \"8G\" or \"60m\"");
            return -1;
        }
        if (rc == 0 && i <= 0) {
            snprintf(why, why_len, "'requested.%s' must be positive", key);
            return -1;
        }
        *slot = i;
    }
    if (rc < 0) {
        snprintf(why, why_len, "'requested.%s': %s", key, sbx_error_msg(e));
        sbx_error_free(&e);
        return -1;
    }
    return 0;
}

struct sbx_job_desc *sbx_policy_job_from_json(const json_t *j, sbx_error_t **err)
{
    static const char *const string_keys[6] = {"id",      "task",       "pool",
                                               "workdir", "repository", "provider"};
    struct owned_job *o = xcalloc(1, sizeof(*o));
    const char *key;
    json_t *v;

    if (!json_is_object(j)) {
        fail(o, err, "must be a JSON object");
        return NULL;
    }
    json_object_foreach((json_t *)j, key, v)
    {
        size_t k;

        for (k = 0; k < 6 && strcmp(key, string_keys[k]) != 0; k++) {
        }
        if (k < 6) {
            if (!json_is_string(v)) {
                fail(o, err, "'%s' must be a string", key);
                return NULL;
            }
            o->strings[k] = xstrdup(json_string_value(v));
        }
        else if (strcmp(key, "argv") == 0) {
            size_t n = json_array_size(v);

            if (!json_is_array(v)) {
                fail(o, err, "'argv' must be an array of strings");
                return NULL;
            }
            o->argv = xcalloc(n + 1, sizeof(*o->argv));
            for (size_t i = 0; i < n; i++) {
                if (!json_is_string(json_array_get(v, i))) {
                    fail(o, err, "'argv[%zu]' must be a string", i);
                    return NULL;
                }
                o->argv[i] = xstrdup(json_string_value(json_array_get(v, i)));
            }
        }
        else if (strcmp(key, "labels") == 0) {
            const char *lk;
            json_t *lv;

            if (!json_is_object(v)) {
                fail(o, err, "'labels' must be an object of strings");
                return NULL;
            }
            o->labels = xcalloc(json_object_size(v) + 1, sizeof(*o->labels));
            json_object_foreach(v, lk, lv)
            {
                if (!json_is_string(lv)) {
                    fail(o, err, "'labels.%s' must be a string", lk);
                    return NULL;
                }
                o->labels[o->job.n_labels].name = xstrdup(lk);
                o->labels[o->job.n_labels].value = xstrdup(json_string_value(lv));
                o->job.n_labels++;
            }
        }
        else if (strcmp(key, "requested") == 0) {
            const char *rk;
            json_t *rv;
            char why[256];

            if (!json_is_object(v)) {
                fail(o, err, "'requested' must be an object");
                return NULL;
            }
            json_object_foreach(v, rk, rv)
            {
                if (requested_value(rk, rv, &o->job.requested, why, sizeof(why)) < 0) {
                    fail(o, err, "%s", why);
                    return NULL;
                }
            }
        }
        else {
            fail(o, err,
                 "unknown key '%s' (allowed: id, task, pool, argv, workdir, repository, "
                 "provider, labels, requested)",
                 key);
            return NULL;
        }
    }
    if (o->strings[2] == NULL) {
        fail(o, err, "'pool' is required (\"ci\" or \"agent\")");
        return NULL;
    }
    o->job.id = o->strings[0];
    o->job.task = o->strings[1];
    o->job.pool = o->strings[2];
    o->job.workdir = o->strings[3];
    o->job.repository = o->strings[4];
    o->job.provider = o->strings[5];
    o->job.argv = (const char *const *)o->argv;
    o->job.labels = o->labels;
    return &o->job;
}

static json_t *part_json(const struct sbx_policy_decision *d, int part, json_t *obj)
{
    json_object_set_new(obj, "decided_by",
                        d->decided_by[part] ? json_string(d->decided_by[part]) : json_null());
    json_object_set_new(obj, "reason",
                        d->reason[part] ? json_string(d->reason[part]) : json_null());
    return obj;
}

json_t *sbx_policy_decision_to_json(const struct sbx_policy_decision *d)
{
    static const char *const clamp_names[] = {"cpus", "memory", "disk", "pids", "idle", "max"};
    json_t *limits = json_object();
    json_t *clamped = json_array();
    json_t *allow = json_array();
    json_t *egress = json_object();
    json_t *slot = json_object();
    json_t *root = json_object();

    json_object_set_new(limits, "cpus", json_real(d->limits.cpus));
    json_object_set_new(limits, "memory", json_integer(d->limits.memory));
    json_object_set_new(limits, "disk", json_integer(d->limits.disk));
    json_object_set_new(limits, "pids", json_integer(d->limits.pids));
    json_object_set_new(limits, "idle", json_integer(d->limits.idle));
    json_object_set_new(limits, "max", json_integer(d->limits.max));
    for (int i = 0; i < 6; i++) {
        if (d->clamped & (1u << i)) {
            json_array_append_new(clamped, json_string(clamp_names[i]));
        }
    }
    json_object_set_new(limits, "clamped", clamped);
    json_object_set_new(root, "limits", part_json(d, SBX_POLICY_LIMITS, limits));

    for (size_t i = 0; i < d->n_egress_allow; i++) {
        json_array_append_new(allow, json_string(d->egress_allow[i]));
    }
    json_object_set_new(egress, "allow", allow);
    json_object_set_new(root, "egress", part_json(d, SBX_POLICY_EGRESS, egress));

    json_object_set_new(slot, "class", d->slot_class ? json_string(d->slot_class) : json_null());
    json_object_set_new(root, "slot", part_json(d, SBX_POLICY_SLOTS, slot));
    return root;
}
