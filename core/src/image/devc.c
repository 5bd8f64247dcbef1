/* devc.c - the Dev Container spec's top-level fields (devc.h): each one is
 * honoured or refused by name; docs/image.md has the table. */
#include "image/devc.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/xalloc.h"

/* Fields refused, and why (docs/image.md, the table). */
static const struct {
    const char *name;
    const char *why;
} refused[] = {
    {"initializeCommand", "it runs on the host, and a definition never runs code on the box"},
    {"postAttachCommand", "nothing attaches to a sandbox: use postStartCommand"},
    {"forwardPorts", "a sandbox has no network but the egress proxy"},
    {"portsAttributes", "a sandbox has no network but the egress proxy"},
    {"otherPortsAttributes", "a sandbox has no network but the egress proxy"},
    {"appPort", "a sandbox has no network but the egress proxy"},
    {"runArgs", "a sandbox's isolation is sbx's (docs/providers.md)"},
    {"privileged", "a sandbox's isolation is sbx's (docs/providers.md)"},
    {"capAdd", "a sandbox's isolation is sbx's (docs/providers.md)"},
    {"securityOpt", "a sandbox's isolation is sbx's (docs/providers.md)"},
    {"mounts", "a sandbox's mounts are sbx's (its worktree, the caches)"},
    {"workspaceMount", "a sandbox's mounts are sbx's (its worktree at /workspace)"},
    {"hostRequirements", "a sandbox's limits come from the policy (docs/policy.md)"},
    {"dockerComposeFile", "a sandbox is one container; Testcontainers has its sidecar"},
    {"service", "a sandbox is one container; Testcontainers has its sidecar"},
    {"runServices", "a sandbox is one container; Testcontainers has its sidecar"},
    {"secrets", "credentials come from the credential plugin (docs/credentials.md)"},
    {NULL, NULL},
};

/* Fields read here or by image.c. */
static const char *const known[] = {"$schema",
                                    "name",
                                    "image",
                                    "build",
                                    "dockerFile",
                                    "context",
                                    "features",
                                    "overrideFeatureInstallOrder",
                                    "containerEnv",
                                    "remoteEnv",
                                    "containerUser",
                                    "remoteUser",
                                    "updateRemoteUserUID",
                                    "userEnvProbe",
                                    "workspaceFolder",
                                    "onCreateCommand",
                                    "updateContentCommand",
                                    "postCreateCommand",
                                    "postStartCommand",
                                    "waitFor",
                                    "overrideCommand",
                                    "init",
                                    "shutdownAction",
                                    "customizations",
                                    NULL};

const char *const sbx_devc_step_field[SBX_DEVC_NSTEPS] = {"onCreateCommand", "updateContentCommand",
                                                          "postCreateCommand", "postStartCommand"};

void sbx_devc_strv_add(char ***v, const char *s)
{
    size_t n = 0;

    while (*v != NULL && (*v)[n] != NULL) {
        n++;
    }
    *v = xrealloc(*v, (n + 2) * sizeof(char *));
    (*v)[n] = xstrdup(s);
    (*v)[n + 1] = NULL;
}

static void strv_free(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

/* The folder of path, with a trailing '/'. */
static char *dir_of(const char *path)
{
    const char *slash = strrchr(path, '/');

    return slash ? xasprintf("%.*s/", (int)(slash - path), path) : xstrdup("./");
}

static int valid_env_name(const char *k)
{
    if (*k == '\0' || strlen(k) > 128 || (*k >= '0' && *k <= '9')) {
        return 0;
    }
    for (; *k; k++) {
        if (!((*k >= 'a' && *k <= 'z') || (*k >= 'A' && *k <= 'Z') || (*k >= '0' && *k <= '9') ||
              *k == '_')) {
            return 0;
        }
    }
    return 1;
}

static int env_object(const char *path, const char *field, json_t *v, char ***out,
                      sbx_error_t **err)
{
    const char *k;
    json_t *x;

    if (v == NULL) {
        return 0;
    }
    if (!json_is_object(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: %s must be an object of strings", path, field);
    }
    json_object_foreach(v, k, x)
    {
        char *kv;

        if (!valid_env_name(k)) {
            return sbx_error_set(err, SBX_E_CONFIG, "%s: %s: '%.64s' is not a variable name", path,
                                 field, k);
        }
        if (!json_is_string(x)) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: %s.%s must be a string (null, which unsets, is refused: "
                                 "an image cannot unset a variable)",
                                 path, field, k);
        }
        if (strstr(json_string_value(x), "${") != NULL) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: %s.%s: variables (${...}) are not substituted by sbx "
                                 "image build; write the value",
                                 path, field, k);
        }
        if (strchr(json_string_value(x), '\n') != NULL) {
            return sbx_error_set(err, SBX_E_CONFIG, "%s: %s.%s: a value has no newline", path,
                                 field, k);
        }
        kv = xasprintf("%s=%s", k, json_string_value(x));
        sbx_devc_strv_add(out, kv);
        free(kv);
    }
    return 0;
}

