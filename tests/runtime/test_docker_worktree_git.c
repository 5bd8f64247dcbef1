/* test_docker_worktree_git.c - worktrees that are repositories, against a real
 * engine (docs/tasks.md, "Worktrees"): agent work in a linked worktree and in a
 * repository with a submodule reaches the task's branch on the host and nothing
 * else moves; a hostile sandbox tries every way we know to make the host run its
 * code or gain a privilege, then the host runs its ordinary git commands and a
 * marker shows that nothing ran. Only local paths are used (no network). */
#include "rt_common.h"

#include <sys/stat.h>

#include "wait.h"

static char *dir;  /* the repositories (outside the state directory) */
static char *mark; /* a command that leaves a marker if the host ever runs it */

static int setup(void **state)
{
    if (rt_setup(state) < 0) {
        return -1;
    }
    dir = test_mkdtemp();
    assert_true(asprintf(&mark, "touch %s/MARK", dir) > 0);
    return 0;
}

static int teardown(void **state)
{
    test_rm_rf(dir);
    free(dir);
    free(mark);
    return rt_teardown(state);
}

/* A shell script on the host, in dir, as root with a clean git environment; the
 * host's own pager and editor are cat and true. */
static struct spawn_result host_sh(const char *script)
{
    char *home = NULL;
    char *env[] = {"PATH=/usr/local/bin:/usr/bin:/bin",
                   NULL,
                   "GIT_CONFIG_NOSYSTEM=1",
                   "GIT_AUTHOR_NAME=h",
                   "GIT_AUTHOR_EMAIL=h@example.invalid",
                   "GIT_COMMITTER_NAME=h",
                   "GIT_COMMITTER_EMAIL=h@example.invalid",
                   "PAGER=cat",
                   "GIT_EDITOR=true",
                   NULL};
    char *full = NULL;
    struct spawn_result r;

    assert_true(asprintf(&home, "HOME=%s", dir) > 0);
    env[1] = home;
    assert_true(asprintf(&full, "set -e; cd '%s'; %s", dir, script) > 0);
    r = spawn_run((char *const[]){"/bin/sh", "-c", full, NULL}, env);
    if (r.rc != 0) {
        fprintf(stderr, "host script failed (%d): %s\n%s%s", r.rc, script, r.out, r.err);
    }
    free(full);
    free(home);
    return r;
}

static void host_ok(const char *script)
{
    struct spawn_result r = host_sh(script);

    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
}

/* stdout of a host script, trimmed of its last newline (caller frees). */
static char *host_out(const char *script)
{
    struct spawn_result r = host_sh(script);
    char *s = strdup(r.out);

    assert_int_equal(r.rc, 0);
    s[strcspn(s, "\n")] = '\0';
    spawn_result_free(&r);
    return s;
}

static struct spawn_result in_sandbox(const char *task, const char *wt, const char *script)
{
    char *path = NULL;
    struct spawn_result r;

    assert_true(asprintf(&path, "%s/%s", dir, wt) > 0);
    r = RT_SBX("run", "--task", task, "--json", "--worktree", path, "--", "sh", "-c", script);
    free(path);
    if (r.rc != 0) { /* whole: a failure message is cut short */
        fprintf(stderr, "sbx run rc %d\n-- stdout:\n%s\n-- stderr:\n%s\n", r.rc, r.out, r.err);
    }
    return r;
}

/* (added, issue 31) The command's stdout in a `sbx run --json` record (the
 * record also holds the command line, "argv"); caller frees. */
static char *record_stdout(const char *out)
{
    json_t *rec = json_loads(out, 0, NULL);
    char *s = strdup(json_string_value(json_object_get(rec, "stdout")) ?: "");

    json_decref(rec);
    return s;
}

static void no_marker(void)
{
    char *p = NULL;

    assert_true(asprintf(&p, "%s/MARK", dir) > 0);
    if (access(p, F_OK) == 0) {
        fail_msg("the host ran a command the sandbox planted (%s exists)", p);
    }
    free(p);
}

/* A linked worktree: edit, commit, stash, switch -c inside; the commit is on the
 * worktree's branch on the host, main and every other ref are as they were. */
