/* harness.c - `sbx policy test`: runs *_test.lua files against the policies.
 *
 * Each test file runs in its own capped sandbox state (the same rules as the
 * policies, with larger caps) and gets this API (docs/policy.md):
 *   test(name, fn)              registers a test
 *   decide(job [, opts])        the decision as a table; raises if denied
 *   denied(job [, opts])        the denial message; raises if allowed
 *   allows(decision, host [, port])  egress check (port defaults to 443)
 *   eq(actual, expected [, msg]), ok(value [, msg]), contains(list, value [, msg])
 * opts = {registries = {...}} stands in for config egress.registries.
 */
#include <dirent.h>
#include <lauxlib.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "policy/convert.h"
#include "policy/policy_internal.h"
#include "policy/sandbox.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

static const struct sbx_lua_caps harness_caps = {
    .instructions = 100000000,
    .timeout_ms = 10000,
    .memory = 64u << 20,
};

struct harness {
    const char *dir;
    const struct sbx_config *cfg;
    struct sbx_policy *policy;
    struct sbx_policy *alt; /* loaded with opts.registries */
    char *alt_key;
};

/* Raises "TESTFILE:LINE: msg" after freeing the C error. */
static int raise_error(lua_State *L, sbx_error_t **e)
{
    luaL_where(L, 1);
    lua_pushstring(L, sbx_error_msg(*e));
    sbx_error_free(e);
    lua_concat(L, 2);
    return lua_error(L);
}

static const char *raw_string_field(lua_State *L, int t, const char *key)
{
    const char *s = NULL;

    lua_pushstring(L, key);
    if (lua_rawget(L, t) == LUA_TSTRING) {
        s = lua_tostring(L, -1); /* kept alive by the job table */
    }
    else if (!lua_isnil(L, -1)) {
        luaL_error(L, "job.%s must be a string", key);
    }
    lua_pop(L, 1);
    return s;
}

/* Raises on a key of the job table at idx that is not a job field. */
static void job_check_keys(lua_State *L, int idx)
{
    static const char *const keys[] = {"id",       "task", "pool",   "workdir",   "repository",
                                       "provider", "argv", "labels", "requested", NULL};

    lua_pushnil(L);
    while (lua_next(L, idx)) {
        size_t k = 0;

        if (lua_type(L, -2) == LUA_TSTRING) {
            for (; keys[k] != NULL && strcmp(keys[k], lua_tostring(L, -2)) != 0; k++) {
            }
        }
        if (lua_type(L, -2) != LUA_TSTRING || keys[k] == NULL) {
            luaL_error(L, "job: unknown key '%s'",
                       lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : luaL_typename(L, -2));
        }
        lua_pop(L, 1);
    }
}

/* job.argv: a userdata holding the NULL-terminated array stays on the stack. */
static void job_argv_from_lua(lua_State *L, int idx, struct sbx_job_desc *job)
{
    lua_pushliteral(L, "argv");
    if (lua_rawget(L, idx) == LUA_TTABLE) {
        int t = lua_gettop(L);
        size_t n = lua_rawlen(L, t);
        const char **argv;

        argv = lua_newuserdatauv(L, (n + 1) * sizeof(*argv), 0);
        for (size_t i = 0; i < n; i++) {
            if (lua_rawgeti(L, t, (lua_Integer)i + 1) != LUA_TSTRING) {
                luaL_error(L, "job.argv[%d] must be a string", (int)i + 1);
            }
            argv[i] = lua_tostring(L, -1);
            lua_pop(L, 1);
        }
        argv[n] = NULL;
        job->argv = argv;
        lua_remove(L, t); /* the userdata stays */
    }
    else if (!lua_isnil(L, -1)) {
        luaL_error(L, "job.argv must be a list of strings");
    }
    else {
        lua_pop(L, 1);
    }
}

/* job.labels: a userdata holding the array stays on the stack. */
static void job_labels_from_lua(lua_State *L, int idx, struct sbx_job_desc *job)
{
    lua_pushliteral(L, "labels");
    if (lua_rawget(L, idx) == LUA_TTABLE) {
        int t = lua_gettop(L);
        struct sbx_kv *kv;
        size_t n = 0;

        lua_pushnil(L);
        while (lua_next(L, t)) {
            n++;
            lua_pop(L, 1);
        }
        kv = lua_newuserdatauv(L, (n + 1) * sizeof(*kv), 0);
        n = 0;
        lua_pushnil(L);
        while (lua_next(L, t)) {
            if (lua_type(L, -2) != LUA_TSTRING || lua_type(L, -1) != LUA_TSTRING) {
                luaL_error(L, "job.labels must map strings to strings");
            }
            kv[n].name = lua_tostring(L, -2);
            kv[n].value = lua_tostring(L, -1);
            n++;
            lua_pop(L, 1);
        }
        job->labels = kv;
        job->n_labels = n;
        lua_remove(L, t);
    }
    else if (!lua_isnil(L, -1)) {
        luaL_error(L, "job.labels must be a table");
    }
    else {
        lua_pop(L, 1);
    }
}

