/* sandbox.c - one capped Lua 5.4 state for policy scripts (see sandbox.h). */
#include "policy/sandbox.h"

#include <errno.h>
#include <lauxlib.h>
#include <lualib.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "util/cleanup.h"
#include "util/log.h"
#include "util/xalloc.h"

#define HOOK_EVERY 1000       /* instructions between two hook calls */
#define MAX_FILE (256 * 1024) /* bytes of one script */
#define MAX_MESSAGE 400       /* bytes of one error message */
#define MAX_BLOCK                                                                                  \
    (1u << 20)                  /* bytes of one allocation: bounds the work of one                 \
                                 * instruction (concatenation, comparison) */
#define CHECK_BLOCK (64u << 10) /* allocations from this size check the deadline */

enum kill_reason {
    KILL_NONE = 0,
    KILL_INSTRUCTIONS,
    KILL_TIME,
};

struct chunk {
    char *name;
    int ref;         /* registry reference of the compiled function */
    int return_line; /* last top-level "return", for result messages */
};

struct sbx_lua {
    lua_State *L;
    struct sbx_lua_caps caps;
    size_t mem_used;
    int allow_ref;  /* registry: the allow-listed globals */
    int env_mt_ref; /* registry: metatable of every fresh _ENV */
    struct chunk *chunks;
    size_t n_chunks;

    /* State of the current run, reset by sbx_lua_run. */
    int running;
    uint64_t executed;
    int64_t deadline_ms;
    enum kill_reason killed;
    int kill_line;
    int err_line;
    int mem_line;
};

size_t sbx_lua_memory(const struct sbx_lua *s)
{
    return s->mem_used;
}

size_t sbx_lua_memory_cap(lua_State *L)
{
    return sbx_lua_from_state(L)->caps.memory;
}

int sbx_lua_killed(lua_State *L)
{
    return sbx_lua_from_state(L)->killed != KILL_NONE;
}

lua_State *sbx_lua_state(struct sbx_lua *s)
{
    return s->L;
}

struct sbx_lua *sbx_lua_from_state(lua_State *L)
{
    return *(struct sbx_lua **)lua_getextraspace(L);
}

/* The line of the innermost Lua function running, or 0. Reads only. */
static int current_line(lua_State *L, int level)
{
    lua_Debug ar;

    for (; lua_getstack(L, level, &ar); level++) {
        if (lua_getinfo(L, "l", &ar) && ar.currentline > 0) {
            return ar.currentline;
        }
    }
    return 0;
}

static void sandbox_hook(lua_State *L, lua_Debug *ar);

/* The allocator enforces the memory cap: past it, it returns NULL and Lua
 * raises LUA_ERRMEM (after one emergency collection). */
static void *sandbox_alloc(void *ud, void *ptr, size_t osize, size_t nsize)
{
    struct sbx_lua *s = ud;
    size_t old = ptr != NULL ? osize : 0;
    void *n;

    if (nsize == 0) {
        free(ptr);
        s->mem_used -= old;
        return NULL;
    }
    if (nsize > old && (nsize > MAX_BLOCK || s->mem_used - old + nsize > s->caps.memory)) {
        if (s->running && s->L != NULL && s->mem_line == 0) {
            s->mem_line = current_line(s->L, 0);
        }
        return NULL;
    }
    /* A large block means as much copying work: check the deadline here
     * too, since one instruction can do that much between two hooks. */
    if (s->running && nsize >= CHECK_BLOCK && s->killed == KILL_NONE &&
        sbx_mono_ms() > s->deadline_ms) {
        s->killed = KILL_TIME;
        s->kill_line = current_line(s->L, 0);
        lua_sethook(s->L, sandbox_hook, LUA_MASKCOUNT | LUA_MASKLINE, 1); /* signal-safe */
        return NULL;
    }
    n = realloc(ptr, nsize);
    if (n == NULL) {
        return NULL;
    }
    s->mem_used = s->mem_used - old + nsize;
    return n;
}

