/* devc_features.c - local features (a folder with devcontainer-feature.json
 * and install.sh beside the definition), their options, their order; and
 * the lifecycle commands' three forms (devc.h). */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "image/devc.h"
#include "image/jsonc.h"
#include "util/xalloc.h"

#define DEVC_MAX_FEATURES 64
#define DEVC_MAX_CMDS 32
#define DEVC_MAX_DEPENDS 16 /* features added through dependsOn */
#define DEVC_FEATURE_JSON_MAX (256 * 1024)

static const char *const feature_known[] = {"id",
                                            "version",
                                            "name",
                                            "description",
                                            "documentationURL",
                                            "licenseURL",
                                            "keywords",
                                            "options",
                                            "installsAfter",
                                            "dependsOn",
                                            "containerEnv",
                                            "customizations",
                                            "legacyIds",
                                            "deprecated",
                                            "$schema",
                                            "onCreateCommand",
                                            "updateContentCommand",
                                            "postCreateCommand",
                                            "postStartCommand",
                                            "init",
                                            NULL};

char *sbx_devc_safe_id(const char *id)
{
    char *out = xstrdup(id);
    size_t i = 0;
    size_t j = 0;

    for (char *p = out; *p; p++) {
        if (!isalnum((unsigned char)*p) && *p != '_') {
            *p = '_';
        }
    }
    /* a leading run of digits and underscores becomes one '_' */
    while (out[i] != '\0' && (isdigit((unsigned char)out[i]) || out[i] == '_')) {
        i++;
    }
    if (i > 0) {
        out[j++] = '_';
    }
    memmove(out + j, out + i, strlen(out + i) + 1);
    for (char *p = out; *p; p++) {
        *p = (char)toupper((unsigned char)*p);
    }
    return out;
}

void sbx_devc_cmds_free(struct sbx_devc_cmd *cmds, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(cmds[i].label);
        for (size_t j = 0; cmds[i].argv != NULL && cmds[i].argv[j] != NULL; j++) {
            free(cmds[i].argv[j]);
        }
        free(cmds[i].argv);
    }
    free(cmds);
}

/* One command: a string (shell) or a non-empty array of strings (argv). */
static int one_cmd(const char *path, const char *label, json_t *v, struct sbx_devc_cmd **cmds,
                   size_t *n, sbx_error_t **err)
{
    struct sbx_devc_cmd *c;
    size_t i;
    json_t *x;

    if (*n >= DEVC_MAX_CMDS) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: %s: more than %d commands", path, label,
                             DEVC_MAX_CMDS);
    }
    if (!(json_is_string(v) && json_string_length(v) > 0) &&
        !(json_is_array(v) && json_array_size(v) > 0)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: %s must be a command string, an array of strings or an "
                             "object of them",
                             path, label);
    }
    json_array_foreach(v, i, x)
    {
        if (!json_is_string(x)) {
            return sbx_error_set(err, SBX_E_CONFIG, "%s: %s[%zu] must be a string", path, label, i);
        }
    }
    *cmds = xrealloc(*cmds, (*n + 1) * sizeof(**cmds));
    c = &(*cmds)[(*n)++];
    c->label = xasprintf("%s: %s", path, label);
    c->shell = json_is_string(v);
    c->argv = xcalloc(c->shell ? 2 : json_array_size(v) + 1, sizeof(char *));
    if (c->shell) {
        c->argv[0] = xstrdup(json_string_value(v));
    }
    json_array_foreach(v, i, x)
    {
        c->argv[i] = xstrdup(json_string_value(x));
    }
    return 0;
}

int sbx_devc_cmds(const char *path, const char *field, json_t *v, struct sbx_devc_cmd **cmds,
                  size_t *n, sbx_error_t **err)
{
    const char *k;
    json_t *x;

    if (!json_is_object(v)) {
        return one_cmd(path, field, v, cmds, n, err);
    }
    /* the object form: the spec runs them in parallel; sbx in the file's order */
    json_object_foreach(v, k, x)
    {
        char *label = xasprintf("%s.%.64s", field, k);
        int r = one_cmd(path, label, x, cmds, n, err);

        free(label);
        if (r < 0) {
            return -1;
        }
    }
    return 0;
}

