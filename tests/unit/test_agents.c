/* test_agents.c - `sbx agents setup`: merging .mcp.json and opencode.json
 * without clobbering, the skill files, idempotence, refusing malformed
 * files, and --dry-run writing nothing. */
#include "spawn.h"
#include "test_common.h"

#include <jansson.h>
#include <sys/stat.h>

#include "agents/agents.h"
#include "agents/jsonedit.h"
#include "util/xalloc.h"

#define PROG "/opt/sbx/bin/sbx"

#define dir test_dir

static char *slurp(const char *rel)
{
    char *path = xasprintf("%s/%s", dir, rel);
    FILE *f = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0;

    free(path);
    if (f == NULL) {
        return NULL;
    }
    buf = xmalloc(1 << 20);
    len = fread(buf, 1, (1 << 20) - 1, f);
    buf[len] = '\0';
    fclose(f);
    return buf;
}

static json_t *load(const char *rel)
{
    char *path = xasprintf("%s/%s", dir, rel);
    json_t *j = json_load_file(path, 0, NULL);

    free(path);
    assert_non_null(j);
    return j;
}

static int setup_run(unsigned clients, sbx_error_t **err)
{
    struct sbx_agents_plan plan;
    int r = sbx_agents_plan(dir, clients, PROG, &plan, err);

    if (r == 0) {
        r = sbx_agents_apply(dir, &plan, err);
        sbx_agents_plan_free(&plan);
    }
    return r;
}

static size_t changed_count(unsigned clients)
{
    struct sbx_agents_plan plan;
    sbx_error_t *err = NULL;
    size_t n = 0;

    assert_int_equal(sbx_agents_plan(dir, clients, PROG, &plan, &err), 0);
    for (size_t i = 0; i < plan.n; i++) {
        n += plan.changes[i].changed;
    }
    sbx_agents_plan_free(&plan);
    return n;
}

static void test_fresh_project(void **state)
{
    sbx_error_t *err = NULL;
    json_t *j;
    json_t *e;
    char *skill;

    (void)state;
    assert_int_equal(changed_count(SBX_AGENTS_ALL), 4);
    assert_int_equal(setup_run(SBX_AGENTS_ALL, &err), 0);
    j = load(".mcp.json");
    e = json_object_get(json_object_get(j, "mcpServers"), "sbx");
    assert_string_equal(json_string_value(json_object_get(e, "command")), PROG);
    assert_string_equal(json_string_value(json_array_get(json_object_get(e, "args"), 0)), "mcp");
    assert_int_equal(json_array_size(json_object_get(e, "args")), 1);
    json_decref(j);
    j = load("opencode.json");
    e = json_object_get(json_object_get(j, "mcp"), "sbx");
    assert_string_equal(json_string_value(json_object_get(e, "type")), "local");
    assert_string_equal(json_string_value(json_array_get(json_object_get(e, "command"), 0)), PROG);
    assert_string_equal(json_string_value(json_array_get(json_object_get(e, "command"), 1)), "mcp");
    assert_true(json_is_true(json_object_get(e, "enabled")));
    json_decref(j);
    skill = slurp(".claude/skills/sbx-sandbox/SKILL.md");
    assert_non_null(skill);
    assert_true(strncmp(skill, "---\nname: sbx-sandbox\ndescription: ", 35) == 0);
    assert_non_null(strstr(skill, "sandbox_run"));
    free(skill);
    skill = slurp(".opencode/skills/sbx-sandbox/SKILL.md");
    assert_non_null(skill);
    free(skill);
}

static void test_idempotent(void **state)
{
    sbx_error_t *err = NULL;
    char *before;
    char *after;

    (void)state;
    assert_int_equal(setup_run(SBX_AGENTS_ALL, &err), 0);
    before = slurp(".mcp.json");
    assert_int_equal(changed_count(SBX_AGENTS_ALL), 0);
    assert_int_equal(setup_run(SBX_AGENTS_ALL, &err), 0);
    after = slurp(".mcp.json");
    assert_string_equal(before, after);
    free(before);
    free(after);
}

