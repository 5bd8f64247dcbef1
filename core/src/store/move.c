/* move.c - a job's transitions, in one function: queued -> running (a slot
 * granted), running: ready (its sandbox up), and the end. Each write may be
 * fenced by the job's claim token (docs/runner.md, "Several boxes"). The
 * states each step leaves and enters are the table of store/states.h, which
 * the runner checks its jobs in memory against too (runner/jobstate.c). */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "store/states.h"
#include "store/store_internal.h"

/* The clear error after an UPDATE that matched no row: the job is unknown,
 * was taken over (its token moved on: ESTALE), or is in another state. */
static int no_row(struct sbx_store *st, const char *id, int64_t token, const char *want,
                  sbx_error_t **err)
{
    struct sbx_job_rec rec = {0};
    sbx_error_t *e = NULL;

    if (sbx_store_job_get(st, id, &rec, &e) < 0) {
        int code = e->code;

        sbx_error_free(&e);
        if (code == SBX_E_NOTFOUND) {
            return sbx_error_set(err, SBX_E_NOTFOUND, "store: no job '%s'", id);
        }
        return sbx_store_fail(st, err, "read job");
    }
    if (token > 0 && rec.token != token) {
        sbx_error_set(err, ESTALE,
                      "store: job %s was taken over (its claim token is %lld, this box holds "
                      "%lld): the write is refused",
                      id, (long long)rec.token, (long long)token);
    }
    else {
        sbx_error_set(err, EINVAL, "store: job %s is %s, not %s", id, sbx_job_state_name(rec.state),
                      want);
    }
    sbx_job_rec_clear(&rec);
    return -1;
}

/* sql: $1 id, $2 at, $3..$5 text, $6 the token (0: unfenced). */
int sbx_store_update_job(struct sbx_store *st, const char *id, int64_t token, const char *sql,
                         const char *want, const char *t1, const char *t2, const char *t3,
                         int64_t at, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = NULL;

    if (id == NULL) {
        return sbx_error_set(err, EINVAL, "store: no job id given");
    }
    s = sbx_q_prepare(st, sql, err);
    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, id);
    sbx_q_int64(s, 2, at ? at : sbx_store_now());
    sbx_q_text(s, 3, t1);
    sbx_q_text(s, 4, t2);
    sbx_q_text(s, 5, t3);
    sbx_q_int64(s, 6, token);
    if (sbx_q_step(s, "update job", err) < 0) {
        return -1;
    }
    if (sbx_q_changes(s) == 0) {
        return no_row(st, id, token, want, err);
    }
    return 0;
}

#define FENCE " AND ($6 = 0 OR token = $6)"

static int job_end(struct sbx_store *st, const char *id, int64_t token,
                   const struct sbx_job_end *end, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = NULL;
    enum sbx_job_state state = end->state;
    const struct sbx_job_edge *e = sbx_job_edge_of(SBX_JOB_STEP_END);

    if ((unsigned)state > SBX_JOB_INTERRUPTED || (e->to & SBX_STATE_BIT(state)) == 0) {
        return sbx_error_set(err, EINVAL,
                             "store: job %s: a job ends finished, cancelled or "
                             "interrupted, not %s",
                             id, sbx_job_state_name(state));
    }
    if ((end->reason && !sbx_store_text_ok(end->reason)) || end->egress_allowed < 0 ||
        end->egress_denied < 0 || end->exit_status > 255) {
        return sbx_error_set(err, EINVAL,
                             "store: job %s: bad reason, egress count or exit "
                             "status",
                             id);
    }
    s = sbx_q_prepare(st,
                      "UPDATE jobs SET state = $2, exit_status = $3, reason = $4, "
                      "egress_allowed = $5, egress_denied = $7, finished_at = $8 "
                      "WHERE id = $1 AND " SBX_FROM_JOB_LIVE_SQL FENCE,
                      err);
    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, id);
    sbx_q_text(s, 2, sbx_job_state_name(state));
    if (end->exit_status < 0) {
        sbx_q_null(s, 3);
    }
    else {
        sbx_q_int64(s, 3, end->exit_status);
    }
    sbx_q_text(s, 4, end->reason);
    sbx_q_int64(s, 5, end->egress_allowed);
    sbx_q_int64(s, 6, token);
    sbx_q_int64(s, 7, end->egress_denied);
    sbx_q_int64(s, 8, end->at ? end->at : sbx_store_now());
    if (sbx_q_step(s, "end job", err) < 0) {
        return -1;
    }
    if (sbx_q_changes(s) == 0) {
        return no_row(st, id, token, e->want, err);
    }
    return 0;
}

int sbx_store_job_move(struct sbx_store *st, const struct sbx_job_move *m, sbx_error_t **err)
{
    if (m == NULL || m->id == NULL) {
        return sbx_error_set(err, EINVAL, "store: no job id given");
    }
    if (m->token < 0) {
        return sbx_error_set(err, EINVAL, "store: job %s: a negative claim token", m->id);
    }
    switch (m->step) {
    case SBX_JOB_STEP_GRANTED:
        return sbx_store_update_job(st, m->id, m->token,
                                    "UPDATE jobs SET state = 'running', granted_at = $2 "
                                    "WHERE id = $1 AND " SBX_FROM_QUEUED_SQL FENCE,
                                    sbx_job_edge_of(m->step)->want, NULL, NULL, NULL, m->at, err);
    case SBX_JOB_STEP_READY:
        if ((m->task && !sbx_store_id_ok(m->task)) ||
            (m->provider && !sbx_store_text_ok(m->provider)) ||
            (m->image && !sbx_store_text_ok(m->image))) {
            return sbx_error_set(err, EINVAL, "store: job %s: bad task, provider or image", m->id);
        }
        return sbx_store_update_job(st, m->id, m->token,
                                    "UPDATE jobs SET ready_at = $2, task = COALESCE($3, task), "
                                    "provider = COALESCE($4, provider), image = COALESCE($5, "
                                    "image) WHERE id = $1 AND " SBX_FROM_RUNNING_SQL FENCE,
                                    sbx_job_edge_of(m->step)->want, m->task, m->provider, m->image,
                                    m->at, err);
    case SBX_JOB_STEP_END:
        return job_end(st, m->id, m->token, &m->end, err);
    }
    return sbx_error_set(err, EINVAL, "store: job %s: unknown step %d", m->id, (int)m->step);
}

int sbx_store_job_granted(struct sbx_store *st, const char *id, int64_t at, sbx_error_t **err)
{
    return sbx_store_job_move(
        st, &(struct sbx_job_move){.id = id, .step = SBX_JOB_STEP_GRANTED, .at = at}, err);
}

int sbx_store_job_ready(struct sbx_store *st, const char *id, const char *task,
                        const char *provider, const char *image, int64_t at, sbx_error_t **err)
{
    return sbx_store_job_move(st,
                              &(struct sbx_job_move){.id = id,
                                                     .step = SBX_JOB_STEP_READY,
                                                     .task = task,
                                                     .provider = provider,
                                                     .image = image,
                                                     .at = at},
                              err);
}

int sbx_store_job_end(struct sbx_store *st, const char *id, const struct sbx_job_end *end,
                      sbx_error_t **err)
{
    if (end == NULL) {
        return sbx_error_set(err, EINVAL, "store: job %s: no end given", id ? id : "(null)");
    }
    return sbx_store_job_move(
        st, &(struct sbx_job_move){.id = id, .step = SBX_JOB_STEP_END, .end = *end}, err);
}
