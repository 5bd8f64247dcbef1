/* sandbox.h - one capped Lua 5.4 state for policy scripts (internal).
 *
 * A state opens only base, table, string, math and utf8, drops the dangerous
 * functions (docs/architecture.md "Lua"), caps its memory in the allocator (which
 * returns NULL past the cap) and runs every chunk under an instruction budget
 * and a monotonic deadline that a script cannot catch with pcall. Each run
 * gets a fresh _ENV whose reads fall through to a read-only allow-list;
 * reading an undefined global is an error. Chunks are text only.
 *
 * Not thread-safe: one state is used by one thread at a time.
 */
#ifndef SBX_POLICY_SANDBOX_H
#define SBX_POLICY_SANDBOX_H

#include <lua.h>
#include <stddef.h>
#include <stdint.h>

#include "util/error.h"

/* Caps of one run (a policy script evaluation or a test file). */
struct sbx_lua_caps {
    uint64_t instructions; /* VM instructions per run */
    int64_t timeout_ms;    /* wall clock per run (CLOCK_MONOTONIC) */
    size_t memory;         /* bytes for the whole state */
};

struct sbx_lua;

/* A callback run inside a protected call, before the chunk: it may set
 * fields in the fresh environment at stack index env; the nargs values given
 * to sbx_lua_run are at indices first..first+nargs-1. */
typedef void (*sbx_lua_env_fn)(lua_State *L, int env, int first, int nargs, void *userdata);

struct sbx_lua *sbx_lua_new(const struct sbx_lua_caps *caps, sbx_error_t **err);
void sbx_lua_free(struct sbx_lua *s);
lua_State *sbx_lua_state(struct sbx_lua *s);
struct sbx_lua *sbx_lua_from_state(lua_State *L);

/* Compiles a text chunk named NAME (shown in messages as "NAME:LINE: ...")
 * and keeps it; returns a reference for sbx_lua_run, or -1. */
int sbx_lua_load(struct sbx_lua *s, const char *name, const char *text, size_t len,
                 sbx_error_t **err);
/* Reads FILE (size-capped) and loads it under NAME. */
int sbx_lua_load_file(struct sbx_lua *s, const char *name, const char *path, sbx_error_t **err);

/* Runs chunk REF with a fresh environment prepared by env_fn (may be NULL),
 * which sees the nargs values on top of the stack (they are consumed).
 * On success the chunk's first result is left on the stack and 0 returned;
 * on failure nothing is left and *err is "NAME:LINE: message" (SBX_E_POLICY,
 * or SBX_E_TIMEOUT for the instruction and time caps). */
int sbx_lua_run(struct sbx_lua *s, int ref, int nargs, sbx_lua_env_fn env_fn, void *userdata,
                sbx_error_t **err);

/* Calls the function below the nargs arguments on the stack under the caps
 * (like sbx_lua_run); errors are named after NAME ("NAME:LINE: ..."). */
int sbx_lua_call(struct sbx_lua *s, const char *name, int nargs, int nres, sbx_error_t **err);

/* Calls fn(L) in protected mode with light userdata ud as its argument and
 * nres results (for C code that allocates Lua values, which may raise). */
int sbx_lua_pcall_c(struct sbx_lua *s, lua_CFunction fn, void *ud, int nres, sbx_error_t **err);

/* Pushes a read-only proxy of the table at idx: reads, ipairs, pairs and #
 * work; writes, rawset and setmetatable fail; the real table is unreachable. */
void sbx_lua_push_readonly(lua_State *L, int idx);

/* Registers extra allow-listed globals (after sbx_lua_new, before any run):
 * the value on top of the stack becomes global NAME for every run. */
void sbx_lua_allow_global(struct sbx_lua *s, const char *name);

/* The line of the last top-level "return" of chunk REF's text (for messages
 * about its result), or 0. */
int sbx_lua_return_line(struct sbx_lua *s, int ref);
const char *sbx_lua_chunk_name(struct sbx_lua *s, int ref);

/* Memory in use by the state, in bytes. */
size_t sbx_lua_memory(const struct sbx_lua *s);

/* For guards.c: the state's memory cap; whether the current run was stopped
 * by a cap (the kill hook is raising). */
size_t sbx_lua_memory_cap(lua_State *L);
int sbx_lua_killed(lua_State *L);

/* Installs the guarded setmetatable and xpcall into the allow-list table at
 * allow, and wraps the real string (strlib) or table (tablib) library
 * functions in place; 0 skips a library. */
void sbx_lua_install_guards(lua_State *L, int allow, int strlib, int tablib);

/* Pattern guard used by the wrapped string.find/match/gmatch/gsub: returns
 * the estimated worst-case cost of matching PATTERN against a subject of
 * SUBJECT_LEN bytes (exported for tests). */
double sbx_lua_pattern_cost(const char *pattern, size_t len, size_t subject_len);

#define SBX_LUA_PATTERN_MAX_COST 2e7

#endif
