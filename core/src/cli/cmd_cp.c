/* cmd_cp.c - `sbx cp` between the host and a kept task's sandbox, both ways,
 * files and directories, as tar streams through the task's keeper
 * (docs/tasks.md, "Files"), or the runner's API for a task it keeps. The sandbox side is resolved
 * inside the sandbox by the provider; the host side is written below the destination without
 * following a symlink (sandbox/tarx.c) and read without following one below the source. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli/args.h"
#include "cli/cli.h"
#include "http/http.h"
#include "runner/runner.h"
#include "sandbox/files.h"
#include "sandbox/keeper_files.h"
#include "sandbox/statedir.h"
#include "sandbox/tarx.h"
#include "sbx/sbx_util.h"
#include "util/xalloc.h"

void sbx_cmd_cp_help(FILE *out)
{
    fprintf(out, "usage: sbx cp [--json] TASK:PATH DEST      copy out of a task's sandbox\n"
                 "       sbx cp [--json] SRC TASK:PATH       copy into a task's sandbox\n"
                 "\n"
                 "Copies a file or a directory between the host and a running task ('sbx task\n"
                 "start'), as a tar stream through the task's keeper. PATH is absolute and is\n"
                 "resolved inside the sandbox: a symlink there never leads to a host file.\n"
                 "\n"
                 "Out of the task: DEST an existing directory gets PATH's last name in it;\n"
                 "otherwise DEST is created (its parent must exist) and becomes the copy.\n"
                 "DEST '-' writes the tar stream to stdout. On the host nothing is written\n"
                 "outside DEST, no symlink is followed, existing files are replaced (never\n"
                 "written through), devices and FIFOs are skipped, owners are not kept.\n"
                 "Into the task: PATH an existing directory gets SRC's last name in it;\n"
                 "otherwise PATH is created (its parent must exist). SRC '-' reads a tar\n"
                 "stream from stdin into the directory PATH. Symlinks under SRC are copied\n"
                 "as symlinks.\n"
                 "\n"
                 "At most 256 MiB of archive per copy, either way (else refused, exit 1).\n"
                 "With runner.listen set, the copy goes through the runner's API to a task\n"
                 "it keeps (GET/PUT /v1/tasks/TASK/files?archive=1); into the task at most\n"
                 "1 MiB of archive then (the API's body cap), out of it 64 MiB.\n"
                 "A paused task can be copied to and from.\n"
                 "\n"
                 "  --json               print {task, direction, bytes, files, dirs, links,\n"
                 "                       skipped} on stdout (not with '-')\n"
                 "\n"
                 "Exit status: 0 copied, 1 failed (no such path, too large, the task or its\n"
                 "keeper is gone), 2 usage error.\n");
}

/* "TASK:/path" -> task and path; 0 when op is a host path */
static int split_remote(const char *op, char *task, size_t tlen, const char **path)
{
    const char *colon = strchr(op, ':');

    if (colon == NULL || colon == op || (size_t)(colon - op) >= tlen || colon[1] != '/' ||
        memchr(op, '/', (size_t)(colon - op)) != NULL) {
        return 0;
    }
    memcpy(task, op, (size_t)(colon - op));
    task[colon - op] = '\0';
    *path = colon + 1;
    return 1;
}

struct counts {
    int64_t bytes, files, dirs, links, skipped;
};

/* ---- the way to the task: its keeper, or the runner's API (runner.listen) ---- */

struct xport {
    const struct sbx_config *cfg;
    const char *state; /* the state directory (keeper) */
    int runner;        /* through the runner */
};

static char *api_path(const char *task, const char *path, const char *what)
{
    char *t = sbx_url_escape(task);
    char *p = sbx_url_escape(path);
    char *u = xasprintf("/v1/tasks/%s/files?path=%s&%s=1", t ? t : "", p ? p : "", what);

    free(t);
    free(p);
    return u;
}

/* 1 directory, 0 another kind, -1 err (SBX_E_NOTFOUND: it does not exist) */
static int x_is_dir(const struct xport *x, const char *task, const char *path, sbx_error_t **err)
{
    json_t *res = NULL;
    json_t *req;
    int rc;

    if (x->runner) {
        struct sbx_http_response resp = {0};
        char *u = api_path(task, path, "stat");

        rc = sbx_runner_call(x->cfg, "GET", u, NULL, NULL, NULL, &resp, err);
        free(u);
        if (rc == 0) {
            res = json_loadb(resp.body ? resp.body : "", resp.body_len, 0, NULL);
            sbx_http_response_free(&resp);
        }
    }
    else {
        req = json_pack("{s:s, s:s}", "op", "files_stat", "path", path);
        rc = sbx_keeper_files_call(x->state, task, req, NULL, 0, NULL, NULL, &res, err);
        json_decref(req);
    }
    if (rc == 0) {
        rc = json_is_true(json_object_get(res, "dir"));
    }
    json_decref(res);
    return rc;
}