static void job_requested_from_lua(lua_State *L, int idx, struct sbx_job_desc *job)
{
    lua_pushliteral(L, "requested");
    if (lua_rawget(L, idx) == LUA_TTABLE) {
        sbx_error_t *e = NULL;
        char *reason = NULL;

        if (sbx_policy_read_limits(L, -1, "job.requested", &job->requested, &reason, &e) < 0) {
            raise_error(L, &e);
        }
        free(reason);
    }
    else if (!lua_isnil(L, -1)) {
        luaL_error(L, "job.requested must be a table");
    }
    lua_pop(L, 1);
}

/* Fills job from the Lua table at idx; arrays live in userdata on the stack
 * until the calling C function returns. Raises on bad input. */
static void job_from_lua(lua_State *L, int idx, struct sbx_job_desc *job)
{
    idx = lua_absindex(L, idx);
    luaL_checktype(L, idx, LUA_TTABLE);
    memset(job, 0, sizeof(*job));
    job_check_keys(L, idx);
    job->id = raw_string_field(L, idx, "id");
    job->task = raw_string_field(L, idx, "task");
    job->pool = raw_string_field(L, idx, "pool");
    job->workdir = raw_string_field(L, idx, "workdir");
    job->repository = raw_string_field(L, idx, "repository");
    job->provider = raw_string_field(L, idx, "provider");
    job_argv_from_lua(L, idx, job);
    job_labels_from_lua(L, idx, job);
    job_requested_from_lua(L, idx, job);
}

/* The policy to use for opts (arg 2): the default, or one loaded with
 * opts.registries. */
static struct sbx_policy *policy_for(lua_State *L, struct harness *h)
{
    sbx_error_t *e = NULL;
    const char **regs;
    luaL_Buffer key;
    size_t n;
    int t;

    if (lua_isnoneornil(L, 2)) {
        return h->policy;
    }
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, 2)) {
        if (lua_type(L, -2) != LUA_TSTRING || strcmp(lua_tostring(L, -2), "registries") != 0) {
            luaL_error(L, "opts: only 'registries' is allowed");
        }
        lua_pop(L, 1);
    }
    lua_pushliteral(L, "registries");
    if (lua_rawget(L, 2) != LUA_TTABLE) {
        luaL_error(L, "opts.registries must be a list of strings");
    }
    t = lua_gettop(L);
    n = lua_rawlen(L, t);
    regs = lua_newuserdatauv(L, (n + 1) * sizeof(*regs), 0);
    luaL_buffinit(L, &key);
    for (size_t i = 0; i < n; i++) {
        if (lua_rawgeti(L, t, (lua_Integer)i + 1) != LUA_TSTRING) {
            luaL_error(L, "opts.registries[%d] must be a string", (int)i + 1);
        }
        regs[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
        luaL_addstring(&key, regs[i]);
        luaL_addchar(&key, '\n');
    }
    regs[n] = NULL;
    luaL_pushresult(&key);
    if (h->alt == NULL || strcmp(h->alt_key, lua_tostring(L, -1)) != 0) {
        sbx_policy_destroy(h->alt);
        free(h->alt_key);
        h->alt_key = NULL;
        h->alt = sbx_policy_load_with(h->dir, h->cfg, regs, &e);
        if (h->alt == NULL) {
            raise_error(L, &e);
        }
        h->alt_key = xstrdup(lua_tostring(L, -1));
    }
    lua_settop(L, t - 1);
    return h->alt;
}

static int decide_common(lua_State *L, int expect_denied)
{
    struct harness *h = lua_touserdata(L, lua_upvalueindex(1));
    struct sbx_policy_decision d;
    struct sbx_job_desc job;
    struct sbx_policy *p;
    sbx_error_t *e = NULL;

    lua_settop(L, 2);
    p = policy_for(L, h);
    job_from_lua(L, 1, &job);
    if (sbx_policy_decide(p, &job, &d, &e) < 0) {
        if (expect_denied) {
            lua_pushstring(L, sbx_error_msg(e));
            sbx_error_free(&e);
            return 1;
        }
        return raise_error(L, &e);
    }
    if (expect_denied) {
        sbx_policy_decision_fini(&d);
        return luaL_error(L, "expected the job to be denied, but it was allowed");
    }
    lua_checkstack(L, 8);
    sbx_policy_push_decision(L, &d);
    sbx_policy_decision_fini(&d);
    return 1;
}

