/* snapshot.c - snapshots of a task's filesystem (docs/tasks.md, "Snapshots and forks").
 *
 * The snapshot is data, never privilege: the provider commits the sandbox's own files
 * with a config of its own (sbx_provider.h, snapshot op), a task started from it runs
 * sbx's entrypoint, limits and egress as any task, and it holds no value of the task's
 * credential lease (the values are handed to the provider's scan, which refuses an
 * image that holds one). Records live in <state>/snapshots/<id>.json; the quota and
 * the age are counted from them under <state>/snapshots/.lock. */
#include "sandbox/snapshot.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sandbox/owner.h"
#include "sandbox/task_int.h"
#include "util/cleanup.h"
#include "util/log.h"
#include "util/xalloc.h"

#define SNAP_DIR "snapshots"
#define SNAP_LIST_MAX 100000 /* records read from the directory at most */

int sbx_snapshot_id_valid(const char *id)
{
    return id != NULL && strncmp(id, "s-", 2) == 0 && strlen(id) == 14 &&
           strspn(id + 2, "0123456789abcdef") == 12;
}

static char *snap_dir(const char *state)
{
    return xasprintf("%s/%s", state, SNAP_DIR);
}

/* The directory, made, and its lock taken: the descriptor, or -1 with err. */
static int lock_dir(const char *state, sbx_error_t **err)
{
    cleanup_free char *dir = snap_dir(state);
    cleanup_free char *lock = xasprintf("%s/.lock", dir);
    int fd;

    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", dir, strerror(errno));
    }
    fd = open(lock, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0 || flock(fd, LOCK_EX) < 0) {
        sbx_error_set(err, SBX_E_GENERIC, "%s: %s", lock, strerror(errno));
        if (fd >= 0) {
            close(fd);
        }
        return -1;
    }
    return fd;
}

static int write_record(const char *state, json_t *rec, sbx_error_t **err)
{
    const char *id = json_string_value(json_object_get(rec, "id"));
    cleanup_free char *path = xasprintf("%s/%s/%s.json", state, SNAP_DIR, id);
    cleanup_free char *tmp = xasprintf("%s.tmp", path);

    if (json_dump_file(rec, tmp, JSON_INDENT(2)) < 0 || chmod(tmp, 0600) < 0 ||
        rename(tmp, path) < 0) {
        unlink(tmp);
        return sbx_error_set(err, SBX_E_GENERIC, "%s: cannot write the snapshot's record", path);
    }
    return 0;
}

json_t *sbx_snapshot_get(const char *state, const char *id, sbx_error_t **err)
{
    cleanup_free char *path = NULL;
    json_t *rec;

    if (!sbx_snapshot_id_valid(id)) {
        sbx_error_set(err, SBX_E_USAGE,
                      "snapshot '%.80s': not a snapshot id (s- and 12 hex digits; see 'sbx "
                      "snapshot ls')",
                      id ? id : "");
        return NULL;
    }
    path = xasprintf("%s/%s/%s.json", state, SNAP_DIR, id);
    rec = json_load_file(path, 0, NULL);
    if (rec == NULL || !json_is_object(rec)) {
        json_decref(rec);
        sbx_error_set(err, SBX_E_NOTFOUND, "snapshot %s: no such snapshot (see 'sbx snapshot ls')",
                      id);
        return NULL;
    }
    return rec;
}

static int by_created(const void *a, const void *b)
{
    json_int_t x = json_integer_value(json_object_get(*(json_t *const *)a, "created"));
    json_int_t y = json_integer_value(json_object_get(*(json_t *const *)b, "created"));

    return x < y ? -1 : x > y;
}

json_t *sbx_snapshot_list(const char *state, const char *pool)
{
    cleanup_free char *dir = snap_dir(state);
    json_t *arr = json_array();
    json_t **v = NULL;
    size_t n = 0;
    struct dirent *de;
    DIR *d = opendir(dir);

    while (d != NULL && (de = readdir(d)) != NULL && n < SNAP_LIST_MAX) {
        char id[32];
        size_t len = strlen(de->d_name);
        json_t *rec;

        if (len != 19 || strcmp(de->d_name + 14, ".json") != 0) {
            continue;
        }
        memcpy(id, de->d_name, 14);
        id[14] = '\0';
        rec = sbx_snapshot_get(state, id, NULL);
        if (rec == NULL) {
            continue;
        }
        if (pool != NULL &&
            strcmp(json_string_value(json_object_get(rec, "pool")) ?: "", pool) != 0) {
            json_decref(rec);
            continue;
        }
        v = xrealloc(v, (n + 1) * sizeof(*v));
        v[n++] = rec;
    }
    if (d != NULL) {
        closedir(d);
    }
    if (n > 0) {
        qsort(v, n, sizeof(*v), by_created);
    }
    for (size_t i = 0; i < n; i++) {
        json_array_append_new(arr, v[i]);
    }
    free(v);
    return arr;
}