/* The value of one option, checked against its declaration. */
static int option_value(const char *path, const char *ref, const char *name, json_t *decl,
                        json_t *given, char **out, sbx_error_t **err)
{
    const char *type = json_string_value(json_object_get(decl, "type"));
    json_t *v = given ? given : json_object_get(decl, "default");
    json_t *en = json_object_get(decl, "enum");
    size_t i;
    json_t *e;

    if (type == NULL || (strcmp(type, "string") != 0 && strcmp(type, "boolean") != 0)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: features[\"%s\"]: option '%s' has no type \"string\" or "
                             "\"boolean\" in its devcontainer-feature.json",
                             path, ref, name);
    }
    if (v == NULL) {
        *out = xstrdup(strcmp(type, "boolean") == 0 ? "false" : "");
        return 0;
    }
    if (strcmp(type, "boolean") == 0) {
        if (json_is_boolean(v)) {
            *out = xstrdup(json_is_true(v) ? "true" : "false");
            return 0;
        }
        if (json_is_string(v) && (strcmp(json_string_value(v), "true") == 0 ||
                                  strcmp(json_string_value(v), "false") == 0)) {
            *out = xstrdup(json_string_value(v));
            return 0;
        }
        return sbx_error_set(err, SBX_E_CONFIG, "%s: features[\"%s\"].%s must be true or false",
                             path, ref, name);
    }
    if (!json_is_string(v) || strchr(json_string_value(v), '\n') != NULL) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: features[\"%s\"].%s must be a string of one line", path, ref,
                             name);
    }
    if (given != NULL && json_is_array(en)) {
        int found = 0;

        json_array_foreach(en, i, e)
        {
            found |= json_is_string(e) && strcmp(json_string_value(e), json_string_value(v)) == 0;
        }
        if (!found) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: features[\"%s\"].%s: \"%.64s\" is not one of the "
                                 "option's enum",
                                 path, ref, name, json_string_value(v));
        }
    }
    *out = xstrdup(json_string_value(v));
    return 0;
}

static int feature_options(const char *path, struct sbx_devc_feature *f, json_t *decls,
                           json_t *given, sbx_error_t **err)
{
    const char *k;
    json_t *v;

    if (json_is_string(given)) {
        /* the short form: the value of the "version" option */
        json_t *o = json_pack("{s:O}", "version", given);
        int r = feature_options(path, f, decls, o, err);

        json_decref(o);
        return r;
    }
    if (given != NULL && !json_is_object(given)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: features[\"%s\"] must be an object of options (or a version "
                             "string)",
                             path, f->ref);
    }
    if (decls != NULL && !json_is_object(decls)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: features[\"%s\"]: its devcontainer-feature.json's options "
                             "must be an object",
                             path, f->ref);
    }
    json_object_foreach(given, k, v)
    {
        if (json_object_get(decls, k) == NULL) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: features[\"%s\"].%.64s: unknown option (%s/"
                                 "devcontainer-feature.json declares %zu)",
                                 path, f->ref, k, f->dir, json_object_size(decls));
        }
    }
    json_object_foreach(decls, k, v)
    {
        char *val = NULL;
        char *name;
        char *kv;

        if (option_value(path, f->ref, k, v, json_object_get(given, k), &val, err) < 0) {
            return -1;
        }
        name = sbx_devc_safe_id(k);
        kv = xasprintf("%s=%s", name, val);
        sbx_devc_strv_add(&f->env, kv);
        free(kv);
        free(name);
        free(val);
    }
    return 0;
}

static int id_list(const char *path, const char *ref, const char *field, json_t *v, int keys,
                   char ***out, sbx_error_t **err)
{
    size_t i;
    const char *k;
    json_t *x;

    if (v == NULL) {
        return 0;
    }
    if (keys ? !json_is_object(v) : !json_is_array(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: features[\"%s\"]: its %s must be an %s", path,
                             ref, field, keys ? "object" : "array of feature ids");
    }
    if (keys) {
        json_object_foreach(v, k, x)
        {
            sbx_devc_strv_add(out, k);
        }
        return 0;
    }
    json_array_foreach(v, i, x)
    {
        if (!json_is_string(x)) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: features[\"%s\"]: %s[%zu] must be a string", path, ref, field,
                                 i);
        }
        sbx_devc_strv_add(out, json_string_value(x));
    }
    return 0;
}