static int h_decide(lua_State *L)
{
    return decide_common(L, 0);
}

static int h_denied(lua_State *L)
{
    return decide_common(L, 1);
}

static int h_allows(lua_State *L)
{
    const char *host = luaL_checkstring(L, 2);
    lua_Integer port = luaL_optinteger(L, 3, 443);
    char **rules;
    size_t n;

    luaL_checktype(L, 1, LUA_TTABLE);
    lua_pushliteral(L, "egress");
    if (lua_rawget(L, 1) != LUA_TTABLE) {
        return luaL_error(L, "allows: argument 1 must be a decision (from decide)");
    }
    n = lua_rawlen(L, -1);
    rules = lua_newuserdatauv(L, (n + 1) * sizeof(*rules), 0);
    for (size_t i = 0; i < n; i++) {
        lua_rawgeti(L, -2, (lua_Integer)i + 1);
        rules[i] = (char *)lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    rules[n] = NULL;
    lua_pushboolean(L, sbx_policy_egress_allows(rules, host, (int)port));
    return 1;
}

static void describe(lua_State *L, int idx, char *buf, size_t len)
{
    switch (lua_type(L, idx)) {
    case LUA_TSTRING:
        snprintf(buf, len, "\"%.100s\"", lua_tostring(L, idx));
        break;
    case LUA_TNUMBER:
        if (lua_isinteger(L, idx)) {
            snprintf(buf, len, "%lld", (long long)lua_tointeger(L, idx));
        }
        else {
            snprintf(buf, len, "%.17g", lua_tonumber(L, idx));
        }
        break;
    case LUA_TBOOLEAN:
        snprintf(buf, len, "%s", lua_toboolean(L, idx) ? "true" : "false");
        break;
    default:
        snprintf(buf, len, "%s", luaL_typename(L, idx));
    }
}

static int deep_equal(lua_State *L, int a, int b, int depth)
{
    if (lua_type(L, a) != LUA_TTABLE || lua_type(L, b) != LUA_TTABLE) {
        return lua_rawequal(L, a, b);
    }
    if (depth > 16 || !lua_checkstack(L, 4)) {
        return 0;
    }
    a = lua_absindex(L, a);
    b = lua_absindex(L, b);
    for (int pass = 0; pass < 2; pass++) {
        int x = pass == 0 ? a : b;
        int y = pass == 0 ? b : a;

        lua_pushnil(L);
        while (lua_next(L, x)) {
            int same;

            lua_pushvalue(L, -2);
            lua_rawget(L, y);
            same = pass == 0 ? deep_equal(L, -2, -1, depth + 1) : !lua_isnil(L, -1);
            lua_pop(L, 2);
            if (!same) {
                lua_pop(L, 1);
                return 0;
            }
        }
    }
    return 1;
}

static int h_eq(lua_State *L)
{
    char got[160];
    char want[160];

    luaL_checkany(L, 2);
    if (deep_equal(L, 1, 2, 0)) {
        return 0;
    }
    describe(L, 1, got, sizeof(got));
    describe(L, 2, want, sizeof(want));
    return luaL_error(L, "%s%sexpected %s, got %s", luaL_optstring(L, 3, ""),
                      lua_isnoneornil(L, 3) ? "" : ": ", want, got);
}

static int h_ok(lua_State *L)
{
    luaL_checkany(L, 1);
    if (!lua_toboolean(L, 1)) {
        return luaL_error(L, "%s", luaL_optstring(L, 2, "assertion failed"));
    }
    return 0;
}

static int h_contains(lua_State *L)
{
    char want[160];
    size_t n;

    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_checkany(L, 2);
    n = lua_rawlen(L, 1);
    for (size_t i = 1; i <= n; i++) {
        lua_rawgeti(L, 1, (lua_Integer)i);
        if (lua_rawequal(L, -1, 2)) {
            return 0;
        }
        lua_pop(L, 1);
    }
    describe(L, 2, want, sizeof(want));
    return luaL_error(L, "%s%sexpected the list to contain %s", luaL_optstring(L, 3, ""),
                      lua_isnoneornil(L, 3) ? "" : ": ", want);
}

static int h_test(lua_State *L)
{
    luaL_checkstring(L, 1);
    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_createtable(L, 2, 0);
    lua_pushvalue(L, 1);
    lua_rawseti(L, -2, 1);
    lua_pushvalue(L, 2);
    lua_rawseti(L, -2, 2);
    lua_rawseti(L, lua_upvalueindex(1), (lua_Integer)lua_rawlen(L, lua_upvalueindex(1)) + 1);
    return 0;
}

static int register_api(lua_State *L)
{
    struct harness *h = lua_touserdata(L, 1);
    struct sbx_lua *s = sbx_lua_from_state(L);
    static const struct {
        const char *name;
        lua_CFunction fn;
    } fns[] = {
        {"decide", h_decide}, {"denied", h_denied}, {"allows", h_allows},
        {"eq", h_eq},         {"ok", h_ok},         {"contains", h_contains},
    };

    for (size_t i = 0; i < sizeof(fns) / sizeof(fns[0]); i++) {
        lua_pushlightuserdata(L, h);
        lua_pushcclosure(L, fns[i].fn, 1);
        sbx_lua_allow_global(s, fns[i].name);
    }
    lua_newtable(L); /* the registered tests */
    lua_pushvalue(L, -1);
    lua_pushcclosure(L, h_test, 1);
    sbx_lua_allow_global(s, "test");
    return 1;
}

static void run_file(struct harness *h, const char *file, sbx_policy_test_fn fn, void *userdata,
                     int *passed, int *failed)
{
    cleanup_free char *name = xasprintf("policies/%s", file);
    cleanup_free char *path = xasprintf("%s/%s", h->dir, file);
    sbx_error_t *e = NULL;
    struct sbx_lua *s = sbx_lua_new(&harness_caps, &e);
    lua_State *L;
    int tests;
    int ref;
    size_t n;

    if (s == NULL || sbx_lua_pcall_c(s, register_api, h, 1, &e) < 0) {
        goto file_failed;
    }
    L = sbx_lua_state(s);
    tests = lua_gettop(L);
    ref = sbx_lua_load_file(s, name, path, &e);
    if (ref < 0 || sbx_lua_run(s, ref, 0, NULL, NULL, &e) < 0) {
        goto file_failed;
    }
    lua_pop(L, 1);
    n = lua_rawlen(L, tests);
    if (n == 0) {
        fn(userdata, name, "(file)", "the file registers no tests");
        (*failed)++;
    }
    for (size_t i = 1; i <= n; i++) {
        cleanup_free char *test = NULL;

        lua_rawgeti(L, tests, (lua_Integer)i);
        lua_rawgeti(L, -1, 1);
        test = xstrdup(lua_tostring(L, -1));
        lua_pop(L, 1);
        lua_rawgeti(L, -1, 2);
        lua_remove(L, -2);
        if (sbx_lua_call(s, name, 0, 0, &e) < 0) {
            fn(userdata, name, test, sbx_error_msg(e));
            sbx_error_free(&e);
            (*failed)++;
        }
        else {
            (*passed)++;
        }
    }
    sbx_lua_free(s);
    return;

file_failed:
    fn(userdata, name, "(file)", sbx_error_msg(e));
    sbx_error_free(&e);
    (*failed)++;
    sbx_lua_free(s);
}

static int is_test_file(const struct dirent *d)
{
    size_t n = strlen(d->d_name);

    return n > 9 && strcmp(d->d_name + n - 9, "_test.lua") == 0 && d->d_name[0] != '.';
}

int sbx_policy_test_dir(const char *dir, const struct sbx_config *cfg, sbx_policy_test_fn fn,
                        void *userdata, int *passed, int *failed, sbx_error_t **err)
{
    struct harness h = {.dir = dir, .cfg = cfg};
    struct dirent **list = NULL;
    int n;

    *passed = 0;
    *failed = 0;
    h.policy = sbx_policy_load(dir, cfg, err);
    if (h.policy == NULL) {
        return -1;
    }
    n = scandir(dir, &list, is_test_file, alphasort);
    if (n < 0) {
        sbx_policy_destroy(h.policy);
        return sbx_error_set(err, SBX_E_POLICY, "policy dir '%s': cannot list it", dir);
    }
    if (n == 0) {
        fn(userdata, dir, "(dir)", "no *_test.lua files");
        (*failed)++;
    }
    for (int i = 0; i < n; i++) {
        run_file(&h, list[i]->d_name, fn, userdata, passed, failed);
        free(list[i]);
    }
    free(list);
    sbx_policy_destroy(h.policy);
    sbx_policy_destroy(h.alt);
    free(h.alt_key);
    return 0;
}
