/* devc_layer.c - the top layer's build context (devc.h): a Dockerfile FROM
 * the base (build arg SBX_BASE), the features copied with their options,
 * the lifecycle commands as RUN steps in exec form, and the scripts they
 * use, under /opt/sbx-devc of the image. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image/devc.h"
#include "util/xalloc.h"

#define LAYER_MAX_BYTES (64L * 1024 * 1024) /* features' files, in all */
#define LAYER_MAX_DEPTH 16

static const char lifecycle_sh[] =
    "#!/bin/sh\n"
    "# sbx: one lifecycle command of devcontainer.json (docs/image.md)\n"
    "# usage: lifecycle.sh LABEL sh 'command' | lifecycle.sh LABEL exec PROGRAM ARGS...\n"
    "label=$1; mode=$2; shift 2\n"
    "rc=0\n"
    "if [ \"$mode\" = sh ]; then /bin/sh -c \"$1\" || rc=$?; else \"$@\" || rc=$?; fi\n"
    "if [ \"$rc\" -ne 0 ]; then\n"
    "    echo \"sbx-lifecycle: $label failed (exit $rc)\" >&2\n"
    "    exit \"$rc\"\n"
    "fi\n";

static const char run_sh[] =
    "#!/bin/sh\n"
    "# sbx: installs one feature as the Dev Container spec does (docs/image.md)\n"
    "# usage: run.sh INDEX LABEL\n"
    "cd \"/opt/sbx-devc/features/$1\" || exit 1\n"
    "set -a\n"
    ". ../builtin.env\n"
    ". ./devcontainer-features.env\n"
    "set +a\n"
    "chmod +x ./install.sh\n"
    "rc=0\n"
    "./install.sh || rc=$?\n"
    "if [ \"$rc\" -ne 0 ]; then\n"
    "    echo \"sbx-lifecycle: $2: install.sh failed (exit $rc)\" >&2\n"
    "    exit \"$rc\"\n"
    "fi\n";

/* _CONTAINER_USER, _REMOTE_USER and their homes, read in the base. */
static const char builtin_sh[] =
    "#!/bin/sh\n"
    "# sbx: the features' built-in variables (docs/image.md)\n"
    "# usage: builtin.sh CONTAINER_USER REMOTE_USER (empty: the base image's user)\n"
    "cu=${1:-${SBX_BASE_USER:-root}}; ru=${2:-$cu}\n"
    "home() {\n"
    "    (command -v getent >/dev/null 2>&1 && getent passwd \"$1\" ||\n"
    "     grep -E \"^$1:|^[^:]*:[^:]*:$1:\" /etc/passwd || true) | head -n 1 | cut -d: -f6\n"
    "}\n"
    "{\n"
    "    echo \"_CONTAINER_USER='$cu'\"\n"
    "    echo \"_REMOTE_USER='$ru'\"\n"
    "    echo \"_CONTAINER_USER_HOME='$(home \"$cu\")'\"\n"
    "    echo \"_REMOTE_USER_HOME='$(home \"$ru\")'\"\n"
    "} >/opt/sbx-devc/features/builtin.env\n";

static const char sleep_check[] =
    "command -v sleep >/dev/null 2>&1 || { echo 'sbx-lifecycle: the image has no sleep "
    "program (sbx keeps every sandbox alive with sleep infinity; docs/image.md)' >&2; exit 1; }";