/* f->dir: dir when given, else the feature fetched from a registry the configuration
 * lists, else "./<folder>" beside the definition (base); a URL is refused. */
static int feature_dir(struct sbx_devc *dc, const char *base, const char *ref, const char *real,
                       const char *dir, struct sbx_devc_feature *f, sbx_error_t **err)
{
    const char *path = dc->path;
    char *joined;

    if (dir != NULL) {
        f->dir = xstrdup(dir);
    }
    else if (strncmp(real, "https://", 8) == 0 || strncmp(real, "http://", 7) == 0) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: features[\"%.128s\"]: features from a URL are not fetched "
                             "(a tarball); publish it to a registry of "
                             "image_registry.feature_registries, or copy it into the "
                             "definition's folder and name it \"./<folder>\"",
                             path, ref);
    }
    else if (strncmp(real, "./", 2) != 0) {
        /* (added) a feature from a registry the configuration lists */
        char *label = xasprintf("%s: features[\"%.200s\"]", path, ref);

        int fr = sbx_feature_oci_fetch_as(dc->fetch, label, real, &f->dir, &f->pinned, err);

        free(label);
        if (fr < 0) {
            return -1;
        }
    }
    else if (strstr(ref, "..") != NULL || strlen(ref) > 200) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: features[\"%.128s\"]: a local feature is \"./<folder>\" "
                             "beside the definition, without \"..\"",
                             path, ref);
    }
    else {
        joined = xasprintf("%s%s", base, ref + 2);
        f->dir = realpath(joined, NULL);
        free(joined);
        if (f->dir == NULL) {
            return sbx_error_set(err, SBX_E_CONFIG, "%s: features[\"%s\"]: no folder %s%s", path,
                                 ref, base, ref + 2);
        }
    }
    return 0;
}

/* The feature's containerEnv (v, not NULL) into f->container_env. */
static int feature_container_env(const char *path, const char *ref, json_t *v,
                                 struct sbx_devc_feature *f, sbx_error_t **err)
{
    const char *ek;
    json_t *ev;

    if (!json_is_object(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: features[\"%s\"]: containerEnv: not an object",
                             path, ref);
    }
    json_object_foreach(v, ek, ev)
    {
        char *kv;

        if (!json_is_string(ev) || strchr(json_string_value(ev), '\n') != NULL || *ek == '\0' ||
            strlen(ek) > 128 ||
            strspn(ek, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_") !=
                strlen(ek)) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: features[\"%s\"]: containerEnv.%.64s must be a string "
                                 "named by letters, digits and _",
                                 path, ref, ek);
        }
        kv = xasprintf("%s=%s", ek, json_string_value(ev));
        sbx_devc_strv_add(&f->container_env, kv);
        free(kv);
    }
    return 0;
}

/* The feature's lifecycle commands (onCreateCommand...) into f->cmds. */
static int feature_cmds(const char *path, const char *ref, json_t *root, struct sbx_devc_feature *f,
                        sbx_error_t **err)
{
    for (int s = 0; s < SBX_DEVC_NSTEPS; s++) {
        json_t *v = json_object_get(root, sbx_devc_step_field[s]);
        char *field;
        int r;

        if (v == NULL) {
            continue;
        }
        field = xasprintf("features[\"%s\"].%s", ref, sbx_devc_step_field[s]);
        r = sbx_devc_cmds(path, field, v, &f->cmds[s], &f->ncmds[s], err);
        free(field);
        if (r < 0) {
            return -1;
        }
    }
    return 0;
}

/* Reads devcontainer-feature.json (root, read from file) into f: only the fields sbx
 * honours, an id, its options with the given values, its containerEnv, its order and
 * dependencies, its commands. */
static int feature_json(const char *path, const char *ref, const char *file, json_t *root,
                        json_t *given, struct sbx_devc_feature *f, sbx_error_t **err)
{
    const char *k;
    json_t *v;

    json_object_foreach(root, k, v)
    {
        size_t i;

        for (i = 0; feature_known[i] != NULL && strcmp(feature_known[i], k) != 0; i++) {
        }
        if (feature_known[i] == NULL) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: features[\"%s\"]: %s: %.64s is not honoured by sbx image "
                                 "build (a sandbox's mounts, privileges and entrypoint are sbx's)",
                                 path, ref, file, k);
        }
    }
    v = json_object_get(root, "id");
    if (!json_is_string(v) || json_string_length(v) == 0) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: features[\"%s\"]: %s: id is missing", path,
                             ref, file);
    }
    f->id = xstrdup(json_string_value(v));
    v = json_object_get(root, "init");
    if (v != NULL && !json_is_true(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: features[\"%s\"]: %s: init: only true", path,
                             ref, file);
    }
    if (feature_options(path, f, json_object_get(root, "options"), given, err) < 0) {
        return -1;
    }
    v = json_object_get(root, "containerEnv");
    if (v != NULL && feature_container_env(path, ref, v, f, err) < 0) {
        return -1;
    }
    if (id_list(path, ref, "installsAfter", json_object_get(root, "installsAfter"), 0, &f->after,
                err) < 0 ||
        id_list(path, ref, "dependsOn", json_object_get(root, "dependsOn"), 1, &f->depends, err) <
            0) {
        return -1;
    }
    if (json_is_object(json_object_get(root, "dependsOn"))) {
        f->depends_on = json_incref(json_object_get(root, "dependsOn"));
    }
    return feature_cmds(path, ref, root, f, err);
}

