/* config.c - finding, loading and reading the configuration. */
#include "config/config.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "config/runner_trust.h"
#include "config/schema.h"
#include "egress/rules.h"
#include "util/cleanup.h"
#include "util/units.h"
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

static char *dup_string(const config_setting_t *parent, const char *key, const char *def)
{
    const char *v = NULL;

    if (parent != NULL && config_setting_lookup_string(parent, key, &v) == CONFIG_TRUE) {
        return xstrdup(v);
    }
    return def ? xstrdup(def) : NULL;
}

static int64_t get_int(const config_setting_t *parent, const char *key, int64_t def)
{
    const config_setting_t *s = parent ? config_setting_get_member(parent, key) : NULL;

    return s ? config_setting_get_int64(s) : def;
}

static double get_float(const config_setting_t *parent, const char *key, double def)
{
    const config_setting_t *s = parent ? config_setting_get_member(parent, key) : NULL;

    if (s == NULL) {
        return def;
    }
    if (config_setting_type(s) == CONFIG_TYPE_FLOAT) {
        return config_setting_get_float(s);
    }
    return (double)config_setting_get_int64(s);
}

/* A size or a duration: a string with a unit, or a bare integer. The schema
 * check has already validated these, so parsing cannot fail. */
static int64_t get_unit(const config_setting_t *parent, const char *key, int64_t def,
                        int (*parse)(const char *, int64_t *, sbx_error_t **))
{
    const config_setting_t *s = parent ? config_setting_get_member(parent, key) : NULL;
    int64_t v = def;

    if (s == NULL) {
        return def;
    }
    if (config_setting_type(s) == CONFIG_TYPE_STRING) {
        sbx_error_t *e = NULL;

        if (parse(config_setting_get_string(s), &v, &e) < 0) {
            sbx_error_free(&e);
            return def;
        }
        return v;
    }
    return config_setting_get_int64(s);
}

static int64_t get_size(const config_setting_t *parent, const char *key, int64_t def)
{
    return get_unit(parent, key, def, sbx_size_parse);
}

static int64_t get_duration(const config_setting_t *parent, const char *key, int64_t def)
{
    return get_unit(parent, key, def, sbx_duration_parse);
}

static double get_cpus(const config_setting_t *parent, const char *key, double def)
{
    const config_setting_t *s = parent ? config_setting_get_member(parent, key) : NULL;
    double v = def;

    if (s == NULL) {
        return def;
    }
    if (config_setting_type(s) == CONFIG_TYPE_STRING) {
        sbx_error_t *e = NULL;

        if (sbx_cpus_parse(config_setting_get_string(s), &v, &e) < 0) {
            sbx_error_free(&e);
            return def;
        }
        return v;
    }
    return get_float(parent, key, def);
}

static char **get_strings(const config_setting_t *parent, const char *key, const char *const *def)
{
    const config_setting_t *s = parent ? config_setting_get_member(parent, key) : NULL;
    char **out;
    size_t n = 0;

    if (s == NULL) {
        if (def == NULL) {
            return NULL;
        }
        while (def[n] != NULL) {
            n++;
        }
        out = xcalloc(n + 1, sizeof(char *));
        for (size_t i = 0; i < n; i++) {
            out[i] = xstrdup(def[i]);
        }
        return out;
    }
    n = (size_t)config_setting_length(s);
    out = xcalloc(n + 1, sizeof(char *));
    for (size_t i = 0; i < n; i++) {
        out[i] = xstrdup(config_setting_get_string_elem(s, (int)i));
    }
    return out;
}

static void free_strv(char **v)
{
    if (v == NULL) {
        return;
    }
    for (size_t i = 0; v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
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
    return in;
}

static int read_instances(struct sbx_config *c, const char *section, enum sbx_plugin_kind kind,
                          sbx_error_t **err)
{
    config_setting_t *g = config_lookup(&c->cfg, section);
    const char *want = kind == SBX_PLUGIN_PROVIDER ? "provider_" : "cred_";

    if (g == NULL) {
        return 0;
    }
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
    }
    return 0;
}

