/* schema.c - the tables both engines keep, written once (docs/runner.md,
 * "Store and recovery"). Each column names the SQLite schema version that
 * added it (store.c migrates a file up through them); PostgreSQL creates
 * every column at once (pg.c). The dialects differ only in the words of
 * `words` below. */
#include <stdlib.h>
#include <string.h>

#include "store/store_internal.h"
#include "util/xalloc.h"

/* The marks a column's definition may hold, and each dialect's words. */
static const struct {
    const char *mark;
    const char *word[2]; /* [SBX_DIALECT_SQLITE], [SBX_DIALECT_PG] */
} words[] = {
    {"{serial}", {"INTEGER PRIMARY KEY AUTOINCREMENT", "BIGSERIAL PRIMARY KEY"}},
    {"{int}", {"INTEGER", "BIGINT"}}, /* 64 bits; plain INTEGER is 32 on PostgreSQL */
    {"{real}", {"REAL", "DOUBLE PRECISION"}},
};

struct column {
    const char *def;
    int since; /* the SQLite schema version that added it (1: the first tables) */
};

/* The columns in the order they stand on disk (a new one goes last). */
static const struct column jobs_columns[] = {
    {"seq {serial}", 1},
    {"id TEXT NOT NULL UNIQUE", 1},
    {"task TEXT NOT NULL", 1},
    {"pool TEXT NOT NULL CHECK (pool IN ('ci', 'agent'))", 1},
    {"class TEXT NOT NULL CHECK (class IN ('light', 'heavy'))", 1},
    {"argv TEXT NOT NULL", 1},
    {"labels TEXT", 1},
    {"worktree TEXT", 1},
    {"provider TEXT", 1},
    {"image TEXT", 1},
    {"cpus {real} NOT NULL", 1},
    {"memory {int} NOT NULL", 1},
    {"disk {int} NOT NULL", 1},
    {"pids {int} NOT NULL", 1},
    {"idle {int} NOT NULL", 1},
    {"max_life {int} NOT NULL", 1},
    {"state TEXT NOT NULL CHECK (state IN ('queued', 'running', 'finished', 'cancelled',"
     "  'interrupted'))",
     1},
    {"queued_at {int} NOT NULL", 1},
    {"granted_at {int} NOT NULL DEFAULT 0", 1},
    {"ready_at {int} NOT NULL DEFAULT 0", 1},
    {"finished_at {int} NOT NULL DEFAULT 0", 1},
    {"exit_status INTEGER", 1},
    {"reason TEXT", 1},
    {"egress_allowed {int} NOT NULL DEFAULT 0", 1},
    {"egress_denied {int} NOT NULL DEFAULT 0", 1},
    {"leases TEXT NOT NULL DEFAULT '[]'", 1},
    {"env TEXT NOT NULL DEFAULT '{}'", 2},  /* the command's variables, a JSON object */
    {"client TEXT NOT NULL DEFAULT ''", 3}, /* the API client that submitted it */
    {"isolation TEXT", 4},                  /* its task's {"isolation", "unenforced"} */
    {"exec_path TEXT", 5},                  /* how its command ran: "agent" or "engine" */
    {"box TEXT", 6},                        /* the box that holds it (granted..end) */
    {"token {int} NOT NULL DEFAULT 0", 6},  /* its fencing token (the last claim) */
    {NULL, 0},
};

static const struct column tasks_columns[] = {
    {"id TEXT PRIMARY KEY", 1},
    {"sandbox_id TEXT", 1},
    {"provider TEXT", 1},
    {"pool TEXT", 1},
    {"state TEXT NOT NULL CHECK (state IN ('starting', 'ready', 'ended', 'interrupted'))", 1},
    {"in_flight INTEGER NOT NULL DEFAULT 0", 1},
    {"created_at {int} NOT NULL", 1},
    {"last_activity {int} NOT NULL", 1},
    {"ended_at {int} NOT NULL DEFAULT 0", 1},
    {"reason TEXT", 1},
    {"box TEXT", 6}, /* the box its sandbox lives on */
    {NULL, 0},
};

