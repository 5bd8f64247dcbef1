/* policy.c - loading the three policy scripts and deciding a job. */
#include "policy/policy.h"

#include <errno.h>
#include <lauxlib.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "policy/convert.h"
#include "policy/policy_internal.h"
#include "policy/sandbox.h"
#include "sandbox/wtscan.h"
#include "util/cleanup.h"
#include "util/paths.h"
#include "util/xalloc.h"

static const char *const part_names[SBX_POLICY_NPARTS] = {
    "policies/limits.lua",
    "policies/egress.lua",
    "policies/slots.lua",
};

static const char *const part_files[SBX_POLICY_NPARTS] = {"limits.lua", "egress.lua", "slots.lua"};

struct pool_cap {
    char *name;
    double cpus;
    int64_t memory;
};

struct sbx_policy {
    struct sbx_lua *lua;
    int ref[SBX_POLICY_NPARTS];
    int config_ref;                 /* registry: the read-only `config` table */
    char *where[SBX_POLICY_NPARTS]; /* "policies/NAME.lua:LINE" of each result */
    struct sbx_limits caps;
    struct pool_cap *pools;
    size_t n_pools;
    char **registries; /* canonical rules, NULL-terminated */
    char **protect;    /* (added) worktree.protect, or its default; NULL-terminated */
    struct sbx_rule_cache rules;
};

struct sbx_lua_caps sbx_policy_caps = {
    .instructions = 1000000,
    .timeout_ms = 100,
    .memory = 32u << 20,
};

static void free_strv(char **v)
{
    for (size_t i = 0; v != NULL && v[i] != NULL; i++) {
        free(v[i]);
    }
    free(v);
}

void sbx_policy_destroy(struct sbx_policy *p)
{
    if (p == NULL) {
        return;
    }
    sbx_lua_free(p->lua);
    sbx_rule_cache_fini(&p->rules);
    for (int i = 0; i < SBX_POLICY_NPARTS; i++) {
        free(p->where[i]);
    }
    for (size_t i = 0; i < p->n_pools; i++) {
        free(p->pools[i].name);
    }
    free(p->pools);
    free_strv(p->registries);
    free_strv(p->protect);
    free(p);
}