/* Reads one feature into f. ref names it in messages (for a dependency:
 * 'A"].dependsOn["B'); real is what is fetched (NULL: ref); dir, when not
 * NULL, is its folder already there (nothing is fetched). */
static int load_feature(struct sbx_devc *dc, const char *base, const char *ref, const char *real,
                        const char *dir, json_t *given, struct sbx_devc_feature *f,
                        sbx_error_t **err)
{
    const char *path = dc->path;
    char *file;
    json_t *root;
    json_error_t jerr;
    int r = -1;

    f->ref = xstrdup(ref);
    real = real ? real : ref;
    if (feature_dir(dc, base, ref, real, dir, f, err) < 0) {
        return -1;
    }
    file = xasprintf("%s/install.sh", f->dir);
    if (access(file, R_OK) < 0) {
        sbx_error_set(err, SBX_E_CONFIG, "%s: features[\"%s\"]: %s is missing", path, ref, file);
        free(file);
        return -1;
    }
    free(file);
    file = xasprintf("%s/devcontainer-feature.json", f->dir);
    root = sbx_jsonc_load_file(file, DEVC_FEATURE_JSON_MAX, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL || !json_is_object(root)) {
        sbx_error_set(err, SBX_E_CONFIG, "%s: features[\"%s\"]: %s:%d: %s", path, ref, file,
                      root ? 1 : jerr.line, root ? "must be an object" : jerr.text);
    }
    else if (feature_json(path, ref, file, root, given, f, err) == 0) {
        r = 0;
    }
    json_decref(root);
    free(file);
    return r;
}

/* The index of the feature a dependsOn or installsAfter entry names: its
 * ref ("./b") or its id ("b"); -1 when none is listed. */
static int names(const char *r, const char *name)
{
    size_t nl = strlen(name);

    return strcmp(r, name) == 0 || (strncmp(r, "./", 2) == 0 && strcmp(r + 2, name) == 0) ||
           (strncmp(r, "./", 2) != 0 && strncmp(r, name, nl) == 0 &&
            (r[nl] == ':' || r[nl] == '@') && strchr(r + nl + 1, '/') == NULL);
}

static long find_feature(const struct sbx_devc *dc, const char *name)
{
    for (size_t i = 0; i < dc->nfeatures; i++) {
        if (names(dc->features[i].ref, name) || strcmp(dc->features[i].id, name) == 0) {
            return (long)i; /* "./b", "b", or REGISTRY/PATH/b for REGISTRY/PATH/b:TAG */
        }
    }
    return -1;
}

static void feature_free(struct sbx_devc_feature *f)
{
    sbx_devc_feature_fini(f);
    memset(f, 0, sizeof(*f));
}

static int same_env(char **a, char **b)
{
    size_t i = 0;

    for (; a != NULL && b != NULL && a[i] != NULL && b[i] != NULL; i++) {
        if (strcmp(a[i], b[i]) != 0) {
            return 0;
        }
    }
    return (a == NULL || a[i] == NULL) && (b == NULL || b[i] == NULL);
}

