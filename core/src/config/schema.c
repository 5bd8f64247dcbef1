/* schema.c - the configuration schema and its checker. */
#include "config/schema.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/units.h"

static const struct sbx_key limits_keys[] = {
    {"cpus", SBX_KEY_CPUS, NULL},
    {"memory", SBX_KEY_SIZE, NULL},
    {"disk", SBX_KEY_SIZE, NULL},
    {"pids", SBX_KEY_INT, NULL},
    {"idle", SBX_KEY_DURATION, NULL},
    {"max", SBX_KEY_DURATION, NULL},
    {NULL, 0, NULL},
};

static const struct sbx_key cache_keys[] = {
    {"host", SBX_KEY_STRING, NULL},
    {"path", SBX_KEY_STRING, NULL},
    {NULL, 0, NULL},
};

static const struct sbx_key pool_keys[] = {
    {"cpus", SBX_KEY_CPUS, NULL},
    {"memory", SBX_KEY_SIZE, NULL},
    {"max_sandboxes", SBX_KEY_INT, NULL},
    {NULL, 0, NULL},
};

static const struct sbx_key box_keys[] = {
    {"pools", SBX_KEY_STRINGS, NULL},
    {"max_sandboxes", SBX_KEY_INT, NULL},
    {"heavy_min_memory", SBX_KEY_SIZE, NULL},
    {"memory", SBX_KEY_SIZE, NULL},
    {"host_reserve", SBX_KEY_SIZE, NULL},
    {"cpu_reserve", SBX_KEY_CPUS, NULL},
    {"id", SBX_KEY_STRING, NULL},
    {NULL, 0, NULL},
};

static const struct sbx_key client_keys[] = {
    {"name", SBX_KEY_STRING, NULL},
    {"token_env", SBX_KEY_STRING, NULL},
    {"token_file", SBX_KEY_STRING, NULL},
    {"scopes", SBX_KEY_STRINGS, NULL},
    {NULL, 0, NULL},
};

static const struct sbx_key runner_keys[] = {
    {"listen", SBX_KEY_STRING, NULL},
    {"state", SBX_KEY_STRING, NULL},
    {"database", SBX_KEY_STRING, NULL},
    {"database_password_env", SBX_KEY_STRING, NULL},
    {"lease", SBX_KEY_DURATION, NULL},
    {"token_env", SBX_KEY_STRING, NULL},
    {"clients", SBX_KEY_GROUP_LIST, client_keys},
    {"worktree_roots", SBX_KEY_STRINGS, NULL},
    {"alert_after", SBX_KEY_DURATION, NULL},
    {"alert_webhook", SBX_KEY_STRING, NULL},
    {"alert_command", SBX_KEY_STRING, NULL},
    {"scale_up_command", SBX_KEY_STRING, NULL},
    {"max_boxes", SBX_KEY_INT, NULL},
    {"cooldown", SBX_KEY_DURATION, NULL},
    {"box_hour_price", SBX_KEY_FLOAT, NULL},
    {"spend_day_cap", SBX_KEY_FLOAT, NULL},
    {"spend_month_cap", SBX_KEY_FLOAT, NULL},
    {NULL, 0, NULL},
};

static const struct sbx_key egress_host_keys[] = {
    {"name", SBX_KEY_STRING, NULL},
    {"address", SBX_KEY_STRING, NULL},
    {NULL, 0, NULL},
};

static const struct sbx_key egress_keys[] = {
    {"log", SBX_KEY_STRING, NULL},
    {"registries", SBX_KEY_STRINGS, NULL},
    {"hosts", SBX_KEY_GROUP_LIST, egress_host_keys},
    {"header_timeout", SBX_KEY_DURATION, NULL},
    {"connect_timeout", SBX_KEY_DURATION, NULL},
    {"system_dns", SBX_KEY_BOOL, NULL},
    {"check_sni", SBX_KEY_BOOL, NULL},
    {"max_connections", SBX_KEY_INT, NULL},
    {"max_buffer", SBX_KEY_SIZE, NULL},
    {"socket_buffer", SBX_KEY_SIZE, NULL},
    {"connection_rate", SBX_KEY_INT, NULL},
    {NULL, 0, NULL},
};

static const struct sbx_key spike_keys[] = {
    {"warm_start", SBX_KEY_DURATION, NULL},
    {"concurrent", SBX_KEY_INT, NULL},
    {"concurrent_cpus", SBX_KEY_CPUS, NULL},
    {"concurrent_memory", SBX_KEY_SIZE, NULL},
    {"agent_hour_cost", SBX_KEY_FLOAT, NULL},
    {"testcontainers_image", SBX_KEY_STRING, NULL},
    {"egress_allowed_url", SBX_KEY_STRING, NULL},
    {"egress_denied_url", SBX_KEY_STRING, NULL},
    {NULL, 0, NULL},
};