/* The image through prov (when it is the record's instance) or an instance opened now,
 * then the record. */
static int remove_rec(const struct sbx_config *cfg, const char *plugin_dir,
                      struct sbx_open_instance *prov, const char *state, json_t *rec,
                      sbx_error_t **err)
{
    const char *id = json_string_value(json_object_get(rec, "id"));
    const char *ref = json_string_value(json_object_get(rec, "ref"));
    const char *name = json_string_value(json_object_get(rec, "provider"));
    struct sbx_open_instance *own = NULL;
    cleanup_free char *path = xasprintf("%s/%s/%s.json", state, SNAP_DIR, id);
    int r;

    if (prov == NULL || name == NULL || strcmp(prov->cfg->name, name) != 0) {
        if (plugin_dir == NULL) {
            return sbx_error_set(err, SBX_E_GENERIC,
                                 "snapshot %s: of provider '%s': remove it with 'sbx snapshot rm'",
                                 id, name ? name : "?");
        }
        own = sbx_instance_open(cfg, plugin_dir, name ? name : "", SBX_PLUGIN_PROVIDER, err);
        if (own == NULL) {
            return sbx_error_wrap(err, "snapshot %s", id);
        }
        prov = own;
    }
    if (sbx_instance_provider(prov)->snapshot_remove == NULL) {
        r = sbx_error_set(err, SBX_E_GENERIC, "snapshot %s: provider '%s' cannot remove snapshots",
                          id, prov->cfg->name);
    }
    else {
        r = sbx_instance_provider(prov)->snapshot_remove(prov->ctx, ref, err);
    }
    if (own != NULL) {
        sbx_instance_close(own);
    }
    if (r < 0) {
        return sbx_error_wrap(err, "snapshot %s", id);
    }
    if (unlink(path) < 0 && errno != ENOENT) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", path, strerror(errno));
    }
    sbx_info("snapshot %s removed (%s)", id, ref ? ref : "?");
    return 0;
}

static int prune_locked(const struct sbx_config *cfg, const char *plugin_dir,
                        struct sbx_open_instance *prov, const char *state, int64_t age,
                        json_t *removed, sbx_error_t **err)
{
    json_t *all;
    json_t *rec;
    size_t i;
    int n = 0;
    int failed = 0;
    int64_t now = (int64_t)time(NULL);

    if (age <= 0) {
        return 0;
    }
    all = sbx_snapshot_list(state, NULL);
    json_array_foreach(all, i, rec)
    {
        sbx_error_t *e = NULL;

        if (json_integer_value(json_object_get(rec, "created")) > now - age) {
            continue;
        }
        if (remove_rec(cfg, plugin_dir, prov, state, rec, &e) < 0) {
            sbx_warn("%s", e->msg);
            if (!failed) {
                sbx_error_set(err, e->code, "%s", e->msg);
            }
            failed = 1;
            sbx_error_free(&e);
            continue;
        }
        if (removed != NULL) {
            json_array_append(removed, json_object_get(rec, "id"));
        }
        n++;
    }
    json_decref(all);
    return failed ? -1 : n;
}

int sbx_snapshot_prune(const struct sbx_config *cfg, const char *plugin_dir, const char *state,
                       int64_t age, json_t *removed, sbx_error_t **err)
{
    int fd = lock_dir(state, err);
    int r;

    if (fd < 0) {
        return -1;
    }
    r = prune_locked(cfg, plugin_dir, NULL, state, age, removed, err);
    close(fd);
    return r;
}

int sbx_snapshot_remove(const struct sbx_config *cfg, const char *plugin_dir, const char *state,
                        const char *id, sbx_error_t **err)
{
    json_t *rec = sbx_snapshot_get(state, id, err);
    int fd;
    int r;

    if (rec == NULL) {
        return -1;
    }
    fd = lock_dir(state, err);
    if (fd < 0) {
        json_decref(rec);
        return -1;
    }
    r = remove_rec(cfg, plugin_dir, NULL, state, rec, err);
    close(fd);
    json_decref(rec);
    return r;
}

/* The lease's values a snapshot must not hold (those of at least 4 bytes: the scan's
 * minimum; shorter ones cannot be told from ordinary bytes). */