static void test_linked_worktree(void **state)
{
    struct spawn_result r;
    char *main_before;
    char *refs_before;
    char *s;

    (void)state;
    host_ok("git init -q -b main main && cd main && echo a > a && git add a && "
            "git commit -q -m a && git worktree add -q ../wt -b feature");
    main_before = host_out("git -C main rev-parse main");
    r = in_sandbox("wt-linked", "wt",
                   "set -e; git config user.name s; git config user.email s@example.invalid; "
                   "git status --short; git log --oneline | grep -q ' a$'; "
                   "echo b > b; git add b; git commit -q -m inside; "
                   "echo c > c; git add c; git stash -q; git stash list | grep -q stash; "
                   "git switch -q -c side; git commit -q --allow-empty -m side; "
                   "git switch -q feature; git stash pop -q; git diff --cached --stat | grep -q c; "
                   "git reset -q; rm c; git submodule status; echo done");
    if (r.rc != 0) {
        fail_msg("sandbox rc %d: %s%s", r.rc, r.out, r.err);
    }
    assert_non_null(strstr(r.out, "done"));
    /* the branch made inside stays there, recorded once */
    assert_non_null(
        strstr(r.out, "branch refs/heads/side made or moved inside .git: stays inside"));
    spawn_result_free(&r);
    s = host_out("git -C wt log -1 --format=%s feature");
    assert_string_equal(s, "inside");
    free(s);
    s = host_out("git -C main rev-parse main");
    assert_string_equal(s, main_before);
    free(s);
    /* only refs/heads/feature moved: no side branch, no stash on the host */
    refs_before = host_out("git -C main for-each-ref --format='%(refname)' | tr '\\n' ' '");
    assert_string_equal(refs_before, "refs/heads/feature refs/heads/main ");
    free(refs_before);
    s = host_out("git -C wt status --porcelain | wc -l");
    assert_string_equal(s, "0");
    free(s);
    /* the objects are the host's, checked: fsck is clean */
    host_ok("git -C main fsck --no-progress --no-dangling 2>&1");
    free(main_before);
}

/* A repository with a submodule on a detached HEAD (as `git submodule update`
 * leaves it): commits in the submodule and in the superproject come back; the
 * host's submodule HEAD moved (compare-and-swap), none of its branches. */
static void test_submodule(void **state)
{
    struct spawn_result r;
    char *lib_main;
    char *s;

    (void)state;
    host_ok("git init -q -b main lib && git -C lib commit -q --allow-empty -m lib && "
            "git init -q -b main super && cd super && "
            "git -c protocol.file.allow=always submodule -q add ../lib lib && "
            "git commit -q -m 'add lib' && git -C lib checkout -q --detach");
    lib_main = host_out("git -C super/lib rev-parse main");
    r = in_sandbox("wt-sub", "super",
                   "set -e; git config user.name s; git config user.email s@example.invalid; "
                   "git submodule status | grep -q '^ .* lib'; git -C lib log --oneline | "
                   "grep -q lib; git -C lib config user.name s; "
                   "git -C lib config user.email s@example.invalid; echo l > lib/l; "
                   "git -C lib add l; git -C lib commit -q -m 'lib inside'; git add lib; "
                   "echo x > x; git add x; git commit -q -m 'super inside'; echo done");
    if (r.rc != 0) {
        fail_msg("sandbox rc %d: %s%s", r.rc, r.out, r.err);
    }
    assert_non_null(strstr(r.out, "done"));
    spawn_result_free(&r);
    s = host_out("git -C super log -1 --format=%s");
    assert_string_equal(s, "super inside");
    free(s);
    s = host_out("git -C super/lib log -1 --format=%s");
    assert_string_equal(s, "lib inside");
    free(s);
    /* the superproject's gitlink and the submodule's HEAD agree; all clean */
    host_ok("cd super && git submodule status | grep -q '^ ' && "
            "git submodule foreach -q 'git status --short' && "
            "git status --porcelain | wc -l | grep -qx 0 && git diff --exit-code && "
            "git -C lib status --porcelain | wc -l | grep -qx 0 && "
            "! git -C lib symbolic-ref -q HEAD");
    s = host_out("git -C super/lib rev-parse main");
    assert_string_equal(s, lib_main);
    free(s);
    host_ok("git -C super/lib fsck --no-progress --no-dangling 2>&1");
    free(lib_main);
}

/* A worktree whose HEAD is detached, owned by a user who is not root: the
 * host's detached HEAD of that worktree moves (compare-and-swap), every new
 * object is that user's; a branch made inside stays there, recorded. */