const struct sbx_key sbx_config_schema[] = {
    {"plugin_dir", SBX_KEY_STRING, NULL},
    {"policy_dir", SBX_KEY_STRING, NULL},
    {"state_dir", SBX_KEY_STRING, NULL},
    {"provider", SBX_KEY_STRING, NULL},
    {"image", SBX_KEY_STRING, NULL},
    {"providers", SBX_KEY_INSTANCES, NULL},
    {"credentials", SBX_KEY_INSTANCES, NULL},
    {"limits", SBX_KEY_GROUP, limits_keys},
    {"caches", SBX_KEY_GROUP_LIST, cache_keys},
    {"pools", SBX_KEY_NAMED_GROUPS, pool_keys},
    {"box", SBX_KEY_GROUP, box_keys},
    {"runner", SBX_KEY_GROUP, runner_keys},
    {"egress", SBX_KEY_GROUP, egress_keys},
    {"spike", SBX_KEY_GROUP, spike_keys},
    {NULL, 0, NULL},
};

const char *sbx_key_type_name(enum sbx_key_type type)
{
    switch (type) {
    case SBX_KEY_STRING:
        return "a string";
    case SBX_KEY_INT:
        return "an integer";
    case SBX_KEY_FLOAT:
        return "a number";
    case SBX_KEY_BOOL:
        return "true or false";
    case SBX_KEY_SIZE:
        return "a size such as \"8G\"";
    case SBX_KEY_DURATION:
        return "a duration such as \"60m\"";
    case SBX_KEY_CPUS:
        return "a CPU count such as 2.0";
    case SBX_KEY_STRINGS:
        return "an array of strings";
    case SBX_KEY_GROUP:
    case SBX_KEY_INSTANCES:
    case SBX_KEY_NAMED_GROUPS:
        return "a group { ... }";
    case SBX_KEY_GROUP_LIST:
        return "a list of groups ( { ... } )";
    }
    return "?";
}

static int fail(const char *file, const config_setting_t *s, sbx_error_t **err, const char *fmt,
                ...) __attribute__((format(printf, 4, 5)));

static int fail(const char *file, const config_setting_t *s, sbx_error_t **err, const char *fmt,
                ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return sbx_error_set(err, SBX_E_CONFIG, "%s:%d: %s", file, (int)config_setting_source_line(s),
                         msg);
}

static const char *key_name(const config_setting_t *s)
{
    const char *n = config_setting_name(s);

    return n ? n : "(element)";
}

int sbx_schema_check_value(const char *file, const config_setting_t *s, enum sbx_key_type type,
                           sbx_error_t **err)
{
    int t = config_setting_type(s);
    cleanup_error sbx_error_t *uerr = NULL;
    int64_t i64;
    double d;

    switch (type) {
    case SBX_KEY_STRING:
        if (t != CONFIG_TYPE_STRING) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        return 0;
    case SBX_KEY_INT:
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        return 0;
    case SBX_KEY_FLOAT:
        if (t != CONFIG_TYPE_INT && t != CONFIG_TYPE_INT64 && t != CONFIG_TYPE_FLOAT) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        return 0;
    case SBX_KEY_BOOL:
        if (t != CONFIG_TYPE_BOOL) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        return 0;
    case SBX_KEY_SIZE:
        if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
            if (config_setting_get_int64(s) < 0) {
                return fail(file, s, err, "'%s' must not be negative", key_name(s));
            }
            return 0;
        }
        if (t != CONFIG_TYPE_STRING) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        if (sbx_size_parse(config_setting_get_string(s), &i64, &uerr) < 0) {
            return fail(file, s, err, "'%s': %s", key_name(s), uerr->msg);
        }
        return 0;
    case SBX_KEY_DURATION:
        if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64) {
            if (config_setting_get_int64(s) < 0) {
                return fail(file, s, err, "'%s' must not be negative", key_name(s));
            }
            return 0;
        }
        if (t != CONFIG_TYPE_STRING) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        if (sbx_duration_parse(config_setting_get_string(s), &i64, &uerr) < 0) {
            return fail(file, s, err, "'%s': %s", key_name(s), uerr->msg);
        }
        return 0;
    case SBX_KEY_CPUS:
        if (t == CONFIG_TYPE_INT || t == CONFIG_TYPE_INT64 || t == CONFIG_TYPE_FLOAT) {
            d = t == CONFIG_TYPE_FLOAT ? config_setting_get_float(s)
                                       : (double)config_setting_get_int64(s);
            if (!(d > 0.0) || d > 4096.0) {
                return fail(file, s, err, "'%s' must be a CPU count above 0", key_name(s));
            }
            return 0;
        }
        if (t != CONFIG_TYPE_STRING) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        if (sbx_cpus_parse(config_setting_get_string(s), &d, &uerr) < 0) {
            return fail(file, s, err, "'%s': %s", key_name(s), uerr->msg);
        }
        return 0;
    case SBX_KEY_STRINGS:
        if (t != CONFIG_TYPE_ARRAY && t != CONFIG_TYPE_LIST) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        for (int i = 0; i < config_setting_length(s); i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);

            if (config_setting_type(e) != CONFIG_TYPE_STRING) {
                return fail(file, e, err, "'%s' element %d must be a string", key_name(s), i);
            }
        }
        return 0;
    case SBX_KEY_GROUP:
    case SBX_KEY_INSTANCES:
    case SBX_KEY_NAMED_GROUPS:
        if (t != CONFIG_TYPE_GROUP) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        return 0;
    case SBX_KEY_GROUP_LIST:
        if (t != CONFIG_TYPE_LIST) {
            return fail(file, s, err, "'%s' must be %s", key_name(s), sbx_key_type_name(type));
        }
        return 0;
    }
    return fail(file, s, err, "'%s': unknown type", key_name(s));
}

