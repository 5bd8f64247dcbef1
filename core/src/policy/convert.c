/* convert.c - jobs into Lua, policy results out of Lua (host rules: hostrule.c). */
#include "policy/convert.h"

#include <ctype.h>
#include <lauxlib.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/sandbox.h"
#include "util/cleanup.h"
#include "util/units.h"
#include "util/xalloc.h"

#define MAX_ARGV 4096

/* --- jobs in ----------------------------------------------------------- */

static void set_string(lua_State *L, int t, const char *name, const char *value)
{
    if (value != NULL) {
        lua_pushstring(L, value);
        lua_setfield(L, t, name);
    }
}

static void push_limits(lua_State *L, const struct sbx_limits *l, int skip_zero)
{
    lua_createtable(L, 0, 6);
    if (!skip_zero || l->cpus > 0) {
        lua_pushnumber(L, l->cpus);
        lua_setfield(L, -2, "cpus");
    }
#define FIELD(f)                                                                                   \
    if (!skip_zero || l->f > 0) {                                                                  \
        lua_pushinteger(L, l->f);                                                                  \
        lua_setfield(L, -2, #f);                                                                   \
    }
    FIELD(memory)
    FIELD(disk)
    FIELD(pids)
    FIELD(idle)
    FIELD(max)
#undef FIELD
}

/* One shared empty read-only table for absent labels and requests: it is
 * immutable, so sharing it between jobs keeps nothing. */
static void push_empty_readonly(lua_State *L)
{
    static const char key = 0;

    if (lua_rawgetp(L, LUA_REGISTRYINDEX, &key) == LUA_TNIL) {
        lua_pop(L, 1);
        lua_createtable(L, 0, 0);
        sbx_lua_push_readonly(L, -1);
        lua_remove(L, -2);
        lua_pushvalue(L, -1);
        lua_rawsetp(L, LUA_REGISTRYINDEX, &key);
    }
}

static int limits_empty(const struct sbx_limits *l)
{
    return l->cpus <= 0 && l->memory <= 0 && l->disk <= 0 && l->pids <= 0 && l->idle <= 0 &&
           l->max <= 0;
}

int sbx_policy_push_job(lua_State *L)
{
    const struct sbx_job_desc *job = lua_touserdata(L, 1);
    int t;
    int n = 0;

    lua_createtable(L, 0, 10);
    t = lua_gettop(L);
    set_string(L, t, "id", job->id);
    set_string(L, t, "task", job->task);
    set_string(L, t, "pool", job->pool);
    set_string(L, t, "workdir", job->workdir);
    set_string(L, t, "repository", job->repository);
    set_string(L, t, "provider", job->provider);

    lua_createtable(L, 8, 0);
    for (; job->argv != NULL && job->argv[n] != NULL; n++) {
        if (n >= MAX_ARGV) {
            return luaL_error(L, "job: argv has more than %d elements", MAX_ARGV);
        }
        lua_pushstring(L, job->argv[n]);
        lua_rawseti(L, -2, n + 1);
    }
    sbx_lua_push_readonly(L, -1);
    lua_setfield(L, t, "argv");
    lua_pop(L, 1);

    if (job->n_labels == 0) {
        push_empty_readonly(L);
        lua_setfield(L, t, "labels");
    }
    else {
        lua_createtable(L, 0, (int)job->n_labels);
        for (size_t i = 0; i < job->n_labels; i++) {
            if (job->labels[i].name == NULL || job->labels[i].value == NULL) {
                return luaL_error(L, "job: label %d has no name or value", (int)i + 1);
            }
            lua_pushstring(L, job->labels[i].value);
            lua_setfield(L, -2, job->labels[i].name);
        }
        sbx_lua_push_readonly(L, -1);
        lua_setfield(L, t, "labels");
        lua_pop(L, 1);
    }

    if (limits_empty(&job->requested)) {
        push_empty_readonly(L);
        lua_setfield(L, t, "requested");
    }
    else {
        push_limits(L, &job->requested, 1);
        sbx_lua_push_readonly(L, -1);
        lua_setfield(L, t, "requested");
        lua_pop(L, 1);
    }

    sbx_lua_push_readonly(L, t);
    return 1;
}

void sbx_policy_push_decision(lua_State *L, const struct sbx_policy_decision *d)
{
    static const char *const parts[] = {"limits", "egress", "slot"};
    static const char *const clamp_names[] = {"cpus", "memory", "disk", "pids", "idle", "max"};
    int n = 0;

    lua_createtable(L, 0, 6);
    push_limits(L, &d->limits, 0);
    lua_setfield(L, -2, "limits");
    lua_createtable(L, (int)d->n_egress_allow, 0);
    for (size_t i = 0; i < d->n_egress_allow; i++) {
        lua_pushstring(L, d->egress_allow[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    lua_setfield(L, -2, "egress");
    lua_pushstring(L, d->slot_class);
    lua_setfield(L, -2, "slot");
    lua_createtable(L, 6, 0);
    for (int i = 0; i < 6; i++) {
        if (d->clamped & (1u << i)) {
            lua_pushstring(L, clamp_names[i]);
            lua_rawseti(L, -2, ++n);
        }
    }
    lua_setfield(L, -2, "clamped");
    lua_createtable(L, 0, 3);
    for (int i = 0; i < SBX_POLICY_NPARTS; i++) {
        lua_pushstring(L, d->decided_by[i]);
        lua_setfield(L, -2, parts[i]);
    }
    lua_setfield(L, -2, "decided_by");
    lua_createtable(L, 0, 3);
    for (int i = 0; i < SBX_POLICY_NPARTS; i++) {
        if (d->reason[i] != NULL) {
            lua_pushstring(L, d->reason[i]);
            lua_setfield(L, -2, parts[i]);
        }
    }
    lua_setfield(L, -2, "reason");
}

/* --- results out ------------------------------------------------------- */

static int bad(sbx_error_t **err, const char *where, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int bad(sbx_error_t **err, const char *where, const char *fmt, ...)
{
    char msg[512];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return sbx_error_set(err, SBX_E_POLICY, "%s: result: %s", where, msg);
}

/* The value at idx as a string (strings only: no number conversion). */
static const char *raw_string(lua_State *L, int idx, size_t *len)
{
    return lua_type(L, idx) == LUA_TSTRING ? lua_tolstring(L, idx, len) : NULL;
}

static int read_reason(lua_State *L, int idx, const char *where, char **reason, sbx_error_t **err)
{
    size_t len;
    const char *s = raw_string(L, idx, &len);

    if (s == NULL) {
        return bad(err, where, "'reason' must be a string, got %s", luaL_typename(L, idx));
    }
    if (len > SBX_POLICY_MAX_REASON || strlen(s) != len) {
        return bad(err, where, "'reason' is longer than %d bytes", SBX_POLICY_MAX_REASON);
    }
    free(*reason);
    *reason = xstrdup(s);
    for (char *p = *reason; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20) {
            *p = ' ';
        }
    }
    return 0;
}

/* Integral number or unit string -> int64 within [lo, hi]. */
static int read_int(lua_State *L, int idx, const char *where, const char *key, int kind, int64_t lo,
                    int64_t hi, int64_t *out, sbx_error_t **err)
{
    int t = lua_type(L, idx);
    int64_t v;

    if (t == LUA_TNUMBER) {
        if (lua_isinteger(L, idx)) {
            v = (int64_t)lua_tointeger(L, idx);
        }
        else {
            double d = lua_tonumber(L, idx);

            if (isnan(d)) {
                return bad(err, where, "'%s' is NaN", key);
            }
            if (d != floor(d) || d < -9.2e18 || d > 9.2e18) {
                return bad(err, where, "'%s' must be a whole number, got %g", key, d);
            }
            v = (int64_t)d;
        }
    }
    else if (t == LUA_TSTRING && kind != 0) {
        cleanup_error sbx_error_t *e = NULL;
        const char *s = lua_tostring(L, idx);

        if ((kind == 1 ? sbx_size_parse(s, &v, &e) : sbx_duration_parse(s, &v, &e)) < 0) {
            return bad(err, where, "'%s': %s", key, sbx_error_msg(e));
        }
    }
    else {
        return bad(err, where, "'%s' must be %s, got %s", key,
                   kind == 1   ? "a number of bytes or a size such as \"8G\""
                   : kind == 2 ? "a number of seconds or a duration such as \"60m\""
                               : "a whole number",
                   luaL_typename(L, idx));
    }
    if (v < lo || v > hi) {
        return bad(err, where, "'%s' = %lld is out of range [%lld, %lld]", key, (long long)v,
                   (long long)lo, (long long)hi);
    }
    *out = v;
    return 0;
}

int sbx_policy_read_limits(lua_State *L, int idx, const char *where, struct sbx_limits *out,
                           char **reason, sbx_error_t **err)
{
    const int64_t day = 24 * 3600;

    idx = lua_absindex(L, idx);
    memset(out, 0, sizeof(*out));
    if (lua_type(L, idx) != LUA_TTABLE) {
        return bad(err, where, "limits.lua must return a table, got %s", luaL_typename(L, idx));
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *key = raw_string(L, -2, NULL);
        int rc = 0;

        if (key == NULL) {
            bad(err, where, "keys must be strings, got a %s key", luaL_typename(L, -2));
            lua_pop(L, 2);
            return -1;
        }
        if (strcmp(key, "cpus") == 0) {
            double d = 0;

            if (lua_type(L, -1) == LUA_TNUMBER) {
                d = lua_tonumber(L, -1);
            }
            else if (lua_type(L, -1) == LUA_TSTRING) {
                cleanup_error sbx_error_t *e = NULL;

                if (sbx_cpus_parse(lua_tostring(L, -1), &d, &e) < 0) {
                    rc = bad(err, where, "'cpus': %s", sbx_error_msg(e));
                }
            }
            else {
                rc = bad(err, where, "'cpus' must be a number, got %s", luaL_typename(L, -1));
            }
            if (rc == 0 && isnan(d)) {
                rc = bad(err, where, "'cpus' is NaN");
            }
            else if (rc == 0 && !(d >= 0.01 && d <= 1024)) {
                rc = bad(err, where, "'cpus' = %g is out of range [0.01, 1024]", d);
            }
            out->cpus = d;
        }
        else if (strcmp(key, "memory") == 0) {
            rc = read_int(L, -1, where, key, 1, 4LL << 20, 1LL << 50, &out->memory, err);
        }
        else if (strcmp(key, "disk") == 0) {
            rc = read_int(L, -1, where, key, 1, 16LL << 20, 1LL << 50, &out->disk, err);
        }
        else if (strcmp(key, "pids") == 0) {
            rc = read_int(L, -1, where, key, 0, 16, 4194304, &out->pids, err);
        }
        else if (strcmp(key, "idle") == 0) {
            rc = read_int(L, -1, where, key, 2, 1, 30 * day, &out->idle, err);
        }
        else if (strcmp(key, "max") == 0) {
            rc = read_int(L, -1, where, key, 2, 1, 30 * day, &out->max, err);
        }
        else if (strcmp(key, "reason") == 0) {
            rc = read_reason(L, -1, where, reason, err);
        }
        else {
            rc = bad(err, where,
                     "unknown key '%.64s' (allowed: cpus, memory, disk, pids, idle, "
                     "max, reason)",
                     key);
        }
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            return -1;
        }
    }
    return 0;
}

/* Checks that the table at idx is a sequence 1..n of at most max items. */
static int sequence_len(lua_State *L, int idx, size_t max, const char *where, const char *what,
                        size_t *n, sbx_error_t **err)
{
    size_t count = 0;
    lua_Integer top = 0;

    lua_pushnil(L);
    while (lua_next(L, idx)) {
        if (!lua_isinteger(L, -2) || lua_tointeger(L, -2) < 1) {
            lua_pop(L, 2);
            return bad(err, where, "'%s' must be a list (keys 1..n)", what);
        }
        if (lua_tointeger(L, -2) > top) {
            top = lua_tointeger(L, -2);
        }
        count++;
        lua_pop(L, 1);
        if (count > max) {
            lua_pop(L, 1);
            return bad(err, where, "'%s' has more than %zu entries", what, max);
        }
    }
    if ((size_t)top != count) {
        return bad(err, where, "'%s' must be a list without holes", what);
    }
    *n = count;
    return 0;
}

void sbx_rule_cache_fini(struct sbx_rule_cache *c)
{
    for (size_t i = 0; i < SBX_POLICY_MAX_RULES; i++) {
        free(c->spec[i]);
        free(c->canon[i]);
        c->spec[i] = NULL;
        c->canon[i] = NULL;
    }
}

/* The error of a rule that does not canonicalize: why says what is wrong. */
static void bad_rule(sbx_error_t **err, const char *where, size_t i, const char *spec,
                     const char *why)
{
    bad(err, where, "egress rule %zu '%.80s': %s", i, spec, why);
}

/* A rule given as a string (at idx, absolute). Canonicalizing is the costly
 * part: cache (when given) keeps rule i's last string and its result. */
static char *rule_from_string(lua_State *L, int idx, const char *where, size_t i,
                              struct sbx_rule_cache *cache, sbx_error_t **err)
{
    char why[160] = "";
    size_t k = i - 1;
    size_t len;
    const char *spec = lua_tolstring(L, idx, &len);
    char *rule;

    if (cache != NULL && cache->spec[k] != NULL && cache->len[k] == len &&
        memcmp(cache->spec[k], spec, len) == 0) {
        return xstrdup(cache->canon[k]);
    }
    rule = sbx_policy_rule_canon(spec, len, NULL, 0, why, sizeof(why));
    if (cache != NULL && rule != NULL && strlen(spec) == len) {
        free(cache->spec[k]);
        free(cache->canon[k]);
        cache->spec[k] = xstrndup(spec, len);
        cache->len[k] = len;
        cache->canon[k] = xstrdup(rule);
    }
    if (rule == NULL) {
        bad_rule(err, where, i, spec, why);
    }
    return rule;
}

/* The ports list at t (the value on top of the stack, its key below it);
 * on error the stack is as it was. */
static int rule_ports(lua_State *L, int t, const char *where, size_t i, int *ports, size_t *n,
                      sbx_error_t **err)
{
    if (sequence_len(L, t, SBX_POLICY_MAX_PORTS, where, "ports", n, err) < 0) {
        return -1;
    }
    for (size_t k = 0; k < *n; k++) {
        lua_rawgeti(L, t, (lua_Integer)k + 1);
        ports[k] = lua_isinteger(L, -1) ? (int)lua_tointeger(L, -1) : -1;
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 1 || lua_tointeger(L, -1) > 65535) {
            lua_pop(L, 1);
            return bad(err, where, "egress rule %zu: ports must be integers 1..65535", i);
        }
        lua_pop(L, 1);
    }
    return 0;
}

/* A rule given as {host=..., ports={...}, opaque=...} (at idx, absolute). */
static char *rule_from_table(lua_State *L, int idx, const char *where, size_t i, sbx_error_t **err)
{
    char why[160] = "";
    int ports[SBX_POLICY_MAX_PORTS];
    size_t n_ports = 0;
    int have_ports = 0;
    int opaque = 0;
    const char *spec = NULL;
    size_t len;
    char *rule;

    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *key = raw_string(L, -2, NULL);

        if (key != NULL && strcmp(key, "host") == 0 && lua_type(L, -1) == LUA_TSTRING) {
            spec = lua_tolstring(L, -1, &len);
        }
        else if (key != NULL && strcmp(key, "ports") == 0 && lua_type(L, -1) == LUA_TTABLE) {
            have_ports = 1;
            if (rule_ports(L, lua_gettop(L), where, i, ports, &n_ports, err) < 0) {
                lua_pop(L, 2);
                return NULL;
            }
        }
        else if (key != NULL && strcmp(key, "opaque") == 0) {
            if (lua_type(L, -1) != LUA_TBOOLEAN) {
                bad(err, where, "egress rule %zu: 'opaque' must be a boolean, got %s", i,
                    luaL_typename(L, -1));
                lua_pop(L, 2);
                return NULL;
            }
            opaque = lua_toboolean(L, -1);
        }
        else {
            lua_pop(L, 2);
            bad(err, where,
                "egress rule %zu: allowed keys are host (string), ports (list) and opaque "
                "(boolean)",
                i);
            return NULL;
        }
        lua_pop(L, 1);
    }
    if (spec == NULL) {
        bad(err, where, "egress rule %zu: 'host' is missing", i);
        return NULL;
    }
    /* spec stays valid: the string is still referenced by the table. */
    rule = sbx_policy_rule_canon(spec, len, have_ports ? ports : NULL, n_ports, why, sizeof(why));
    if (rule == NULL) {
        bad_rule(err, where, i, spec, why);
    }
    else if (opaque) {
        /* the proxy passes client-first bytes to it unchecked (docs/egress.md) */
        char *flagged = xasprintf("%s " SBX_POLICY_OPAQUE, rule);

        free(rule);
        rule = flagged;
    }
    return rule;
}

static char *read_rule(lua_State *L, int idx, const char *where, size_t i,
                       struct sbx_rule_cache *cache, sbx_error_t **err)
{
    idx = lua_absindex(L, idx);
    if (lua_type(L, idx) == LUA_TSTRING) {
        return rule_from_string(L, idx, where, i, cache, err);
    }
    if (lua_type(L, idx) == LUA_TTABLE) {
        return rule_from_table(L, idx, where, i, err);
    }
    bad(err, where, "egress rule %zu must be a string or {host=..., ports={...}}, got %s", i,
        luaL_typename(L, idx));
    return NULL;
}

static void free_rules(char **rules, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(rules[i]);
    }
    free(rules);
}