static const char *existing_mcp =
    "{\n"
    "  \"mcpServers\": {\n"
    "    \"github\": {\"command\": \"gh-mcp\", \"args\": [\"--stdio\"], \"env\": {\"X\": \"1\"}},\n"
    "    \"db\": {\"type\": \"http\", \"url\": \"http://127.0.0.1:9/mcp\"}\n"
    "  },\n"
    "  \"other\": [1, 2, 3]\n"
    "}\n";

static void test_merge_keeps_other_servers(void **state)
{
    sbx_error_t *err = NULL;
    json_t *old = json_loads(existing_mcp, 0, NULL);
    char *p = test_write_file(dir, ".mcp.json", existing_mcp);
    json_t *j;
    json_t *servers;

    (void)state;
    assert_int_equal(setup_run(SBX_AGENTS_CLAUDE, &err), 0);
    j = load(".mcp.json");
    servers = json_object_get(j, "mcpServers");
    assert_int_equal(json_object_size(servers), 3);
    assert_true(json_equal(json_object_get(servers, "github"),
                           json_object_get(json_object_get(old, "mcpServers"), "github")));
    assert_true(json_equal(json_object_get(servers, "db"),
                           json_object_get(json_object_get(old, "mcpServers"), "db")));
    assert_true(json_equal(json_object_get(j, "other"), json_object_get(old, "other")));
    assert_non_null(json_object_get(servers, "sbx"));
    assert_int_equal(changed_count(SBX_AGENTS_CLAUDE), 0);
    /* only claude-code was asked for */
    assert_null(slurp("opencode.json"));
    json_decref(j);
    json_decref(old);
    free(p);
}

static void test_existing_sbx_entry_updated_not_replaced(void **state)
{
    sbx_error_t *err = NULL;
    char *p = test_write_file(dir, "opencode.json",
                              "{\"theme\": \"dark\", \"mcp\": {\"sbx\": {\"type\": \"local\", "
                              "\"command\": [\"/old/sbx\", \"mcp\"], \"enabled\": false, "
                              "\"environment\": {\"SBX_CONFIG\": \"/etc/x.conf\"}}}}\n");
    json_t *j;
    json_t *e;

    (void)state;
    assert_int_equal(setup_run(SBX_AGENTS_OPENCODE, &err), 0);
    j = load("opencode.json");
    e = json_object_get(json_object_get(j, "mcp"), "sbx");
    assert_string_equal(json_string_value(json_array_get(json_object_get(e, "command"), 0)), PROG);
    assert_true(json_is_true(json_object_get(e, "enabled")));
    assert_string_equal(
        json_string_value(json_object_get(json_object_get(e, "environment"), "SBX_CONFIG")),
        "/etc/x.conf");
    assert_string_equal(json_string_value(json_object_get(j, "theme")), "dark");
    json_decref(j);
    free(p);
}

static void expect_refused(const char *file, const char *text, const char *needle)
{
    sbx_error_t *err = NULL;
    char *p = test_write_file(dir, file, text);
    char *after;

    assert_int_equal(setup_run(SBX_AGENTS_ALL, &err), -1);
    assert_non_null(err);
    if (strstr(err->msg, file) == NULL || strstr(err->msg, needle) == NULL) {
        fail_msg("error '%s' should name %s and say '%s'", err->msg, file, needle);
    }
    sbx_error_free(&err);
    after = slurp(file);
    assert_string_equal(after, text); /* untouched */
    free(after);
    /* nothing else was written either */
    assert_null(strcmp(file, ".mcp.json") ? slurp(".mcp.json") : NULL);
    assert_null(slurp(".claude/skills/sbx-sandbox/SKILL.md"));
    unlink(p);
    free(p);
}