static const struct sbx_key *find_key(const struct sbx_key *keys, const char *name)
{
    for (const struct sbx_key *k = keys; k->name != NULL; k++) {
        if (strcmp(k->name, name) == 0) {
            return k;
        }
    }
    return NULL;
}

static int check_children(const char *file, const config_setting_t *s, const struct sbx_key *k,
                          sbx_error_t **err)
{
    int n = config_setting_length(s);

    switch (k->type) {
    case SBX_KEY_GROUP:
        return sbx_schema_check(file, s, k->children, err);
    case SBX_KEY_NAMED_GROUPS:
    case SBX_KEY_GROUP_LIST:
        for (int i = 0; i < n; i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);

            if (config_setting_type(e) != CONFIG_TYPE_GROUP) {
                return fail(file, e, err, "'%s' entries must be groups { ... }", k->name);
            }
            if (sbx_schema_check(file, e, k->children, err) < 0) {
                return -1;
            }
        }
        return 0;
    case SBX_KEY_INSTANCES:
        for (int i = 0; i < n; i++) {
            const config_setting_t *e = config_setting_get_elem(s, (unsigned)i);
            const config_setting_t *p;

            if (config_setting_type(e) != CONFIG_TYPE_GROUP) {
                return fail(file, e, err, "%s instance '%s' must be a group { plugin = ...; }",
                            k->name, key_name(e));
            }
            p = config_setting_get_member(e, "plugin");
            if (p == NULL) {
                return fail(file, e, err, "%s instance '%s' has no 'plugin' key", k->name,
                            key_name(e));
            }
            if (config_setting_type(p) != CONFIG_TYPE_STRING) {
                return fail(file, p, err, "'plugin' must be a string");
            }
            p = config_setting_get_member(e, "unisolated");
            if (p != NULL && config_setting_type(p) != CONFIG_TYPE_BOOL) {
                return fail(file, p, err, "%s instance '%s': 'unisolated' must be true or false",
                            k->name, key_name(e));
            }
        }
        return 0;
    default:
        return 0;
    }
}

int sbx_schema_check(const char *file, const config_setting_t *group, const struct sbx_key *keys,
                     sbx_error_t **err)
{
    int n = config_setting_length(group);

    for (int i = 0; i < n; i++) {
        const config_setting_t *s = config_setting_get_elem(group, (unsigned)i);
        const char *name = config_setting_name(s);
        const struct sbx_key *k = name ? find_key(keys, name) : NULL;

        if (k == NULL) {
            const char *parent = config_setting_name(group);

            if (parent != NULL) {
                return fail(file, s, err, "unknown key '%s' in '%s'", name ? name : "?", parent);
            }
            return fail(file, s, err, "unknown key '%s'", name ? name : "?");
        }
        if (sbx_schema_check_value(file, s, k->type, err) < 0) {
            return -1;
        }
        if (check_children(file, s, k, err) < 0) {
            return -1;
        }
    }
    return 0;
}
