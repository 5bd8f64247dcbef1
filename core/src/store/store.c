/* store.c - open the SQLite store, the schema, and the job calls. */
#include "store/store_internal.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/envname.h"
#include "util/xalloc.h"

#define BUSY_TIMEOUT_MS 5000
#define MAX_ARGV 4096
#define MAX_JSON_BYTES (1 << 20)
#define MAX_LEASES 64
#define MAX_TEXT 4096

/* The schema's version (PRAGMA user_version, SBX_STORE_SQLITE_VERSION).
 * 1: the first tables. 2: jobs.env, the command's variables as a JSON object
 * (docs/runner.md, Store). 3: jobs.client, the API client that submitted the
 * job ('' before). 4: jobs.isolation, {"isolation", "unenforced"} of the
 * job's task (sandbox/caps.h). 5: jobs.exec_path, how the job's command ran
 * ("agent" or "engine"). 6: jobs.box, jobs.token and tasks.box: the fleet's
 * claim columns, kept the same on both engines (NULL and 0 on one box;
 * store/pg.c). 7: the task_owners table, who owns each task id (docs/runner.md,
 * "Task ids"), filled from the jobs of older files. The columns are schema.c's; each migration adds
 * the columns of its version and keeps every row; a newer file than this code is refused. */
#define SCHEMA_VERSION SBX_STORE_SQLITE_VERSION

int64_t sbx_store_now(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int sbx_store_id_ok(const char *id)
{
    size_t n = id ? strlen(id) : 0;

    if (n == 0 || n > 63) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char c = id[i];

        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == ':' || c == '-')) {
            return 0;
        }
    }
    return 1;
}

static int user_version(struct sbx_store *st, int *out, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = sbx_q_prepare(st, "PRAGMA user_version", err);

    if (s == NULL) {
        return -1;
    }
    if (sbx_q_step(s, "read the schema version", err) != 1) {
        return err && *err ? -1 : sbx_store_fail(st, err, "read the schema version");
    }
    *out = (int)sbx_q_col_int64(s, 0);
    return 0;
}

/* Creates the tables or brings an older file up to SCHEMA_VERSION, in one
 * write transaction (two processes opening an old file migrate it once). */
static int migrate(struct sbx_store *st, sbx_error_t **err)
{
    int v = 0;

    if (sbx_store_begin(st, err) < 0) {
        return -1;
    }
    if (user_version(st, &v, err) < 0) {
        goto fail;
    }
    if (v > SCHEMA_VERSION) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "store: %s: schema version %d is newer than this sbx knows (%d); use "
                      "the sbx that wrote it",
                      st->path, v, SCHEMA_VERSION);
        goto fail;
    }
    if (v == 0) {
        /* a new file is made as version 1 was, then migrated like an old one */
        cleanup_free char *schema = sbx_store_schema_create(SBX_DIALECT_SQLITE, 1);

        if (sbx_store_exec(st, schema, err) < 0) {
            goto fail;
        }
    }
    for (int i = v + 1; i <= SCHEMA_VERSION; i++) {
        cleanup_free char *add = sbx_store_schema_add(SBX_DIALECT_SQLITE, i);
        char pragma[64];

        snprintf(pragma, sizeof(pragma), "PRAGMA user_version = %d;", i);
        if ((add[0] != '\0' && sbx_store_exec(st, add, err) < 0) ||
            (i == 7 && sbx_store_exec(st, SBX_STORE_OWNERS_BACKFILL, err) < 0) ||
            sbx_store_exec(st, pragma, err) < 0) {
            sbx_error_wrap(err, "store: %s: migrating the schema to version %d", st->path, i);
            goto fail;
        }
    }
    return sbx_store_commit(st, err);
fail:
    sbx_store_rollback(st);
    return -1;
}

void sbx_store_set_box(struct sbx_store *st, const char *box)
{
    free(st->box);
    st->box = box ? xstrdup(box) : NULL;
}

int sbx_store_location_is_pg(const char *location)
{
    return location != NULL && (strncmp(location, "postgresql://", 13) == 0 ||
                                strncmp(location, "postgres://", 11) == 0);
}

struct sbx_store *sbx_store_open(const char *path, sbx_error_t **err)
{
    return sbx_store_open_ex(path, NULL, err);
}

