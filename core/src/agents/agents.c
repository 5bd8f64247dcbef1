/* agents.c - planning and applying `sbx agents setup`. */
#include "agents/agents.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "agents/jsonedit.h"
#include "cred/redact.h"
#include "sandbox/statedir.h"
#include "util/cleanup.h"
#include "util/xalloc.h"

#define SERVER_NAME "sbx"
#define SKILL_DIR "skills/sbx-sandbox"

int sbx_agents_client_parse(const char *s)
{
    if (strcmp(s, "claude-code") == 0 || strcmp(s, "claude") == 0) {
        return SBX_AGENTS_CLAUDE;
    }
    if (strcmp(s, "opencode") == 0) {
        return SBX_AGENTS_OPENCODE;
    }
    if (strcmp(s, "all") == 0) {
        return SBX_AGENTS_ALL;
    }
    return -1;
}

char *sbx_agents_skill_text(void)
{
    return xstrdup(
        "---\n"
        "name: sbx-sandbox\n"
        "description: Run builds, tests, scripts and any untrusted or risky command in an "
        "isolated sbx sandbox (the sbx MCP tools sandbox_run, sandbox_end, sandbox_job, "
        "sandbox_cancel, sandbox_queue) instead of on this machine. Use it whenever a command "
        "installs packages, runs code from the repository or the internet, needs a clean "
        "environment, or could damage the host.\n"
        "---\n" SBX_AGENTS_SKILL_MARK "\n"
        "\n"
        "# Running commands in sbx sandboxes\n"
        "\n"
        "The `sbx` MCP server runs each command in a fresh, resource-limited sandbox (a\n"
        "container) with filtered network egress. Nothing it does touches this machine\n"
        "except the worktree you mount.\n"
        "\n"
        "## When to use it\n"
        "\n"
        "- Building and testing: `make`, `npm test`, `cargo test`, `pytest`, ...\n"
        "- Running code you did not write, install scripts, downloaded tools.\n"
        "- Anything that needs a clean environment or could damage the host.\n"
        "\n"
        "## How\n"
        "\n"
        "1. Pick a task id for the piece of work, e.g. `fix-login-42` (letters, digits,\n"
        "   `-`, `_`, `.`; up to 64). The first `sandbox_run` with it starts the sandbox;\n"
        "   later calls with the same id run in the same sandbox and see its files.\n"
        "2. Mount the project with `worktree` on the first call: `\".\"` (the project\n"
        "   directory) or a directory below it; nothing else of the host can be\n"
        "   mounted. It appears at `/workspace` inside, read-write. Run commands there:\n"
        "   `{\"task\": \"fix-login-42\", \"worktree\": \".\",\n"
        "   \"argv\": [\"sh\", \"-c\", \"cd /workspace && make test\"]}`.\n"
        "3. `argv` is run directly, without a shell. Use `[\"sh\", \"-c\", \"...\"]` for\n"
        "   pipes, `&&`, redirections or `cd`.\n"
        "4. Read `exit_status`, `stdout` and `stderr` in the result. Output is capped at\n"
        "   64 KiB per stream (the first and last 32 KiB); a note says when it was cut,\n"
        "   so redirect long logs to a file and `tail` or `grep` it.\n"
        "5. Call `sandbox_end` with the task id when the work is done: it frees the slot\n"
        "   and removes the sandbox and its files (not the mounted worktree).\n"
        "\n"
        "Without a task id a command runs in a throwaway sandbox that is removed when it\n"
        "ends: fine for one-off commands, useless for a build followed by its tests.\n"
        "\n"
        "## Limits and errors\n"
        "\n"
        "- `timeout` (seconds, default 600) kills a command that runs too long; the\n"
        "  result then has `state: timed_out`. Pass a larger timeout for long builds.\n"
        "- A result with `isError` means the sandbox could not run the command (bad\n"
        "  arguments, no free slot, timeout, cancelled); a command that ran and failed\n"
        "  is not an error: look at `exit_status`.\n"
        "- A task ends by itself after its idle time or maximum lifetime; the next\n"
        "  `sandbox_run` says so, and the one after starts a fresh sandbox.\n"
        "- Network access goes through a filtering proxy: hosts that are not allowed\n"
        "  fail. Do not try to work around it; tell the user what was blocked.\n"
        "- Secret values given to the sandbox are replaced by `" SBX_REDACT_MARKER_OPEN
        "NAME" SBX_REDACT_MARKER_CLOSE "`\n"
        "  in output (NAME is the variable's name, e.g. `" SBX_REDACT_MARKER_OPEN
        "API_KEY" SBX_REDACT_MARKER_CLOSE "`):\n"
        "  the value is in the environment, you just cannot see it. Do not try to\n"
        "  print, encode or exfiltrate it.\n"
        "- `sandbox_job` shows a job (also while it runs), `sandbox_cancel` kills a\n"
        "  running command, `sandbox_queue` shows your tasks and the free slots.\n");
}