static void test_detached(void **state)
{
    struct spawn_result r;
    char *main_before;
    char *s;

    (void)state;
    host_ok("git config --global safe.directory '*' && chmod 755 . && "
            "git init -q -b main det && cd det && git commit -q --allow-empty -m a && "
            "git checkout -q --detach && chown -R nobody: .");
    main_before = host_out("git -C det rev-parse main");
    r = in_sandbox("wt-det", "det",
                   "set -e; git config user.name s; git config user.email s@example.invalid; "
                   "echo d > d; git add d; git commit -q -m d1; git switch -q -c mine; "
                   "git commit -q --allow-empty -m d2; echo done");
    if (r.rc != 0) {
        fail_msg("sandbox rc %d: %s%s", r.rc, r.out, r.err);
    }
    assert_non_null(strstr(r.out, "done"));
    assert_non_null(strstr(r.out, "branch refs/heads/mine made or moved inside .git"));
    spawn_result_free(&r);
    /* before the host's own git commands below, which run as root here (a
     * `git status` that refreshes the index rewrites it as root's) */
    s = host_out("find det ! -user nobody -printf '%u %p\\n'");
    if (s[0] != '\0') {
        fail_msg("not nobody's: %s", s);
    }
    free(s);
    s = host_out("git -C det log -2 --format=%s HEAD | tr '\\n' ' '");
    assert_string_equal(s, "d2 d1 ");
    free(s);
    host_ok("cd det && ! git symbolic-ref -q HEAD && git status --porcelain | wc -l | grep -qx 0 "
            "&& ! git rev-parse -q --verify mine");
    s = host_out("git -C det rev-parse main");
    assert_string_equal(s, main_before);
    free(s);
    free(main_before);
}

/* A linked worktree of a repository with a submodule: commits in both come back. */
static void test_linked_submodule(void **state)
{
    struct spawn_result r;
    char *s;

    (void)state;
    host_ok("git init -q -b main lib2 && git -C lib2 commit -q --allow-empty -m lib && "
            "git init -q -b main sm && cd sm && "
            "git -c protocol.file.allow=always submodule -q add ../lib2 lib && "
            "git commit -q -m 'add lib' && git worktree add -q ../lsm -b feat && cd ../lsm && "
            "git -c protocol.file.allow=always submodule -q update --init");
    r = in_sandbox("wt-lsm", "lsm",
                   "set -e; git config user.name s; git config user.email s@example.invalid; "
                   "git -C lib config user.name s; git -C lib config user.email s@example.invalid; "
                   "echo l > lib/l; git -C lib add l; git -C lib commit -q -m 'lib linked'; "
                   "git add lib; git commit -q -m 'super linked'; echo done");
    if (r.rc != 0) {
        fail_msg("sandbox rc %d: %s%s", r.rc, r.out, r.err);
    }
    assert_non_null(strstr(r.out, "done"));
    spawn_result_free(&r);
    s = host_out("git -C lsm log -1 --format=%s feat");
    assert_string_equal(s, "super linked");
    free(s);
    s = host_out("git -C lsm/lib log -1 --format=%s");
    assert_string_equal(s, "lib linked");
    free(s);
    host_ok("cd lsm && git status --porcelain | wc -l | grep -qx 0 && "
            "git submodule status | grep -q '^ '");
    s = host_out("git -C sm log -1 --format=%s main");
    assert_string_equal(s, "add lib");
    free(s);
}

/* A repository that borrows objects (clone --shared, chained, one relative
 * path): the sandbox reads them and its commit comes back; an alternate that
 * does not exist refuses the task with one line naming the file and line. */
static void test_alternates(void **state)
{
    struct spawn_result r;
    char *s;

    (void)state;
    host_ok("git init -q -b main am && git -C am commit -q --allow-empty -m base && "
            "git clone -q --shared am ac && git clone -q --shared ac ac2 && "
            "echo ../../../ac/.git/objects > ac2/.git/objects/info/alternates && "
            "git -C ac2 log -q >/dev/null");
    r = in_sandbox("wt-alt", "ac2",
                   "set -e; git config user.name s; git config user.email s@example.invalid; "
                   "git log --oneline | grep -q base; git fsck --no-progress --connectivity-only; "
                   "git commit -q --allow-empty -m 'alt inside' 2>&1; git status >/dev/null 2>e; "
                   "! grep . e; echo done");
    if (r.rc != 0) {
        fail_msg("sandbox rc %d: %s%s", r.rc, r.out, r.err);
    }
    assert_non_null(strstr(r.out, "done"));
    spawn_result_free(&r);
    s = host_out("git -C ac2 log -1 --format=%s");
    assert_string_equal(s, "alt inside");
    free(s);
    host_ok("git -C ac2 fsck --no-progress --no-dangling 2>&1");
    host_ok("git clone -q --shared am ab && echo '# x' > ab/.git/objects/info/alternates && "
            "echo /nonexistent/objects >> ab/.git/objects/info/alternates");
    r = in_sandbox("wt-altbad", "ab", "echo ran");
    assert_int_not_equal(r.rc, 0);
    s = record_stdout(r.out); /* (changed, issue 31) the record holds argv */
    assert_null(strstr(s, "ran"));
    free(s);
    assert_non_null(strstr(r.err, "objects/info/alternates line 2: /nonexistent/objects"));
    assert_non_null(strstr(r.err, "refused"));
    spawn_result_free(&r);
}