struct sbx_store *sbx_store_open_ex(const char *path, const char *password_env, sbx_error_t **err)
{
    struct sbx_store *st;
    int rc;

    if (path == NULL || path[0] == '\0') {
        sbx_error_set(err, EINVAL, "store: no path given (runner.state)");
        return NULL;
    }
    st = xcalloc(1, sizeof(*st));
    st->path = xstrdup(path);
    if (sbx_store_location_is_pg(path)) {
        if (sbx_store_pg_open(st, path, password_env, err) < 0) {
            sbx_store_close(st);
            return NULL;
        }
        return st;
    }
    rc = sqlite3_open_v2(path, &st->db,
                         SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, NULL);
    if (rc != SQLITE_OK) {
        sbx_error_set(err, SBX_E_GENERIC, "store: %s: cannot open: %s", path,
                      st->db ? sqlite3_errmsg(st->db) : sqlite3_errstr(rc));
        sbx_store_close(st);
        return NULL;
    }
    sqlite3_busy_timeout(st->db, BUSY_TIMEOUT_MS);
    /* WAL: readers do not block the writer; FULL: a commit survives power loss */
    if (sbx_store_exec(st, "PRAGMA journal_mode = WAL", err) < 0 ||
        sbx_store_exec(st, "PRAGMA synchronous = FULL", err) < 0 || migrate(st, err) < 0) {
        sbx_store_close(st);
        return NULL;
    }
    return st;
}

int sbx_store_reusable(struct sbx_store *st)
{
    if (st == NULL) {
        return 0;
    }
    if (st->pg != NULL) {
        /* reads what the server sent meanwhile without waiting (libpq's socket
         * never blocks here): a server that restarted closed the connection,
         * which this turns into CONNECTION_BAD */
        PQconsumeInput(st->pg);
        return PQstatus(st->pg) == CONNECTION_OK && PQtransactionStatus(st->pg) == PQTRANS_IDLE;
    }
    return st->db != NULL && sqlite3_get_autocommit(st->db);
}

void sbx_store_close(struct sbx_store *st)
{
    if (st == NULL) {
        return;
    }
    if (st->db != NULL) {
        sqlite3_close(st->db);
    }
    if (st->pg != NULL) {
        PQfinish(st->pg);
    }
    free(st->path);
    free(st->box);
    free(st);
}

/* ---- validation ---- */

int sbx_store_text_ok(const char *s)
{
    size_t n = 0;

    for (; s[n] != '\0'; n++) {
        if ((unsigned char)s[n] < 0x20 || s[n] == 0x7f) {
            return 0;
        }
    }
    return n > 0 && n <= MAX_TEXT;
}

/* The job's ids, pool and class. */
static int check_job_names(const struct sbx_job_rec *j, const char *id, sbx_error_t **err)
{
    if (!sbx_id_valid(j->id, SBX_ID_NAME)) {
        return sbx_error_set(err, EINVAL,
                             "store: job id must be 1-63 characters of "
                             "[A-Za-z0-9._:-]");
    }
    if (j->task != NULL && !sbx_id_valid(j->task, SBX_ID_NAME)) {
        return sbx_error_set(err, EINVAL,
                             "store: job %s: task id must be 1-63 characters of "
                             "[A-Za-z0-9._:-]",
                             id);
    }
    if (j->pool == NULL || (strcmp(j->pool, "ci") != 0 && strcmp(j->pool, "agent") != 0)) {
        return sbx_error_set(err, EINVAL, "store: job %s: pool must be 'ci' or 'agent'", id);
    }
    if (j->cls == NULL || (strcmp(j->cls, "light") != 0 && strcmp(j->cls, "heavy") != 0)) {
        return sbx_error_set(err, EINVAL, "store: job %s: class must be 'light' or 'heavy'", id);
    }
    return 0;
}

/* argv is an array of 1..MAX_ARGV strings (its size is checked after env). */
static int check_job_argv(const struct sbx_job_rec *j, const char *id, sbx_error_t **err)
{
    size_t i;
    json_t *v;

    if (!json_is_array(j->argv) || json_array_size(j->argv) == 0 ||
        json_array_size(j->argv) > MAX_ARGV) {
        return sbx_error_set(err, EINVAL,
                             "store: job %s: argv must be an array of 1-%d "
                             "strings",
                             id, MAX_ARGV);
    }
    json_array_foreach(j->argv, i, v)
    {
        if (!json_is_string(v)) {
            return sbx_error_set(err, EINVAL, "store: job %s: argv[%zu] is not a string", id, i);
        }
    }
    return 0;
}