static void apply_defaults(struct sbx_config *c)
{
    static const char *const default_pools[] = {"ci", "agent", NULL};

    for (size_t i = 0; i < sizeof(builtin_instances) / sizeof(builtin_instances[0]); i++) {
        add_instance(c, builtin_instances[i].name, builtin_instances[i].plugin,
                     builtin_instances[i].kind, NULL, xstrdup("built-in"));
    }
    c->limits.cpus = SBX_DEFAULT_CPUS;
    c->limits.memory = SBX_DEFAULT_MEMORY;
    c->limits.disk = SBX_DEFAULT_DISK;
    c->limits.pids = SBX_DEFAULT_PIDS;
    c->limits.idle = SBX_DEFAULT_IDLE;
    c->limits.max = SBX_DEFAULT_MAX;
    c->provider = xstrdup("docker");
    c->image = xstrdup(SBX_DEFAULT_IMAGE);
    c->box.pools = get_strings(NULL, "pools", default_pools);
    c->box.max_sandboxes = 6;
    c->box.heavy_min_memory = 60LL << 30;
    c->box.memory = 0;
    c->box.host_reserve = -1;
    c->box.cpu_reserve = -1.0;
    c->runner.alert_after = 600;
    c->runner.max_boxes = 1;
    c->runner.lease = 30;
    c->runner.cooldown = 600;
    c->runner.spend_day_cap = 150.0;
    c->runner.spend_month_cap = 4500.0;
    c->spike.warm_start = 10.0;
    c->spike.concurrent = 6;
    c->spike.concurrent_cpus = 0.25;
    c->spike.concurrent_memory = 256LL << 20;
    c->spike.agent_hour_cost = 0.10;
    c->spike.testcontainers_image = xstrdup("sbx-busybox:test");
    c->egress.header_timeout = SBX_DEFAULT_EGRESS_HEADER_TIMEOUT;
    c->egress.connect_timeout = SBX_DEFAULT_EGRESS_CONNECT_TIMEOUT;
    c->egress.system_dns = 1;
    c->egress.check_sni = 1;
    c->egress.max_connections = SBX_DEFAULT_EGRESS_MAX_CONNECTIONS;
    c->egress.max_buffer = SBX_DEFAULT_EGRESS_MAX_BUFFER;
    c->egress.socket_buffer = SBX_DEFAULT_EGRESS_SOCKET_BUFFER;
    c->egress.connection_rate = SBX_DEFAULT_EGRESS_CONNECTION_RATE;
}

struct sbx_config *sbx_config_defaults(void)
{
    struct sbx_config *c = xcalloc(1, sizeof(*c));

    config_init(&c->cfg);
    apply_defaults(c);
    return c;
}

static int check_positive(struct sbx_config *c, const char *path, sbx_error_t **err)
{
    const config_setting_t *s = config_lookup(&c->cfg, path);

    if (s == NULL) {
        return 0;
    }
    if (config_setting_type(s) == CONFIG_TYPE_INT || config_setting_type(s) == CONFIG_TYPE_INT64) {
        if (config_setting_get_int64(s) <= 0) {
            return sbx_error_set(err, SBX_E_CONFIG, "%s:%u: '%s' must be greater than 0", c->path,
                                 config_setting_source_line(s), path);
        }
    }
    return 0;
}

static int egress_key_error(const struct sbx_config *c, const config_setting_t *egress,
                            const char *key, const char *what, sbx_error_t **err)
{
    const config_setting_t *s = egress ? config_setting_get_member(egress, key) : NULL;

    return sbx_error_set(err, SBX_E_CONFIG, "%s:%u: 'egress.%s' %s", c->path,
                         s ? config_setting_source_line(s) : 0, key, what);
}

/* egress.max_connections, max_buffer, socket_buffer, connection_rate: the proxy's
 * budgets per sandbox. max_buffer must hold at least one tunnel. */