static int x_get(const struct xport *x, const char *task, const char *path,
                 int (*sink)(void *ud, const char *data, size_t len), void *ud, sbx_error_t **err)
{
    json_t *req;
    int rc;

    if (x->runner) {
        struct sbx_http_response resp = {0};
        char *u;

        /* the error of a missing path first: a streamed body goes to the sink */
        if (x_is_dir(x, task, path, err) < 0) {
            return -1;
        }
        u = api_path(task, path, "archive");
        rc = sbx_runner_call(x->cfg, "GET", u, NULL, sink, ud, &resp, err);
        free(u);
        if (rc == 0) {
            sbx_http_response_free(&resp);
        }
        return rc;
    }
    req = json_pack("{s:s, s:s}", "op", "files_get", "path", path);
    rc = sbx_keeper_files_call(x->state, task, req, NULL, 0, sink, ud, NULL, err);
    json_decref(req);
    return rc;
}

/* Through the runner: the archive whole, as the body of one PUT (the keeper's way
 * streams it: copy_in). */
static int x_put(const struct xport *x, const char *task, const char *dir, const char *tar,
                 size_t len, sbx_error_t **err)
{
    struct sbx_http_response resp = {0};
    char *u;
    int rc;

    if ((int64_t)len > SBX_FILES_ONE_MAX) {
        return sbx_error_set(err, SBX_FILES_E_TOOBIG,
                             "cp: through the runner a copy into a task is at most %lld MiB "
                             "of archive (the API's body cap); this one is %zu bytes",
                             (long long)(SBX_FILES_ONE_MAX >> 20), len);
    }
    u = api_path(task, dir, "archive");
    rc = sbx_runner_call_body(x->cfg, "PUT", u, tar, len, "application/x-tar", NULL, NULL, &resp,
                              err);
    free(u);
    if (rc == 0) {
        sbx_http_response_free(&resp);
    }
    return rc;
}

/* ---- into the task: an archive of a host path ------------------------------ */

/* (changed) The archive as it is made: to the keeper in pieces of PIECE bytes (streamed on
 * to the provider: never whole in memory), or whole for the runner (the API's body, at
 * most SBX_FILES_ONE_MAX). */
#define PIECE (1u << 20)

struct tar_out {
    struct sbx_tar_buf b;
    int fd;        /* the keeper's connection, or -1: kept whole (the runner) */
    int stopped;   /* the keeper stopped reading: its reply says why */
    int64_t total; /* archive bytes so far */
    int64_t whole; /* kept whole: at most this many bytes (the runner's body cap) */
};

/* Sends what the buffer holds (all, or once it holds a piece) to the keeper. */
static void out_flush(struct tar_out *o, int all)
{
    if (o->fd < 0 || o->b.len == 0 || (!all && o->b.len < PIECE)) {
        return;
    }
    if (!o->stopped && sbx_keeper_files_put_data(o->fd, o->b.data, o->b.len) < 0) {
        o->stopped = 1;
    }
    o->b.len = 0;
    memset(o->b.data, 0, o->b.cap < 1024 ? o->b.cap : 1024); /* sbx_tar_finish's end blocks */
}

/* Appends raw archive bytes (a file's data, its padding, stdin), keeping the 1024 bytes
 * after them zeroed as sbx_tar_finish expects. */
static int out_raw(struct tar_out *o, const char *data, size_t len, sbx_error_t **err)
{
    if (o->b.len + len + 1024 > o->b.cap) {
        size_t cap = o->b.cap ? o->b.cap : 64 * 1024;

        while (cap < o->b.len + len + 1024) {
            cap *= 2;
        }
        o->b.data = xrealloc(o->b.data, cap);
        o->b.cap = cap;
    }
    if (data != NULL) {
        memcpy(o->b.data + o->b.len, data, len);
    }
    else {
        memset(o->b.data + o->b.len, 0, len);
    }
    o->b.len += len;
    memset(o->b.data + o->b.len, 0, 1024);
    o->total += (int64_t)len;
    out_flush(o, 0);
    if (o->fd < 0 && o->total > o->whole) {
        return sbx_error_set(err, SBX_FILES_E_TOOBIG,
                             "cp: through the runner a copy into a task is at most %lld MiB "
                             "of archive (the API's body cap): refused",
                             (long long)(o->whole >> 20));
    }
    if (o->stopped) {
        return sbx_error_set(err, SBX_E_CANCELLED, "the keeper stopped reading the archive");
    }
    return 0;
}