int sbx_policy_read_egress(lua_State *L, int idx, const char *where, struct sbx_rule_cache *cache,
                           char ***allow, size_t *n, char **reason, sbx_error_t **err)
{
    int have_allow = 0;

    idx = lua_absindex(L, idx);
    *allow = NULL;
    *n = 0;
    if (lua_type(L, idx) != LUA_TTABLE) {
        return bad(err, where, "egress.lua must return a table, got %s", luaL_typename(L, idx));
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *key = raw_string(L, -2, NULL);
        int rc = 0;

        if (key != NULL && strcmp(key, "allow") == 0) {
            int t = lua_gettop(L);
            size_t count = 0;

            have_allow = 1;
            if (lua_type(L, t) != LUA_TTABLE) {
                rc = bad(err, where, "'allow' must be a list of host rules, got %s",
                         luaL_typename(L, t));
            }
            else if (sequence_len(L, t, SBX_POLICY_MAX_RULES, where, "allow", &count, err) < 0) {
                rc = -1;
            }
            else {
                char **rules = xcalloc(count + 1, sizeof(*rules));

                for (size_t i = 0; i < count && rc == 0; i++) {
                    lua_rawgeti(L, t, (lua_Integer)i + 1);
                    rules[i] = read_rule(L, -1, where, i + 1, cache, err);
                    lua_pop(L, 1);
                    if (rules[i] == NULL) {
                        free_rules(rules, i);
                        rc = -1;
                    }
                }
                if (rc == 0) {
                    free_rules(*allow, *n);
                    *allow = rules;
                    *n = count;
                }
            }
        }
        else if (key != NULL && strcmp(key, "reason") == 0) {
            rc = read_reason(L, -1, where, reason, err);
        }
        else if (key != NULL) {
            rc = bad(err, where, "unknown key '%.64s' (allowed: allow, reason)", key);
        }
        else {
            rc = bad(err, where, "keys must be strings, got a %s key", luaL_typename(L, -2));
        }
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            free_rules(*allow, *n);
            *allow = NULL;
            *n = 0;
            return -1;
        }
    }
    if (!have_allow) {
        return bad(err, where, "'allow' is missing (use allow = {} to deny all egress)");
    }
    if (*allow == NULL) {
        *allow = xcalloc(1, sizeof(**allow));
    }
    return 0;
}

