/* egress_change.c - egress.lua's second entry point: change(task, request, who) decides
 * whether a running task's egress may change (`sbx task allow|deny`; docs/policy.md,
 * "Changing a running task's egress"). The script runs as at a start (same `job`,
 * `config`, caps); change is the function it leaves in its environment. */
#include <lauxlib.h>
#include <stdio.h>
#include <string.h>

#include "policy/convert.h"
#include "policy/policy.h"
#include "policy/policy_internal.h"
#include "policy/sandbox.h"

#define WHERE "policies/egress.lua"
#define MAX_CURRENT 4096

struct capture {
    int env_ref; /* registry reference of the chunk's environment */
};

static void capture_env(lua_State *L, int env, int first, int nargs, void *userdata)
{
    struct capture *c = userdata;

    (void)nargs;
    lua_pushvalue(L, first);
    lua_setfield(L, env, "job");
    lua_pushvalue(L, first + 1);
    lua_setfield(L, env, "config");
    lua_pushvalue(L, env);
    c->env_ref = luaL_ref(L, LUA_REGISTRYINDEX);
}

struct args {
    const struct sbx_job_desc *job;
    const struct sbx_egress_change *req;
};

static void set_str(lua_State *L, int t, const char *k, const char *v)
{
    if (v != NULL) {
        lua_pushstring(L, v);
        lua_setfield(L, t, k);
    }
}

/* Pushes the read-only task, request and who tables. */
static int push_args(lua_State *L)
{
    const struct args *a = lua_touserdata(L, 1);
    int t;

    lua_createtable(L, 0, 6);
    t = lua_gettop(L);
    set_str(L, t, "id", a->job->task);
    set_str(L, t, "job", a->job->id);
    set_str(L, t, "pool", a->job->pool);
    set_str(L, t, "provider", a->job->provider);
    lua_createtable(L, 8, 0);
    for (int i = 0; a->req->current != NULL && a->req->current[i] != NULL && i < MAX_CURRENT; i++) {
        lua_pushstring(L, a->req->current[i]);
        lua_rawseti(L, -2, i + 1);
    }
    sbx_lua_push_readonly(L, -1);
    lua_setfield(L, t, "allow");
    lua_pop(L, 1);
    sbx_lua_push_readonly(L, t);
    lua_remove(L, t);

    lua_createtable(L, 0, 4);
    t = lua_gettop(L);
    set_str(L, t, "op", a->req->op);
    set_str(L, t, "rule", a->req->rule);
    set_str(L, t, "host", a->req->host);
    lua_createtable(L, (int)a->req->n_ports, 0);
    for (size_t i = 0; i < a->req->n_ports; i++) {
        lua_pushinteger(L, a->req->ports[i]);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    sbx_lua_push_readonly(L, -1);
    lua_setfield(L, t, "ports");
    lua_pop(L, 1);
    sbx_lua_push_readonly(L, t);
    lua_remove(L, t);

    lua_createtable(L, 0, 2);
    t = lua_gettop(L);
    set_str(L, t, "client", a->req->client);
    set_str(L, t, "via", a->req->via);
    sbx_lua_push_readonly(L, t);
    lua_remove(L, t);
    return 3;
}

/* A string field of the result at idx: at most max bytes, no control characters. */
static int read_str(lua_State *L, int idx, const char *key, char *out, size_t max, int required,
                    sbx_error_t **err)
{
    size_t len = 0;
    const char *s;
    int type;

    lua_pushstring(L, key);
    type = lua_rawget(L, idx);
    if (type == LUA_TNIL && !required) {
        lua_pop(L, 1);
        return 0;
    }
    if (type != LUA_TSTRING) {
        lua_pop(L, 1);
        return sbx_error_set(err, SBX_E_POLICY, "%s: change(): '%s' must be a string, got %s",
                             WHERE, key, lua_typename(L, type));
    }
    s = lua_tolstring(L, -1, &len);
    if (len == 0 || len >= max) {
        lua_pop(L, 1);
        return sbx_error_set(err, SBX_E_POLICY, "%s: change(): '%s' must be 1 to %zu bytes", WHERE,
                             key, max - 1);
    }
    for (size_t i = 0; i < len; i++) {
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f) {
            lua_pop(L, 1);
            return sbx_error_set(err, SBX_E_POLICY, "%s: change(): '%s' holds a control character",
                                 WHERE, key);
        }
    }
    memcpy(out, s, len);
    out[len] = '\0';
    lua_pop(L, 1);
    return 0;
}