/* Every vector we know, from inside; then the host's ordinary git commands. */
static void test_hostile(void **state)
{
    struct spawn_result r;
    char *script = NULL;
    char *main_before;
    char *s;
    struct stat st;
    char *p = NULL;

    (void)state;
    host_ok("git init -q -b main repo && cd repo && echo 'echo hi' > .bashrc && "
            "printf '[submodule \"x\"]\\n' > .gitmodules && git add . && git commit -q -m base && "
            "git branch other");
    main_before = host_out("git -C repo rev-parse main");
    assert_true(
        asprintf(
            &script,
            "M='%s'; cd /workspace; "
            /* the repository's configuration and hooks */
            "git config core.fsmonitor \"$M\"; git config core.pager \"$M\"; "
            "git config core.hooksPath /workspace/h; mkdir -p h; printf '#!/bin/sh\\n%%s\\n' "
            "\"$M\" > h/pre-commit; chmod +x h/pre-commit; "
            "mkdir -p .git/hooks; for k in pre-commit post-checkout pre-push post-index-change "
            "reference-transaction; do printf '#!/bin/sh\\n%%s\\n' \"$M\" > .git/hooks/$k; "
            "chmod +x .git/hooks/$k; done; "
            "git config diff.external \"$M\"; git config core.editor \"$M\"; "
            "git config include.path /workspace/inc; printf '[core]\\n\\tfsmonitor = %%s\\n' "
            "\"$M\" > inc; "
            "echo /workspace/evil > .git/commondir; "
            "echo /workspace/evil/objects > .git/objects/info/alternates; "
            /* refs other than the task's branch */
            "git update-ref refs/heads/other HEAD~0 2>/dev/null; git tag evil; "
            "git push -q . HEAD:refs/heads/planted 2>/dev/null; "
            /* nested repositories */
            "mkdir -p n && git -C n init -q && git -C n config core.fsmonitor \"$M\"; "
            "git init -q --bare b.git && git -C b.git config core.pager \"$M\"; "
            /* protected paths, new and existing */
            "mkdir -p .vscode; echo '{}' > .vscode/tasks.json; echo '{}' > .mcp.json; "
            "echo \"$M\" >> .bashrc; echo '[x]' >> .gitmodules; "
            /* privileges */
            "cp /bin/sh rootsh; chmod 4755 rootsh; chmod g+s rootsh; mkfifo fifo; "
            "perl -e 'my $v=\"\\x01\\x00\\x00\\x02\"; my $p=\"rootsh\"; my "
            "$n=\"security.capability\"; syscall(188, $p, $n, $v, 4, 0) == 0 and print "
            "\"xattr set\\n\"'; "
            "echo done",
            mark) > 0);
    r = in_sandbox("wt-hostile", "repo", script);
    free(script);
    assert_non_null(strstr(r.out, "done"));

    /* the host user's ordinary commands, in the worktree and in the nested ones */
    host_ok("cd repo && git status >/dev/null && git diff >/dev/null && git -p log -p >/dev/null "
            "&& git commit -q --allow-empty -m host && git submodule foreach -q true && "
            "git stash list >/dev/null && git checkout -q -b review && git checkout -q main");
    host_ok("cd repo/n && (git status >/dev/null 2>&1 || true); cd ../b.git && "
            "(git log >/dev/null 2>&1 || true)");
    no_marker();
    /* refused inside; what was made there recorded in the task's record */
    s = record_stdout(r.out); /* (changed, issue 31) the record holds argv */
    assert_null(strstr(s, "xattr set"));
    free(s);
    assert_non_null(strstr(r.out, "worktree_events"));
    assert_non_null(strstr(r.out, "protected path .mcp.json"));
    assert_non_null(strstr(r.out, "repository n/.git"));
    /* the sandbox's own git dir: what it changed there is recorded once each */
    {
        const char *cfg = "protected path .git/config: changed inside, not taken back";
        const char *first = strstr(r.out, cfg);

        assert_non_null(first);
        assert_null(strstr(first + 1, cfg));
    }
    assert_non_null(strstr(r.out, "protected path .git/hooks/pre-commit: changed inside"));
    assert_non_null(strstr(r.out, "protected path .git/commondir: changed inside"));
    assert_non_null(strstr(r.out, "protected path .git/objects/info/alternates: changed inside"));
    spawn_result_free(&r);
    /* no ref but the task's branch moved (main: the host's own commit on top) */
    s = host_out("git -C repo rev-parse main~1");
    assert_string_equal(s, main_before);
    free(s);
    s = host_out("git -C repo rev-parse other");
    assert_string_equal(s, main_before);
    free(s);
    s = host_out("git -C repo tag | wc -l; git -C repo branch --list planted | wc -l");
    assert_string_equal(s, "0");
    free(s);
    /* protected files: the existing ones unchanged, the new ones not in place */
    s = host_out("cat repo/.bashrc");
    assert_string_equal(s, "echo hi");
    free(s);
    assert_true(asprintf(&p, "%s/repo/.mcp.json", dir) > 0);
    assert_int_not_equal(access(p, F_OK), 0);
    free(p);
    assert_true(asprintf(&p, "%s/repo/.vscode", dir) > 0);
    assert_int_not_equal(access(p, F_OK), 0);
    free(p);
    /* no set-id program, no FIFO */
    assert_true(asprintf(&p, "%s/repo/rootsh", dir) > 0);
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_mode & 06000, 0);
    free(p);
    assert_true(asprintf(&p, "%s/repo/fifo", dir) > 0);
    assert_int_not_equal(access(p, F_OK), 0);
    free(p);
    free(main_before);
}

