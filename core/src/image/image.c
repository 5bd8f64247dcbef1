/* image.c - reading .devcontainer/devcontainer.json for the warm image. */
#include "image/image.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/jsonc.h"
#include "image/mise.h"
#include "util/log.h"
#include "util/paths.h"
#include "util/xalloc.h"

/* Packages every sandbox image has (issue: bash, ca-certificates, curl, git). */
static const char *const required_packages[] = {"bash", "ca-certificates", "curl", "git", NULL};

/* The Docker sidecar (docs/testcontainers.md): sorted. */
const char *const sbx_image_sidecar_packages[] = {
    "ca-certificates", "docker.io", "iptables", "procps", "rootlesskit", "uidmap", NULL};

char *sbx_image_def_find(const char *explicit_path, sbx_error_t **err)
{
    char *dir;
    char *p;

    if (explicit_path != NULL) {
        if (access(explicit_path, R_OK) < 0) {
            sbx_error_set(err, SBX_E_USAGE, "%s: cannot read the image definition", explicit_path);
            return NULL;
        }
        return xstrdup(explicit_path);
    }
    if (access(".devcontainer/devcontainer.json", R_OK) == 0) {
        return realpath(".devcontainer/devcontainer.json", NULL);
    }
    dir = sbx_asset_dir(SBX_ASSET_IMAGE);
    p = dir ? xasprintf("%s/devcontainer.json", dir) : NULL;
    if (p != NULL && access(p, R_OK) == 0) {
        free(dir);
        return p;
    }
    sbx_error_set(err, SBX_E_USAGE,
                  "no .devcontainer/devcontainer.json here and none shipped with sbx (%s); "
                  "pass --definition",
                  p ? p : "/proc/self/exe unreadable");
    free(p);
    free(dir);
    return NULL;
}

static int valid_package(const char *s)
{
    if (s == NULL || *s == '\0' || strlen(s) > 100) {
        return 0;
    }
    for (; *s; s++) {
        if (!((*s >= 'a' && *s <= 'z') || (*s >= '0' && *s <= '9') || *s == '+' || *s == '-' ||
              *s == '.')) {
            return 0;
        }
    }
    return 1;
}

int sbx_image_npm_spec_valid(const char *s)
{
    const char *at;

    if (s == NULL || strlen(s) > 214 || s[0] == '\0' || s[0] == '-' || s[0] == '.') {
        return 0;
    }
    at = strchr(s + 1, '@'); /* a scope's own '@' comes first */
    if (at == NULL || at[1] == '\0') {
        return 0;
    }
    for (const char *p = s; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-' || *p == '_' ||
              *p == '.' || *p == '@' || *p == '/' || *p == '~' || *p == '^' ||
              (p > at && *p >= 'A' && *p <= 'Z'))) {
            return 0;
        }
    }
    return 1;
}