static void test_malformed_refused(void **state)
{
    (void)state;
    expect_refused(".mcp.json", "{\"mcpServers\": {\"a\": {}},}\n", "not valid JSON");
    expect_refused(".mcp.json", "{\"mcpServers\": {}, \"mcpServers\": {}}\n", "not valid JSON");
    expect_refused(".mcp.json", "[1, 2]\n", "not a JSON object");
    expect_refused(".mcp.json", "{\"mcpServers\": [\"sbx\"]}\n", "\"mcpServers\" is not");
    expect_refused(".mcp.json", "{\"mcpServers\": {\"sbx\": \"sbx mcp\"}}\n", "\"sbx\" is not");
    expect_refused("opencode.json", "{\n  // a comment\n  \"mcp\": {}\n}\n", "not valid JSON");
    expect_refused("opencode.json", "{\"mcp\": 5}\n", "\"mcp\" is not");
    expect_refused("opencode.jsonc", "{\"mcp\": {}}\n", "cannot edit JSONC");
}

static void test_foreign_skill_refused(void **state)
{
    sbx_error_t *err = NULL;
    char *d = xasprintf("%s/.claude/skills/sbx-sandbox", dir);
    char *cmd = xasprintf("mkdir -p '%s'", d);
    char *p;

    (void)state;
    assert_int_equal(system(cmd), 0);
    p = test_write_file(d, "SKILL.md", "---\nname: sbx-sandbox\ndescription: mine\n---\n");
    assert_int_equal(setup_run(SBX_AGENTS_CLAUDE, &err), -1);
    assert_non_null(strstr(err->msg, "not written by 'sbx agents setup'"));
    sbx_error_free(&err);
    /* an older skill of ours is updated */
    free(p);
    p = test_write_file(d, "SKILL.md", "---\nname: sbx-sandbox\n---\n" SBX_AGENTS_SKILL_MARK "\n");
    assert_int_equal(setup_run(SBX_AGENTS_CLAUDE, &err), 0);
    {
        char *now = slurp(".claude/skills/sbx-sandbox/SKILL.md");
        char *want = sbx_agents_skill_text();

        assert_string_equal(now, want);
        free(now);
        free(want);
    }
    free(p);
    free(cmd);
    free(d);
}

static void test_diff(void **state)
{
    struct sbx_agents_change c = {.path = ".mcp.json", .changed = 1};
    char *d;

    (void)state;
    c.old_text = "{\n  \"a\": 1\n}\n";
    c.new_text = "{\n  \"a\": 1,\n  \"sbx\": 2\n}\n";
    d = sbx_agents_diff(&c);
    assert_string_equal(d, "--- a/.mcp.json\n+++ b/.mcp.json\n@@ -1,3 +1,4 @@\n {\n-  \"a\": 1\n"
                           "+  \"a\": 1,\n+  \"sbx\": 2\n }\n");
    free(d);
    c.old_text = NULL;
    c.new_text = "x\ny\n";
    d = sbx_agents_diff(&c);
    assert_string_equal(d, "--- /dev/null\n+++ b/.mcp.json\n@@ -0,0 +1,2 @@\n+x\n+y\n");
    free(d);
    c.changed = 0;
    d = sbx_agents_diff(&c);
    assert_string_equal(d, "");
    free(d);
}

static void expect_edit(const char *in, const char *want)
{
    json_t *v = json_pack("{s:i}", "a", 1);
    char *out = sbx_jsonedit_set(in, "g", "sbx", v);

    assert_non_null(out);
    assert_string_equal(out, want);
    free(out);
    json_decref(v);
}

static void test_jsonedit_keeps_layout(void **state)
{
    json_t *v = json_integer(1);

    (void)state;
    expect_edit("{}", "{\n  \"g\": {\n    \"sbx\": {\n      \"a\": 1\n    }\n  }\n}");
    expect_edit("{\"x\": 1}", "{\"x\": 1, \"g\": {\"sbx\": {\"a\": 1}}}");
    expect_edit("{\"g\": {\"y\": \"}{\\\"\"}}",
                "{\"g\": {\"y\": \"}{\\\"\", \"sbx\": {\"a\": 1}}}");
    expect_edit("{\n  \"g\": {\n    \"y\": [1, {\"z\": 2}]\n  }\n}\n",
                "{\n  \"g\": {\n    \"y\": [1, {\"z\": 2}],\n    \"sbx\": {\n      \"a\": 1\n    "
                "}\n  }\n}\n");
    expect_edit("{\"g\": {\"sbx\": {\"a\": 0, \"b\": 2}, \"y\": 3}}",
                "{\"g\": {\"sbx\": {\"a\": 1}, \"y\": 3}}");
    expect_edit("{\n  \"g\": {\n    \"sbx\": \"old\"\n  }\n}",
                "{\n  \"g\": {\n    \"sbx\": {\n      \"a\": 1\n    }\n  }\n}");
    assert_null(sbx_jsonedit_set("[1]", "g", "sbx", v));
    assert_null(sbx_jsonedit_set("{\"g\": [1]}", "g", "sbx", v));
    json_decref(v);
}