static int valid_user(const char *u)
{
    if (u == NULL || *u == '\0' || strlen(u) > 64 || *u == '-') {
        return 0;
    }
    for (; *u; u++) {
        if (!((*u >= 'a' && *u <= 'z') || (*u >= 'A' && *u <= 'Z') || (*u >= '0' && *u <= '9') ||
              *u == '_' || *u == '-' || *u == '.' || *u == ':')) {
            return 0;
        }
    }
    return 1;
}

static int user_field(const char *path, json_t *root, const char *field, char **out,
                      sbx_error_t **err)
{
    json_t *v = json_object_get(root, field);

    if (v == NULL) {
        return 0;
    }
    if (!json_is_string(v) || !valid_user(json_string_value(v))) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: %s must be a user name or uid[:gid] (letters, digits, _ - . :)",
                             path, field);
    }
    *out = xstrdup(json_string_value(v));
    return 0;
}

/* A path the definition names, relative to its folder; it must exist. */
static int def_path(const char *path, const char *field, const char *rel, const char *base,
                    int want_dir, char **out, sbx_error_t **err)
{
    char *joined = rel[0] == '/' ? xstrdup(rel) : xasprintf("%s%s", base, rel);
    char *real = realpath(joined, NULL);

    if (real == NULL || access(real, R_OK) < 0) {
        sbx_error_set(err, SBX_E_CONFIG, "%s: %s: %s does not exist or cannot be read", path, field,
                      joined);
        free(joined);
        free(real);
        return -1;
    }
    free(joined);
    if (want_dir && access(real, X_OK) < 0) {
        sbx_error_set(err, SBX_E_CONFIG, "%s: %s: %s is not a folder", path, field, real);
        free(real);
        return -1;
    }
    *out = real;
    return 0;
}

static int string_array(const char *path, const char *field, json_t *v, char ***out,
                        sbx_error_t **err)
{
    size_t i;
    json_t *x;

    if (json_is_string(v)) {
        sbx_devc_strv_add(out, json_string_value(v));
        return 0;
    }
    if (!json_is_array(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: %s must be a string or an array of strings",
                             path, field);
    }
    json_array_foreach(v, i, x)
    {
        if (!json_is_string(x) || json_string_length(x) == 0 || json_string_length(x) > 256) {
            return sbx_error_set(err, SBX_E_CONFIG, "%s: %s[%zu] must be a non-empty string", path,
                                 field, i);
        }
        sbx_devc_strv_add(out, json_string_value(x));
    }
    return 0;
}