/* A kept task: a process it left running plants protected files between two
 * commands; they are quarantined while the task runs, with no command's end. */
static void test_kept_background(void **state)
{
    struct spawn_result r;
    char *wt = NULL;
    char *p = NULL;

    (void)state;
    host_ok("git init -q -b main kept && cd kept && echo x > f && git add . && "
            "git commit -q -m base");
    assert_true(asprintf(&wt, "%s/kept", dir) > 0);
    r = RT_SBX("task", "start", "--task", "wt-kept", "--worktree", wt);
    if (r.rc != 0) {
        fprintf(stderr, "sbx task start rc %d\n%s%s", r.rc, r.out, r.err);
    }
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    /* the command returns at once; what it left behind writes a second later */
    r = RT_SBX("exec", "wt-kept", "--", "sh", "-c",
               "cd /workspace && setsid sh -c 'sleep 1; mkdir -p .claude; "
               "echo {} > .claude/settings.json; echo {} > .mcp.json; touch planted' "
               "</dev/null >/dev/null 2>&1 &");
    assert_int_equal(r.rc, 0);
    spawn_result_free(&r);
    assert_true(asprintf(&p, "%s/planted", wt) > 0);
    wait_until(access(p, F_OK) == 0, 20, NULL, "the background writer of wt-kept (%s)", p);
    free(p);
    assert_true(asprintf(&p, "%s/.mcp.json.sbx-quarantine-wt-kept", wt) > 0);
    wait_until(access(p, F_OK) == 0, 10, NULL, "%s, with no command run since", p);
    free(p);
    assert_true(asprintf(&p, "%s/.claude/settings.json.sbx-quarantine-wt-kept", wt) > 0);
    wait_until(access(p, F_OK) == 0, 10, NULL, "%s, with no command run since", p);
    free(p);
    assert_true(asprintf(&p, "%s/.mcp.json", wt) > 0);
    assert_int_not_equal(access(p, F_OK), 0);
    free(p);
    r = RT_SBX("task", "end", "--json", "wt-kept");
    assert_int_equal(r.rc, 0);
    assert_non_null(strstr(r.out, "protected path .mcp.json: written inside"));
    spawn_result_free(&r);
    free(wt);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_linked_worktree), cmocka_unit_test(test_submodule),
        cmocka_unit_test(test_detached),        cmocka_unit_test(test_linked_submodule),
        cmocka_unit_test(test_alternates),      cmocka_unit_test(test_hostile),
        cmocka_unit_test(test_kept_background),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