static int read_egress_budgets(struct sbx_config *c, const config_setting_t *egress,
                               sbx_error_t **err)
{
    c->egress.max_connections = get_int(egress, "max_connections", c->egress.max_connections);
    c->egress.max_buffer = get_size(egress, "max_buffer", c->egress.max_buffer);
    c->egress.socket_buffer = get_size(egress, "socket_buffer", c->egress.socket_buffer);
    c->egress.connection_rate = get_int(egress, "connection_rate", c->egress.connection_rate);
    if (c->egress.max_connections < 1 || c->egress.max_connections > 65536) {
        return egress_key_error(c, egress, "max_connections", "must be 1 to 65536", err);
    }
    if (c->egress.socket_buffer < 4096 || c->egress.socket_buffer > (64LL << 20)) {
        return egress_key_error(c, egress, "socket_buffer", "must be 4K to 64M", err);
    }
    if ((uint64_t)c->egress.max_buffer < SBX_EGRESS_TUNNEL_RESERVE(c->egress.socket_buffer)) {
        return egress_key_error(c, egress, "max_buffer",
                                "must hold one tunnel: at least 512K + 4 x socket_buffer", err);
    }
    if (c->egress.connection_rate < 0 || c->egress.connection_rate > 1000000) {
        return egress_key_error(c, egress, "connection_rate", "must be 0 to 1000000", err);
    }
    return 0;
}

/* egress.hosts: each entry a host name (not an IP literal) and an IP address. */
static int read_egress_hosts(struct sbx_config *c, const config_setting_t *hosts, sbx_error_t **err)
{
    if (hosts == NULL) {
        return 0;
    }
    c->egress.n_hosts = (size_t)config_setting_length(hosts);
    c->egress.hosts = xcalloc(c->egress.n_hosts ? c->egress.n_hosts : 1, sizeof(*c->egress.hosts));
    for (size_t i = 0; i < c->egress.n_hosts; i++) {
        const config_setting_t *e = config_setting_get_elem(hosts, (unsigned)i);
        cleanup_free char *name = dup_string(e, "name", NULL);
        char norm[SBX_EGRESS_HOST_MAX + 1];
        struct sbx_egress_addr a;
        const char *why;

        c->egress.hosts[i].address = dup_string(e, "address", NULL);
        if (name == NULL || c->egress.hosts[i].address == NULL) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%u: an 'egress.hosts' entry needs "
                                 "'name' and 'address'",
                                 c->path, config_setting_source_line(e));
        }
        why = sbx_egress_addr_parse(name, &a) ? "an IP literal"
                                              : sbx_egress_host_normalize(name, strlen(name), norm);
        if (why != NULL) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%u: 'egress.hosts' name '%s' is not "
                                 "a valid host name (%s)",
                                 c->path, config_setting_source_line(e), name, why);
        }
        c->egress.hosts[i].name = xstrdup(norm);
        if (!sbx_egress_addr_parse(c->egress.hosts[i].address, &a)) {
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "%s:%u: 'egress.hosts' address '%s' is "
                                 "not an IP address",
                                 c->path, config_setting_source_line(e),
                                 c->egress.hosts[i].address);
        }
    }
    return 0;
}

/* box.memory, box.host_reserve, box.cpu_reserve (docs/configuration.md): the
 * admission budget. The reserve must leave room for a sandbox; the schema
 * refuses negative sizes and CPU counts of 0 or less. */
/* box.id: 1-63 of [A-Za-z0-9._-] (it names a row and a file) */
static int sbx_box_id_ok(const char *id)
{
    size_t n = strlen(id);

    if (n == 0 || n > 63) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        char ch = id[i];

        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
              ch == '.' || ch == '_' || ch == '-')) {
            return 0;
        }
    }
    return 1;
}

static int read_box_budget(struct sbx_config *c, const config_setting_t *box, sbx_error_t **err)
{
    const config_setting_t *mem = box ? config_setting_get_member(box, "memory") : NULL;
    const config_setting_t *res = box ? config_setting_get_member(box, "host_reserve") : NULL;

    c->box.memory = get_size(box, "memory", c->box.memory);
    c->box.host_reserve = get_size(box, "host_reserve", c->box.host_reserve);
    c->box.cpu_reserve = get_cpus(box, "cpu_reserve", c->box.cpu_reserve);
    if (mem != NULL && c->box.memory < (64LL << 20)) {
        return sbx_error_set(err, SBX_E_CONFIG, "%s:%u: 'box.memory' must be at least 64M", c->path,
                             config_setting_source_line(mem));
    }
    if (mem != NULL && res != NULL && c->box.host_reserve >= c->box.memory) {
        char r[32], m[32];

        sbx_size_format(c->box.host_reserve, r, sizeof(r));
        sbx_size_format(c->box.memory, m, sizeof(m));
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%u: 'box.host_reserve' (%s) leaves nothing "
                             "of 'box.memory' (%s) for sandboxes",
                             c->path, config_setting_source_line(res), r, m);
    }
    return 0;
}