static char *read_file(const char *path, int *missing, sbx_error_t **err)
{
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0;
    size_t cap = 0;
    size_t n;

    *missing = 0;
    if (f == NULL) {
        if (errno == ENOENT) {
            *missing = 1;
            return NULL;
        }
        sbx_error_set(err, errno, "%s: %s", path, strerror(errno));
        return NULL;
    }
    do {
        if (len + 4096 + 1 > cap) {
            cap = cap ? cap * 2 : 8192;
            buf = xrealloc(buf, cap);
        }
        n = fread(buf + len, 1, cap - len - 1, f);
        len += n;
    } while (n > 0);
    buf[len] = '\0';
    fclose(f);
    return buf;
}

static char *dump(json_t *root)
{
    char *s = json_dumps(root, JSON_INDENT(2));
    char *r = xasprintf("%s\n", s);

    free(s);
    return r;
}

/* The new text: the old one with only the sbx entry changed when that can
 * be done in place (checked by parsing it back), else root rewritten. */
static char *edit(const char *old, const char *group, json_t *entry, json_t *root)
{
    char *t;
    json_t *back;

    if (old == NULL) {
        return dump(root);
    }
    t = sbx_jsonedit_set(old, group, SERVER_NAME, entry);
    back = t ? json_loads(t, JSON_REJECT_DUPLICATES, NULL) : NULL;
    if (back == NULL || !json_equal(back, root)) {
        free(t);
        t = dump(root);
    }
    json_decref(back);
    return t;
}

static void add_change(struct sbx_agents_plan *plan, const char *path, const char *client,
                       char *old_text, char *new_text)
{
    struct sbx_agents_change *c;

    plan->changes = xrealloc(plan->changes, (plan->n + 1) * sizeof(*c));
    c = &plan->changes[plan->n++];
    c->path = xstrdup(path);
    c->client = client;
    c->old_text = old_text;
    c->new_text = new_text;
    c->changed = old_text == NULL || strcmp(old_text, new_text) != 0;
}

/* Merges entry under root[group][SERVER_NAME] of the JSON file rel. Keys
 * of an existing sbx entry that we do not set (env, ...) are kept. */
static int plan_json(const char *project, const char *rel, const char *client, const char *group,
                     json_t *entry, struct sbx_agents_plan *plan, sbx_error_t **err)
{
    cleanup_free char *path = xasprintf("%s/%s", project, rel);
    json_error_t je;
    json_t *root;
    json_t *servers;
    json_t *old;
    json_t *merged;
    char *text;
    int missing;

    text = read_file(path, &missing, err);
    if (text == NULL && !missing) {
        return -1;
    }
    if (missing) {
        root = json_object();
    }
    else {
        root = json_loads(text, JSON_REJECT_DUPLICATES, &je);
        if (root == NULL) {
            sbx_error_set(err, SBX_E_CONFIG,
                          "%s:%d:%d: not valid JSON (%s): fix or move it; "
                          "nothing was changed",
                          path, je.line, je.column, je.text);
            free(text);
            return -1;
        }
        if (!json_is_object(root)) {
            sbx_error_set(err, SBX_E_CONFIG,
                          "%s: the top level is not a JSON object; nothing "
                          "was changed",
                          path);
            goto fail;
        }
    }
    servers = json_object_get(root, group);
    if (servers == NULL) {
        servers = json_object();
        json_object_set_new(root, group, servers);
    }
    else if (!json_is_object(servers)) {
        sbx_error_set(err, SBX_E_CONFIG, "%s: \"%s\" is not a JSON object; nothing was changed",
                      path, group);
        goto fail;
    }
    old = json_object_get(servers, SERVER_NAME);
    if (old != NULL && !json_is_object(old)) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "%s: \"%s\".\"%s\" is not a JSON object; nothing was "
                      "changed",
                      path, group, SERVER_NAME);
        goto fail;
    }
    merged = old ? json_deep_copy(old) : json_object();
    json_object_update(merged, entry);
    if (old != NULL && json_equal(old, merged)) {
        json_decref(merged);
        add_change(plan, rel, client, text, xstrdup(text)); /* unchanged, not reformatted */
        json_decref(root);
        return 0;
    }
    json_object_set_new(servers, SERVER_NAME, merged);
    add_change(plan, rel, client, text, edit(text, group, merged, root));
    json_decref(root);
    return 0;
fail:
    json_decref(root);
    free(text);
    return -1;
}

static int plan_skill(const char *project, const char *rel, const char *client,
                      struct sbx_agents_plan *plan, sbx_error_t **err)
{
    cleanup_free char *path = xasprintf("%s/%s", project, rel);
    char *skill = sbx_agents_skill_text();
    int missing;
    char *text = read_file(path, &missing, err);

