/* record.c - job and task records: names, freeing, rows, JSON. */
#include "store/store_internal.h"

#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

static const char *const job_states[] = {"queued", "running", "finished", "cancelled",
                                         "interrupted"};
static const char *const task_states[] = {"starting", "ready", "ended", "interrupted"};

const char *sbx_job_state_name(enum sbx_job_state st)
{
    return (unsigned)st < sizeof(job_states) / sizeof(job_states[0]) ? job_states[st] : "unknown";
}

int sbx_job_state_parse(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof(job_states) / sizeof(job_states[0]); i++) {
        if (strcmp(name, job_states[i]) == 0) {
            return (int)i;
        }
    }
    return -1;
}

const char *sbx_task_state_name(enum sbx_task_state st)
{
    return (unsigned)st < sizeof(task_states) / sizeof(task_states[0]) ? task_states[st]
                                                                       : "unknown";
}

void sbx_job_rec_clear(struct sbx_job_rec *rec)
{
    if (rec == NULL) {
        return;
    }
    free(rec->id);
    free(rec->task);
    free(rec->pool);
    free(rec->cls);
    json_decref(rec->argv);
    json_decref(rec->labels);
    json_decref(rec->env);
    json_decref(rec->isolation);
    free(rec->exec_path);
    free(rec->box);
    free(rec->worktree);
    free(rec->client);
    free(rec->provider);
    free(rec->image);
    free(rec->reason);
    for (size_t i = 0; i < rec->n_leases; i++) {
        free(rec->leases[i]);
    }
    free(rec->leases);
    memset(rec, 0, sizeof(*rec));
}

void sbx_job_rec_free_array(struct sbx_job_rec *recs, size_t n)
{
    for (size_t i = 0; recs != NULL && i < n; i++) {
        sbx_job_rec_clear(&recs[i]);
    }
    free(recs);
}

void sbx_task_rec_clear(struct sbx_task_rec *rec)
{
    if (rec == NULL) {
        return;
    }
    free(rec->id);
    free(rec->sandbox_id);
    free(rec->provider);
    free(rec->pool);
    free(rec->reason);
    memset(rec, 0, sizeof(*rec));
}

static json_t *col_json(struct sbx_q *s, int i)
{
    const char *t = sbx_q_col_text(s, i);

    return t ? json_loads(t, 0, NULL) : NULL;
}