static int write_text(const char *path, const char *text, mode_t mode, sbx_error_t **err)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
    size_t len = strlen(text);
    size_t off = 0;

    if (fd < 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", path, strerror(errno));
    }
    while (off < len) {
        ssize_t w = write(fd, text + off, len - off);

        if (w < 0 && errno == EINTR) {
            continue;
        }
        if (w <= 0) {
            sbx_error_set(err, SBX_E_GENERIC, "%s: %s", path, strerror(errno));
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    fchmod(fd, mode);
    close(fd);
    return 0;
}

/* Copies the folder src into dst (made), regular files and folders only. */
static int copy_tree(const char *src, const char *dst, int depth, long *budget, sbx_error_t **err)
{
    DIR *d;
    struct dirent *e;
    int r = 0;

    if (depth > LAYER_MAX_DEPTH) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: folders nested deeper than %d", src,
                             LAYER_MAX_DEPTH);
    }
    if (mkdir(dst, 0755) < 0 && errno != EEXIST) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s: %s", dst, strerror(errno));
    }
    d = opendir(src);
    if (d == NULL) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: %s", src, strerror(errno));
    }
    while (r == 0 && (e = readdir(d)) != NULL) {
        char *s;
        char *t;
        struct stat st;

        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) {
            continue;
        }
        s = xasprintf("%s/%s", src, e->d_name);
        t = xasprintf("%s/%s", dst, e->d_name);
        if (lstat(s, &st) < 0) {
            r = sbx_error_set(err, SBX_E_CONFIG, "%s: %s", s, strerror(errno));
        }
        else if (S_ISDIR(st.st_mode)) {
            r = copy_tree(s, t, depth + 1, budget, err);
        }
        else if (S_ISREG(st.st_mode)) {
            int in = open(s, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
            int out = open(t, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, st.st_mode & 0755);
            char buf[65536];
            ssize_t n;

            *budget -= st.st_size;
            if (*budget < 0) {
                r = sbx_error_set(err, SBX_E_CONFIG, "%s: the features are larger than %ld MiB", s,
                                  LAYER_MAX_BYTES >> 20);
            }
            else if (in < 0 || out < 0) {
                r = sbx_error_set(err, SBX_E_GENERIC, "%s: %s", in < 0 ? s : t, strerror(errno));
            }
            while (r == 0 && (n = read(in, buf, sizeof(buf))) != 0) {
                if (n < 0 || write(out, buf, (size_t)n) != n) {
                    r = sbx_error_set(err, SBX_E_GENERIC, "copying %s: %s", s, strerror(errno));
                }
            }
            if (in >= 0) {
                close(in);
            }
            if (out >= 0) {
                close(out);
            }
        }
        else {
            r = sbx_error_set(err, SBX_E_CONFIG,
                              "%s: a feature holds regular files and folders only (a link or "
                              "device is refused)",
                              s);
        }
        free(s);
        free(t);
    }
    closedir(d);
    return r;
}

/* A Dockerfile RUN in exec form: the JSON array, no shell, no expansion. */
static void run_json(FILE *f, json_t *argv)
{
    char *s = json_dumps(argv, JSON_COMPACT);

    fprintf(f, "RUN %s\n", s);
    free(s);
    json_decref(argv);
}

/* ENV NAME="value" with the Dockerfile's escapes ($, ", \). */
static void env_line(FILE *f, const char *kv)
{
    const char *eq = strchr(kv, '=');

    fprintf(f, "ENV %.*s=\"", (int)(eq - kv), kv);
    for (const char *p = eq + 1; *p; p++) {
        if (*p == '"' || *p == '\\' || *p == '$') {
            fputc('\\', f);
        }
        fputc(*p, f);
    }
    fputs("\"\n", f);
}

static json_t *cmd_argv(const struct sbx_devc_cmd *c)
{
    json_t *a = json_pack("[s,s,s,s]", "/bin/sh", SBX_DEVC_SHARE "/lifecycle.sh", c->label,
                          c->shell ? "sh" : "exec");

    for (size_t i = 0; c->argv[i] != NULL; i++) {
        json_array_append_new(a, json_string(c->argv[i]));
    }
    return a;
}

/* 'text' for /bin/sh. */
static void sh_quote(FILE *f, const char *s)
{
    fputc('\'', f);
    for (; *s; s++) {
        if (*s == '\'') {
            fputs("'\\''", f);
        }
        else {
            fputc(*s, f);
        }
    }
    fputc('\'', f);
}