/* An image reference as the engine takes it (no option-like leading '-'). */
static int valid_ref(const char *s)
{
    size_t n = strlen(s);

    return n > 0 && n <= 256 && s[0] != '-' &&
           strspn(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._:/@-") == n;
}

static int build_fields(struct sbx_devc *dc, json_t *root, const char *base, sbx_error_t **err)
{
    const char *path = dc->path;
    json_t *build = json_object_get(root, "build");
    json_t *v;
    const char *k;
    const char *df = NULL;
    const char *ctx = NULL;

    v = json_object_get(root, "image");
    if (v != NULL && (!json_is_string(v) || !valid_ref(json_string_value(v)))) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: image must be an image reference (letters, digits, . _ : / @ -)",
                             path);
    }
    if (v != NULL) {
        dc->image = xstrdup(json_string_value(v));
    }
    if (build != NULL && !json_is_object(build)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: build must be an object", path);
    }
    json_object_foreach(build, k, v)
    {
        if (strcmp(k, "dockerfile") != 0 && strcmp(k, "context") != 0 && strcmp(k, "args") != 0 &&
            strcmp(k, "target") != 0 && strcmp(k, "cacheFrom") != 0) {
            return sbx_error_set(
                err, SBX_E_CONFIG, "%s: build.%s is not honoured by sbx image build (%s)", path, k,
                strcmp(k, "options") == 0 ? "arbitrary builder flags are refused"
                                          : "not a field of the Dev Container spec's build");
        }
    }
    v = json_object_get(build, "dockerfile");
    if (v == NULL) {
        v = json_object_get(root, "dockerFile"); /* the spec's older spelling */
    }
    if (v != NULL && !json_is_string(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: build.dockerfile must be a path", path);
    }
    df = json_string_value(v);
    v = json_object_get(build, "context");
    if (v == NULL) {
        v = json_object_get(root, "context");
    }
    if (v != NULL && !json_is_string(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: build.context must be a path", path);
    }
    ctx = json_string_value(v);
    if (df == NULL) {
        if (ctx != NULL || json_object_size(build) > 0) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: build: build.dockerfile is missing (the other build "
                                 "fields need it)",
                                 path);
        }
        return 0;
    }
    if (dc->image != NULL) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: image and build.dockerfile: name one base, not both", path);
    }
    if (def_path(path, "build.dockerfile", df, base, 0, &dc->dockerfile, err) < 0) {
        return -1;
    }
    if (ctx == NULL) {
        ctx = "."; /* the spec: relative to the definition */
    }
    if (def_path(path, "build.context", ctx, base, 1, &dc->context, err) < 0) {
        return -1;
    }
    v = json_object_get(build, "args");
    if (env_object(path, "build.args", v, &dc->args, err) < 0) {
        return -1;
    }
    v = json_object_get(build, "target");
    if (v != NULL && (!json_is_string(v) || !valid_user(json_string_value(v)))) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: build.target must be a stage name", path);
    }
    if (v != NULL) {
        dc->target = xstrdup(json_string_value(v));
    }
    v = json_object_get(build, "cacheFrom");
    if (v != NULL && string_array(path, "build.cacheFrom", v, &dc->cache_from, err) < 0) {
        return -1;
    }
    for (size_t i = 0; dc->cache_from != NULL && dc->cache_from[i] != NULL; i++) {
        if (!valid_ref(dc->cache_from[i])) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: build.cacheFrom: '%.64s' is not an image reference", path,
                                 dc->cache_from[i]);
        }
    }
    return 0;
}

/* Fields accepted only with the value sbx always has. */
static int fixed_fields(const char *path, json_t *root, sbx_error_t **err)
{
    json_t *v = json_object_get(root, "overrideCommand");

    if (v != NULL && !json_is_true(v)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: overrideCommand: only true is honoured (sbx starts every "
                             "sandbox with its own keep-alive command)",
                             path);
    }
    v = json_object_get(root, "init");
    if (v != NULL && !json_is_true(v)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: init: only true is honoured (every sandbox has an init)", path);
    }
    v = json_object_get(root, "userEnvProbe");
    if (v != NULL && !(json_is_string(v) && strcmp(json_string_value(v), "none") == 0)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: userEnvProbe: only \"none\" is honoured (commands run without "
                             "a login shell; put the variables in containerEnv)",
                             path);
    }
    v = json_object_get(root, "shutdownAction");
    if (v != NULL && !json_is_string(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: shutdownAction must be a string", path);
    }
    v = json_object_get(root, "waitFor");
    if (v != NULL && !json_is_string(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: waitFor must be a string", path);
    }
    v = json_object_get(root, "updateRemoteUserUID");
    if (v != NULL && !json_is_boolean(v)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s: updateRemoteUserUID must be true or false",
                             path);
    }
    return 0;
}