int sbx_store_row_to_job(struct sbx_q *s, struct sbx_job_rec *out)
{
    json_t *leases;
    int st;

    memset(out, 0, sizeof(*out));
    out->seq = sbx_q_col_int64(s, 0);
    out->id = sbx_q_col_strdup(s, 1);
    out->task = sbx_q_col_strdup(s, 2);
    out->pool = sbx_q_col_strdup(s, 3);
    out->cls = sbx_q_col_strdup(s, 4);
    out->argv = col_json(s, 5);
    out->labels = col_json(s, 6);
    out->worktree = sbx_q_col_strdup(s, 7);
    out->provider = sbx_q_col_strdup(s, 8);
    out->image = sbx_q_col_strdup(s, 9);
    out->limits.cpus = sbx_q_col_double(s, 10);
    out->limits.memory = sbx_q_col_int64(s, 11);
    out->limits.disk = sbx_q_col_int64(s, 12);
    out->limits.pids = sbx_q_col_int64(s, 13);
    out->limits.idle = sbx_q_col_int64(s, 14);
    out->limits.max = sbx_q_col_int64(s, 15);
    st = sbx_job_state_parse(sbx_q_col_text(s, 16));
    out->state = st < 0 ? SBX_JOB_INTERRUPTED : (enum sbx_job_state)st;
    out->queued_at = sbx_q_col_int64(s, 17);
    out->granted_at = sbx_q_col_int64(s, 18);
    out->ready_at = sbx_q_col_int64(s, 19);
    out->finished_at = sbx_q_col_int64(s, 20);
    out->has_exit_status = !sbx_q_col_null(s, 21);
    out->exit_status = (int)sbx_q_col_int64(s, 21);
    out->reason = sbx_q_col_strdup(s, 22);
    out->egress_allowed = sbx_q_col_int64(s, 23);
    out->egress_denied = sbx_q_col_int64(s, 24);
    leases = col_json(s, 25);
    if (json_is_array(leases) && json_array_size(leases) > 0) {
        out->n_leases = json_array_size(leases);
        out->leases = xcalloc(out->n_leases, sizeof(*out->leases));
        for (size_t i = 0; i < out->n_leases; i++) {
            const char *v = json_string_value(json_array_get(leases, i));

            out->leases[i] = xstrdup(v ? v : "");
        }
    }
    json_decref(leases);
    out->client = sbx_q_col_strdup(s, 27);
    out->env = col_json(s, 26);
    if (!json_is_object(out->env) || json_object_size(out->env) == 0) {
        json_decref(out->env);
        out->env = NULL;
    }
    out->exec_path = sbx_q_col_strdup(s, 29);
    out->box = sbx_q_col_strdup(s, 30);
    out->token = sbx_q_col_int64(s, 31);
    out->isolation = col_json(s, 28);
    if (!json_is_object(out->isolation)) {
        json_decref(out->isolation);
        out->isolation = NULL;
    }
    return 0;
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

static json_t *secs_or_null(int64_t ms)
{
    return ms ? json_real((double)ms / 1000.0) : json_null();
}

json_t *sbx_job_rec_to_json(const struct sbx_job_rec *rec)
{
    json_t *leases = json_array();
    json_t *o;

    for (size_t i = 0; i < rec->n_leases; i++) {
        json_array_append_new(leases, json_string(rec->leases[i]));
    }
    o = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:s, "
                  "s:{s:f, s:I, s:I, s:I, s:I, s:I}, s:o, s:o, s:o, s:o, s:o, "
                  "s:{s:I, s:I}, s:o, s:o, s:o, s:o, "
                  "s:{s:o, s:o, s:o, s:o}}",
                  "id", str_or_null(rec->id), "task", str_or_null(rec->task), "pool",
                  str_or_null(rec->pool), "class", str_or_null(rec->cls), "provider",
                  str_or_null(rec->provider), "image", str_or_null(rec->image), "state",
                  sbx_job_state_name(rec->state), "limits", "cpus", rec->limits.cpus, "memory",
                  (json_int_t)rec->limits.memory, "disk", (json_int_t)rec->limits.disk, "pids",
                  (json_int_t)rec->limits.pids, "idle", (json_int_t)rec->limits.idle, "max",
                  (json_int_t)rec->limits.max, "created_at", secs_or_null(rec->queued_at),
                  "started_at", secs_or_null(rec->granted_at), "ended_at",
                  secs_or_null(rec->finished_at), "exit_status",
                  rec->has_exit_status ? json_integer(rec->exit_status) : json_null(), "reason",
                  str_or_null(rec->reason), "egress", "allowed", (json_int_t)rec->egress_allowed,
                  "denied", (json_int_t)rec->egress_denied, "credential_leases", leases, "argv",
                  rec->argv ? json_incref(rec->argv) : json_array(), "labels",
                  rec->labels ? json_incref(rec->labels) : json_object(), "worktree",
                  str_or_null(rec->worktree), "timings", "queued_at", secs_or_null(rec->queued_at),
                  "granted_at", secs_or_null(rec->granted_at), "ready_at",
                  secs_or_null(rec->ready_at), "finished_at", secs_or_null(rec->finished_at));
    if (o == NULL) {
        abort();
    }
    {
        json_t *names = json_array();
        const char *k;
        json_t *v;

        json_object_foreach(rec->env, k, v)
        {
            json_array_append_new(names, json_string(k));
        }
        json_object_set_new(o, "env_names", names);
    }
    json_object_set_new(o, "client", json_string(rec->client ? rec->client : ""));
    /* "exec_path": how the command ran (null until it did), as `sbx run --json` */
    json_object_set_new(o, "exec_path", rec->exec_path ? json_string(rec->exec_path) : json_null());
    /* (added) "box": the fleet box that holds or held it (absent on one box) */
    if (rec->box != NULL) {
        json_object_set_new(o, "box", json_string(rec->box));
    }
    /* "isolation" (null until the task ran) and "unenforced", as task.json */
    json_object_set(o, "isolation",
                    rec->isolation ? json_object_get(rec->isolation, "isolation") : json_null());
    /* (added) "warm": the job's task claimed a sandbox of the warm pool (kept
     * beside the isolation, which is written when the task is ready) */
    json_object_set(o, "warm",
                    rec->isolation && json_object_get(rec->isolation, "warm")
                        ? json_object_get(rec->isolation, "warm")
                        : json_null());
    /* (added) "resized": a warm sandbox given the job's memory, CPUs or pids
     * by the engine's update call at the claim (null before the task ran) */
    json_object_set(o, "resized",
                    rec->isolation && json_object_get(rec->isolation, "resized")
                        ? json_object_get(rec->isolation, "resized")
                        : json_null());
    if (rec->isolation != NULL && json_object_get(rec->isolation, "unenforced") != NULL) {
        json_object_set(o, "unenforced", json_object_get(rec->isolation, "unenforced"));
    }
    return o;
}