static int sandbox_panic(lua_State *L)
{
    const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "?";

    sbx_log(SBX_LOG_ERROR, "policy: unprotected Lua error: %s", msg);
    abort();
}

/* Count hook: instruction budget and deadline. Once either is exceeded it
 * re-arms itself on every line and instruction, so pcall in the script only
 * catches the error to meet it again at the next instruction (Redis). */
static void sandbox_hook(lua_State *L, lua_Debug *ar)
{
    struct sbx_lua *s = sbx_lua_from_state(L);

    if (s->killed == KILL_NONE) {
        if (ar->event == LUA_HOOKCOUNT) {
            s->executed += HOOK_EVERY;
        }
        if (s->executed > s->caps.instructions) {
            s->killed = KILL_INSTRUCTIONS;
        }
        else if (sbx_mono_ms() > s->deadline_ms) {
            s->killed = KILL_TIME;
        }
        else {
            return;
        }
        if (lua_getinfo(L, "l", ar) && ar->currentline > 0) {
            s->kill_line = ar->currentline;
        }
        lua_sethook(L, sandbox_hook, LUA_MASKCOUNT | LUA_MASKLINE, 1);
    }
    luaL_error(L, "policy stopped");
}

/* Message handler: notes the line of the failing Lua function; keeps the
 * error object as it is (no tostring, which could run script code). */
static int sandbox_msgh(lua_State *L)
{
    struct sbx_lua *s = sbx_lua_from_state(L);

    s->err_line = current_line(L, 1);
    return 1;
}

/* --- read-only proxies ------------------------------------------------ */

static int ro_newindex(lua_State *L)
{
    return luaL_error(L, "attempt to modify a read-only table");
}

/* Pushes the real table behind the proxy at idx; raises if it is none. */
static void ro_real(lua_State *L, int idx)
{
    if (!lua_getmetatable(L, idx)) {
        luaL_error(L, "not a read-only table");
    }
    lua_getfield(L, -1, "__newindex");
    if (lua_tocfunction(L, -1) != ro_newindex) {
        luaL_error(L, "not a read-only table");
    }
    lua_pop(L, 1);
    lua_getfield(L, -1, "__index");
    lua_remove(L, -2);
}

static int ro_len(lua_State *L)
{
    ro_real(L, 1);
    lua_pushinteger(L, (lua_Integer)lua_rawlen(L, -1));
    return 1;
}

static int ro_next(lua_State *L)
{
    lua_settop(L, 2);
    ro_real(L, 1);
    lua_pushvalue(L, 2);
    if (lua_next(L, 3)) {
        return 2;
    }
    lua_pushnil(L);
    return 1;
}

static int ro_pairs(lua_State *L)
{
    lua_pushcfunction(L, ro_next);
    lua_pushvalue(L, 1);
    lua_pushnil(L);
    return 3;
}

void sbx_lua_push_readonly(lua_State *L, int idx)
{
    idx = lua_absindex(L, idx);
    lua_createtable(L, 0, 0);
    lua_createtable(L, 0, 5);
    lua_pushvalue(L, idx);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, ro_newindex);
    lua_setfield(L, -2, "__newindex");
    lua_pushcfunction(L, ro_pairs);
    lua_setfield(L, -2, "__pairs");
    lua_pushcfunction(L, ro_len);
    lua_setfield(L, -2, "__len");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_setmetatable(L, -2);
}

/* --- the allow-listed globals ----------------------------------------- */

static int env_index(lua_State *L)
{
    lua_pushvalue(L, 2);
    if (lua_rawget(L, lua_upvalueindex(1)) == LUA_TNIL) {
        if (lua_type(L, 2) == LUA_TSTRING) {
            return luaL_error(L, "undefined global '%s'", lua_tostring(L, 2));
        }
        return luaL_error(L, "undefined global");
    }
    return 1;
}