int sbx_policy_read_slot(lua_State *L, int idx, const char *where, char **slot_class, char **reason,
                         sbx_error_t **err)
{
    idx = lua_absindex(L, idx);
    *slot_class = NULL;
    if (lua_type(L, idx) != LUA_TTABLE) {
        return bad(err, where, "slots.lua must return a table, got %s", luaL_typename(L, idx));
    }
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        const char *key = raw_string(L, -2, NULL);
        const char *v = raw_string(L, -1, NULL);
        int rc = 0;

        if (key != NULL && strcmp(key, "class") == 0) {
            if (v == NULL || (strcmp(v, "heavy") != 0 && strcmp(v, "light") != 0)) {
                rc = bad(err, where, "'class' must be \"heavy\" or \"light\", got %s%.32s%s",
                         v ? "\"" : "", v ? v : luaL_typename(L, -1), v ? "\"" : "");
            }
            else {
                free(*slot_class);
                *slot_class = xstrdup(v);
            }
        }
        else if (key != NULL && strcmp(key, "reason") == 0) {
            rc = read_reason(L, -1, where, reason, err);
        }
        else if (key != NULL) {
            rc = bad(err, where, "unknown key '%.64s' (allowed: class, reason)", key);
        }
        else {
            rc = bad(err, where, "keys must be strings, got a %s key", luaL_typename(L, -2));
        }
        lua_pop(L, 1);
        if (rc < 0) {
            lua_pop(L, 1);
            free(*slot_class);
            *slot_class = NULL;
            return -1;
        }
    }
    if (*slot_class == NULL) {
        return bad(err, where, "'class' is missing");
    }
    return 0;
}
