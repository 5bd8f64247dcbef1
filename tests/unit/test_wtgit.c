/* test_wtgit.c - the pure checks of the worktree's git and scan (gitrun.h,
 * wtscan.h): object names, branch names, object paths the host takes back, the
 * worktree.protect globs and their matching, and the scan on a directory. */
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "sandbox/gitrun.h"
#include "sandbox/wtscan.h"

static void test_oid(void **state)
{
    char out[65];

    (void)state;
    assert_int_equal(sbx_git_oid_parse("0123456789abcdef0123456789abcdef01234567\n", out), 0);
    assert_string_equal(out, "0123456789abcdef0123456789abcdef01234567");
    assert_int_equal(
        sbx_git_oid_parse("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef", out),
        0);
    assert_int_equal(sbx_git_oid_parse("0123456789ABCDEF0123456789abcdef01234567", out), -1);
    assert_int_equal(sbx_git_oid_parse("0123456789abcdef0123456789abcdef0123456", out), -1);
    assert_int_equal(sbx_git_oid_parse("ref: refs/heads/main\n", out), -1);
    assert_int_equal(sbx_git_oid_parse("0123456789abcdef0123456789abcdef01234567 x", out), -1);
    assert_int_equal(sbx_git_oid_parse("", out), -1);
    assert_int_equal(sbx_git_oid_parse(NULL, out), -1);
}

static void test_refname(void **state)
{
    (void)state;
    assert_true(sbx_git_refname_ok("refs/heads/main"));
    assert_true(sbx_git_refname_ok("refs/heads/feature/x-1"));
    assert_false(sbx_git_refname_ok("refs/heads/../../config"));
    assert_false(sbx_git_refname_ok("/etc/passwd"));
    assert_false(sbx_git_refname_ok("refs/heads/.hidden"));
    assert_false(sbx_git_refname_ok("refs/heads/x.lock"));
    assert_false(sbx_git_refname_ok("refs/heads//x"));
    assert_false(sbx_git_refname_ok("refs/heads/a b"));
    assert_false(sbx_git_refname_ok("refs/heads/a@{1}"));
    assert_false(sbx_git_refname_ok("refs/heads/x/"));
    assert_false(sbx_git_refname_ok(""));
}

static void test_object_path(void **state)
{
    (void)state;
    assert_true(sbx_git_object_path_ok("ab/0123456789abcdef0123456789abcdef012345"));
    assert_true(sbx_git_object_path_ok("pack/pack-0123456789abcdef0123456789abcdef01234567.pack"));
    assert_true(sbx_git_object_path_ok("pack/pack-0123456789abcdef0123456789abcdef01234567.idx"));
    assert_false(sbx_git_object_path_ok("info/alternates"));
    assert_false(sbx_git_object_path_ok("pack/pack-0123.keep"));
    assert_false(sbx_git_object_path_ok("ab/../../../../etc/passwd000000000000000"));
    assert_false(sbx_git_object_path_ok("pack/pack-0123456789abcdef0123456789abcdef01234567.rev"));
}

static void test_protect_globs(void **state)
{
    static const char *const g[] = {".vscode", ".claude/commands", "*.code-workspace", ".mcp.json",
                                    NULL};

    (void)state;
    assert_true(sbx_protect_glob_ok(".vscode"));
    assert_true(sbx_protect_glob_ok("tools/*.sh"));
    assert_false(sbx_protect_glob_ok("/etc/passwd"));
    assert_false(sbx_protect_glob_ok("../x"));
    assert_false(sbx_protect_glob_ok("a/../b"));
    assert_false(sbx_protect_glob_ok("a//b"));
    assert_false(sbx_protect_glob_ok("a/"));
    assert_false(sbx_protect_glob_ok("./a"));
    assert_false(sbx_protect_glob_ok(""));
    assert_true(sbx_protect_match(g, ".vscode"));
    assert_true(sbx_protect_match(g, ".vscode/tasks.json"));
    assert_true(sbx_protect_match(g, ".claude/commands/x.md"));
    assert_false(sbx_protect_match(g, ".claude/notes.md"));
    assert_true(sbx_protect_match(g, "a.code-workspace"));
    assert_false(sbx_protect_match(g, "sub/a.code-workspace")); /* FNM_PATHNAME: top only */
    assert_false(sbx_protect_match(g, "src/.vscode.txt"));
    assert_true(sbx_protect_match(sbx_protect_default, ".bashrc"));
    assert_true(sbx_protect_match(sbx_protect_default, ".gitmodules"));
    assert_true(sbx_protect_match(sbx_protect_default, ".claude/settings.json"));
    assert_false(sbx_protect_match(sbx_protect_default, "src/main.c"));
    assert_false(sbx_protect_match(NULL, ".bashrc"));
}