static int check_job_labels(const struct sbx_job_rec *j, const char *id, sbx_error_t **err)
{
    const char *k;
    json_t *v;

    if (j->labels == NULL) {
        return 0;
    }
    if (!json_is_object(j->labels)) {
        return sbx_error_set(err, EINVAL, "store: job %s: labels must be an object", id);
    }
    json_object_foreach(j->labels, k, v)
    {
        if (!json_is_string(v)) {
            return sbx_error_set(err, EINVAL, "store: job %s: label '%s' is not a string", id, k);
        }
    }
    return 0;
}

/* The length of v as compact JSON (0 when it cannot be dumped). */
static size_t json_dump_len(const json_t *v)
{
    char *dump = json_dumps(v, JSON_COMPACT);
    size_t dump_len = dump ? strlen(dump) : 0;

    free(dump);
    return dump_len;
}

static int check_job_env(const struct sbx_job_rec *j, const char *id, sbx_error_t **err)
{
    const char *k;
    json_t *v;

    if (j->env == NULL) {
        return 0;
    }
    if (!json_is_object(j->env)) {
        return sbx_error_set(err, EINVAL, "store: job %s: env must be an object", id);
    }
    json_object_foreach(j->env, k, v)
    {
        if (!sbx_env_name_valid(k, strlen(k))) {
            return sbx_error_set(err, EINVAL,
                                 "store: job %s: env.%.80s: invalid variable name "
                                 "(" SBX_ENV_NAME_RULE ")",
                                 id, k);
        }
        if (!json_is_string(v)) {
            return sbx_error_set(err, EINVAL, "store: job %s: env.%s is not a string", id, k);
        }
    }
    if (json_dump_len(j->env) > MAX_JSON_BYTES) {
        return sbx_error_set(err, EINVAL, "store: job %s: env is over %d bytes", id,
                             MAX_JSON_BYTES);
    }
    return 0;
}

/* The texts, limits and credential leases. */
static int check_job_rest(const struct sbx_job_rec *j, const char *id, sbx_error_t **err)
{
    if ((j->worktree && !sbx_store_text_ok(j->worktree)) ||
        (j->provider && !sbx_store_text_ok(j->provider)) ||
        (j->image && !sbx_store_text_ok(j->image)) ||
        (j->reason && !sbx_store_text_ok(j->reason))) {
        return sbx_error_set(err, EINVAL,
                             "store: job %s: worktree, provider, image and reason "
                             "must be 1-%d printable characters",
                             id, MAX_TEXT);
    }
    if (!(j->limits.cpus > 0) || !isfinite(j->limits.cpus) || j->limits.memory <= 0 ||
        j->limits.disk < 0 || j->limits.pids < 0 || j->limits.idle < 0 || j->limits.max < 0) {
        return sbx_error_set(err, EINVAL,
                             "store: job %s: limits need cpus > 0, memory > 0 and "
                             "no negative value",
                             id);
    }
    if (j->n_leases > MAX_LEASES) {
        return sbx_error_set(err, EINVAL, "store: job %s: more than %d credential leases", id,
                             MAX_LEASES);
    }
    for (size_t i = 0; i < j->n_leases; i++) {
        if (j->leases == NULL || j->leases[i] == NULL || !sbx_store_text_ok(j->leases[i]) ||
            strlen(j->leases[i]) > 200) {
            return sbx_error_set(err, EINVAL,
                                 "store: job %s: credential lease id %zu must be "
                                 "1-200 printable characters",
                                 id, i);
        }
    }
    return 0;
}

/* The checks run in this order: the first failing one names the error. */
static int check_job(const struct sbx_job_rec *j, sbx_error_t **err)
{
    const char *id;

    if (j == NULL) {
        return sbx_error_set(err, EINVAL, "store: no job given");
    }
    id = j->id ? j->id : "(null)";
    if (check_job_names(j, id, err) < 0 || check_job_argv(j, id, err) < 0 ||
        check_job_labels(j, id, err) < 0 || check_job_env(j, id, err) < 0) {
        return -1;
    }
    if (json_dump_len(j->argv) > MAX_JSON_BYTES) {
        return sbx_error_set(err, EINVAL, "store: job %s: argv is over %d bytes", id,
                             MAX_JSON_BYTES);
    }
    return check_job_rest(j, id, err);
}

