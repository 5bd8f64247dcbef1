/* test_wtgit.c - the pure checks of the worktree's git and scan (gitrun.h,
 * wtscan.h): object names, branch names, object paths the host takes back, the
 * worktree.protect globs and their matching, and the scan on a directory. */
#include <errno.h>
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
#include "sandbox/wtgit_int.h"
#include "sandbox/wtscan.h"
#include "sandbox/wtwatch.h"
#include "util/fileio.h"

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

static void mkdir_p(const char *dir, const char *rel)
{
    char p[1200];

    snprintf(p, sizeof(p), "mkdir -p '%s/%s'", dir, rel);
    assert_int_equal(system(p), 0);
}

static void rm_rf(const char *dir)
{
    char p[1200];

    snprintf(p, sizeof(p), "rm -rf '%s'", dir);
    assert_int_equal(system(p), 0);
}

/* The one copy loop: everything up to the bound, EFBIG past it; the one
 * whole-file write never follows a symlink. */
static void test_fileio(void **state)
{
    char dir[] = "/tmp/sbx-fileio-XXXXXX";
    char a[1200];
    char b[1200];
    char l[1200];
    char *big = malloc(200001);
    int in;
    int out;
    struct stat st;

    (void)state;
    assert_non_null(mkdtemp(dir));
    memset(big, 'x', 200000);
    big[200000] = '\0';
    snprintf(a, sizeof(a), "%s/a", dir);
    snprintf(b, sizeof(b), "%s/b", dir);
    snprintf(l, sizeof(l), "%s/l", dir);
    assert_int_equal(sbx_file_write_text(a, big, 0600, getuid(), getgid()), 0);
    in = open(a, O_RDONLY);
    out = open(b, O_WRONLY | O_CREAT | O_TRUNC, 0600);
    assert_true(sbx_fd_copy(in, out, 1LL << 30) == 200000);
    assert_int_equal(fstat(out, &st), 0);
    assert_int_equal(st.st_size, 200000);
    assert_int_equal(lseek(in, 0, SEEK_SET), 0);
    errno = 0;
    assert_true(sbx_fd_copy(in, out, 1000) == -1);
    assert_int_equal(errno, EFBIG);
    close(in);
    close(out);
    assert_int_equal(symlink(a, l), 0);
    assert_int_equal(sbx_file_write_text(l, "evil", 0600, getuid(), getgid()), -1);
    assert_int_equal(stat(a, &st), 0);
    assert_int_equal(st.st_size, 200000);
    free(big);
    rm_rf(dir);
}

/* The host's alternates: chained (a relative line, an absolute one), comments
 * skipped, each store mounted read-only with an empty file over its own
 * alternates; a path that cannot be given refuses with the file and line. */
static void test_alternates(void **state)
{
    char dir[] = "/tmp/sbx-wtalt-XXXXXX";
    char objs[1200];
    char text[1200];
    struct sbx_mount *v = NULL;
    size_t n = 0;
    char *alt = NULL;
    sbx_error_t *err = NULL;

    (void)state;
    assert_non_null(mkdtemp(dir));
    mkdir_p(dir, "a/objects/info");
    mkdir_p(dir, "b/objects/info");
    mkdir_p(dir, "c/objects");
    write_file(dir, "a/objects/info/alternates", "# borrowed\n\n../../b/objects\n");
    snprintf(text, sizeof(text), "%s/c/objects\n%s/c/objects/\n", dir, dir);
    write_file(dir, "b/objects/info/alternates", text);
    write_file(dir, "empty", "");
    snprintf(objs, sizeof(objs), "%s/a/objects", dir);
    snprintf(text, sizeof(text), "%s/empty", dir);
    assert_int_equal(sbx_wtgit_alternates(objs, text, 0, 0, &v, &n, &alt, &err), 0);
    assert_string_equal(alt, "/run/sbx-git/objects\n/run/sbx-git/alt/0\n/run/sbx-git/alt/1\n");
    assert_int_equal(n, 4);
    assert_string_equal(v[0].path, "/run/sbx-git/objects/info/alternates");
    assert_string_equal(v[0].host, text);
    assert_string_equal(v[1].path, "/run/sbx-git/alt/0");
    assert_non_null(strstr(v[1].host, "/b/objects"));
    assert_string_equal(v[2].path, "/run/sbx-git/alt/0/info/alternates");
    assert_string_equal(v[3].path, "/run/sbx-git/alt/1");
    for (size_t i = 0; i < n; i++) {
        assert_true(v[i].read_only);
    }
    sbx_wtgit_mounts_free(v, n);
    free(alt);
    /* refused: absent, not a directory */
    write_file(dir, "a/objects/info/alternates", "../../b/objects\n/nonexistent/objects\n");
    alt = NULL;
    assert_int_equal(sbx_wtgit_alternates(objs, text, 0, 0, &v, &n, &alt, &err), -1);
    assert_non_null(strstr(err->msg, "objects/info/alternates line 2: /nonexistent/objects"));
    assert_non_null(strstr(err->msg, "refused"));
    assert_null(strchr(err->msg, '\n'));
    assert_null(alt);
    assert_int_equal(n, 0);
    sbx_error_free(&err);

    write_file(dir, "a/objects/info/alternates", "../../empty\n");
    assert_int_equal(sbx_wtgit_alternates(objs, text, 0, 0, &v, &n, &alt, &err), -1);
    assert_non_null(strstr(err->msg, "line 1: ../../empty: not a directory"));
    sbx_error_free(&err);
    rm_rf(dir);
}

