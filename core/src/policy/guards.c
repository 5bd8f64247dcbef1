/* guards.c - what keeps C library functions within the policy caps.
 *
 * The instruction hook only runs between VM instructions, so any C function
 * that can loop long on its own is wrapped: pattern matching (exponential
 * backtracking), string.rep of empty strings, table shifts over lengths a
 * __len can fake. setmetatable refuses finalizers and xpcall never runs a
 * script's handler for the kill error (Lua runs handlers with hooks off).
 */
#include <lauxlib.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "policy/sandbox.h"

#define MAX_ELEMENTS 1000000 /* elements table.insert/remove/move may shift */
#define MAX_SORT 100000      /* elements table.sort may sort */

/* setmetatable without finalizers: a __gc could run later, in another job's
 * evaluation or at lua_close, outside any cap. */
static int safe_setmetatable(lua_State *L)
{
    int t = lua_type(L, 2);

    luaL_checktype(L, 1, LUA_TTABLE);
    luaL_argexpected(L, t == LUA_TNIL || t == LUA_TTABLE, 2, "nil or table");
    if (t == LUA_TTABLE) {
        lua_pushstring(L, "__gc");
        if (lua_rawget(L, 2) != LUA_TNIL) {
            return luaL_error(L, "__gc metamethods are not allowed in policies");
        }
        lua_pop(L, 1);
    }
    if (luaL_getmetafield(L, 1, "__metatable") != LUA_TNIL) {
        return luaL_error(L, "cannot change a protected metatable");
    }
    lua_settop(L, 2);
    lua_setmetatable(L, 1);
    return 1;
}

/* The message handler of xpcall. An error raised by the kill hook is raised
 * with hooks off (Lua does not re-enable them until the next protected call
 * returns), so a script's handler must not run then: it could loop forever. */