    if (text == NULL && !missing) {
        free(skill);
        return -1;
    }
    if (text != NULL && strcmp(text, skill) != 0 && strstr(text, SBX_AGENTS_SKILL_MARK) == NULL) {
        sbx_error_set(err, SBX_E_CONFIG,
                      "%s exists and was not written by 'sbx agents setup': "
                      "move it away to install the sbx skill; nothing was changed",
                      path);
        free(text);
        free(skill);
        return -1;
    }
    add_change(plan, rel, client, text, skill);
    return 0;
}

int sbx_agents_plan(const char *project, unsigned clients, const char *program,
                    struct sbx_agents_plan *plan, sbx_error_t **err)
{
    struct stat st;
    int r = 0;

    memset(plan, 0, sizeof(*plan));
    if (stat(project, &st) < 0 || !S_ISDIR(st.st_mode)) {
        return sbx_error_set(err, SBX_E_USAGE, "--project %s: not a directory", project);
    }
    if (clients & SBX_AGENTS_CLAUDE) {
        json_t *e =
            json_pack("{s:s, s:s, s:[s]}", "type", "stdio", "command", program, "args", "mcp");

        r = plan_json(project, ".mcp.json", "claude-code", "mcpServers", e, plan, err);
        json_decref(e);
        if (r == 0) {
            r = plan_skill(project, ".claude/" SKILL_DIR "/SKILL.md", "claude-code", plan, err);
        }
    }
    if (r == 0 && (clients & SBX_AGENTS_OPENCODE)) {
        cleanup_free char *jsonc = xasprintf("%s/opencode.jsonc", project);
        cleanup_free char *json = xasprintf("%s/opencode.json", project);
        json_t *e;

        if (access(jsonc, F_OK) == 0 && access(json, F_OK) != 0) {
            sbx_error_set(err, SBX_E_CONFIG,
                          "%s: sbx cannot edit JSONC; add under \"mcp\": "
                          "\"sbx\": {\"type\": \"local\", \"command\": [\"%s\", \"mcp\"], "
                          "\"enabled\": true} by hand, or use opencode.json; nothing was "
                          "changed",
                          jsonc, program);
            r = -1;
        }
        else {
            e = json_pack("{s:s, s:[s, s], s:b}", "type", "local", "command", program, "mcp",
                          "enabled", 1);
            r = plan_json(project, "opencode.json", "opencode", "mcp", e, plan, err);
            json_decref(e);
        }
        if (r == 0) {
            r = plan_skill(project, ".opencode/" SKILL_DIR "/SKILL.md", "opencode", plan, err);
        }
    }
    if (r < 0) {
        sbx_agents_plan_free(plan);
    }
    return r;
}

static int write_atomic(const char *path, const char *text, sbx_error_t **err)
{
    cleanup_free char *tmp = xasprintf("%s.sbx-tmp", path);
    struct stat st;
    mode_t mode = 0644;
    size_t len = strlen(text);
    int fd;

    if (stat(path, &st) == 0) {
        mode = st.st_mode & 07777;
    }
    fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0) {
        return sbx_error_set(err, errno, "writing %s: %s", tmp, strerror(errno));
    }
    if (write(fd, text, len) != (ssize_t)len || fsync(fd) < 0) {
        int e = errno;

        close(fd);
        unlink(tmp);
        return sbx_error_set(err, e, "writing %s: %s", tmp, strerror(e));
    }
    close(fd);
    if (rename(tmp, path) < 0) {
        int e = errno;

        unlink(tmp);
        return sbx_error_set(err, e, "rename %s: %s", tmp, strerror(e));
    }
    return 0;
}

int sbx_agents_apply(const char *project, const struct sbx_agents_plan *plan, sbx_error_t **err)
{
    for (size_t i = 0; i < plan->n; i++) {
        const struct sbx_agents_change *c = &plan->changes[i];
        cleanup_free char *path = xasprintf("%s/%s", project, c->path);
        char *slash;

        if (!c->changed) {
            continue;
        }
        slash = strrchr(path, '/');
        *slash = '\0';
        if (sbx_mkdirs(path, 0755, err) < 0) {
            return -1;
        }
        *slash = '/';
        if (write_atomic(path, c->new_text, err) < 0) {
            return -1;
        }
    }
    return 0;
}

/* Splits text into lines (each without its newline). */
static char **lines(const char *text, size_t *n)
{
    char **v = NULL;
    const char *p = text ? text : "";

    *n = 0;
    while (*p != '\0') {
        const char *nl = strchr(p, '\n');
        size_t len = nl ? (size_t)(nl - p) : strlen(p);

        v = xrealloc(v, (*n + 1) * sizeof(char *));
        v[(*n)++] = xstrndup(p, len);
        p += len + (nl ? 1 : 0);
    }
    return v;
}