static int add_unique(char ***v, size_t *n, const char *s)
{
    for (size_t i = 0; i < *n; i++) {
        if (strcmp((*v)[i], s) == 0) {
            return 0;
        }
    }
    *v = xrealloc(*v, (*n + 2) * sizeof(char *));
    (*v)[(*n)++] = xstrdup(s);
    (*v)[*n] = NULL;
    return 1;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* mise.toml of the repository the definition belongs to: the parent of a
 * ".devcontainer" folder, else the definition's own folder. */
static char *read_mise(const char *def_path)
{
    char *dir = xstrdup(def_path);
    char *slash = strrchr(dir, '/');
    const char *base;
    char *path;
    char *text = NULL;
    FILE *f;

    if (slash == NULL) {
        free(dir);
        dir = xstrdup(".");
    }
    else {
        *slash = '\0'; /* the definition's folder */
        base = strrchr(dir, '/') ? strrchr(dir, '/') + 1 : dir;
        if (strcmp(base, ".devcontainer") == 0) {
            slash = strrchr(dir, '/');
            if (slash != NULL) {
                *slash = '\0';
            }
            else {
                free(dir);
                dir = xstrdup(".");
            }
        }
        if (dir[0] == '\0') {
            free(dir);
            dir = xstrdup("/");
        }
    }
    path = xasprintf("%s/mise.toml", dir);
    f = fopen(path, "r");
    if (f != NULL) {
        size_t cap = 65536;
        size_t n;

        text = xmalloc(cap + 1);
        n = fread(text, 1, cap, f);
        text[n] = '\0';
        fclose(f);
    }
    free(path);
    free(dir);
    return text;
}

struct sbx_image_def *sbx_image_def_load(const char *path, sbx_error_t **err)
{
    return sbx_image_def_load_with(path, NULL, err);
}

/* customizations.sbx (sbx, NULL when absent): the Debian suite, the packages (the
 * required ones first; sorted) and the npm specs (sorted). */
static int sbx_fields(struct sbx_image_def *d, const char *path, json_t *sbx, sbx_error_t **err)
{
    json_t *pkgs;
    json_t *v;
    size_t n = 0;
    size_t i;

    if (sbx != NULL && !json_is_object(sbx)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: customizations.sbx must be an object", path);
    }
    v = json_object_get(sbx, "suite");
    if (v != NULL && (!json_is_string(v) || !valid_package(json_string_value(v)))) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: customizations.sbx.suite must be a Debian suite "
                             "name such as \"bookworm\"",
                             path);
    }
    d->suite = xstrdup(v ? json_string_value(v) : "bookworm");
    for (i = 0; required_packages[i] != NULL; i++) {
        add_unique(&d->packages, &n, required_packages[i]);
    }
    pkgs = json_object_get(sbx, "packages");
    if (pkgs != NULL && !json_is_array(pkgs)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: customizations.sbx.packages must be an array of "
                             "Debian package names",
                             path);
    }
    json_array_foreach(pkgs, i, v)
    {
        if (!json_is_string(v) || !valid_package(json_string_value(v))) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: customizations.sbx.packages[%zu] is not a "
                                 "Debian package name",
                                 path, i);
        }
        add_unique(&d->packages, &n, json_string_value(v));
    }
    qsort(d->packages, n, sizeof(char *), cmp_str);
    pkgs = json_object_get(sbx, "npm");
    if (pkgs != NULL && !json_is_array(pkgs)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: customizations.sbx.npm must be an array of "
                             "\"name@version\" strings",
                             path);
    }
    n = 0;
    json_array_foreach(pkgs, i, v)
    {
        if (!json_is_string(v) || !sbx_image_npm_spec_valid(json_string_value(v))) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: customizations.sbx.npm[%zu] is not an npm "
                                 "\"name@version\"",
                                 path, i);
        }
        add_unique(&d->npm, &n, json_string_value(v));
    }
    if (n > 0) {
        qsort(d->npm, n, sizeof(char *), cmp_str);
    }
    return 0;
}

/* containerEnv as KEY=VALUE strings, and workspaceFolder. */
static int env_and_workdir(struct sbx_image_def *d, const char *path, json_t *root,
                           sbx_error_t **err)
{
    json_t *env = json_object_get(root, "containerEnv");
    const char *k;
    json_t *v;
    size_t n = 0;

    if (env != NULL && !json_is_object(env)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: containerEnv must be an object of strings",
                             path);
    }
    json_object_foreach(env, k, v)
    {
        char *kv;

        if (!json_is_string(v) || strchr(k, '=') != NULL || *k == '\0') {
            return sbx_error_set(err, SBX_E_CONFIG, "%s: containerEnv.%s must be a string", path,
                                 k);
        }
        kv = xasprintf("%s=%s", k, json_string_value(v));
        add_unique(&d->env, &n, kv);
        free(kv);
    }
    v = json_object_get(root, "workspaceFolder");
    if (v != NULL && (!json_is_string(v) || json_string_value(v)[0] != '/')) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: workspaceFolder must be an absolute path",
                             path);
    }
    d->workdir = xstrdup(v ? json_string_value(v) : "/workspace");
    return 0;
}

/* The repository's mise.toml (UTF-8 text) and its tools: Debian packages and npm specs
 * (image/mise.c); *mise_tools for the content hash. */