/* The command line: --dry-run prints the merge and writes nothing. */
static void test_cli_dry_run(void **state)
{
    char *sbx = xasprintf("%s/sbx", getenv("SBX_BUILD_DIR"));
    char *p = test_write_file(dir, ".mcp.json", existing_mcp);
    char *argv[] = {sbx, "agents", "setup", "--project", dir, "--dry-run", "--command", PROG, NULL};
    struct spawn_result r;
    char *after;

    (void)state;
    r = spawn_run_as(argv, NULL, 0);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "--- a/.mcp.json\n+++ b/.mcp.json\n"));
    /* the kept servers, unchanged (context lines) */
    assert_non_null(strstr(r.out, "\n     \"github\": {\"command\": \"gh-mcp\""));
    assert_non_null(strstr(r.out, "\n+    \"db\": {\"type\": \"http\"")); /* gains its comma */
    assert_non_null(strstr(r.out, "+    \"sbx\": {\n"));
    assert_non_null(strstr(r.out, "+++ b/opencode.json"));
    assert_non_null(strstr(r.out, "+++ b/.claude/skills/sbx-sandbox/SKILL.md"));
    assert_null(strstr(r.out, "-    \"github\""));
    after = slurp(".mcp.json");
    assert_string_equal(after, existing_mcp);
    assert_null(slurp("opencode.json"));
    assert_null(slurp(".claude/skills/sbx-sandbox/SKILL.md"));
    spawn_result_free(&r);
    free(after);
    /* then for real, twice: the second run changes nothing */
    argv[5] = "--json";
    r = spawn_run_as(argv, NULL, 0);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "\"action\": \"update\""));
    spawn_result_free(&r);
    r = spawn_run_as(argv, NULL, 0);
    assert_int_equal(r.rc, 0);
    assert_null(strstr(r.out, "\"update\""));
    assert_null(strstr(r.out, "\"create\""));
    spawn_result_free(&r);
    argv[5] = "--dry-run";
    r = spawn_run_as(argv, NULL, 0);
    assert_non_null(strstr(r.out, "nothing to change"));
    assert_null(strstr(r.out, "+++"));
    spawn_result_free(&r);
    free(p);
    free(sbx);
}

static void test_cli_errors(void **state)
{
    char *sbx = xasprintf("%s/sbx", getenv("SBX_BUILD_DIR"));
    char *bad = test_write_file(dir, ".mcp.json", "{oops");
    char *a1[] = {sbx, "agents", "setup", "--project", dir, NULL};
    char *a2[] = {sbx, "agents", "setup", "--client", "vim", NULL};
    char *a3[] = {sbx, "agents", "install", NULL};
    struct spawn_result r;

    (void)state;
    r = spawn_run_as(a1, NULL, 0);
    assert_int_equal(r.rc, 1);
    assert_non_null(strstr(r.err, ".mcp.json:1:"));
    spawn_result_free(&r);
    r = spawn_run_as(a2, NULL, 0);
    assert_int_equal(r.rc, 2);
    spawn_result_free(&r);
    r = spawn_run_as(a3, NULL, 0);
    assert_int_equal(r.rc, 2);
    spawn_result_free(&r);
    free(bad);
    free(sbx);
}

/* The command written: "sbx" when an sbx is on PATH (any), the absolute path
 * only when none is, and a note saying so. */