/* (added) Who owns each task id, for good (docs/runner.md, "Task ids"): the
 * client of the job that named it first; every later job of the id must be
 * that client's. A row is never removed while a job names the id. */
static const struct column task_owners_columns[] = {
    {"id TEXT PRIMARY KEY", 7},
    {"client TEXT NOT NULL", 7},
    {"created_at {int} NOT NULL", 7},
    {NULL, 0},
};

static const struct {
    const char *name;
    const struct column *columns;
    const char *indexes;
    int since; /* (added) the SQLite schema version that added the table */
} tables[] = {
    {"jobs", jobs_columns,
     "CREATE INDEX IF NOT EXISTS jobs_state ON jobs (state, seq);"
     "CREATE INDEX IF NOT EXISTS jobs_task ON jobs (task);",
     1},
    {"tasks", tasks_columns, "", 1},
    {"task_owners", task_owners_columns, "", 7},
};

/* A text that grows (xrealloc: out of memory aborts). */
struct text {
    char *s;
    size_t len, cap;
};

static void put(struct text *t, const char *s, size_t n)
{
    if (t->len + n + 1 > t->cap) {
        t->cap = (t->len + n + 1) * 2;
        t->s = xrealloc(t->s, t->cap);
    }
    memcpy(t->s + t->len, s, n);
    t->len += n;
    t->s[t->len] = '\0';
}

static void puts_(struct text *t, const char *s)
{
    put(t, s, strlen(s));
}

/* def with the dialect's words for its marks. */
static void put_def(struct text *t, enum sbx_dialect d, const char *def)
{
    while (*def != '\0') {
        size_t i;

        for (i = 0; i < sizeof(words) / sizeof(words[0]); i++) {
            size_t n = strlen(words[i].mark);

            if (strncmp(def, words[i].mark, n) == 0) {
                puts_(t, words[i].word[d]);
                def += n;
                break;
            }
        }
        if (i == sizeof(words) / sizeof(words[0])) {
            put(t, def++, 1);
        }
    }
}

/* CREATE TABLE (and its indexes) of table i with the columns of versions <= version. */
static void put_table(struct text *t, enum sbx_dialect d, size_t i, int version)
{
    const char *sep = " ";

    puts_(t, "CREATE TABLE IF NOT EXISTS ");
    puts_(t, tables[i].name);
    puts_(t, " (");
    for (const struct column *c = tables[i].columns; c->def != NULL; c++) {
        if (c->since <= version) {
            puts_(t, sep);
            put_def(t, d, c->def);
            sep = ", ";
        }
    }
    puts_(t, ");");
    puts_(t, tables[i].indexes);
}

char *sbx_store_schema_create(enum sbx_dialect d, int version)
{
    struct text t = {0};

    puts_(&t, "");
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]); i++) {
        if (tables[i].since <= version) {
            put_table(&t, d, i, version);
        }
    }
    return t.s;
}

char *sbx_store_schema_add(enum sbx_dialect d, int version)
{
    struct text t = {0};

    puts_(&t, "");
    for (size_t i = 0; i < sizeof(tables) / sizeof(tables[0]) && version > 1; i++) {
        if (tables[i].since == version) { /* (added) a table of this version, whole */
            put_table(&t, d, i, version);
            continue;
        }
        for (const struct column *c = tables[i].columns; c->def != NULL; c++) {
            if (c->since == version) {
                puts_(&t, "ALTER TABLE ");
                puts_(&t, tables[i].name);
                puts_(&t, d == SBX_DIALECT_PG ? " ADD COLUMN IF NOT EXISTS " : " ADD COLUMN ");
                put_def(&t, d, c->def);
                puts_(&t, ";");
            }
        }
    }
    return t.s;
}