static int xpcall_handler(lua_State *L)
{
    if (sbx_lua_killed(L)) {
        return 1;
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

static int safe_xpcall(lua_State *L)
{
    int n = lua_gettop(L);

    luaL_checktype(L, 2, LUA_TFUNCTION);
    lua_pushvalue(L, 2);
    lua_pushcclosure(L, xpcall_handler, 1);
    lua_replace(L, 2);
    lua_pushboolean(L, 1);
    lua_pushvalue(L, 1);
    lua_rotate(L, 3, 2); /* handler, true, f, args... */
    if (lua_pcall(L, n - 2, LUA_MULTRET, 2) != LUA_OK) {
        lua_pushboolean(L, 0);
        lua_insert(L, -2);
        return 2;
    }
    return lua_gettop(L) - 2;
}

static size_t skip_set(const char *p, size_t len, size_t i)
{
    size_t j = i + 1;

    if (j < len && p[j] == '^') {
        j++;
    }
    do {
        if (j >= len) {
            return len;
        }
        if (p[j++] == '%' && j < len) {
            j++;
        }
    } while (j < len && p[j] != ']');
    return j + 1;
}

double sbx_lua_pattern_cost(const char *p, size_t len, size_t n)
{
    size_t i = 0;
    int q = 0;
    int o = 0;
    int anchored = 0;

    if (len > 0 && p[0] == '^') {
        anchored = 1;
        i = 1;
    }
    while (i < len) {
        size_t end;

        if (p[i] == '(' || p[i] == ')' || (p[i] == '$' && i + 1 == len)) {
            i++;
            continue;
        }
        if (p[i] == '%') {
            char d = i + 1 < len ? p[i + 1] : '\0';

            if (d == 'b') {
                q++;
                i += 4;
                continue;
            }
            if (d == 'f') {
                i += 2;
                if (i < len && p[i] == '[') {
                    i = skip_set(p, len, i);
                }
                continue;
            }
            if (d >= '0' && d <= '9') {
                q++;
                i += 2;
                continue;
            }
            end = i + 2;
        }
        else if (p[i] == '[') {
            end = skip_set(p, len, i);
        }
        else {
            end = i + 1;
        }
        if (end < len) {
            if (p[end] == '*' || p[end] == '+' || p[end] == '-') {
                size_t rest = end + 1;

                /* A last quantifier (only ')' after it) never backtracks
                 * into anything: linear, not a factor. */
                while (rest < len && p[rest] == ')') {
                    rest++;
                }
                if (rest < len) {
                    q++;
                }
                end++;
            }
            else if (p[end] == '?') {
                o++;
                end++;
            }
        }
        i = end;
    }
    return (anchored ? 1.0 : (double)n + 1.0) * ((double)len + 1.0) * pow(2.0, o) *
           pow((double)n + 1.0, q);
}

enum pattern_fn { PAT_FIND, PAT_MATCH, PAT_GMATCH, PAT_GSUB };

/* string.find/match/gmatch/gsub run in C, where no hook can stop them, and
 * backtracking is exponential in the number of quantifiers: refuse patterns
 * whose worst case exceeds SBX_LUA_PATTERN_MAX_COST steps. */
static int guarded_pattern(lua_State *L)
{
    enum pattern_fn kind = (enum pattern_fn)lua_tointeger(L, lua_upvalueindex(2));
    int t1 = lua_type(L, 1);
    int t2 = lua_type(L, 2);

    if ((t1 == LUA_TSTRING || t1 == LUA_TNUMBER) && (t2 == LUA_TSTRING || t2 == LUA_TNUMBER)) {
        size_t ls;
        size_t lp;
        const char *pat;
        double cost;

        (void)lua_tolstring(L, 1, &ls);
        pat = lua_tolstring(L, 2, &lp);
        if (kind == PAT_FIND && lua_toboolean(L, 4)) {
            cost = ((double)ls + 1.0) * ((double)lp + 1.0); /* plain search */
        }
        else {
            cost = sbx_lua_pattern_cost(pat, lp, ls);
        }
        if (kind == PAT_GMATCH && lp > 0 && pat[0] == '^') {
            cost *= (double)ls + 1.0;
        }
        if (cost > SBX_LUA_PATTERN_MAX_COST) {
            char msg[200];

            snprintf(msg, sizeof(msg),
                     "pattern too complex for a subject of %zu bytes (worst "
                     "case %.3g steps, limit %.3g)",
                     ls, cost, SBX_LUA_PATTERN_MAX_COST);
            return luaL_error(L, "%s", msg);
        }
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

/* string.rep of an empty string loops n times in C: return early; a result
 * past the memory cap fails before any work. */
static int guarded_rep(lua_State *L)
{
    size_t l;
    size_t lsep;
    lua_Integer n;

    (void)luaL_checklstring(L, 1, &l);
    n = luaL_checkinteger(L, 2);
    (void)luaL_optlstring(L, 3, "", &lsep);
    if (n <= 0 || l + lsep == 0) {
        lua_pushliteral(L, "");
        return 1;
    }
    if ((double)(l + lsep) * (double)n > (double)sbx_lua_memory_cap(L)) {
        return luaL_error(L, "resulting string too large");
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

enum table_fn { TAB_INSERT, TAB_REMOVE, TAB_MOVE, TAB_SORT };

/* table.insert/remove/move/sort loop in C over lengths a __len metamethod or
 * arguments can make huge: bound them. */
static int guarded_table(lua_State *L)
{
    enum table_fn kind = (enum table_fn)lua_tointeger(L, lua_upvalueindex(2));

    if (kind == TAB_MOVE) {
        lua_Integer f = luaL_checkinteger(L, 2);
        lua_Integer e = luaL_checkinteger(L, 3);

        if (e >= f && (lua_Unsigned)e - (lua_Unsigned)f >= MAX_ELEMENTS) {
            return luaL_error(L, "table.move: more than %d elements", MAX_ELEMENTS);
        }
    }
    else {
        lua_Integer n = luaL_len(L, 1);
        lua_Integer max = kind == TAB_SORT ? MAX_SORT : MAX_ELEMENTS;

        if (n > max) {
            return luaL_error(L, "table.%s: more than %d elements",
                              kind == TAB_SORT     ? "sort"
                              : kind == TAB_INSERT ? "insert"
                                                   : "remove",
                              (int)max);
        }
    }
    lua_pushvalue(L, lua_upvalueindex(1));
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, LUA_MULTRET);
    return lua_gettop(L);
}

static void wrap_table(lua_State *L, int tab, const char *name, enum table_fn kind)
{
    lua_getfield(L, tab, name);
    lua_pushinteger(L, kind);
    lua_pushcclosure(L, guarded_table, 2);
    lua_setfield(L, tab, name);
}

static void wrap_pattern(lua_State *L, int strtab, const char *name, enum pattern_fn kind)
{
    lua_getfield(L, strtab, name);
    lua_pushinteger(L, kind);
    lua_pushcclosure(L, guarded_pattern, 2);
    lua_setfield(L, strtab, name);
}

void sbx_lua_install_guards(lua_State *L, int allow, int strlib, int tablib)
{
    lua_pushcfunction(L, safe_setmetatable);
    lua_setfield(L, allow, "setmetatable");
    lua_pushcfunction(L, safe_xpcall);
    lua_setfield(L, allow, "xpcall");
    if (strlib != 0) {
        wrap_pattern(L, strlib, "find", PAT_FIND);
        wrap_pattern(L, strlib, "match", PAT_MATCH);
        wrap_pattern(L, strlib, "gmatch", PAT_GMATCH);
        wrap_pattern(L, strlib, "gsub", PAT_GSUB);
        lua_getfield(L, strlib, "rep");
        lua_pushcclosure(L, guarded_rep, 1);
        lua_setfield(L, strlib, "rep");
    }
    if (tablib != 0) {
        wrap_table(L, tablib, "insert", TAB_INSERT);
        wrap_table(L, tablib, "remove", TAB_REMOVE);
        wrap_table(L, tablib, "move", TAB_MOVE);
        wrap_table(L, tablib, "sort", TAB_SORT);
    }
}