/* After sbx_tar_add/add_head: the member's headers counted and sent on. */
static int out_added(struct tar_out *o, size_t before, int rc, const char *arc, sbx_error_t **err)
{
    if (rc < 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s: name too long", arc);
    }
    o->total += (int64_t)(o->b.len - before);
    out_flush(o, 0);
    return o->stopped
               ? sbx_error_set(err, SBX_E_CANCELLED, "the keeper stopped reading the archive")
               : 0;
}

static int add_tree(struct tar_out *o, int dirfd, const char *name, const char *arc,
                    struct counts *n, sbx_error_t **err);

static int add_dir(struct tar_out *o, int fd, const char *arc, struct counts *n, sbx_error_t **err)
{
    DIR *d = fdopendir(fd);
    struct dirent *de;
    int rc = 0;

    if (d == NULL) {
        close(fd);
        return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", arc, strerror(errno));
    }
    while (rc == 0 && (de = readdir(d)) != NULL) {
        char *sub;

        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) {
            continue;
        }
        sub = xasprintf("%s/%s", arc, de->d_name);
        rc = add_tree(o, dirfd(d), de->d_name, sub, n, err);
        free(sub);
    }
    closedir(d);
    return rc;
}

/* A regular file: its header, then its data read in pieces (never whole). */
static int add_file(struct tar_out *o, int dirfd, const char *name, const char *arc,
                    const struct stat *st, struct counts *n, sbx_error_t **err)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    size_t before = o->b.len;
    uint64_t got = 0;
    char *buf;
    int rc;

    if (fd < 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", arc, strerror(errno));
    }
    rc = out_added(
        o, before,
        sbx_tar_add_head(&o->b, arc, st->st_mode & 0777, st->st_mtime, (uint64_t)st->st_size), arc,
        err);
    buf = xmalloc(PIECE);
    while (rc == 0 && got < (uint64_t)st->st_size) {
        size_t want =
            (uint64_t)st->st_size - got < PIECE ? (size_t)((uint64_t)st->st_size - got) : PIECE;
        ssize_t r = read(fd, buf, want);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r <= 0) {
            rc = sbx_error_set(err, SBX_E_GENERIC, "%s: cannot read it whole", arc);
            break;
        }
        got += (uint64_t)r;
        rc = out_raw(o, buf, (size_t)r, err);
    }
    free(buf);
    close(fd);
    if (rc == 0) {
        rc = out_raw(o, NULL, sbx_tar_pad((uint64_t)st->st_size), err);
    }
    n->bytes += (int64_t)got;
    n->files++;
    return rc;
}

static int add_tree(struct tar_out *o, int dirfd, const char *name, const char *arc,
                    struct counts *n, sbx_error_t **err)
{
    struct stat st;
    size_t before = o->b.len;

    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0) {
        return sbx_error_set(err, SBX_E_NOTFOUND, "%s: %s", name, strerror(errno));
    }
    if (n->bytes + st.st_size > SBX_FILES_CP_MAX) {
        return sbx_error_set(
            err, SBX_FILES_E_TOOBIG,
            "%s: the copy is larger than %lld MiB (the bound of one copy): refused", arc,
            (long long)(SBX_FILES_CP_MAX >> 20));
    }
    if (S_ISREG(st.st_mode)) {
        return add_file(o, dirfd, name, arc, &st, n, err);
    }
    if (S_ISLNK(st.st_mode)) {
        char link[SBX_TAR_NAME_MAX];
        ssize_t l = readlinkat(dirfd, name, link, sizeof(link) - 1);

        if (l < 0) {
            return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", arc, strerror(errno));
        }
        link[l] = '\0';
        n->links++;
        return out_added(o, before, sbx_tar_add(&o->b, arc, '2', 0777, st.st_mtime, link, NULL, 0),
                         arc, err);
    }
    if (S_ISDIR(st.st_mode)) {
        int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);

        if (fd < 0) {
            return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", arc, strerror(errno));
        }
        if (out_added(o, before,
                      sbx_tar_add(&o->b, arc, '5', st.st_mode & 0777, st.st_mtime, NULL, NULL, 0),
                      arc, err) < 0) {
            close(fd);
            return -1;
        }
        n->dirs++;
        return add_dir(o, fd, arc, n, err);
    }
    n->skipped++;
    return 0;
}