static int read_verdict(lua_State *L, int idx, struct sbx_egress_verdict *out, sbx_error_t **err)
{
    const char *k;

    if (!lua_istable(L, idx)) {
        return sbx_error_set(err, SBX_E_POLICY,
                             "%s: change() must return { allow = BOOL, rule = \"NAME\", "
                             "reason = \"...\" }, got %s",
                             WHERE, luaL_typename(L, idx));
    }
    lua_pushnil(L);
    while (lua_next(L, idx) != 0) {
        k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : NULL;
        if (k == NULL ||
            (strcmp(k, "allow") != 0 && strcmp(k, "rule") != 0 && strcmp(k, "reason") != 0)) {
            lua_pop(L, 2);
            return sbx_error_set(err, SBX_E_POLICY,
                                 "%s: change(): unknown key '%.64s' (allowed: allow, rule, "
                                 "reason)",
                                 WHERE, k ? k : "(not a string)");
        }
        lua_pop(L, 1);
    }
    lua_pushstring(L, "allow");
    if (lua_rawget(L, idx) != LUA_TBOOLEAN) {
        lua_pop(L, 1);
        return sbx_error_set(err, SBX_E_POLICY, "%s: change(): 'allow' must be a boolean", WHERE);
    }
    out->allow = lua_toboolean(L, -1);
    lua_pop(L, 1);
    if (read_str(L, idx, "rule", out->rule, sizeof(out->rule), 1, err) < 0 ||
        read_str(L, idx, "reason", out->reason, sizeof(out->reason), 0, err) < 0) {
        return -1;
    }
    return 0;
}

int sbx_policy_egress_change(struct sbx_policy *p, const struct sbx_job_desc *job,
                             const struct sbx_egress_change *req, struct sbx_egress_verdict *out,
                             sbx_error_t **err)
{
    struct sbx_lua *lua = sbx_policy_lua(p);
    lua_State *L = sbx_lua_state(lua);
    int top = lua_gettop(L);
    struct capture cap = {LUA_NOREF};
    struct args a = {job, req};
    int rc = -1;

    memset(out, 0, sizeof(*out));
    snprintf(out->where, sizeof(out->where), "%s", WHERE);
    if (sbx_lua_pcall_c(lua, sbx_policy_push_job, (void *)job, 1, err) < 0) {
        return sbx_error_wrap(err, "job %s", job->id ? job->id : "(no id)");
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, sbx_policy_config_ref(p));
    if (sbx_lua_run(lua, sbx_policy_part_ref(p, SBX_POLICY_EGRESS), 2, capture_env, &cap, err) <
        0) {
        goto out;
    }
    lua_settop(L, top);
    if (cap.env_ref == LUA_NOREF || cap.env_ref == LUA_REFNIL) {
        sbx_error_set(err, SBX_E_POLICY, "%s: its environment was not kept", WHERE);
        goto out;
    }
    lua_rawgeti(L, LUA_REGISTRYINDEX, cap.env_ref);
    lua_pushstring(L, "change");
    lua_rawget(L, -2);
    lua_remove(L, -2);
    if (lua_isnil(L, -1)) {
        int deny = strcmp(req->op, "deny") == 0;

        out->allow = deny;
        snprintf(out->rule, sizeof(out->rule), "default");
        snprintf(out->reason, sizeof(out->reason), "%s",
                 deny ? "narrowing is always allowed"
                      : "egress.lua defines no change(): a running task's egress may only "
                        "be narrowed");
        rc = 0;
        goto out;
    }
    if (!lua_isfunction(L, -1)) {
        sbx_error_set(err, SBX_E_POLICY, "%s: 'change' must be a function, got %s", WHERE,
                      luaL_typename(L, -1));
        goto out;
    }
    if (sbx_lua_pcall_c(lua, push_args, &a, 3, err) < 0 ||
        sbx_lua_call(lua, WHERE, 3, 1, err) < 0) {
        goto out;
    }
    rc = read_verdict(L, lua_gettop(L), out, err);
out:
    if (cap.env_ref != LUA_NOREF) {
        luaL_unref(L, LUA_REGISTRYINDEX, cap.env_ref);
    }
    lua_settop(L, top);
    return rc;
}