static int sandbox_setup(lua_State *L)
{
    static const char *const base_allowed[] = {
        "assert",   "error", "ipairs",   "next",   "pairs",        "pcall",    "select", "tonumber",
        "tostring", "type",  "rawequal", "rawlen", "getmetatable", "_VERSION", NULL,
    };
    static const char *const base_removed[] = {
        "dofile", "loadfile", "load",         "require", "print", "collectgarbage",
        "rawset", "rawget",   "setmetatable", "xpcall",  NULL,
    };
    static const struct {
        const char *name;
        lua_CFunction open;
    } libs[] = {
        {LUA_TABLIBNAME, luaopen_table},
        {LUA_STRLIBNAME, luaopen_string},
        {LUA_MATHLIBNAME, luaopen_math},
        {LUA_UTF8LIBNAME, luaopen_utf8},
    };
    struct sbx_lua *s = lua_touserdata(L, 1);
    int allow;

    luaL_requiref(L, LUA_GNAME, luaopen_base, 1);
    lua_createtable(L, 0, 32);
    allow = lua_gettop(L);
    for (size_t i = 0; base_allowed[i] != NULL; i++) {
        lua_getfield(L, -2, base_allowed[i]);
        lua_setfield(L, allow, base_allowed[i]);
    }
    sbx_lua_install_guards(L, allow, 0, 0);
    for (size_t i = 0; base_removed[i] != NULL; i++) {
        lua_pushnil(L);
        lua_setfield(L, allow - 1, base_removed[i]);
    }
    for (size_t i = 0; i < sizeof(libs) / sizeof(libs[0]); i++) {
        int lib;

        luaL_requiref(L, libs[i].name, libs[i].open, 0);
        lib = lua_gettop(L);
        if (strcmp(libs[i].name, LUA_STRLIBNAME) == 0) {
            lua_pushnil(L);
            lua_setfield(L, lib, "dump");
            sbx_lua_install_guards(L, allow, lib, 0);
        }
        else if (strcmp(libs[i].name, LUA_TABLIBNAME) == 0) {
            sbx_lua_install_guards(L, allow, 0, lib);
        }
        else if (strcmp(libs[i].name, LUA_MATHLIBNAME) == 0) {
            /* Shared generator state would persist between jobs. */
            lua_pushnil(L);
            lua_setfield(L, lib, "random");
            lua_pushnil(L);
            lua_setfield(L, lib, "randomseed");
        }
        sbx_lua_push_readonly(L, lib);
        lua_setfield(L, allow, libs[i].name);
        lua_pop(L, 1);
    }
    /* ("").upper reaches the real string table through the string
     * metatable: hide that metatable from getmetatable. */
    lua_pushliteral(L, "");
    lua_getmetatable(L, -1);
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    lua_pop(L, 2);
    lua_pushinteger(L, 1LL << 10);
    lua_setfield(L, allow, "KiB");
    lua_pushinteger(L, 1LL << 20);
    lua_setfield(L, allow, "MiB");
    lua_pushinteger(L, 1LL << 30);
    lua_setfield(L, allow, "GiB");
    lua_pushinteger(L, 1LL << 40);
    lua_setfield(L, allow, "TiB");

    lua_createtable(L, 0, 2);
    lua_pushvalue(L, allow);
    lua_pushcclosure(L, env_index, 1);
    lua_setfield(L, -2, "__index");
    lua_pushboolean(L, 0);
    lua_setfield(L, -2, "__metatable");
    s->env_mt_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    lua_pushvalue(L, allow);
    s->allow_ref = luaL_ref(L, LUA_REGISTRYINDEX);
    return 0;
}

void sbx_lua_allow_global(struct sbx_lua *s, const char *name)
{
    lua_rawgeti(s->L, LUA_REGISTRYINDEX, s->allow_ref);
    lua_insert(s->L, -2);
    lua_setfield(s->L, -2, name);
    lua_pop(s->L, 1);
}