/* What the sandbox changed in its git dir: nothing, then its config (changed,
 * replaced by a symlink), a hook, attributes and a branch other than the task's. */
static void test_check(void **state)
{
    char dir[] = "/tmp/sbx-wtcheck-XXXXXX";
    char repo[1200];
    char spec[1200];
    char p[1200];
    int fd;

    (void)state;
    assert_non_null(mkdtemp(dir));
    mkdir_p(dir, "repo/refs/heads");
    mkdir_p(dir, "repo/objects/info");
    mkdir_p(dir, "spec");
    write_file(dir, "repo/config", "[core]\n\tbare = false\n");
    write_file(dir, "spec/orig-config", "[core]\n\tbare = false\n");
    write_file(dir, "repo/objects/info/alternates", "/run/sbx-git/objects\n");
    write_file(dir, "spec/orig-objects-info-alternates", "/run/sbx-git/objects\n");
    write_file(dir, "repo/refs/heads/main", "0123456789abcdef0123456789abcdef01234567\n");
    snprintf(repo, sizeof(repo), "%s/repo", dir);
    snprintf(spec, sizeof(spec), "%s/spec", dir);
    fd = open(repo, O_RDONLY | O_DIRECTORY);
    assert_true(fd >= 0);
    n_notes = 0;
    sbx_wtgit_check(fd, spec, ".git", "refs/heads/main", note, NULL);
    assert_int_equal(n_notes, 0);
    write_file(dir, "repo/config", "[core]\n\tfsmonitor = touch /tmp/x\n");
    sbx_wtgit_check(fd, spec, ".git", "refs/heads/main", note, NULL);
    assert_int_equal(n_notes, 1);
    assert_string_equal(last_note, "protected path .git/config: changed inside, not taken back");
    snprintf(p, sizeof(p), "%s/repo/config", dir);
    assert_int_equal(unlink(p), 0);
    assert_int_equal(symlink("/etc/passwd", p), 0);
    n_notes = 0;
    sbx_wtgit_check(fd, spec, ".git/modules/lib", "HEAD", note, NULL);
    assert_int_equal(n_notes, 2); /* the symlink; main, a branch other than HEAD */
    mkdir_p(dir, "repo/hooks");
    mkdir_p(dir, "repo/info");
    write_file(dir, "repo/hooks/pre-commit", "#!/bin/sh\n");
    write_file(dir, "repo/info/attributes", "* diff=x\n");
    write_file(dir, "repo/refs/heads/side", "0123456789abcdef0123456789abcdef01234567\n");
    n_notes = 0;
    sbx_wtgit_check(fd, spec, ".git", "refs/heads/main", note, NULL);
    assert_int_equal(n_notes, 4); /* config, attributes, the hook, side */
    assert_string_equal(last_note,
                        "branch refs/heads/side made or moved inside .git: stays inside, not "
                        "taken back");
    close(fd);
    rm_rf(dir);
}

/* 1 once path exists (want 1) or is gone (want 0), within 10 s: a condition
 * wait, never a fixed one. */
static int await_path(const char *dir, const char *rel, int want)
{
    char p[1200];
    struct timespec start;
    struct timespec now;

    snprintf(p, sizeof(p), "%s/%s", dir, rel);
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        if ((access(p, F_OK) == 0) == want) {
            return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &now);
        if (now.tv_sec - start.tv_sec > 10) {
            fprintf(stderr, "waited 10 s for %s to %s\n", p, want ? "appear" : "go");
            return 0;
        }
        usleep(10000);
    }
}

static int busy_now;

static int busy_flag(void *ud)
{
    (void)ud;
    return __atomic_load_n(&busy_now, __ATOMIC_ACQUIRE);
}

/* The watcher: what is made at the top or in a protected path's parent while the
 * task runs is quarantined without a command's end; a path that existed before,
 * an ordinary file and a symlinked parent are left alone. */