static const char **lease_needles(const struct sbx_task *t, size_t *n)
{
    const char **v = xcalloc(t->have_lease ? t->lease.n_secrets + 1 : 1, sizeof(char *));

    *n = 0;
    for (size_t i = 0; t->have_lease && i < t->lease.n_secrets; i++) {
        if (t->lease.secrets[i].value != NULL && strlen(t->lease.secrets[i].value) >= 4) {
            v[(*n)++] = t->lease.secrets[i].value;
        }
    }
    return v;
}

static json_t *make_record(struct sbx_task *t, const struct sbx_snapshot_out *out, const char *who,
                           int for_fork)
{
    char id[16];
    char created[32];
    time_t now = time(NULL);
    struct tm tm;

    snprintf(id, sizeof(id), "s-%.12s", out->digest + 7);
    gmtime_r(&now, &tm);
    strftime(created, sizeof(created), "%Y-%m-%dT%H:%M:%SZ", &tm);
    return json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:s, s:I, s:I, s:I, s:s, s:b, s:b}", "id",
                     id, "digest", out->digest, "ref", out->ref, "task", t->id, "pool", t->pool,
                     "provider", t->prov->cfg->name, "image", t->image, "created_at", created,
                     "created", (json_int_t)now, "size", (json_int_t)out->size, "scanned_bytes",
                     (json_int_t)out->scanned, "by", who, "fork", for_fork, "lease_scanned",
                     t->have_lease);
}

int sbx_task_snapshot(struct sbx_task *t, const char *who, int for_fork, json_t **rec,
                      sbx_error_t **err)
{
    const struct sbx_provider_ops *ops = sbx_instance_provider(t->prov);
    struct sbx_snapshot_out out;
    int bad_scope = 0;
    const char *scope = sbx_owner_test_scope(&bad_scope);
    struct sbx_kv labels[] = {
        {"sbx.snapshot.task", t->id},
        {"sbx.snapshot.pool", t->pool},
        {"sbx.test", scope},
    };
    struct sbx_snapshot_req req = {
        .labels = labels, .n_labels = sizeof(labels) / sizeof(labels[0]) - (scope == NULL)};
    json_t *pool;
    int fd;
    int r;

    *rec = NULL;
    if (ops->snapshot == NULL) {
        return sbx_error_set(err, SBX_E_USAGE, "task %s: provider '%s' cannot snapshot a sandbox",
                             t->id, t->prov->cfg->name);
    }
    if (t->sandbox[0] == '\0' || t->stop) {
        return sbx_error_set(err, SBX_E_GENERIC, "task %s: it does not run", t->id);
    }
    fd = lock_dir(t->state, err);
    if (fd < 0) {
        return sbx_error_wrap(err, "task %s: snapshot", t->id);
    }
    if (prune_locked(t->cfg, NULL, t->prov, t->state, t->cfg->snapshot.max_age, NULL, NULL) > 0) {
        sbx_info("task %s: snapshots older than snapshot.max_age removed", t->id);
    }
    pool = sbx_snapshot_list(t->state, t->pool);
    if ((int)json_array_size(pool) >= t->cfg->snapshot.quota) {
        r = sbx_error_set(err, SBX_E_USAGE,
                          "task %s: snapshot quota of pool %s reached (%zu of %d, "
                          "snapshot.quota): remove one with 'sbx snapshot rm'",
                          t->id, t->pool, json_array_size(pool), t->cfg->snapshot.quota);
        json_decref(pool);
        close(fd);
        return r;
    }
    json_decref(pool);
    req.needles = lease_needles(t, &req.n_needles);
    r = ops->snapshot(t->prov->ctx, t->sandbox, &req, &out, err);
    free((void *)req.needles);
    if (r == 0) {
        *rec = make_record(t, &out, who, for_fork);
        if (write_record(t->state, *rec, err) < 0) {
            sbx_error_t *e2 = NULL;

            if (ops->snapshot_remove != NULL &&
                ops->snapshot_remove(t->prov->ctx, out.ref, &e2) < 0) {
                sbx_warn("%s", e2->msg);
                sbx_error_free(&e2);
            }
            json_decref(*rec);
            *rec = NULL;
            r = -1;
        }
    }
    close(fd);
    if (r < 0) {
        sbx_warn("task %s: snapshot for %s failed: %s", t->id, who, (*err)->msg);
        return sbx_error_wrap(err, "task %s: snapshot", t->id);
    }
    sbx_info("task %s: snapshot %s (%s, %lld bytes, lease %s) by %s", t->id,
             json_string_value(json_object_get(*rec, "id")), out.digest, (long long)out.size,
             t->have_lease ? "scanned: none of its values" : "none", who);
    return 0;
}