/* `-`: the archive on stdin, passed on as it comes (the keeper and the provider
 * check it; the bound is counted here too). */
static int read_stdin(struct tar_out *o, sbx_error_t **err)
{
    char *buf = xmalloc(PIECE);
    int rc = 0;

    for (;;) {
        ssize_t r = read(0, buf, PIECE);

        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            rc = sbx_error_set(err, SBX_E_GENERIC, "reading stdin: %s", strerror(errno));
            break;
        }
        if (r == 0) {
            break;
        }
        if (o->total + r > SBX_FILES_CP_MAX) {
            rc = sbx_error_set(err, SBX_FILES_E_TOOBIG,
                               "stdin: the archive is larger than %lld MiB (the bound of one "
                               "copy): refused",
                               (long long)(SBX_FILES_CP_MAX >> 20));
            break;
        }
        if ((rc = out_raw(o, buf, (size_t)r, err)) < 0) {
            break;
        }
    }
    free(buf);
    return rc;
}

static int copy_in(const struct xport *x, const char *src, const char *task, const char *path,
                   struct counts *n, sbx_error_t **err)
{
    struct tar_out o = {.fd = -1, .whole = SBX_FILES_ONE_MAX};
    char *dir = NULL;
    const char *top = NULL;
    char *s1 = NULL;
    char *s2 = NULL;
    int rc = 0;

    if (strcmp(src, "-") == 0) {
        dir = xstrdup(path);
    }
    else {
        char *sb;
        sbx_error_t *e = NULL;
        int d;

        s1 = xstrdup(src);
        s2 = xstrdup(path);
        sb = basename(s1);
        d = x_is_dir(x, task, path, &e);
        if (d == 1) {
            dir = xstrdup(path); /* into it, under SRC's name */
            top = sb;
        }
        else if (d == 0 || (e != NULL && e->code == SBX_E_NOTFOUND)) {
            dir = xstrdup(dirname(s2)); /* PATH becomes the copy */
            top = strrchr(path, '/') + 1;
        }
        else {
            *err = e;
            e = NULL;
            rc = -1;
        }
        sbx_error_free(&e);
        if (rc == 0 && (top == NULL || *top == '\0' || strcmp(top, "..") == 0 ||
                        strcmp(top, ".") == 0 || strcmp(top, "/") == 0)) {
            rc = sbx_error_set(err, SBX_E_USAGE, "cp: '%s' does not name a file to make", path);
        }
    }
    if (rc == 0 && !x->runner &&
        (o.fd = sbx_keeper_files_put_begin(x->state, task, dir, err)) < 0) {
        rc = -1;
    }
    if (rc == 0 && top == NULL) {
        rc = read_stdin(&o, err);
        n->bytes = o.total;
    }
    else if (rc == 0) {
        rc = add_tree(&o, AT_FDCWD, src, top, n, err);
        if (rc == 0) {
            sbx_tar_finish(&o.b);
            o.total += 1024;
        }
    }
    if (o.fd >= 0) {
        sbx_error_t *e = NULL;

        out_flush(&o, 1);
        if (sbx_keeper_files_put_end(o.fd, task, rc < 0 && !o.stopped, &e) < 0 && e != NULL) {
            /* the keeper's reason (it stopped reading, or refused at the end) */
            sbx_error_free(err);
            *err = e;
            rc = -1;
        }
        else {
            sbx_error_free(&e);
        }
    }
    else if (rc == 0) {
        rc = x_put(x, task, dir, o.b.data, o.b.len, err);
    }
    free(s1);
    free(s2);
    free(dir);
    free(o.b.data);
    return rc;
}

/* ---- out of the task ------------------------------------------------------- */

struct out_state {
    struct sbx_tar_extract x;
    int to_stdout;
    int64_t bytes;
};

static int out_sink(void *ud, const char *data, size_t len)
{
    struct out_state *o = ud;

    o->bytes += (int64_t)len;
    if (o->to_stdout) {
        while (len > 0) {
            ssize_t w = write(1, data, len);

            if (w < 0 && errno == EINTR) {
                continue;
            }
            if (w <= 0) {
                return 1;
            }
            data += w;
            len -= (size_t)w;
        }
        return 0;
    }
    return sbx_tar_extract_feed(&o->x, data, len) < 0 ? 1 : 0;
}