static void test_watch(void **state)
{
    static const char *const prot[] = {".mcp.json", ".vscode", ".claude/settings.json", NULL};
    char dir[] = "/tmp/sbx-wtwatch-XXXXXX";
    char out[] = "/tmp/sbx-wtwatch-out-XXXXXX";
    char p[1200];
    struct sbx_wtwatch_opts o = {0};
    struct sbx_wtwatch *w;
    sbx_error_t *err = NULL;

    (void)state;
    assert_non_null(mkdtemp(dir));
    assert_non_null(mkdtemp(out));
    write_file(dir, "existing", "x");
    mkdir_p(dir, ".vscode"); /* the host's own: mounted read-only inside */
    usleep(20000);           /* a change time after these */
    clock_gettime(CLOCK_REALTIME, &o.since);
    o.worktree = dir;
    o.task_id = "t2";
    o.protect = prot;
    o.note = note;
    n_notes = 0;
    w = sbx_wtwatch_start(&o, &err);
    assert_non_null(w);
    assert_int_equal(n_notes, 0); /* nothing made yet */
    usleep(20000);                /* a change time past since (the kernel's clock is coarse) */
    /* a protected file at the top, no command's end needed */
    write_file(dir, ".mcp.json", "{\"mcpServers\":{}}");
    assert_true(await_path(dir, ".mcp.json.sbx-quarantine-t2", 1));
    assert_true(await_path(dir, ".mcp.json", 0));
    /* a parent made first, the protected file in it after */
    mkdir_p(dir, ".claude");
    write_file(dir, ".claude/settings.json", "{}");
    assert_true(await_path(dir, ".claude/settings.json.sbx-quarantine-t2", 1));
    /* a repository at the top of a worktree that was none */
    mkdir_p(dir, ".git");
    assert_true(await_path(dir, ".git.sbx-quarantine-t2", 1));
    /* a renamed-in protected path */
    write_file(dir, "staged", "x");
    snprintf(p, sizeof(p), "mv '%s/staged' '%s/.mcp.json'", dir, dir);
    assert_int_equal(system(p), 0);
    assert_true(await_path(dir, ".mcp.json", 0));
    /* a parent that is a symlink out of the worktree is not followed */
    rm_rf(dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    sbx_wtwatch_stop(w);
    usleep(20000);
    clock_gettime(CLOCK_REALTIME, &o.since);
    w = sbx_wtwatch_start(&o, &err);
    assert_non_null(w);
    usleep(20000);
    snprintf(p, sizeof(p), "%s/.claude", dir);
    assert_int_equal(symlink(out, p), 0);
    write_file(out, "settings.json", "{}");
    write_file(dir, "plain", "x");      /* an ordinary file: left */
    write_file(dir, ".mcp.json", "{}"); /* seen after both above */
    assert_true(await_path(dir, ".mcp.json", 0));
    snprintf(p, sizeof(p), "%s/settings.json", out);
    assert_int_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/plain", dir);
    assert_int_equal(access(p, F_OK), 0);
    /* the after-command scan and the watcher share one lock */
    sbx_wtwatch_lock(w);
    sbx_wtwatch_unlock(w);
    sbx_wtwatch_stop(w);
    /* while a command runs a .git waits for its end (git init && git commit in
     * one command works); a protected path does not wait */
    rm_rf(dir);
    assert_int_equal(mkdir(dir, 0700), 0);
    usleep(20000);
    clock_gettime(CLOCK_REALTIME, &o.since);
    o.busy = busy_flag;
    __atomic_store_n(&busy_now, 1, __ATOMIC_RELEASE);
    w = sbx_wtwatch_start(&o, &err);
    assert_non_null(w);
    usleep(20000); /* a change time past since (the kernel's clock is coarse) */
    mkdir_p(dir, ".git");
    write_file(dir, ".mcp.json", "{}"); /* seen after the .git */
    assert_true(await_path(dir, ".mcp.json", 0));
    snprintf(p, sizeof(p), "%s/.git", dir);
    assert_int_equal(access(p, F_OK), 0); /* left to the command's end */
    sbx_wtwatch_idle(w);                  /* still busy: nothing */
    assert_int_equal(access(p, F_OK), 0);
    __atomic_store_n(&busy_now, 0, __ATOMIC_RELEASE);
    sbx_wtwatch_idle(w); /* the command ended: checked now */
    assert_int_not_equal(access(p, F_OK), 0);
    snprintf(p, sizeof(p), "%s/.git.sbx-quarantine-t2", dir);
    assert_int_equal(access(p, F_OK), 0);
    sbx_wtwatch_stop(w);
    sbx_wtwatch_stop(NULL);
    rm_rf(dir);
    rm_rf(out);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oid),         cmocka_unit_test(test_refname),
        cmocka_unit_test(test_object_path), cmocka_unit_test(test_protect_globs),
        cmocka_unit_test(test_scan),        cmocka_unit_test(test_fileio),
        cmocka_unit_test(test_alternates),  cmocka_unit_test(test_check),
        cmocka_unit_test(test_watch),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