static int read_values(struct sbx_config *c, sbx_error_t **err)
{
    const config_setting_t *root = config_root_setting(&c->cfg);
    const config_setting_t *limits = config_lookup(&c->cfg, "limits");
    const config_setting_t *box = config_lookup(&c->cfg, "box");
    const config_setting_t *runner = config_lookup(&c->cfg, "runner");
    const config_setting_t *egress = config_lookup(&c->cfg, "egress");
    const config_setting_t *caches = config_lookup(&c->cfg, "caches");
    const config_setting_t *pools = config_lookup(&c->cfg, "pools");
    static const char *const positive[] = {"limits.pids", "box.max_sandboxes", "runner.max_boxes",
                                           "spike.concurrent", NULL};

    for (size_t i = 0; positive[i] != NULL; i++) {
        if (check_positive(c, positive[i], err) < 0) {
            return -1;
        }
    }

    c->plugin_dir = dup_string(root, "plugin_dir", NULL);
    c->policy_dir = dup_string(root, "policy_dir", NULL);
    c->state_dir = dup_string(root, "state_dir", NULL);
    if (config_lookup(&c->cfg, "provider") != NULL) {
        free(c->provider);
        c->provider = dup_string(root, "provider", "docker");
    }
    if (config_lookup(&c->cfg, "image") != NULL) {
        free(c->image);
        c->image = dup_string(root, "image", SBX_DEFAULT_IMAGE);
    }

    c->limits.cpus = get_cpus(limits, "cpus", c->limits.cpus);
    c->limits.memory = get_size(limits, "memory", c->limits.memory);
    c->limits.disk = get_size(limits, "disk", c->limits.disk);
    c->limits.pids = get_int(limits, "pids", c->limits.pids);
    c->limits.idle = get_duration(limits, "idle", c->limits.idle);
    c->limits.max = get_duration(limits, "max", c->limits.max);
    if (limits != NULL) {
        static const char *const nonzero[] = {"memory", "disk", "idle", "max", NULL};
        const int64_t values[] = {c->limits.memory, c->limits.disk, c->limits.idle, c->limits.max};

        /* a zero cap would read as "no cap" further down: refuse it */
        for (size_t i = 0; nonzero[i] != NULL; i++) {
            const config_setting_t *s = config_setting_get_member(limits, nonzero[i]);

            if (s != NULL && values[i] <= 0) {
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s:%u: 'limits.%s' must be greater "
                                     "than 0",
                                     c->path, config_setting_source_line(s), nonzero[i]);
            }
        }
        if (c->limits.memory < (6LL << 20)) {
            return sbx_error_set(
                err, SBX_E_CONFIG,
                "%s:%u: 'limits.memory' must be at least "
                "6M (the engine's minimum)",
                c->path, config_setting_source_line(config_setting_get_member(limits, "memory")));
        }
    }

    if (caches != NULL) {
        c->n_caches = (size_t)config_setting_length(caches);
        c->caches = xcalloc(c->n_caches ? c->n_caches : 1, sizeof(*c->caches));
        for (size_t i = 0; i < c->n_caches; i++) {
            const config_setting_t *e = config_setting_get_elem(caches, (unsigned)i);
            char *host = dup_string(e, "host", NULL);
            char *path = dup_string(e, "path", NULL);

            c->caches[i].host = host;
            c->caches[i].path = path;
            c->caches[i].read_only = 1;
            if (host == NULL || path == NULL || host[0] != '/' || path[0] != '/') {
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s:%u: a cache needs absolute 'host' "
                                     "and 'path'",
                                     c->path, config_setting_source_line(e));
            }
        }
    }

    if (pools != NULL) {
        c->n_pools = (size_t)config_setting_length(pools);
        c->pools = xcalloc(c->n_pools ? c->n_pools : 1, sizeof(*c->pools));
        for (size_t i = 0; i < c->n_pools; i++) {
            const config_setting_t *e = config_setting_get_elem(pools, (unsigned)i);
            const char *name = config_setting_name(e);

            c->pools[i].name = xstrdup(name);
            c->pools[i].cpus = get_cpus(e, "cpus", 0);
            c->pools[i].memory = get_size(e, "memory", 0);
            c->pools[i].max_sandboxes = (int)get_int(e, "max_sandboxes", 0);
            if (strcmp(name, "ci") != 0 && strcmp(name, "agent") != 0) {
                return sbx_error_set(err, SBX_E_CONFIG,
                                     "%s:%u: unknown pool '%s' (pools are "
                                     "'ci' and 'agent')",
                                     c->path, config_setting_source_line(e), name);
            }
        }
    }

    if (box != NULL) {
        char **v = get_strings(box, "pools", NULL);

        if (v != NULL) {
            for (size_t i = 0; v[i] != NULL; i++) {
                if (strcmp(v[i], "ci") != 0 && strcmp(v[i], "agent") != 0) {
                    const config_setting_t *s = config_setting_get_member(box, "pools");

                    free_strv(v);
                    return sbx_error_set(err, SBX_E_CONFIG,
                                         "%s:%u: 'box.pools' may hold only "
                                         "\"ci\" and \"agent\"",
                                         c->path, config_setting_source_line(s));
                }
            }
            free_strv(c->box.pools);
            c->box.pools = v;
        }
    }
    c->box.max_sandboxes = (int)get_int(box, "max_sandboxes", c->box.max_sandboxes);
    c->box.heavy_min_memory = get_size(box, "heavy_min_memory", c->box.heavy_min_memory);
    if (read_box_budget(c, box, err) < 0) {
        return -1;
    }

    c->runner.listen = dup_string(runner, "listen", NULL);
    c->runner.state = dup_string(runner, "state", NULL);
    c->runner.database = dup_string(runner, "database", NULL);
    c->runner.database_password_env = dup_string(runner, "database_password_env", NULL);
    c->runner.lease = get_duration(runner, "lease", c->runner.lease);
    c->box.id = dup_string(box, "id", NULL);
    if (c->runner.database != NULL && strncmp(c->runner.database, "postgresql://", 13) != 0 &&
        strncmp(c->runner.database, "postgres://", 11) != 0) {
        return sbx_error_set(
            err, SBX_E_CONFIG, "%s:%u: 'runner.database' must be a postgresql:// DSN", c->path,
            config_setting_source_line(config_setting_get_member(runner, "database")));
    }
    if (c->runner.lease < 1) {
        return sbx_error_set(
            err, SBX_E_CONFIG, "%s:%u: 'runner.lease' must be at least 1s", c->path,
            config_setting_source_line(config_setting_get_member(runner, "lease")));
    }
    if (c->box.id != NULL && !sbx_box_id_ok(c->box.id)) {
        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%u: 'box.id' must be 1-63 characters of [A-Za-z0-9._-]", c->path,
                             config_setting_source_line(config_setting_get_member(box, "id")));
    }
    c->runner.token_env = dup_string(runner, "token_env", NULL);
    c->runner.alert_after = get_duration(runner, "alert_after", c->runner.alert_after);
    c->runner.alert_webhook = dup_string(runner, "alert_webhook", NULL);
    c->runner.alert_command = dup_string(runner, "alert_command", NULL);
    c->runner.scale_up_command = dup_string(runner, "scale_up_command", NULL);
    c->runner.max_boxes = (int)get_int(runner, "max_boxes", c->runner.max_boxes);
    c->runner.cooldown = get_duration(runner, "cooldown", c->runner.cooldown);
    c->runner.box_hour_price = get_float(runner, "box_hour_price", 0.0);
    c->runner.spend_day_cap = get_float(runner, "spend_day_cap", c->runner.spend_day_cap);
    c->runner.spend_month_cap = get_float(runner, "spend_month_cap", c->runner.spend_month_cap);
    if (sbx_config_read_runner_trust(c, runner, err) < 0) {
        return -1;
    }

    {
        const config_setting_t *spike = config_lookup(&c->cfg, "spike");

        c->spike.warm_start =
            (double)get_duration(spike, "warm_start", (int64_t)c->spike.warm_start);
        c->spike.concurrent = (int)get_int(spike, "concurrent", c->spike.concurrent);
        c->spike.concurrent_cpus = get_cpus(spike, "concurrent_cpus", c->spike.concurrent_cpus);
        c->spike.concurrent_memory =
            get_size(spike, "concurrent_memory", c->spike.concurrent_memory);
        c->spike.agent_hour_cost = get_float(spike, "agent_hour_cost", c->spike.agent_hour_cost);
        c->spike.egress_allowed_url = dup_string(spike, "egress_allowed_url", NULL);
        c->spike.egress_denied_url = dup_string(spike, "egress_denied_url", NULL);
        if (spike != NULL && config_setting_get_member(spike, "testcontainers_image") != NULL) {
            free(c->spike.testcontainers_image);
            c->spike.testcontainers_image = dup_string(spike, "testcontainers_image", NULL);
        }
    }
    c->egress.log = dup_string(egress, "log", NULL);
    c->egress.registries = get_strings(egress, "registries", NULL);
    c->egress.header_timeout = get_duration(egress, "header_timeout", c->egress.header_timeout);
    c->egress.connect_timeout = get_duration(egress, "connect_timeout", c->egress.connect_timeout);
    if (egress != NULL && config_setting_get_member(egress, "system_dns") != NULL) {
        c->egress.system_dns =
            config_setting_get_bool(config_setting_get_member(egress, "system_dns"));
    }
    if (egress != NULL && config_setting_get_member(egress, "check_sni") != NULL) {
        c->egress.check_sni =
            config_setting_get_bool(config_setting_get_member(egress, "check_sni"));
    }
    if (c->egress.header_timeout <= 0 || c->egress.connect_timeout <= 0) {
        const config_setting_t *s = config_setting_get_member(
            egress, c->egress.header_timeout <= 0 ? "header_timeout" : "connect_timeout");

        return sbx_error_set(err, SBX_E_CONFIG, "%s:%u: 'egress.%s' must be greater than 0",
                             c->path, config_setting_source_line(s), config_setting_name(s));
    }
    if (read_egress_hosts(c, egress ? config_setting_get_member(egress, "hosts") : NULL, err) < 0 ||
        read_egress_budgets(c, egress, err) < 0) {
        return -1;
    }

    if (read_instances(c, "providers", SBX_PLUGIN_PROVIDER, err) < 0 ||
        read_instances(c, "credentials", SBX_PLUGIN_CREDENTIAL, err) < 0) {
        return -1;
    }
    if (sbx_config_instance(c, c->provider, SBX_PLUGIN_PROVIDER) == NULL) {
        const config_setting_t *s = config_lookup(&c->cfg, "provider");

        return sbx_error_set(err, SBX_E_CONFIG,
                             "%s:%u: provider '%s' is not a configured "
                             "provider instance",
                             c->path, s ? config_setting_source_line(s) : 0, c->provider);
    }
    return 0;
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
    if (sbx_schema_check(path, config_root_setting(&c->cfg), sbx_config_schema, err) < 0 ||
        read_values(c, err) < 0) {
        sbx_config_destroy(c);
        return NULL;
    }
    return c;
}