/* (added) One dependsOn entry k (options v) of features[i]: the index of the
 * feature it is. A listed feature named k with the same options (their
 * values after defaults), or one of the same pinned digest and options, is
 * it; else k is fetched like a listed feature and appended (its own
 * dependsOn resolved in turn). A local folder or an id only names a listed
 * feature (the spec's dependsOn names published features). */
static int resolve_one(struct sbx_devc *dc, const char *base, size_t i, const char *k, json_t *v,
                       size_t *added, long *out, sbx_error_t **err)
{
    struct sbx_feature_ref fr;
    struct sbx_devc_feature t = {0};
    char *label = xasprintf("%s\"].dependsOn[\"%.200s", dc->features[i].ref, k);
    json_t *given = json_is_true(v) ? NULL : v;
    int r = -1;

    *out = -1;
    if (strncmp(k, "./", 2) == 0 || strncmp(k, "../", 3) == 0 || strstr(k, "://") != NULL ||
        sbx_feature_ref_parse(k, &fr) < 0) {
        *out = find_feature(dc, k);
        if (*out < 0) {
            sbx_error_set(err, SBX_E_CONFIG,
                          "%s: features[\"%s\"]: dependsOn \"%.128s\" is not in features "
                          "(a dependsOn that is not listed is fetched only when it names a "
                          "published feature, REGISTRY/NAMESPACE/NAME[:TAG|@sha256:HEX])",
                          dc->path, dc->features[i].ref, k);
        }
        free(label);
        return *out < 0 ? -1 : 0;
    }
    for (size_t j = 0; j < dc->nfeatures && *out < 0; j++) {
        if (dc->features[j].dir != NULL && names(dc->features[j].ref, k)) {
            /* options that feature does not take: not it (the fetch below says why) */
            if (load_feature(dc, base, label, k, dc->features[j].dir, given, &t, err) < 0) {
                sbx_error_free(err);
            }
            else if (same_env(t.env, dc->features[j].env)) {
                *out = (long)j;
            }
            feature_free(&t);
        }
    }
    if (*out >= 0) {
        r = 0;
        goto out;
    }
    if (load_feature(dc, base, label, k, NULL, given, &t, err) < 0) {
        goto out;
    }
    for (size_t j = 0; j < dc->nfeatures && *out < 0; j++) {
        if (dc->features[j].pinned != NULL && strcmp(dc->features[j].pinned, t.pinned) == 0 &&
            same_env(t.env, dc->features[j].env)) {
            *out = (long)j;
        }
    }
    if (*out < 0) {
        if (*added >= DEVC_MAX_DEPENDS || dc->nfeatures >= DEVC_MAX_FEATURES) {
            sbx_error_set(err, SBX_E_CONFIG,
                          "%s: features[\"%s\"]: more than %d features through dependsOn "
                          "(%d in all)",
                          dc->path, label, DEVC_MAX_DEPENDS, DEVC_MAX_FEATURES);
            goto out;
        }
        (*added)++;
        free(t.ref);
        t.ref = xstrdup(k);
        dc->features = xrealloc(dc->features, (dc->nfeatures + 1) * sizeof(*dc->features));
        dc->features[dc->nfeatures] = t;
        memset(&t, 0, sizeof(t));
        *out = (long)dc->nfeatures++;
    }
    r = 0;
out:
    feature_free(&t);
    free(label);
    return r;
}

/* (added) Resolves every feature's dependsOn (those appended too). */
static int resolve_depends(struct sbx_devc *dc, const char *base, sbx_error_t **err)
{
    size_t added = 0;
    const char *k;
    json_t *v;

    for (size_t i = 0; i < dc->nfeatures; i++) {
        size_t j = 0;

        dc->features[i].dep_idx =
            xcalloc(json_object_size(dc->features[i].depends_on) + 1, sizeof(long));
        json_object_foreach(dc->features[i].depends_on, k, v)
        {
            long d;

            if (resolve_one(dc, base, i, k, v, &added, &d, err) < 0) {
                return -1;
            }
            dc->features[i].dep_idx[j++] = d;
        }
    }
    return 0;
}

