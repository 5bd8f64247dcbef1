/* agents.h - `sbx agents setup`: registers `sbx mcp` with coding agents
 * (Claude Code: .mcp.json; OpenCode: opencode.json) and installs the usage
 * skill (SKILL.md) for each. Merges, never clobbers other entries; refuses
 * malformed files; a second run changes nothing. */
#ifndef SBX_AGENTS_AGENTS_H
#define SBX_AGENTS_AGENTS_H

#include <stddef.h>

#include "util/error.h"

enum sbx_agents_client {
    SBX_AGENTS_CLAUDE = 1,
    SBX_AGENTS_OPENCODE = 2,
    SBX_AGENTS_ALL = 3,
};

/* The line in SKILL.md that marks it as ours (so an update may replace it). */
#define SBX_AGENTS_SKILL_MARK "<!-- written by 'sbx agents setup'; rerun it to update -->"

struct sbx_agents_change {
    char *path;         /* relative to the project: ".mcp.json", ".claude/skills/..." */
    const char *client; /* "claude-code" or "opencode" */
    char *old_text;     /* NULL: the file does not exist */
    char *new_text;
    int changed;
};

struct sbx_agents_plan {
    struct sbx_agents_change *changes;
    size_t n;
};

/* Parses "claude-code", "opencode" or "all"; -1 when none. */
int sbx_agents_client_parse(const char *s);
/* Reads the project's files and computes every change; writes nothing.
 * program is the sbx binary the agents will start (its args are ["mcp"]).
 * Fails, naming the file, on a malformed or foreign file. */
int sbx_agents_plan(const char *project, unsigned clients, const char *program,
                    struct sbx_agents_plan *plan, sbx_error_t **err);
/* Writes the changed files (atomically each: temporary file + rename). */
int sbx_agents_apply(const char *project, const struct sbx_agents_plan *plan, sbx_error_t **err);
/* A unified diff of one change ("" when unchanged). Caller frees. */
char *sbx_agents_diff(const struct sbx_agents_change *c);
void sbx_agents_plan_free(struct sbx_agents_plan *plan);
/* The usage skill, as installed. Caller frees. */
char *sbx_agents_skill_text(void);
/* The command the agents start: "sbx" when an executable sbx is on path_env
 * (a PATH value; absolute entries only), else self (this binary's absolute
 * path). *note (caller frees, or NULL) says why when it is not plainly "sbx". */
char *sbx_agents_program(const char *path_env, const char *self, char **note);
/* What the user does next for a client ("claude-code", "opencode") so that it
 * uses the server: Claude Code asks to approve project servers. */
const char *sbx_agents_next_step(const char *client);

#endif