struct sbx_config *sbx_config_load(const char *explicit_path, sbx_error_t **err)
{
    const char *env = getenv("SBX_CONFIG");

    if (explicit_path != NULL) {
        return sbx_config_load_file(explicit_path, err);
    }
    if (env != NULL && env[0] != '\0') {
        return sbx_config_load_file(env, err);
    }
    if (access("sbx.conf", F_OK) == 0) {
        return sbx_config_load_file("sbx.conf", err);
    }
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
    }
    free(c->pools);
    free_strv(c->box.pools);
    free(c->runner.listen);
    free(c->runner.state);
    free(c->runner.database);
    free(c->runner.database_password_env);
    free(c->box.id);
    free(c->runner.token_env);
    sbx_config_clear_runner_trust(c);
    free(c->runner.alert_webhook);
    free(c->runner.alert_command);
    free(c->runner.scale_up_command);
    free(c->spike.testcontainers_image);
    free(c->spike.egress_allowed_url);
    free(c->spike.egress_denied_url);
    free(c->egress.log);
    free_strv(c->egress.registries);
    for (size_t i = 0; i < c->egress.n_hosts; i++) {
        free(c->egress.hosts[i].name);
        free(c->egress.hosts[i].address);
    }
    free(c->egress.hosts);
    free(c->plugin_dir);
    free(c->policy_dir);
    free(c->state_dir);
    free(c->provider);
    free(c->image);
    free(c->path);
    config_destroy(&c->cfg);
    free(c);
}
