/* config.c - finding and loading the configuration; its keys are read from the
 * table of config/keys.c. */
#include "config/config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/keys.h"
#include "config/runner_trust.h"
#include "config/schema.h"
#include "util/xalloc.h"

/* The built-in instances every configuration has (docs/architecture.md, Names). A
 * configured instance of the same name replaces its built-in. */
static const struct {
    const char *name;
    const char *plugin;
    enum sbx_plugin_kind kind;
} builtin_instances[] = {
    {"docker", "provider_docker", SBX_PLUGIN_PROVIDER},
    {"opensandbox", "provider_opensandbox", SBX_PLUGIN_PROVIDER},
    {"daytona", "provider_daytona", SBX_PLUGIN_PROVIDER},
    {"e2b", "provider_e2b", SBX_PLUGIN_PROVIDER},
    {"host", "provider_host", SBX_PLUGIN_PROVIDER},
    {"infisical", "cred_infisical", SBX_PLUGIN_CREDENTIAL},
    {"agentvault", "cred_agentvault", SBX_PLUGIN_CREDENTIAL},
};

char *sbx_config_where(const struct sbx_config *c, const config_setting_t *s)
{
    const char *file = c->path ? c->path : "(defaults)";

    if (s == NULL || config_setting_source_line(s) == 0) {
        return xstrdup(file);
    }
    return xasprintf("%s:%u", file, config_setting_source_line(s));
}

static struct sbx_instance *add_instance(struct sbx_config *c, const char *name, const char *plugin,
                                         enum sbx_plugin_kind kind, config_setting_t *group,
                                         char *where)
{
    struct sbx_instance *in;

    for (size_t i = 0; i < c->n_instances; i++) {
        in = &c->instances[i];
        if (in->kind == kind && strcmp(in->name, name) == 0) {
            free(in->plugin);
            free(in->where);
            in->plugin = xstrdup(plugin);
            in->group = group;
            in->where = where;
            in->unisolated = 0;
            return in;
        }
    }
    c->instances = xrealloc(c->instances, (c->n_instances + 1) * sizeof(*c->instances));
    in = &c->instances[c->n_instances++];
    in->name = xstrdup(name);
    in->plugin = xstrdup(plugin);
    in->kind = kind;
    in->group = group;
    in->where = where;
    in->unisolated = 0;
    in->image = NULL;
    return in;
}

int sbx_config_read_instances(struct sbx_config *c, const config_setting_t *g,
                              enum sbx_plugin_kind kind, sbx_error_t **err)
{
    const char *section = config_setting_name(g);
    const char *want = kind == SBX_PLUGIN_PROVIDER ? "provider_" : "cred_";

    for (int i = 0; i < config_setting_length(g); i++) {
        config_setting_t *e = config_setting_get_elem(g, (unsigned)i);
        const char *plugin = NULL;
        struct sbx_instance *in;

        config_setting_lookup_string(e, "plugin", &plugin);
        if (strncmp(plugin, want, strlen(want)) != 0) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%u: %s instance '%s': plugin '%s' is "
                                 "not a %s plugin (its name must start with '%s')",
                                 c->path, config_setting_source_line(e), section,
                                 config_setting_name(e), plugin,
                                 kind == SBX_PLUGIN_PROVIDER ? "provider" : "credential", want);
        }
        in = add_instance(c, config_setting_name(e), plugin, kind, e, sbx_config_where(c, e));
        /* the type is checked by the schema (sbx_schema_check) */
        config_setting_lookup_bool(e, "unisolated", &in->unisolated);
        if (config_setting_lookup_string(e, "image", &in->image) == CONFIG_TRUE &&
            !sbx_config_image_ref_ok(in->image)) { /* (added) */
            const config_setting_t *m = config_setting_get_member(e, "image");

            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%u: '%s.%s.image' '%.80s' is not an image reference "
                                 "(NAME[:TAG][@DIGEST], at most 255 bytes)",
                                 c->path, config_setting_source_line(m), section,
                                 config_setting_name(e), in->image);
        }
    }
    return 0;
}

struct sbx_config *sbx_config_defaults(void)
{
    struct sbx_config *c = xcalloc(1, sizeof(*c));

    config_init(&c->cfg);
    for (size_t i = 0; i < sizeof(builtin_instances) / sizeof(builtin_instances[0]); i++) {
        add_instance(c, builtin_instances[i].name, builtin_instances[i].plugin,
                     builtin_instances[i].kind, NULL, xstrdup("built-in"));
    }
    sbx_config_keys_defaults(c);
    return c;
}

struct sbx_config *sbx_config_load_file(const char *path, sbx_error_t **err)
{
    struct sbx_config *c = sbx_config_defaults();

    c->path = xstrdup(path);
    c->loaded = 1;
    if (access(path, R_OK) < 0) {
        sbx_error_set(err, SBX_E_CONFIG, "%s: cannot read configuration: %s", path,
                      strerror(errno));
        sbx_config_destroy(c);
        return NULL;
    }
    if (config_read_file(&c->cfg, path) != CONFIG_TRUE) {
        const char *f = config_error_file(&c->cfg);

        sbx_error_set(err, SBX_E_CONFIG, "%s:%d: %s", f ? f : path, config_error_line(&c->cfg),
                      config_error_text(&c->cfg));
        sbx_config_destroy(c);
        return NULL;
    }
    if (sbx_schema_check(path, config_root_setting(&c->cfg), err) < 0 ||
        sbx_config_keys_read(c, err) < 0) {
        sbx_config_destroy(c);
        return NULL;
    }
    return c;
}

