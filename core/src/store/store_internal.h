/* store_internal.h - shared by store.c, task.c and record.c only. */
#ifndef SBX_STORE_STORE_INTERNAL_H
#define SBX_STORE_STORE_INTERNAL_H

#include <sqlite3.h>

#include "store/store.h"

struct sbx_store {
    sqlite3 *db;
    char *path;
};

/* -1 with "store: PATH: WHAT: sqlite message" */
int sbx_store_fail(struct sbx_store *st, sbx_error_t **err, const char *what);
sqlite3_stmt *sbx_store_prepare(struct sbx_store *st, const char *sql, sbx_error_t **err);
int sbx_store_exec(struct sbx_store *st, const char *sql, sbx_error_t **err);
int64_t sbx_store_now(void);
/* binds text or NULL */
void sbx_store_bind_text(sqlite3_stmt *s, int i, const char *v);
char *sbx_store_col_text(sqlite3_stmt *s, int i);

static inline void sbx_store_finalizep(sqlite3_stmt **s)
{
    if (*s != NULL) {
        sqlite3_finalize(*s);
        *s = NULL;
    }
}
#define cleanup_stmt __attribute__((cleanup(sbx_store_finalizep)))

/* the job columns in the order record.c reads them */
#define SBX_JOB_COLUMNS                                                                            \
    "seq, id, task, pool, class, argv, labels, worktree, provider, image, cpus, memory, "          \
    "disk, pids, idle, max_life, state, queued_at, granted_at, ready_at, finished_at, "            \
    "exit_status, reason, egress_allowed, egress_denied, leases, env, client, isolation, "         \
    "exec_path"
int sbx_store_row_to_job(sqlite3_stmt *s, struct sbx_job_rec *out);

#endif