static char *leases_json(const char *const *leases, size_t n)
{
    json_t *a = json_array();
    char *s;

    for (size_t i = 0; i < n; i++) {
        json_array_append_new(a, json_string(leases[i]));
    }
    s = json_dumps(a, JSON_COMPACT);
    json_decref(a);
    if (s == NULL) {
        abort();
    }
    return s;
}

static int job_insert_row(struct sbx_store *st, const struct sbx_job_rec *job, sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = NULL;
    cleanup_free char *argv = NULL;
    cleanup_free char *labels = NULL;
    cleanup_free char *leases = NULL;
    cleanup_free char *env = NULL;
    int rc;

    if (check_job(job, err) < 0) {
        return -1;
    }
    s = sbx_q_prepare(st,
                      "INSERT INTO jobs (id, task, pool, class, argv, labels, "
                      "worktree, provider, image, cpus, memory, disk, pids, idle, "
                      "max_life, state, queued_at, leases, env, client) VALUES ($1, $2, $3, "
                      "$4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, 'queued', $16, "
                      "$17, $18, $19)",
                      err);
    if (s == NULL) {
        return -1;
    }
    argv = json_dumps(job->argv, JSON_COMPACT);
    labels = job->labels ? json_dumps(job->labels, JSON_COMPACT) : NULL;
    leases = leases_json((const char *const *)job->leases, job->n_leases);
    env = job->env ? json_dumps(job->env, JSON_COMPACT) : xstrdup("{}");
    sbx_q_text(s, 1, job->id);
    sbx_q_text(s, 2, job->task ? job->task : job->id);
    sbx_q_text(s, 3, job->pool);
    sbx_q_text(s, 4, job->cls);
    sbx_q_text(s, 5, argv);
    sbx_q_text(s, 6, labels);
    sbx_q_text(s, 7, job->worktree);
    sbx_q_text(s, 8, job->provider);
    sbx_q_text(s, 9, job->image);
    sbx_q_double(s, 10, job->limits.cpus);
    sbx_q_int64(s, 11, job->limits.memory);
    sbx_q_int64(s, 12, job->limits.disk);
    sbx_q_int64(s, 13, job->limits.pids);
    sbx_q_int64(s, 14, job->limits.idle);
    sbx_q_int64(s, 15, job->limits.max);
    sbx_q_int64(s, 16, job->queued_at ? job->queued_at : sbx_store_now());
    sbx_q_text(s, 17, leases);
    sbx_q_text(s, 18, env);
    sbx_q_text(s, 19, job->client ? job->client : "");
    {
        sbx_error_t *e = NULL;

        rc = sbx_q_step(s, "insert job", &e);
        if (rc < 0 && e->code == EEXIST) {
            sbx_error_free(&e);
            return sbx_error_set(err, EEXIST, "store: job %s already exists", job->id);
        }
        if (rc < 0) {
            if (err != NULL && *err == NULL) {
                *err = e;
            }
            else {
                sbx_error_free(&e);
            }
            return -1;
        }
    }
    return 0;
}

/* (changed) The row and its task's owner in one transaction (or in the
 * caller's batch). */
int sbx_store_job_insert(struct sbx_store *st, const struct sbx_job_rec *job, sbx_error_t **err)
{
    /* a transaction already open (a batch, or the caller's BEGIN) holds it */
    int own = !st->tx && (st->db != NULL ? sqlite3_get_autocommit(st->db) != 0
                                         : PQtransactionStatus(st->pg) == PQTRANS_IDLE);

    if (check_job(job, err) < 0) {
        return -1;
    }
    if (own && sbx_store_begin(st, err) < 0) {
        return -1;
    }
    if (sbx_store_owner_take(st, job->task ? job->task : job->id, job->client ? job->client : "",
                             job->queued_at, err) < 0 ||
        job_insert_row(st, job, err) < 0) {
        if (own) {
            sbx_store_rollback(st);
        }
        return -1;
    }
    return own ? sbx_store_commit(st, err) : 0;
}