/* The search order (docs/configuration.md, "Which file is used"). */
struct sbx_config *sbx_config_load(const char *explicit_path, sbx_error_t **err)
{
    const char *env = getenv("SBX_CONFIG");
    const char *xdg = getenv("XDG_CONFIG_HOME");
    const char *home = getenv("HOME");
    char *user = NULL;

    if (explicit_path != NULL) {
        return sbx_config_load_file(explicit_path, err);
    }
    if (env != NULL && env[0] != '\0') {
        return sbx_config_load_file(env, err);
    }
    if (access("sbx.conf", F_OK) == 0) {
        return sbx_config_load_file("sbx.conf", err);
    }
    /* the user's: $XDG_CONFIG_HOME/sbx/sbx.conf, or ~/.config/sbx/sbx.conf when
     * it is unset, empty or relative (the XDG Base Directory rule) */
    if (xdg != NULL && xdg[0] == '/') {
        user = xasprintf("%s/sbx/sbx.conf", xdg);
    }
    else if (home != NULL && home[0] == '/') {
        user = xasprintf("%s/.config/sbx/sbx.conf", home);
    }
    if (user != NULL && access(user, F_OK) == 0) {
        struct sbx_config *c = sbx_config_load_file(user, err);

        free(user);
        return c;
    }
    free(user);
    if (access(SBX_SYSTEM_CONFIG, F_OK) == 0) {
        return sbx_config_load_file(SBX_SYSTEM_CONFIG, err);
    }
    return sbx_config_defaults();
}

const struct sbx_instance *sbx_config_instance(const struct sbx_config *c, const char *name,
                                               enum sbx_plugin_kind kind)
{
    for (size_t i = 0; i < c->n_instances; i++) {
        if (c->instances[i].kind == kind && strcmp(c->instances[i].name, name) == 0) {
            return &c->instances[i];
        }
    }
    return NULL;
}

const char *const *sbx_config_protect(const struct sbx_config *c, const char *pool)
{
    if (c == NULL) {
        return NULL;
    }
    for (size_t i = 0; pool != NULL && i < c->n_pools; i++) {
        if (strcmp(c->pools[i].name, pool) == 0 && c->pools[i].worktree_protect != NULL) {
            return (const char *const *)c->pools[i].worktree_protect;
        }
    }
    return (const char *const *)c->worktree_protect;
}

int sbx_config_image_ref_ok(const char *ref)
{
    size_t n = ref != NULL ? strlen(ref) : 0;

    if (n == 0 || n > 255 || ref[0] == '-' || ref[0] == ':' || ref[0] == '@' || ref[0] == '/' ||
        ref[n - 1] == ':' || ref[n - 1] == '/' || ref[n - 1] == '@') {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char ch = (unsigned char)ref[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              strchr("._-:/@", ch) != NULL)) {
            return 0;
        }
    }
    return 1;
}

const char *sbx_config_image(const struct sbx_config *c, const char *pool, const char *provider)
{
    const struct sbx_instance *in;

    for (size_t i = 0; pool != NULL && i < c->n_pools; i++) {
        if (strcmp(c->pools[i].name, pool) == 0 && c->pools[i].image != NULL) {
            return c->pools[i].image;
        }
    }
    in = sbx_config_instance(c, provider != NULL ? provider : c->provider, SBX_PLUGIN_PROVIDER);
    if (in != NULL && in->image != NULL) {
        return in->image;
    }
    return c->image;
}

void sbx_config_destroy(struct sbx_config *c)
{
    if (c == NULL) {
        return;
    }
    for (size_t i = 0; i < c->n_instances; i++) {
        free(c->instances[i].name);
        free(c->instances[i].plugin);
        free(c->instances[i].where);
    }
    free(c->instances);
    for (size_t i = 0; i < c->n_caches; i++) {
        free((char *)c->caches[i].host);
        free((char *)c->caches[i].path);
    }
    free(c->caches);
    for (size_t i = 0; i < c->n_pools; i++) {
        free(c->pools[i].name);
        for (size_t k = 0; c->pools[i].worktree_protect && c->pools[i].worktree_protect[k]; k++) {
            free(c->pools[i].worktree_protect[k]);
        }
        free(c->pools[i].worktree_protect);
        free(c->pools[i].ca_bundle);
        free(c->pools[i].image);
    }
    free(c->pools);
    sbx_config_clear_runner_trust(c);
    for (size_t i = 0; i < c->egress.n_hosts; i++) {
        free(c->egress.hosts[i].name);
        free(c->egress.hosts[i].address);
    }
    free(c->egress.hosts);
    for (size_t i = 0; i < c->egress.n_private_allow; i++) {
        free(c->egress.private_allow[i].name);
        for (size_t k = 0; c->egress.private_allow[i].addresses[k] != NULL; k++) {
            free(c->egress.private_allow[i].addresses[k]);
        }
        free(c->egress.private_allow[i].addresses);
    }
    free(c->egress.private_allow);
    sbx_config_keys_free(c); /* every string field of the key table */
    free(c->path);
    config_destroy(&c->cfg);
    free(c);
}
