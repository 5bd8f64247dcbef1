/* host_store.c - provider_host's sandboxes on disk: <root>/<id>/sandbox.json
 * ({"cwd", "labels"}) and, for a task without a worktree, <root>/<id>/work,
 * the fresh directory its commands run in. On disk so that `sbx exec`, the
 * keeper and the orphan reaper (other processes) find them by id and label. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "host.h"

int hx_id_valid(const char *id)
{
    size_t n = id != NULL ? strlen(id) : 0;
    char task[72];

    /* host-<task id>-<8 hex>: the task part follows the SDK's task rule */
    if (n < 5 + 1 + 9 || n >= HX_ID_MAX || strncmp(id, "host-", 5) != 0 || id[n - 9] != '-' ||
        strspn(id + n - 8, "0123456789abcdef") != 8 || n - 5 - 9 >= sizeof(task)) {
        return 0;
    }
    memcpy(task, id + 5, n - 5 - 9);
    task[n - 5 - 9] = '\0';
    return sbx_id_valid(task, SBX_ID_TASK);
}

/* The root is ours alone: a directory (not a link), owned by us, mode 0700. */
int hx_root_prepare(struct hx_ctx *c, sbx_error_t **err)
{
    struct stat st;

    if (mkdir(c->root, 0700) < 0 && errno != EEXIST) {
        return c->host->error_set(err, SBX_E_GENERIC, "%s: %s", c->root, strerror(errno));
    }
    if (lstat(c->root, &st) < 0) {
        return c->host->error_set(err, SBX_E_GENERIC, "%s: %s", c->root, strerror(errno));
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != getuid() || (st.st_mode & 077) != 0) {
        return c->host->error_set(err, SBX_E_CONFIG,
                                  "%s: not a directory of uid %u with mode "
                                  "0700; remove it or set another root",
                                  c->root, (unsigned)getuid());
    }
    return 0;
}

static char *path_of(const struct hx_ctx *c, const char *id, const char *leaf)
{
    char *p = NULL;

    p = xasprintf("%s/%s%s%s", c->root, id, leaf ? "/" : "", leaf ? leaf : "");
    return p;
}

int hx_store_create(struct hx_ctx *c, const struct sbx_sandbox_spec *spec, char *id, size_t id_size,
                    sbx_error_t **err)
{
    unsigned char rnd[4] = {0};
    char *dir;
    char *cwd = NULL;
    char *rec;
    json_t *labels = json_object();
    json_t *j;
    int r = 0;

    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
        json_decref(labels);
        return c->host->error_set(err, SBX_E_GENERIC, "getrandom: %s", strerror(errno));
    }
    snprintf(id, id_size, "host-%.64s-%02x%02x%02x%02x", spec->task_id ? spec->task_id : "task",
             rnd[0], rnd[1], rnd[2], rnd[3]);
    if (!hx_id_valid(id)) {
        json_decref(labels);
        return c->host->error_set(err, SBX_E_USAGE, "task id '%.64s' makes no valid sandbox id",
                                  spec->task_id ? spec->task_id : "");
    }
    dir = path_of(c, id, NULL);
    if (mkdir(dir, 0700) < 0) {
        r = c->host->error_set(err, SBX_E_GENERIC, "%s: %s", dir, strerror(errno));
        free(dir);
        json_decref(labels);
        return r;
    }
    if (spec->worktree != NULL) {
        cwd = strdup(spec->worktree);
    }
    else {
        cwd = path_of(c, id, "work");
        if (mkdir(cwd, 0700) < 0) {
            r = c->host->error_set(err, SBX_E_GENERIC, "%s: %s", cwd, strerror(errno));
        }
    }
    for (size_t i = 0; i < spec->n_labels; i++) {
        json_object_set_new(labels, spec->labels[i].name, json_string(spec->labels[i].value));
    }
    j = json_pack("{s:s, s:o}", "cwd", cwd ? cwd : "", "labels", labels);
    rec = path_of(c, id, "sandbox.json");
    if (r == 0 && (j == NULL || json_dump_file(j, rec, JSON_COMPACT) < 0)) {
        r = c->host->error_set(err, SBX_E_GENERIC, "%s: cannot write", rec);
    }
    json_decref(j);
    free(rec);
    free(cwd);
    free(dir);
    if (r < 0) {
        hx_store_remove(c, id, NULL);
        id[0] = '\0';
    }
    return r;
}

static json_t *load(const struct hx_ctx *c, const char *id)
{
    char *rec = path_of(c, id, "sandbox.json");
    json_t *j = json_load_file(rec, 0, NULL);

    free(rec);
    if (j != NULL && !json_is_object(json_object_get(j, "labels"))) {
        json_decref(j);
        return NULL;
    }
    return j;
}

char *hx_store_cwd(struct hx_ctx *c, const char *id, sbx_error_t **err)
{
    json_t *j;
    const char *cwd;
    char *out;

    if (!hx_id_valid(id) || (j = load(c, id)) == NULL) {
        c->host->error_set(err, SBX_E_NOTFOUND, "sandbox '%.64s' is gone", id);
        return NULL;
    }
    cwd = json_string_value(json_object_get(j, "cwd"));
    out = cwd && cwd[0] == '/' ? strdup(cwd) : NULL;
    json_decref(j);
    if (out == NULL) {
        c->host->error_set(err, SBX_E_PROTOCOL, "sandbox '%.64s': no working directory", id);
    }
    return out;
}

static int rm_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st;
    (void)ftw;
    return (flag == FTW_DP ? rmdir(path) : unlink(path)) < 0 && errno != ENOENT ? -1 : 0;
}

int hx_store_remove(struct hx_ctx *c, const char *id, sbx_error_t **err)
{
    char *dir = path_of(c, id, NULL);
    int r = 0;

    /* depth first, never following a link: the worktree is never under it */
    if (nftw(dir, rm_one, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT) {
        r = c->host->error_set(err, SBX_E_GENERIC, "removing %s: %s", dir, strerror(errno));
    }
    free(dir);
    return r;
}

int hx_store_list(struct hx_ctx *c, const char *key, const char *value, sbx_sandbox_fn fn, void *ud,
                  sbx_error_t **err)
{
    DIR *d = opendir(c->root);
    struct dirent *e;

    if (d == NULL) {
        return c->host->error_set(err, SBX_E_GENERIC, "%s: %s", c->root, strerror(errno));
    }
    while ((e = readdir(d)) != NULL) {
        json_t *j;
        json_t *labels;
        const char *v;
        struct sbx_kv kv[32];
        size_t n = 0;
        const char *k;
        json_t *jv;

        if (!hx_id_valid(e->d_name) || (j = load(c, e->d_name)) == NULL) {
            continue;
        }
        labels = json_object_get(j, "labels");
        v = json_string_value(json_object_get(labels, key));
        if (v != NULL && (value == NULL || strcmp(v, value) == 0)) {
            json_object_foreach(labels, k, jv)
            {
                if (n < sizeof(kv) / sizeof(kv[0]) && json_is_string(jv)) {
                    kv[n].name = k;
                    kv[n].value = json_string_value(jv);
                    n++;
                }
            }
            fn(ud, e->d_name, kv, n);
        }
        json_decref(j);
    }
    closedir(d);
    return 0;
}