int sbx_devc_parse(const char *path, json_t *root, struct sbx_devc **out, sbx_error_t **err)
{
    return sbx_devc_parse_with(path, root, NULL, out, err);
}

/* Every top-level field is refused by name (refused[]) or one sbx reads (known[]). */
static int field_names(const char *path, json_t *root, sbx_error_t **err)
{
    const char *k;
    json_t *v;

    json_object_foreach(root, k, v)
    {
        size_t i;

        for (i = 0; refused[i].name != NULL && strcmp(refused[i].name, k) != 0; i++) {
        }
        if (refused[i].name != NULL) {
            return sbx_error_set(err, SBX_E_CONFIG, "%s: %s is not honoured by sbx image build: %s",
                                 path, k, refused[i].why);
        }
        for (i = 0; known[i] != NULL && strcmp(known[i], k) != 0; i++) {
        }
        if (known[i] == NULL) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: %.64s is not a field of the Dev Container spec that sbx "
                                 "reads (docs/image.md)",
                                 path, k);
        }
    }
    return 0;
}

/* containerUser and remoteUser (one user: they must agree), updateRemoteUserUID and
 * workspaceFolder. */
static int user_fields(struct sbx_devc *dc, const char *path, json_t *root, sbx_error_t **err)
{
    json_t *v;

    if (user_field(path, root, "containerUser", &dc->container_user, err) < 0 ||
        user_field(path, root, "remoteUser", &dc->remote_user, err) < 0) {
        return -1;
    }
    if (dc->container_user != NULL && dc->remote_user != NULL &&
        strcmp(dc->container_user, dc->remote_user) != 0) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: containerUser '%s' differs from remoteUser '%s': a sandbox runs "
                             "its own processes and every command as one user",
                             path, dc->container_user, dc->remote_user);
    }
    dc->update_uid = !json_is_false(json_object_get(root, "updateRemoteUserUID"));
    v = json_object_get(root, "workspaceFolder");
    dc->workdir = xstrdup(json_is_string(v) ? json_string_value(v) : "/workspace");
    for (const char *p = dc->workdir; *p; p++) {
        if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') ||
              *p == '/' || *p == '.' || *p == '_' || *p == '-') ||
            dc->workdir[0] != '/') {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: workspaceFolder must be an absolute path of letters, digits "
                                 "and / . _ -",
                                 path);
        }
    }
    return 0;
}

/* The lifecycle commands, then the features and their order. */
static int steps_and_features(struct sbx_devc *dc, const char *path, json_t *root,
                              sbx_error_t **err)
{
    json_t *v;

    for (int s = 0; s < SBX_DEVC_NSTEPS; s++) {
        v = json_object_get(root, sbx_devc_step_field[s]);
        if (v != NULL &&
            sbx_devc_cmds(path, sbx_devc_step_field[s], v, &dc->cmds[s], &dc->ncmds[s], err) < 0) {
            return -1;
        }
    }
    v = json_object_get(root, "features");
    if (v != NULL &&
        sbx_devc_features(dc, v, json_object_get(root, "overrideFeatureInstallOrder"), err) < 0) {
        return -1;
    }
    if (json_object_get(root, "overrideFeatureInstallOrder") != NULL && v == NULL) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s: overrideFeatureInstallOrder without features: nothing to order",
                             path);
    }
    return 0;
}

/* customizations.sbx's fields that build sbx's own Debian base, refused when the
 * definition names another base. */
static int own_base_fields(const struct sbx_devc *dc, const char *path, json_t *sbx,
                           sbx_error_t **err)
{
    const char *k;
    json_t *v;

    if ((dc->image == NULL && dc->dockerfile == NULL) || sbx == NULL) {
        return 0;
    }
    json_object_foreach(sbx, k, v)
    {
        if (strcmp(k, "suite") == 0 || strcmp(k, "packages") == 0 || strcmp(k, "npm") == 0) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s: customizations.sbx.%s builds sbx's own Debian base, and "
                                 "this definition names another (%s): install it there",
                                 path, k, dc->image ? "image" : "build.dockerfile");
        }
    }
    return 0;
}