static int push_config(lua_State *L)
{
    struct sbx_policy *p = lua_touserdata(L, 1);
    size_t n = 0;

    lua_createtable(L, 0, 3);
    while (p->registries[n] != NULL) {
        n++;
    }
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, p->registries[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    sbx_lua_push_readonly(L, -1);
    lua_setfield(L, -3, "registries");
    lua_pop(L, 1);
    /* (added) the worktree's protected paths (docs/tasks.md, "Worktrees") */
    for (n = 0; p->protect != NULL && p->protect[n] != NULL; n++) {
    }
    lua_createtable(L, (int)n, 0);
    for (size_t i = 0; i < n; i++) {
        lua_pushstring(L, p->protect[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    sbx_lua_push_readonly(L, -1);
    lua_setfield(L, -3, "worktree_protect");
    lua_pop(L, 1);

    lua_createtable(L, 0, 6);
    lua_pushnumber(L, p->caps.cpus);
    lua_setfield(L, -2, "cpus");
    lua_pushinteger(L, p->caps.memory);
    lua_setfield(L, -2, "memory");
    lua_pushinteger(L, p->caps.disk);
    lua_setfield(L, -2, "disk");
    lua_pushinteger(L, p->caps.pids);
    lua_setfield(L, -2, "pids");
    lua_pushinteger(L, p->caps.idle);
    lua_setfield(L, -2, "idle");
    lua_pushinteger(L, p->caps.max);
    lua_setfield(L, -2, "max");
    sbx_lua_push_readonly(L, -1);
    lua_setfield(L, -3, "caps");
    lua_pop(L, 1);

    sbx_lua_push_readonly(L, -1);
    return 1;
}

struct sbx_policy *sbx_policy_load_with(const char *dir, const struct sbx_config *cfg,
                                        const char *const *registries, sbx_error_t **err)
{
    struct sbx_policy *p = xcalloc(1, sizeof(*p));
    size_t n = 0;

    p->caps = cfg->limits;
    p->n_pools = cfg->n_pools;
    p->pools = xcalloc(cfg->n_pools + 1, sizeof(*p->pools));
    for (size_t i = 0; i < cfg->n_pools; i++) {
        p->pools[i].name = xstrdup(cfg->pools[i].name);
        p->pools[i].cpus = cfg->pools[i].cpus;
        p->pools[i].memory = cfg->pools[i].memory;
    }
    if (registries == NULL) {
        registries = (const char *const *)cfg->egress.registries;
    }
    while (registries != NULL && registries[n] != NULL) {
        n++;
    }
    p->registries = xcalloc(n + 1, sizeof(*p->registries));
    for (size_t i = 0; i < n; i++) {
        char why[160];

        p->registries[i] = sbx_policy_registry_rule(registries[i], why, sizeof(why));
        if (p->registries[i] == NULL) {
            sbx_error_set(err, SBX_E_CONFIG, "%s: egress.registries: '%s': %s",
                          cfg->path ? cfg->path : "config", registries[i], why);
            sbx_policy_destroy(p);
            return NULL;
        }
    }
    {
        const char *const *g = cfg->worktree_protect ? (const char *const *)cfg->worktree_protect
                                                     : sbx_protect_default;
        size_t k = 0;

        while (g[k] != NULL) {
            k++;
        }
        p->protect = xcalloc(k + 1, sizeof(char *));
        for (size_t i = 0; i < k; i++) {
            p->protect[i] = xstrdup(g[i]);
        }
    }
    p->lua = sbx_lua_new(&sbx_policy_caps, err);
    if (p->lua == NULL) {
        sbx_policy_destroy(p);
        return NULL;
    }
    for (int i = 0; i < SBX_POLICY_NPARTS; i++) {
        cleanup_free char *path = xasprintf("%s/%s", dir, part_files[i]);

        p->ref[i] = sbx_lua_load_file(p->lua, part_names[i], path, err);
        if (p->ref[i] < 0) {
            sbx_policy_destroy(p);
            return NULL;
        }
        if (sbx_lua_return_line(p->lua, p->ref[i]) > 0) {
            p->where[i] = xasprintf("%s:%d", part_names[i], sbx_lua_return_line(p->lua, p->ref[i]));
        }
        else {
            p->where[i] = xstrdup(part_names[i]);
        }
    }
    if (sbx_lua_pcall_c(p->lua, push_config, p, 1, err) < 0) {
        sbx_policy_destroy(p);
        return NULL;
    }
    p->config_ref = luaL_ref(sbx_lua_state(p->lua), LUA_REGISTRYINDEX);
    return p;
}

struct sbx_lua *sbx_policy_lua(struct sbx_policy *p)
{
    return p->lua;
}

int sbx_policy_part_ref(const struct sbx_policy *p, int part)
{
    return p->ref[part];
}

int sbx_policy_config_ref(const struct sbx_policy *p)
{
    return p->config_ref;
}

struct sbx_policy *sbx_policy_load(const char *dir, const struct sbx_config *cfg, sbx_error_t **err)
{
    return sbx_policy_load_with(dir, cfg, NULL, err);
}

void sbx_policy_decision_fini(struct sbx_policy_decision *d)
{
    if (d == NULL) {
        return;
    }
    free_strv(d->egress_allow);
    free(d->slot_class);
    for (int i = 0; i < SBX_POLICY_NPARTS; i++) {
        free(d->decided_by[i]);
        free(d->reason[i]);
    }
    memset(d, 0, sizeof(*d));
}

/* Arguments: the job and the config tables. */
static void set_env(lua_State *L, int env, int first, int nargs, void *userdata)
{
    (void)nargs;
    (void)userdata;
    lua_pushvalue(L, first);
    lua_setfield(L, env, "job");
    lua_pushvalue(L, first + 1);
    lua_setfield(L, env, "config");
}

#define CLAMP(field, bit)                                                                          \
    do {                                                                                           \
        if (l->field == 0) {                                                                       \
            l->field = caps.field;                                                                 \
        }                                                                                          \
        else if (caps.field > 0 && l->field > caps.field) {                                        \
            l->field = caps.field;                                                                 \
            *clamped |= (bit);                                                                     \
        }                                                                                          \
    } while (0)

static void clamp(const struct sbx_policy *p, const char *pool, struct sbx_limits *l,
                  unsigned *clamped)
{
    struct sbx_limits caps = p->caps;

    for (size_t i = 0; i < p->n_pools; i++) {
        if (strcmp(p->pools[i].name, pool) == 0) {
            if (p->pools[i].cpus > 0 && (caps.cpus <= 0 || p->pools[i].cpus < caps.cpus)) {
                caps.cpus = p->pools[i].cpus;
            }
            if (p->pools[i].memory > 0 && (caps.memory <= 0 || p->pools[i].memory < caps.memory)) {
                caps.memory = p->pools[i].memory;
            }
        }
    }
    CLAMP(cpus, SBX_CLAMP_CPUS);
    CLAMP(memory, SBX_CLAMP_MEMORY);
    CLAMP(disk, SBX_CLAMP_DISK);
    CLAMP(pids, SBX_CLAMP_PIDS);
    CLAMP(idle, SBX_CLAMP_IDLE);
    CLAMP(max, SBX_CLAMP_MAX);
}

static int read_part(struct sbx_policy *p, int part, int idx, struct sbx_policy_decision *out,
                     sbx_error_t **err)
{
    lua_State *L = sbx_lua_state(p->lua);
    const char *where = p->where[part];

    switch (part) {
    case SBX_POLICY_LIMITS:
        return sbx_policy_read_limits(L, idx, where, &out->limits, &out->reason[part], err);
    case SBX_POLICY_EGRESS:
        return sbx_policy_read_egress(L, idx, where, &p->rules, &out->egress_allow,
                                      &out->n_egress_allow, &out->reason[part], err);
    default:
        return sbx_policy_read_slot(L, idx, where, &out->slot_class, &out->reason[part], err);
    }
}

int sbx_policy_decide(struct sbx_policy *p, const struct sbx_job_desc *job,
                      struct sbx_policy_decision *out, sbx_error_t **err)
{
    lua_State *L = sbx_lua_state(p->lua);
    int top = lua_gettop(L);

    memset(out, 0, sizeof(*out));
    if (job->pool == NULL || (strcmp(job->pool, "ci") != 0 && strcmp(job->pool, "agent") != 0)) {
        return sbx_error_set(err, SBX_E_POLICY,
                             "job: pool must be \"ci\" or \"agent\", got "
                             "'%s'",
                             job->pool ? job->pool : "(none)");
    }
    if (sbx_lua_pcall_c(p->lua, sbx_policy_push_job, (void *)job, 1, err) < 0) {
        return sbx_error_wrap(err, "job %s", job->id ? job->id : "(no id)");
    }
    for (int i = 0; i < SBX_POLICY_NPARTS; i++) {
        lua_pushvalue(L, top + 1);
        lua_rawgeti(L, LUA_REGISTRYINDEX, p->config_ref);
        if (sbx_lua_run(p->lua, p->ref[i], 2, set_env, NULL, err) < 0 ||
            read_part(p, i, -1, out, err) < 0) {
            lua_settop(L, top);
            sbx_policy_decision_fini(out);
            return -1;
        }
        lua_settop(L, top + 1);
        out->decided_by[i] = xstrdup(part_names[i]);
    }
    lua_settop(L, top);
    clamp(p, job->pool, &out->limits, &out->clamped);
    return 0;
}

char *sbx_policy_dir_resolve(const char *configured, sbx_error_t **err)
{
    return sbx_asset_dir_resolve(SBX_ASSET_POLICIES, configured, SBX_E_CONFIG, err);
}

int sbx_policy_check(const char *dir, const struct sbx_config *cfg, sbx_error_t **err)
{
    static const char *const ci_argv[] = {"encore", "test", NULL};
    static const char *const agent_argv[] = {"bash", NULL};
    struct sbx_job_desc jobs[] = {
        {.id = "check-ci",
         .task = "check-ci",
         .pool = "ci",
         .argv = ci_argv,
         .workdir = "/workspace",
         .repository = "example/repo"},
        {.id = "check-agent",
         .task = "check-agent",
         .pool = "agent",
         .argv = agent_argv,
         .workdir = "/workspace"},
    };
    struct sbx_policy *p = sbx_policy_load(dir, cfg, err);

    if (p == NULL) {
        return -1;
    }
    for (size_t i = 0; i < sizeof(jobs) / sizeof(jobs[0]); i++) {
        struct sbx_policy_decision d;

        if (sbx_policy_decide(p, &jobs[i], &d, err) < 0) {
            sbx_policy_destroy(p);
            return -1;
        }
        sbx_policy_decision_fini(&d);
    }
    sbx_policy_destroy(p);
    return 0;
}