struct sbx_lua *sbx_lua_new(const struct sbx_lua_caps *caps, sbx_error_t **err)
{
    struct sbx_lua *s = xcalloc(1, sizeof(*s));

    s->caps = *caps;
    s->L = lua_newstate(sandbox_alloc, s);
    if (s->L == NULL) {
        free(s);
        sbx_error_set(err, ENOMEM, "policy: cannot create a Lua state");
        return NULL;
    }
    *(struct sbx_lua **)lua_getextraspace(s->L) = s;
    lua_atpanic(s->L, sandbox_panic);
    lua_gc(s->L, LUA_GCINC, 0, 0, 0);
    if (sbx_lua_pcall_c(s, sandbox_setup, s, 0, err) < 0) {
        sbx_lua_free(s);
        return NULL;
    }
    return s;
}

void sbx_lua_free(struct sbx_lua *s)
{
    if (s == NULL) {
        return;
    }
    if (s->L != NULL) {
        lua_close(s->L);
    }
    for (size_t i = 0; i < s->n_chunks; i++) {
        free(s->chunks[i].name);
    }
    free(s->chunks);
    free(s);
}

/* --- loading ---------------------------------------------------------- */

static int find_return_line(const char *text, size_t len)
{
    int line = 1;
    int top = 0;
    int any = 0;
    size_t i = 0;

    while (i < len) {
        size_t j = i;

        while (j < len && (text[j] == ' ' || text[j] == '\t')) {
            j++;
        }
        if (len - j >= 6 && memcmp(text + j, "return", 6) == 0 &&
            (len - j == 6 || !(text[j + 6] == '_' || (text[j + 6] >= 'a' && text[j + 6] <= 'z') ||
                               (text[j + 6] >= 'A' && text[j + 6] <= 'Z') ||
                               (text[j + 6] >= '0' && text[j + 6] <= '9')))) {
            any = line;
            if (j == i) {
                top = line;
            }
        }
        while (i < len && text[i] != '\n') {
            i++;
        }
        i++;
        line++;
    }
    return top ? top : any;
}

/* One line, no control characters, bounded. */
static void sanitize(char *msg)
{
    size_t n = strlen(msg);

    if (n > MAX_MESSAGE) {
        memcpy(msg + MAX_MESSAGE - 3, "...", 4);
    }
    for (char *p = msg; *p != '\0'; p++) {
        if ((unsigned char)*p < 0x20 || *p == 0x7f) {
            *p = ' ';
        }
    }
}

int sbx_lua_load(struct sbx_lua *s, const char *name, const char *text, size_t len,
                 sbx_error_t **err)
{
    cleanup_free char *chunkname = xasprintf("=%s", name);
    lua_State *L = s->L;
    int st;

    st = luaL_loadbufferx(L, text, len, chunkname, "t");
    if (st != LUA_OK) {
        cleanup_free char *msg =
            xstrdup(lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "cannot load");

        lua_pop(L, 1);
        sanitize(msg);
        if (st == LUA_ERRMEM) {
            return sbx_error_set(err, SBX_E_POLICY, "%s: memory limit reached while loading", name);
        }
        if (strncmp(msg, name, strlen(name)) == 0) {
            return sbx_error_set(err, SBX_E_POLICY, "%s", msg);
        }
        return sbx_error_set(err, SBX_E_POLICY, "%s:1: %s", name, msg);
    }
    s->chunks = xrealloc(s->chunks, (s->n_chunks + 1) * sizeof(*s->chunks));
    s->chunks[s->n_chunks].name = xstrdup(name);
    s->chunks[s->n_chunks].ref = luaL_ref(L, LUA_REGISTRYINDEX);
    s->chunks[s->n_chunks].return_line = find_return_line(text, len);
    return (int)s->n_chunks++;
}