static int write_post_start(const struct sbx_devc *dc, const char *dir, int *any, sbx_error_t **err)
{
    char *path = xasprintf("%s/sbx/post-start.sh", dir);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    int r;

    fputs("#!/bin/sh\n# sbx: postStartCommand, run at each sandbox start (docs/image.md)\n"
          "set -e\n",
          f);
    *any = 0;
    for (size_t i = 0; i <= dc->nfeatures; i++) {
        struct sbx_devc_cmd *cmds = i < dc->nfeatures ? dc->features[i].cmds[SBX_DEVC_POST_START]
                                                      : dc->cmds[SBX_DEVC_POST_START];
        size_t n = i < dc->nfeatures ? dc->features[i].ncmds[SBX_DEVC_POST_START]
                                     : dc->ncmds[SBX_DEVC_POST_START];

        for (size_t k = 0; k < n; k++) {
            fputs("/bin/sh " SBX_DEVC_SHARE "/lifecycle.sh ", f);
            sh_quote(f, cmds[k].label);
            fputs(cmds[k].shell ? " sh" : " exec", f);
            for (size_t a = 0; cmds[k].argv[a] != NULL; a++) {
                fputc(' ', f);
                sh_quote(f, cmds[k].argv[a]);
            }
            fputc('\n', f);
            *any = 1;
        }
    }
    fclose(f);
    r = *any ? write_text(path, text, 0755, err) : 0;
    free(text);
    free(path);
    return r;
}

static int write_features(const struct sbx_devc *dc, const char *dir, sbx_error_t **err)
{
    long budget = LAYER_MAX_BYTES;
    char *p = xasprintf("%s/sbx/features", dir);
    int r = mkdir(p, 0755);

    free(p);
    if (r < 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s/sbx/features: %s", dir, strerror(errno));
    }
    p = xasprintf("%s/sbx/features/run.sh", dir);
    r = write_text(p, run_sh, 0755, err);
    free(p);
    p = xasprintf("%s/sbx/features/builtin.sh", dir);
    r = r < 0 ? r : write_text(p, builtin_sh, 0755, err);
    free(p);
    for (size_t i = 0; r == 0 && i < dc->nfeatures; i++) {
        const struct sbx_devc_feature *fe = &dc->features[i];
        char *t = xasprintf("%s/sbx/features/%zu", dir, i);
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        r = copy_tree(fe->dir, t, 0, &budget, err);
        for (size_t k = 0; fe->env != NULL && fe->env[k] != NULL; k++) {
            const char *eq = strchr(fe->env[k], '=');

            fprintf(f, "%.*s=", (int)(eq - fe->env[k]), fe->env[k]);
            sh_quote(f, eq + 1);
            fputc('\n', f);
        }
        fclose(f);
        free(t);
        t = xasprintf("%s/sbx/features/%zu/devcontainer-features.env", dir, i);
        if (r == 0) {
            unlink(t); /* a feature's own file of that name is replaced */
            r = write_text(t, text, 0644, err);
        }
        free(t);
        free(text);
    }
    return r;
}

/* (added) LABEL dev.sbx.features: each feature from a registry and the
 * digest it was read by, so the image says what it was built from. */
static void write_pins(const struct sbx_devc *dc, FILE *f)
{
    json_t *a = json_array();
    char *text;

    for (size_t i = 0; i < dc->nfeatures; i++) {
        if (dc->features[i].pinned != NULL) {
            json_array_append_new(a, json_pack("{s:s, s:s}", "ref", dc->features[i].ref, "pinned",
                                               dc->features[i].pinned));
        }
    }
    if (json_array_size(a) > 0) {
        text = json_dumps(a, JSON_COMPACT);
        fputs("LABEL " SBX_DEVC_FEATURES_LABEL "=\"", f);
        for (const char *p = text; *p; p++) {
            if (*p == '"' || *p == '\\' || *p == '$') {
                fputc('\\', f);
            }
            fputc(*p, f);
        }
        fputs("\"\n", f);
        free(text);
    }
    json_decref(a);
}

