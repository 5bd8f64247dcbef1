/* where.c - which box of a fleet holds a job or a live task, and its API
 * address (docs/runner.md, "Several boxes": forwarding to the owning box);
 * whether the database is reachable at all (the API's 503). */
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/xalloc.h"

void sbx_store_owner_clear(struct sbx_store_owner *o)
{
    free(o->box);
    free(o->api);
    memset(o, 0, sizeof(*o));
}

int sbx_store_where(struct sbx_store *st, int task, const char *id, struct sbx_store_owner *out,
                    sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;
    int rc;

    memset(out, 0, sizeof(*out));
    if (st->pg == NULL || id == NULL) {
        return 0; /* one box: everything is here */
    }
    q = sbx_q_prepare(st,
                      task ? "SELECT t.box, b.api, b.lease_until FROM tasks t LEFT JOIN boxes b ON "
                             "b.id = t.box WHERE t.id = $1 AND t.state IN ('starting', 'ready')"
                           : "SELECT j.box, b.api, b.lease_until FROM jobs j LEFT JOIN boxes b ON "
                             "b.id = j.box WHERE j.id = $1",
                      err);
    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, id);
    rc = sbx_q_step(q, task ? "locating a task" : "locating a job", err);
    if (rc <= 0 || sbx_q_col_null(q, 0)) {
        return rc < 0 ? -1 : 0;
    }
    out->box = sbx_q_col_strdup(q, 0);
    out->api = sbx_q_col_null(q, 1) ? NULL : sbx_q_col_strdup(q, 1);
    out->lease_until = sbx_q_col_null(q, 2) ? 0 : sbx_q_col_int64(q, 2);
    out->alive = out->lease_until > sbx_store_now();
    return 1;
}

int sbx_store_job_own(struct sbx_store *st, const char *id, sbx_error_t **err)
{
    cleanup_q struct sbx_q *q = NULL;

    if (st->pg == NULL || st->box == NULL) {
        return 0;
    }
    q = sbx_q_prepare(st, "UPDATE jobs SET box = $2 WHERE id = $1 AND box IS NULL", err);
    if (q == NULL) {
        return -1;
    }
    sbx_q_text(q, 1, id);
    sbx_q_text(q, 2, st->box);
    return sbx_q_step(q, "recording a job's box", err) < 0 ? -1 : 0;
}

int sbx_store_down(struct sbx_store *st)
{
    return st != NULL && st->pg != NULL &&
           (PQstatus(st->pg) != CONNECTION_OK || st->timed_out ||
            sbx_store_gate_down(st->gate) != 0);
}