static void test_program_choice(void **state)
{
    char *bin = xasprintf("%s/bin", dir);
    char *empty = xasprintf("%s/empty", dir);
    char *path_with;
    char *path_without = xasprintf("/nonexistent-dir:%s", empty);
    char *note = NULL;
    char *prog;
    char *fake;

    (void)state;
    assert_int_equal(mkdir(bin, 0755), 0);
    assert_int_equal(mkdir(empty, 0755), 0);
    fake = test_write_file(bin, "sbx", "#!/bin/sh\n");
    assert_int_equal(chmod(fake, 0755), 0);
    path_with = xasprintf("%s:relative:%s", empty, bin);
    prog = sbx_agents_program(path_with, fake, &note);
    assert_string_equal(prog, "sbx");
    assert_null(note); /* the sbx on PATH is this one */
    free(prog);
    prog = sbx_agents_program(path_with, PROG, &note);
    assert_string_equal(prog, "sbx");
    assert_non_null(note); /* another sbx: still "sbx", and it says which */
    assert_non_null(strstr(note, fake));
    free(note);
    free(prog);
    prog = sbx_agents_program(path_without, PROG, &note);
    assert_string_equal(prog, PROG);
    assert_non_null(note);
    assert_non_null(strstr(note, "no sbx on PATH"));
    free(note);
    free(prog);
    /* a relative PATH entry is not trusted, a non-executable sbx is not one */
    assert_int_equal(chmod(fake, 0644), 0);
    prog = sbx_agents_program(path_with, PROG, &note);
    assert_string_equal(prog, PROG);
    free(note);
    free(prog);
    free(fake);
    free(path_with);
    free(path_without);
    free(bin);
    free(empty);
}

/* The skill names the marker sbx really prints (cred/redact.c), not another. */
static void test_skill_marker(void **state)
{
    char *skill = sbx_agents_skill_text();

    (void)state;
    assert_non_null(strstr(skill, "`[redacted:NAME]`"));
    assert_null(strstr(skill, "[REDACTED]"));
    free(skill);
}

/* The command line: without an sbx on PATH the absolute path is written and
 * stderr says so; every client's next step is printed (Claude Code's approval). */
static void test_cli_next_steps(void **state)
{
    char *sbx = xasprintf("%s/sbx", getenv("SBX_BUILD_DIR"));
    char *argv[] = {sbx, "agents", "setup", "--project", dir, NULL};
    char *env[] = {"PATH=/nonexistent-dir", NULL};
    struct spawn_result r;
    json_t *mcp;
    char *real = realpath(sbx, NULL);

    (void)state;
    r = spawn_run_as(argv, env, 0);
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.err, "no sbx on PATH: wrote this binary's absolute path"));
    assert_non_null(strstr(r.out, "next: Claude Code: approve"));
    assert_non_null(strstr(r.out, "pending approval"));
    assert_non_null(strstr(r.out, "next: OpenCode: nothing to approve"));
    mcp = load(".mcp.json");
    assert_string_equal(json_string_value(json_object_get(
                            json_object_get(json_object_get(mcp, "mcpServers"), "sbx"), "command")),
                        real);
    json_decref(mcp);
    spawn_result_free(&r);
    free(real);
    free(sbx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_fresh_project, test_dir_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_idempotent, test_dir_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_merge_keeps_other_servers, test_dir_setup,
                                        test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_existing_sbx_entry_updated_not_replaced,
                                        test_dir_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_malformed_refused, test_dir_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_foreign_skill_refused, test_dir_setup,
                                        test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_diff, test_dir_setup, test_dir_teardown),
        cmocka_unit_test(test_jsonedit_keeps_layout),
        cmocka_unit_test_setup_teardown(test_cli_dry_run, test_dir_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_cli_errors, test_dir_setup, test_dir_teardown),
        cmocka_unit_test_setup_teardown(test_program_choice, test_dir_setup, test_dir_teardown),
        cmocka_unit_test(test_skill_marker),
        cmocka_unit_test_setup_teardown(test_cli_next_steps, test_dir_setup, test_dir_teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