int sbx_store_job_get(struct sbx_store *st, const char *id, struct sbx_job_rec *out,
                      sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = NULL;
    int rc;

    if (id == NULL) {
        return sbx_error_set(err, EINVAL, "store: no job id given");
    }
    s = sbx_q_prepare(st, "SELECT " SBX_JOB_COLUMNS " FROM jobs WHERE id = $1", err);
    if (s == NULL) {
        return -1;
    }
    sbx_q_text(s, 1, id);
    rc = sbx_q_step(s, "get job", err);
    if (rc == 0) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "store: no job '%s'", id);
    }
    if (rc < 0) {
        return -1;
    }
    sbx_job_rec_clear(out);
    return sbx_store_row_to_job(s, out);
}

int sbx_store_job_list(struct sbx_store *st, int state, struct sbx_job_rec **out, size_t *n,
                       sbx_error_t **err)
{
    cleanup_q struct sbx_q *s = NULL;
    struct sbx_job_rec *recs = NULL;
    size_t count = 0, cap = 0;
    int rc;

    if (state >= 0 && sbx_job_state_name((enum sbx_job_state)state)[0] == 'u') {
        return sbx_error_set(err, EINVAL, "store: unknown job state %d", state);
    }
    s = sbx_q_prepare(st,
                      state < 0 ? "SELECT " SBX_JOB_COLUMNS " FROM jobs ORDER BY seq"
                                : "SELECT " SBX_JOB_COLUMNS " FROM jobs WHERE state = "
                                  "$1 ORDER BY seq",
                      err);
    if (s == NULL) {
        return -1;
    }
    if (state >= 0) {
        sbx_q_text(s, 1, sbx_job_state_name((enum sbx_job_state)state));
    }
    while ((rc = sbx_q_step(s, "list jobs", err)) == 1) {
        if (count == cap) {
            cap = cap ? cap * 2 : 16;
            recs = xrealloc(recs, cap * sizeof(*recs));
        }
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

int sbx_store_job_set_leases(struct sbx_store *st, const char *id, const char *const *leases,
                             size_t n, sbx_error_t **err)
{
    cleanup_free char *text = NULL;

    if (n > MAX_LEASES) {
        return sbx_error_set(err, EINVAL, "store: job %s: more than %d credential leases",
                             id ? id : "(null)", MAX_LEASES);
    }
    for (size_t i = 0; i < n; i++) {
        if (leases == NULL || leases[i] == NULL || !sbx_store_text_ok(leases[i]) ||
            strlen(leases[i]) > 200) {
            return sbx_error_set(err, EINVAL,
                                 "store: job %s: credential lease id %zu must be "
                                 "1-200 printable characters",
                                 id ? id : "(null)", i);
        }
    }
    text = leases_json(leases, n);
    return sbx_store_update_job(st, id, 0,
                                "UPDATE jobs SET leases = $3 WHERE id = $1 AND $2 > 0 "
                                "AND state IN ('queued', 'running')",
                                "queued or running", text, NULL, NULL, 1, err);
}

int sbx_store_job_set_isolation(struct sbx_store *st, const char *id, json_t *isolation,
                                sbx_error_t **err)
{
    cleanup_free char *text = json_dumps(isolation, JSON_COMPACT);

    if (text == NULL || strlen(text) > MAX_TEXT) {
        return sbx_error_set(err, EINVAL, "store: job %s: isolation is not a small JSON object",
                             id ? id : "(null)");
    }
    return sbx_store_update_job(st, id, 0,
                                "UPDATE jobs SET isolation = $3 WHERE id = $1 AND $2 > 0 "
                                "AND state IN ('queued', 'running')",
                                "queued or running", text, NULL, NULL, 1, err);
}

int sbx_store_job_set_exec_path(struct sbx_store *st, const char *id, const char *path,
                                sbx_error_t **err)
{
    if (path == NULL || (strcmp(path, "agent") != 0 && strcmp(path, "engine") != 0)) {
        return sbx_error_set(err, EINVAL, "store: job %s: exec path must be agent or engine",
                             id ? id : "(null)");
    }
    return sbx_store_update_job(st, id, 0,
                                "UPDATE jobs SET exec_path = $3 WHERE id = $1 AND $2 > 0 "
                                "AND state IN ('queued', 'running')",
                                "queued or running", path, NULL, NULL, 1, err);
}