/* Orders the features: each after its dependsOn and installsAfter; among
 * the ready ones, overrideFeatureInstallOrder's first, then the file's. */
static int order(struct sbx_devc *dc, json_t *override, sbx_error_t **err)
{
    size_t n = dc->nfeatures;
    unsigned char edge[DEVC_MAX_FEATURES][DEVC_MAX_FEATURES] = {{0}}; /* [a][b]: a before b */
    long prio[DEVC_MAX_FEATURES];
    int done[DEVC_MAX_FEATURES] = {0};
    struct sbx_devc_feature *out = xcalloc(n ? n : 1, sizeof(*out));
    size_t i;
    json_t *x;

    if (override != NULL && !json_is_array(override)) {
        free(out);
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: overrideFeatureInstallOrder must be an array of features",
                             dc->path);
    }
    for (i = 0; i < n; i++) {
        prio[i] = (long)n + (long)i;
    }
    json_array_foreach(override, i, x)
    {
        long f = json_is_string(x) ? find_feature(dc, json_string_value(x)) : -1;

        if (f < 0) {
            free(out);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: overrideFeatureInstallOrder[%zu] is not in features",
                                 dc->path, i);
        }
        prio[f] = (long)i;
    }
    for (i = 0; i < n; i++) {
        struct sbx_devc_feature *f = &dc->features[i];

        for (size_t j = 0; f->depends != NULL && f->depends[j] != NULL; j++) {
            long d = f->dep_idx != NULL ? f->dep_idx[j] : find_feature(dc, f->depends[j]);

            if (d < 0) {
                free(out);
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s: features[\"%s\"]: dependsOn \"%.128s\" is not in "
                                     "features (sbx installs only the features listed)",
                                     dc->path, f->ref, f->depends[j]);
            }
            edge[d][i] = 1;
        }
        for (size_t j = 0; prio[i] >= (long)n && f->after != NULL && f->after[j] != NULL; j++) {
            long d = find_feature(dc, f->after[j]);

            /* soft: only when present, and overrideFeatureInstallOrder's
             * features are ordered by it instead */
            if (d >= 0) {
                edge[d][i] = 1;
            }
        }
    }
    for (size_t k = 0; k < n; k++) {
        long best = -1;

        for (i = 0; i < n; i++) {
            int ready = !done[i];

            for (size_t j = 0; ready && j < n; j++) {
                ready = !(edge[j][i] && !done[j]);
            }
            if (ready && (best < 0 || prio[i] < prio[best])) {
                best = (long)i;
            }
        }
        if (best < 0) {
            char names[512] = "";

            for (i = 0; i < n; i++) {
                if (!done[i] && strlen(names) + strlen(dc->features[i].ref) + 4 < sizeof(names)) {
                    strcat(names, names[0] ? ", " : "");
                    strcat(names, dc->features[i].ref);
                }
            }
            free(out);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: features: a cycle in dependsOn/installsAfter among %s",
                                 dc->path, names);
        }
        done[best] = 1;
        out[k] = dc->features[best];
    }
    free(dc->features);
    dc->features = out;
    return 0;
}

int sbx_devc_features(struct sbx_devc *dc, json_t *features, json_t *override, sbx_error_t **err)
{
    const char *slash = strrchr(dc->path, '/');
    char *base;
    const char *k;
    json_t *v;
    int r;

    if (!json_is_object(features)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: features must be an object", dc->path);
    }
    if (json_object_size(features) > DEVC_MAX_FEATURES) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: features: more than %d", dc->path,
                             DEVC_MAX_FEATURES);
    }
    base = slash ? xasprintf("%.*s/", (int)(slash - dc->path), dc->path) : xstrdup("./");
    dc->features = xcalloc(json_object_size(features) + 1, sizeof(*dc->features));
    json_object_foreach(features, k, v)
    {
        struct sbx_devc_feature *f = &dc->features[dc->nfeatures++];

        if (load_feature(dc, base, k, NULL, NULL, json_is_true(v) ? NULL : v, f, err) < 0) {
            free(base);
            return -1;
        }
    }
    r = resolve_depends(dc, base, err);
    free(base);
    r = r < 0 ? r : order(dc, override, err);
    return r;
}
