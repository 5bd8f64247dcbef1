/* db.h - the store's one SQL layer over its two engines: SQLite (one box, a
 * file) and PostgreSQL (a fleet of boxes, docs/runner.md "Several boxes").
 *
 * Every statement in store/ is written once, with $1..$N placeholders (SQLite
 * binds them by name), and runs on either engine through these calls. Values
 * are bound as text, 64-bit integers, doubles or NULL; columns are read back
 * the same way. Only the schema and the few engine-specific clauses differ.
 */
#ifndef SBX_STORE_DB_H
#define SBX_STORE_DB_H

#include <stdint.h>

#include "util/error.h"

struct sbx_store;
struct sbx_q;

/* A statement of st. NULL with *err set when the SQL does not compile. */
struct sbx_q *sbx_q_prepare(struct sbx_store *st, const char *sql, sbx_error_t **err);
void sbx_q_free(struct sbx_q *q);
/* Binds $i (1-based); a $i the statement does not use is ignored. v NULL: NULL. */
void sbx_q_text(struct sbx_q *q, int i, const char *v);
void sbx_q_int64(struct sbx_q *q, int i, int64_t v);
void sbx_q_double(struct sbx_q *q, int i, double v);
void sbx_q_null(struct sbx_q *q, int i);
/* Runs the statement or moves to its next row: 1 a row, 0 done, -1 error
 * ("store: WHERE: WHAT: engine message"; code EEXIST for a unique key
 * violation). */
int sbx_q_step(struct sbx_q *q, const char *what, sbx_error_t **err);
/* Rows the last INSERT/UPDATE/DELETE changed. */
int64_t sbx_q_changes(struct sbx_q *q);
/* Columns of the current row (0-based). Text is NULL for SQL NULL and valid
 * until the next step. */
const char *sbx_q_col_text(struct sbx_q *q, int i);
char *sbx_q_col_strdup(struct sbx_q *q, int i);
int64_t sbx_q_col_int64(struct sbx_q *q, int i);
double sbx_q_col_double(struct sbx_q *q, int i);
int sbx_q_col_null(struct sbx_q *q, int i);

static inline void sbx_q_freep(struct sbx_q **q)
{
    sbx_q_free(*q);
    *q = NULL;
}
#define cleanup_q __attribute__((cleanup(sbx_q_freep)))

/* Runs one or more statements with no parameters. */
int sbx_store_exec(struct sbx_store *st, const char *sql, sbx_error_t **err);
/* A write transaction (SQLite: BEGIN IMMEDIATE). */
int sbx_store_begin(struct sbx_store *st, sbx_error_t **err);
int sbx_store_commit(struct sbx_store *st, sbx_error_t **err);
void sbx_store_rollback(struct sbx_store *st);
/* 1 on PostgreSQL, 0 on SQLite. */
int sbx_store_is_pg(const struct sbx_store *st);

#endif