int sbx_lua_load_file(struct sbx_lua *s, const char *name, const char *path, sbx_error_t **err)
{
    cleanup_fclose FILE *f = fopen(path, "re");
    cleanup_free char *buf = NULL;
    struct stat st;
    size_t n;

    if (f == NULL) {
        return sbx_error_set(err, SBX_E_POLICY, "%s: cannot open %s: %s", name, path,
                             strerror(errno));
    }
    if (fstat(fileno(f), &st) < 0 || !S_ISREG(st.st_mode)) {
        return sbx_error_set(err, SBX_E_POLICY, "%s: %s is not a regular file", name, path);
    }
    if (st.st_size > MAX_FILE) {
        return sbx_error_set(err, SBX_E_POLICY, "%s: file is larger than %d bytes", name, MAX_FILE);
    }
    buf = xmalloc((size_t)st.st_size + 1);
    n = fread(buf, 1, (size_t)st.st_size + 1, f);
    if (ferror(f) || n > (size_t)st.st_size) {
        return sbx_error_set(err, SBX_E_POLICY, "%s: cannot read %s", name, path);
    }
    return sbx_lua_load(s, name, buf, n, err);
}

int sbx_lua_return_line(struct sbx_lua *s, int ref)
{
    return s->chunks[ref].return_line;
}

const char *sbx_lua_chunk_name(struct sbx_lua *s, int ref)
{
    return s->chunks[ref].name;
}

/* --- running ---------------------------------------------------------- */

struct run_args {
    struct sbx_lua *s;
    int ref;
    sbx_lua_env_fn env_fn;
    void *userdata;
};

static int run_chunk(lua_State *L)
{
    struct run_args *a = lua_touserdata(L, 1);
    int fn;
    int env;

    int nargs = lua_gettop(L) - 1;

    lua_rawgeti(L, LUA_REGISTRYINDEX, a->s->chunks[a->ref].ref);
    fn = lua_gettop(L);
    lua_createtable(L, 0, 4);
    env = lua_gettop(L);
    lua_rawgeti(L, LUA_REGISTRYINDEX, a->s->env_mt_ref);
    lua_setmetatable(L, env);
    if (a->env_fn != NULL) {
        a->env_fn(L, env, 2, nargs, a->userdata);
    }
    lua_settop(L, env);
    if (lua_setupvalue(L, fn, 1) == NULL) {
        return luaL_error(L, "chunk has no _ENV");
    }
    lua_call(L, 0, 1);
    return 1;
}

static void begin_run(struct sbx_lua *s)
{
    s->running = 1;
    s->executed = 0;
    s->killed = KILL_NONE;
    s->kill_line = 0;
    s->err_line = 0;
    s->mem_line = 0;
    s->deadline_ms = sbx_mono_ms() + s->caps.timeout_ms;
    lua_sethook(s->L, sandbox_hook, LUA_MASKCOUNT, HOOK_EVERY);
}

static void end_run(struct sbx_lua *s)
{
    lua_sethook(s->L, NULL, 0, 0);
    s->running = 0;
}

