/* list.c - a page of job records for GET /v1/jobs (docs/api.md, "Listing
 * jobs"): newest first, filtered in SQL, bounded by the caller's limit. */
#include <errno.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/xalloc.h"

int sbx_store_job_page(struct sbx_store *st, const struct sbx_job_filter *f,
                       struct sbx_job_rec **out, size_t *n, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = NULL;
    struct sbx_job_rec *recs = NULL;
    size_t count = 0;
    int rc = 0;

    *out = NULL;
    *n = 0;
    if (f->limit == 0 || f->limit > SBX_STORE_PAGE_MAX) {
        return sbx_error_set(err, EINVAL, "store: a page holds 1-%d jobs, not %zu",
                             SBX_STORE_PAGE_MAX, f->limit);
    }
    if (f->state >= 0 && sbx_job_state_name((enum sbx_job_state)f->state)[0] == 'u') {
        return sbx_error_set(err, EINVAL, "store: unknown job state %d", f->state);
    }
    /* every filter is bound; NULL (or 0) leaves it out. (changed) Each
     * optional one is CAST: PostgreSQL cannot infer the type of a parameter
     * that is only tested for NULL ("could not determine data type") */
    s = sbx_q_prepare(st,
                      "SELECT " SBX_JOB_COLUMNS " FROM jobs"
                      " WHERE (CAST($1 AS TEXT) IS NULL OR state = $1)"
                      " AND (CAST($2 AS TEXT) IS NULL OR pool = $2)"
                      " AND (CAST($3 AS TEXT) IS NULL OR client = $3) AND queued_at >= $4"
                      " AND (CAST($5 AS BIGINT) = 0 OR seq < $5) ORDER BY seq DESC LIMIT $6",
                      err);
    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, f->state >= 0 ? sbx_job_state_name((enum sbx_job_state)f->state) : NULL);
    sbx_q_text(s, 2, f->pool);
    sbx_q_text(s, 3, f->client);
    sbx_q_int64(s, 4, f->since);
    sbx_q_int64(s, 5, f->before_seq);
    sbx_q_int64(s, 6, (int64_t)f->limit);
    recs = xcalloc(f->limit, sizeof(*recs));
    while (count < f->limit && (rc = sbx_q_step(s, "list jobs", err)) == 1) {
        sbx_store_row_to_job(s, &recs[count++]);
    }
    if (rc < 0) {
        sbx_job_rec_free_array(recs, count);
        return -1;
    }
    *out = recs;
    *n = count;
    return 0;
}

int sbx_store_ping(struct sbx_store *st, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = sbx_q_prepare(st, "SELECT count(*) FROM jobs", err);

    if (s == NULL) {
        return -1;
    }
    if (sbx_q_step(s, "read jobs", err) != 1) {
        return -1;
    }
    return 0;
}