static int mise_fields(struct sbx_image_def *d, const char *path, json_t **mise_tools,
                       sbx_error_t **err)
{
    d->mise = read_mise(path);
    if (d->mise != NULL) {
        /* the canonical spec is JSON: mise.toml must be UTF-8 text */
        json_t *t = json_string(d->mise);

        if (t == NULL) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: the mise.toml of this repository is not UTF-8 "
                                 "text",
                                 path);
        }
        json_decref(t);
    }
    /* (added) mise.toml's tools: Debian packages and npm specs (image/mise.c) */
    return sbx_mise_apply(d->mise, "mise.toml", &d->packages, &d->npm, mise_tools, err);
}

/* d->canonical: the content hash covers exactly what shapes the image (mise_tools,
 * owned, when not NULL). */
static void canonical(struct sbx_image_def *d, json_t *mise_tools)
{
    json_t *canon =
        json_pack("{s:i, s:s, s:o, s:o, s:s, s:s?}", "format", 1, "suite", d->suite, "packages",
                  json_array(), "env", json_array(), "workdir", d->workdir, "mise", d->mise);
    size_t i;

    for (i = 0; d->packages[i] != NULL; i++) {
        json_array_append_new(json_object_get(canon, "packages"), json_string(d->packages[i]));
    }
    for (i = 0; d->env != NULL && d->env[i] != NULL; i++) {
        json_array_append_new(json_object_get(canon, "env"), json_string(d->env[i]));
    }
    if (d->npm != NULL) {
        /* only when present: definitions without npm keep their hash */
        json_t *a = json_array();

        for (i = 0; d->npm[i] != NULL; i++) {
            json_array_append_new(a, json_string(d->npm[i]));
        }
        json_object_set_new(canon, "npm", a);
    }
    if (d->devc != NULL) {
        /* only when present: definitions of the shortcut keep their hash */
        json_object_set_new(canon, "devc", sbx_devc_canonical(d->devc));
    }
    if (mise_tools != NULL) { /* (added) only with tools: other hashes stay */
        json_object_set_new(canon, "mise_tools", mise_tools);
    }
    d->canonical = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(canon);
}

struct sbx_image_def *sbx_image_def_load_with(const char *path, const struct sbx_devc_fetch *fetch,
                                              sbx_error_t **err)
{
    struct sbx_image_def *d = xcalloc(1, sizeof(*d));
    json_error_t jerr;
    /* JSONC, as the spec allows: comments and trailing commas */
    json_t *root = sbx_jsonc_load_file(path, SBX_IMAGE_DEF_MAX, JSON_REJECT_DUPLICATES, &jerr);
    json_t *mise_tools = NULL;

    d->path = xstrdup(path);
    if (root == NULL) {
        sbx_error_set(err, SBX_E_CONFIG, "%s:%d: %s", path, jerr.line, jerr.text);
        goto fail;
    }
    if (!json_is_object(root)) {
        sbx_error_set(err, SBX_E_CONFIG, "%s: the top level must be an object", path);
        goto fail;
    }
    /* every other field of the spec: honoured or refused by name */
    if (sbx_devc_parse_with(path, root, fetch, &d->devc, err) < 0 ||
        sbx_fields(d, path, json_object_get(json_object_get(root, "customizations"), "sbx"), err) <
            0 ||
        env_and_workdir(d, path, root, err) < 0 || mise_fields(d, path, &mise_tools, err) < 0) {
        goto fail;
    }
    canonical(d, mise_tools);
    json_decref(root);
    return d;
fail:
    json_decref(root);
    sbx_image_def_free(d);
    return NULL;
}

static void free_strv(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

void sbx_image_def_free(struct sbx_image_def *d)
{
    if (d == NULL) {
        return;
    }
    free(d->path);
    free(d->suite);
    free_strv(d->packages);
    free_strv(d->env);
    free(d->workdir);
    free(d->mise);
    free_strv(d->npm);
    free(d->canonical);
    sbx_devc_free(d->devc);
    free(d);
}

char *sbx_image_sidecar_canonical(const struct sbx_image_def *d)
{
    json_t *canon = json_pack("{s:i, s:s, s:[], s:s}", "format", 1, "kind", "sidecar", "packages",
                              "suite", d->suite);
    char *out;

    for (size_t i = 0; sbx_image_sidecar_packages[i] != NULL; i++) {
        json_array_append_new(json_object_get(canon, "packages"),
                              json_string(sbx_image_sidecar_packages[i]));
    }
    out = json_dumps(canon, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(canon);
    return out;
}