static int copy_out(const struct xport *x, const char *task, const char *path, const char *dest,
                    struct counts *n, sbx_error_t **err)
{
    struct out_state o = {.to_stdout = strcmp(dest, "-") == 0};
    struct stat st;
    char *d1 = xstrdup(dest);
    char *d2 = xstrdup(dest);
    int root = -1;
    int rc;

    if (!o.to_stdout) {
        const char *top = NULL;

        if (stat(dest, &st) == 0 && S_ISDIR(st.st_mode)) {
            root = open(dest, O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* into it */
        }
        else {
            root = open(dirname(d1), O_RDONLY | O_DIRECTORY | O_CLOEXEC); /* DEST is the copy */
            top = basename(d2);
        }
        if (root < 0) {
            rc = sbx_error_set(err, SBX_E_NOTFOUND, "cp: %s: its directory does not exist", dest);
            goto out;
        }
        sbx_tar_extract_init(&o.x, root, top);
    }
    rc = x_get(x, task, path, out_sink, &o, err);
    if (!o.to_stdout) {
        int refused = o.x.rd.err[0] != '\0'; /* the extractor stopped the copy */
        int xr;

        if (refused) {
            sbx_error_free(err);
            rc = sbx_error_set(err, SBX_E_GENERIC, "cp: %s: %s", dest, o.x.rd.err);
        }
        xr = sbx_tar_extract_fini(&o.x);
        if (rc == 0 && xr < 0) {
            rc = sbx_error_set(err, SBX_E_PROTOCOL, "cp: %s: %s", dest, o.x.rd.err);
        }
        n->files = o.x.files;
        n->dirs = o.x.dirs;
        n->links = o.x.links;
        n->skipped = o.x.skipped;
    }
    n->bytes = o.bytes;
out:
    if (root >= 0) {
        close(root);
    }
    free(d1);
    free(d2);
    return rc;
}

int sbx_cmd_cp(struct sbx_cli *cli, int argc, char **argv)
{
    struct sbx_args a = {.cmd = "cp", .help = "cp", .argc = argc, .argv = argv};
    struct sbx_config *cfg;
    struct xport x = {0};
    sbx_error_t *err = NULL;
    struct counts n = {0};
    char task[128];
    const char *path = NULL;
    const char *src, *dst;
    char *state;
    int json = 0;
    int out;
    int rc;

    if (sbx_args_json_only(&a, 2, 2, "SRC DEST", &json) < 0) {
        return SBX_EXIT_USAGE;
    }
    src = a.argv[optind];
    dst = a.argv[optind + 1];
    out = split_remote(src, task, sizeof(task), &path);
    if (out == split_remote(dst, task, sizeof(task), &path)) {
        fprintf(stderr, "sbx: error: cp: name the task on exactly one side, as TASK:/ABSOLUTE/PATH "
                        "(see 'sbx cp --help')\n");
        return SBX_EXIT_USAGE;
    }
    if (json && strcmp(out ? dst : src, "-") == 0) {
        fprintf(stderr, "sbx: error: cp: --json and '-' both want stdout or stdin\n");
        return SBX_EXIT_USAGE;
    }
    if ((cfg = sbx_cli_config(cli)) == NULL) {
        return SBX_EXIT_USAGE;
    }
    if ((state = sbx_state_dir(cfg->state_dir, &err)) == NULL) {
        sbx_cli_print_error(err);
        sbx_error_free(&err);
        return SBX_EXIT_USAGE;
    }
    x.cfg = cfg;
    x.state = state;
    x.runner = cfg->runner.listen != NULL && cfg->runner.listen[0] != '\0';
    if (sbx_files_path_ok(path, "cp", &err) < 0) {
        rc = -1;
    }
    else {
        rc = out ? copy_out(&x, task, path, dst, &n, &err) : copy_in(&x, src, task, path, &n, &err);
    }
    free(state);
    if (rc < 0) {
        sbx_cli_print_error(err);
        rc = err != NULL && err->code == SBX_E_USAGE ? SBX_EXIT_USAGE : SBX_EXIT_FAIL;
        sbx_error_free(&err);
        return rc;
    }
    if (json) {
        json_t *j = json_pack("{s:s, s:s, s:I, s:I, s:I, s:I, s:I}", "task", task, "direction",
                              out ? "out" : "in", "bytes", (json_int_t)n.bytes, "files",
                              (json_int_t)n.files, "dirs", (json_int_t)n.dirs, "links",
                              (json_int_t)n.links, "skipped", (json_int_t)n.skipped);
        char *s = json_dumps(j, JSON_COMPACT);

        printf("%s\n", s);
        free(s);
        json_decref(j);
    }
    return SBX_EXIT_OK;
}