static int n_notes;
static char last_note[1024];

static void note(void *ud, const char *what)
{
    (void)ud;
    n_notes++;
    snprintf(last_note, sizeof(last_note), "%s", what);
}

static void write_file(const char *dir, const char *rel, const char *text)
{
    char p[1024];
    FILE *f;

    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    f = fopen(p, "w");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
}

static void test_scan(void **state)
{
    static const char *const prot[] = {".mcp.json", ".vscode", NULL};
    char dir[] = "/tmp/sbx-wtscan-XXXXXX";
    char p[1200];
    struct timespec since;
    struct stat st;

    (void)state;
    assert_non_null(mkdtemp(dir));
    /* before the task: a vendored repository, a protected folder, a plain file */
    snprintf(p, sizeof(p), "%s/vendor", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    snprintf(p, sizeof(p), "%s/vendor/.git", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    write_file(dir, "vendor/.git/config", "[core]\n");
    snprintf(p, sizeof(p), "%s/.vscode", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    write_file(dir, "plain", "x");
    clock_gettime(CLOCK_REALTIME, &since);
    /* untouched since: nothing found */
    n_notes = 0;
    assert_int_equal(sbx_wtscan(dir, &since, 0, "t1", prot, note, NULL), 0);
    /* the task: a hook into the vendored repository, a new nested repository, a
     * protected file, a set-uid file, a FIFO */
    usleep(20000);
    write_file(dir, "vendor/.git/config", "[core]\n\tfsmonitor = touch /tmp/x\n");
    snprintf(p, sizeof(p), "%s/sub", dir);
    assert_int_equal(mkdir(p, 0755), 0);
    write_file(dir, "sub/.git", "gitdir: /tmp/evil\n");
    write_file(dir, ".mcp.json", "{}");
    write_file(dir, "tool", "#!/bin/sh\n");
    snprintf(p, sizeof(p), "%s/tool", dir);
    assert_int_equal(chmod(p, 04755), 0);
    snprintf(p, sizeof(p), "%s/fifo", dir);
    assert_int_equal(mkfifo(p, 0644), 0);
    n_notes = 0;
    assert_int_equal(sbx_wtscan(dir, &since, 0, "t1", prot, note, NULL), 5);
    snprintf(p, sizeof(p), "%s/vendor/.git.sbx-quarantine-t1/HEAD", dir);
    assert_int_not_equal(access(p, F_OK), 0); /* no HEAD to find there either */
    snprintf(p, sizeof(p), "%s/vendor/.git", dir);
    assert_int_not_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/sub/.git.sbx-quarantine-t1", dir);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/.mcp.json.sbx-quarantine-t1", dir);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/tool", dir);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 07777, 0755);
    snprintf(p, sizeof(p), "%s/fifo", dir);
    assert_int_not_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/.vscode", dir);
    assert_int_equal(access(p, F_OK), 0); /* existed before: kept */
    /* a second scan finds nothing new to do with what is quarantined */
    snprintf(p, sizeof(p), "rm -rf '%s'", dir);
    assert_int_equal(system(p), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oid),         cmocka_unit_test(test_refname),
        cmocka_unit_test(test_object_path), cmocka_unit_test(test_protect_globs),
        cmocka_unit_test(test_scan),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