static void lines_free(char **v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        free(v[i]);
    }
    free(v);
}

static void append(char **buf, size_t *len, const char *fmt, const char *a, const char *b)
{
    char *s = xasprintf(fmt, a, b);
    size_t n = strlen(s);

    *buf = xrealloc(*buf, *len + n + 1);
    memcpy(*buf + *len, s, n + 1);
    *len += n;
    free(s);
}

/* One hunk: the common head and tail are context (3 lines each side). */
char *sbx_agents_diff(const struct sbx_agents_change *c)
{
    size_t na;
    size_t nb;
    char **a;
    char **b;
    size_t pre = 0;
    size_t suf = 0;
    size_t from;
    size_t a_end;
    size_t b_end;
    char *out = xstrdup("");
    size_t len = 0;
    char hunk[96];

    if (!c->changed) {
        return out;
    }
    a = lines(c->old_text, &na);
    b = lines(c->new_text, &nb);
    while (pre < na && pre < nb && strcmp(a[pre], b[pre]) == 0) {
        pre++;
    }
    while (suf < na - pre && suf < nb - pre && strcmp(a[na - 1 - suf], b[nb - 1 - suf]) == 0) {
        suf++;
    }
    from = pre > 3 ? pre - 3 : 0;
    a_end = na - suf + (suf > 3 ? 3 : suf);
    b_end = nb - suf + (suf > 3 ? 3 : suf);
    append(&out, &len, "--- %s%s\n", c->old_text ? "a/" : "/dev/null", c->old_text ? c->path : "");
    append(&out, &len, "+++ b/%s%s\n", c->path, "");
    snprintf(hunk, sizeof(hunk), "@@ -%zu,%zu +%zu,%zu @@\n", a_end > from ? from + 1 : from,
             a_end - from, b_end > from ? from + 1 : from, b_end - from);
    append(&out, &len, "%s%s", hunk, "");
    for (size_t i = from; i < pre; i++) {
        append(&out, &len, " %s%s\n", a[i], "");
    }
    for (size_t i = pre; i < na - suf; i++) {
        append(&out, &len, "-%s%s\n", a[i], "");
    }
    for (size_t i = pre; i < nb - suf; i++) {
        append(&out, &len, "+%s%s\n", b[i], "");
    }
    for (size_t i = na - suf; i < a_end; i++) {
        append(&out, &len, " %s%s\n", a[i], "");
    }
    lines_free(a, na);
    lines_free(b, nb);
    return out;
}

void sbx_agents_plan_free(struct sbx_agents_plan *plan)
{
    for (size_t i = 0; i < plan->n; i++) {
        free(plan->changes[i].path);
        free(plan->changes[i].old_text);
        free(plan->changes[i].new_text);
    }
    free(plan->changes);
    memset(plan, 0, sizeof(*plan));
}

char *sbx_agents_program(const char *path_env, const char *self, char **note)
{
    char *copy = xstrdup(path_env ? path_env : "");
    char *save = NULL;

    *note = NULL;
    for (char *d = strtok_r(copy, ":", &save); d != NULL; d = strtok_r(NULL, ":", &save)) {
        cleanup_free char *cand = xasprintf("%s/sbx", d);
        struct stat st;

        if (d[0] == '/' && stat(cand, &st) == 0 && S_ISREG(st.st_mode) && access(cand, X_OK) == 0) {
            char *real = realpath(cand, NULL);

            if (self != NULL && real != NULL && strcmp(real, self) != 0) {
                *note = xasprintf("wrote 'sbx': the agents start %s (first on PATH), not this "
                                  "binary (%s)",
                                  cand, self);
            }
            free(real);
            free(copy);
            return xstrdup("sbx");
        }
    }
    free(copy);
    if (self == NULL) {
        *note = xstrdup("no sbx on PATH and this binary's path is unknown: wrote 'sbx'");
        return xstrdup("sbx");
    }
    *note = xasprintf("no sbx on PATH: wrote this binary's absolute path %s; install sbx "
                      "(docs/operations.md, \"Install\") and rerun to write 'sbx', which "
                      "works on every machine",
                      self);
    return xstrdup(self);
}

const char *sbx_agents_next_step(const char *client)
{
    if (strcmp(client, "claude-code") == 0) {
        return "Claude Code: approve the project's server before it is used: start 'claude' "
               "in the project and accept \"sbx\" when asked (or /mcp, then enable sbx); "
               "until then 'claude mcp list' shows it pending approval. To approve it for "
               "yourself without asking, add \"enabledMcpjsonServers\": [\"sbx\"] to "
               ".claude/settings.local.json (not committed).";
    }
    return "OpenCode: nothing to approve (the entry has \"enabled\": true); restart opencode "
           "in the project to load the server and the skill.";
}