static void write_dockerfile(const struct sbx_devc *dc, FILE *f, int post_start)
{
    const char *user = dc->remote_user ? dc->remote_user : dc->container_user;

    fprintf(f, "# generated by sbx image build (docs/image.md)\n"
               "ARG SBX_BASE\n"
               "FROM ${SBX_BASE}\n"
               "ARG SBX_BASE_USER=root\n"
               "USER root\n"
               "COPY sbx/ " SBX_DEVC_SHARE "/\n");
    if (dc->nfeatures > 0) {
        run_json(f, json_pack("[s,s,s,s]", "/bin/sh", SBX_DEVC_SHARE "/features/builtin.sh",
                              dc->container_user ? dc->container_user : "",
                              dc->remote_user ? dc->remote_user : ""));
    }
    for (size_t i = 0; i < dc->nfeatures; i++) {
        const struct sbx_devc_feature *fe = &dc->features[i];
        char idx[32];
        char *label = xasprintf("%s: features[\"%s\"]", dc->path, fe->ref);

        for (size_t k = 0; fe->container_env != NULL && fe->container_env[k] != NULL; k++) {
            env_line(f, fe->container_env[k]);
        }
        snprintf(idx, sizeof(idx), "%zu", i);
        run_json(f,
                 json_pack("[s,s,s,s]", "/bin/sh", SBX_DEVC_SHARE "/features/run.sh", idx, label));
        free(label);
    }
    for (size_t k = 0; dc->env != NULL && dc->env[k] != NULL; k++) {
        env_line(f, dc->env[k]);
    }
    /* WORKDIR takes no JSON form: devc.c allows only [A-Za-z0-9/._-] */
    fprintf(f, "WORKDIR %s\n", dc->workdir);
    if (user != NULL) {
        fprintf(f, "USER %s\n", user);
    }
    else {
        fputs("USER ${SBX_BASE_USER}\n", f);
    }
    for (int s = 0; s < SBX_DEVC_POST_START; s++) {
        for (size_t i = 0; i <= dc->nfeatures; i++) {
            struct sbx_devc_cmd *cmds = i < dc->nfeatures ? dc->features[i].cmds[s] : dc->cmds[s];
            size_t n = i < dc->nfeatures ? dc->features[i].ncmds[s] : dc->ncmds[s];

            for (size_t k = 0; k < n; k++) {
                run_json(f, cmd_argv(&cmds[k]));
            }
        }
    }
    run_json(f, json_pack("[s,s,s]", "/bin/sh", "-c", sleep_check));
    write_pins(dc, f);
    if (post_start) {
        fputs("LABEL " SBX_DEVC_POST_START_LABEL "=\"" SBX_DEVC_SHARE "/post-start.sh\"\n", f);
    }
}

int sbx_devc_write_layer(const struct sbx_devc *dc, const char *dir, sbx_error_t **err)
{
    char *p = xasprintf("%s/sbx", dir);
    char *text = NULL;
    size_t len = 0;
    int post_start = 0;
    int r;
    FILE *f;

    r = mkdir(p, 0755);
    free(p);
    if (r < 0) {
        return sbx_error_set(err, SBX_E_GENERIC, "%s/sbx: %s", dir, strerror(errno));
    }
    p = xasprintf("%s/sbx/lifecycle.sh", dir);
    r = write_text(p, lifecycle_sh, 0755, err);
    free(p);
    if (r < 0 || (dc->nfeatures > 0 && write_features(dc, dir, err) < 0) ||
        write_post_start(dc, dir, &post_start, err) < 0) {
        return -1;
    }
    f = open_memstream(&text, &len);
    write_dockerfile(dc, f, post_start);
    fclose(f);
    p = xasprintf("%s/Dockerfile", dir);
    r = write_text(p, text, 0644, err);
    free(p);
    free(text);
    return r;
}