static int run_error(struct sbx_lua *s, const char *name, int st, sbx_error_t **err)
{
    lua_State *L = s->L;
    char where[300];
    int line;

    line = s->killed ? s->kill_line : st == LUA_ERRMEM ? s->mem_line : s->err_line;
    if (line > 0) {
        snprintf(where, sizeof(where), "%s:%d", name, line);
    }
    else {
        snprintf(where, sizeof(where), "%s", name);
    }
    if (s->killed == KILL_INSTRUCTIONS) {
        return sbx_error_set(err, SBX_E_TIMEOUT,
                             "%s: instruction limit reached (%llu "
                             "instructions)",
                             where, (unsigned long long)s->caps.instructions);
    }
    if (s->killed == KILL_TIME) {
        return sbx_error_set(err, SBX_E_TIMEOUT, "%s: time limit reached (%lld ms)", where,
                             (long long)s->caps.timeout_ms);
    }
    if (st == LUA_ERRMEM) {
        return sbx_error_set(err, SBX_E_POLICY,
                             "%s: memory limit reached (%zu bytes, %u per "
                             "object)",
                             where, s->caps.memory, MAX_BLOCK);
    }
    if (lua_type(L, -1) == LUA_TSTRING) {
        cleanup_free char *msg = xstrdup(lua_tostring(L, -1));
        size_t n = strlen(name);

        sanitize(msg);
        if (strncmp(msg, name, n) == 0 && msg[n] == ':') {
            return sbx_error_set(err, SBX_E_POLICY, "%s", msg);
        }
        return sbx_error_set(err, SBX_E_POLICY, "%s: %s", where, msg);
    }
    return sbx_error_set(err, SBX_E_POLICY, "%s: error object is a %s value", where,
                         luaL_typename(L, -1));
}

/* Calls the function below nargs arguments under the caps, with the
 * message handler; errors are named after NAME. */
static int capped_call(struct sbx_lua *s, const char *name, int nargs, int nres, sbx_error_t **err)
{
    lua_State *L = s->L;
    int base = lua_gettop(L) - nargs; /* the function */
    int st;

    lua_pushcfunction(L, sandbox_msgh);
    lua_insert(L, base);
    begin_run(s);
    st = lua_pcall(L, nargs, nres, base);
    end_run(s);
    if (st != LUA_OK) {
        run_error(s, name, st, err);
        lua_settop(L, base - 1);
        /* Start the next run clean after a bomb (no finalizers can run). */
        lua_gc(L, LUA_GCCOLLECT, 0);
        return -1;
    }
    lua_remove(L, base);
    return 0;
}

int sbx_lua_run(struct sbx_lua *s, int ref, int nargs, sbx_lua_env_fn env_fn, void *userdata,
                sbx_error_t **err)
{
    lua_State *L = s->L;
    struct run_args a = {s, ref, env_fn, userdata};

    if (!lua_checkstack(L, 8)) {
        lua_pop(L, nargs);
        return sbx_error_set(err, SBX_E_POLICY, "%s: Lua stack exhausted", s->chunks[ref].name);
    }
    lua_pushcfunction(L, run_chunk);
    lua_insert(L, -nargs - 1);
    lua_pushlightuserdata(L, &a);
    lua_insert(L, -nargs - 1);
    return capped_call(s, s->chunks[ref].name, nargs + 1, 1, err);
}

int sbx_lua_call(struct sbx_lua *s, const char *name, int nargs, int nres, sbx_error_t **err)
{
    if (!lua_checkstack(s->L, 8)) {
        lua_pop(s->L, nargs + 1);
        return sbx_error_set(err, SBX_E_POLICY, "%s: Lua stack exhausted", name);
    }
    return capped_call(s, name, nargs, nres, err);
}

int sbx_lua_pcall_c(struct sbx_lua *s, lua_CFunction fn, void *ud, int nres, sbx_error_t **err)
{
    lua_State *L = s->L;
    int top = lua_gettop(L);
    int st;

    if (!lua_checkstack(L, 4)) {
        return sbx_error_set(err, SBX_E_POLICY, "policy: Lua stack exhausted");
    }
    lua_pushcfunction(L, fn);
    lua_pushlightuserdata(L, ud);
    st = lua_pcall(L, 1, nres, 0);
    if (st != LUA_OK) {
        const char *msg = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : "error";

        if (st == LUA_ERRMEM) {
            sbx_error_set(err, SBX_E_POLICY, "policy: memory limit reached (%zu bytes)",
                          s->caps.memory);
        }
        else {
            sbx_error_set(err, SBX_E_POLICY, "policy: %s", msg);
        }
        lua_settop(L, top);
        return -1;
    }
    return 0;
}