int sbx_devc_parse_with(const char *path, json_t *root, const struct sbx_devc_fetch *fetch,
                        struct sbx_devc **out, sbx_error_t **err)
{
    struct sbx_devc *dc = xcalloc(1, sizeof(*dc));
    char *base = dir_of(path);
    json_t *sbx = json_object_get(json_object_get(root, "customizations"), "sbx");

    *out = NULL;
    dc->path = xstrdup(path);
    dc->fetch = fetch;
    dc->update_uid = 1;
    if (field_names(path, root, err) < 0 || fixed_fields(path, root, err) < 0 ||
        build_fields(dc, root, base, err) < 0 ||
        env_object(path, "containerEnv", json_object_get(root, "containerEnv"), &dc->env, err) <
            0 ||
        env_object(path, "remoteEnv", json_object_get(root, "remoteEnv"), &dc->env, err) < 0 ||
        user_fields(dc, path, root, err) < 0 || steps_and_features(dc, path, root, err) < 0) {
        goto fail;
    }
    dc->layered = dc->image != NULL || dc->dockerfile != NULL || dc->nfeatures > 0 ||
                  dc->container_user != NULL || dc->remote_user != NULL ||
                  json_object_get(root, "remoteEnv") != NULL;
    for (int s = 0; s < SBX_DEVC_NSTEPS; s++) {
        dc->layered |= dc->ncmds[s] > 0;
    }
    if (!dc->layered) {
        sbx_devc_free(dc);
        free(base);
        return 0;
    }
    if (own_base_fields(dc, path, sbx, err) < 0) {
        goto fail;
    }
    free(base);
    *out = dc;
    return 0;
fail:
    free(base);
    sbx_devc_free(dc);
    return -1;
}

void sbx_devc_feature_fini(struct sbx_devc_feature *f)
{
    free(f->ref);
    free(f->id);
    free(f->dir);
    free(f->pinned);
    strv_free(f->env);
    strv_free(f->container_env);
    strv_free(f->after);
    strv_free(f->depends);
    json_decref(f->depends_on);
    free(f->dep_idx);
    for (int s = 0; s < SBX_DEVC_NSTEPS; s++) {
        sbx_devc_cmds_free(f->cmds[s], f->ncmds[s]);
    }
}

void sbx_devc_free(struct sbx_devc *dc)
{
    if (dc == NULL) {
        return;
    }
    for (size_t i = 0; i < dc->nfeatures; i++) {
        sbx_devc_feature_fini(&dc->features[i]);
    }
    free(dc->features);
    for (int s = 0; s < SBX_DEVC_NSTEPS; s++) {
        sbx_devc_cmds_free(dc->cmds[s], dc->ncmds[s]);
    }
    free(dc->path);
    free(dc->image);
    free(dc->dockerfile);
    free(dc->context);
    strv_free(dc->args);
    free(dc->target);
    strv_free(dc->cache_from);
    strv_free(dc->env);
    free(dc->container_user);
    free(dc->remote_user);
    free(dc->workdir);
    free(dc);
}

static json_t *strv_json(char *const *v)
{
    json_t *a = json_array();

    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        json_array_append_new(a, json_string(v[i]));
    }
    return a;
}

json_t *sbx_devc_canonical(const struct sbx_devc *dc)
{
    /* the layer's bytes (Dockerfile, features, scripts) and the base's id are
     * hashed by the helper; here what chooses and builds the base */
    json_t *c = json_pack("{s:s?, s:b, s:o, s:s?, s:o}", "image", dc->image, "dockerfile",
                          dc->dockerfile != NULL, "args", strv_json(dc->args), "target", dc->target,
                          "cacheFrom", strv_json(dc->cache_from));

    if (!dc->update_uid) {
        /* (added) it changes the result's labels: only when false, so the
         * hashes of definitions without it stay */
        json_object_set_new(c, "updateRemoteUserUID", json_false());
    }
    return c;
}
