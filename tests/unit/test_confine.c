/* test_confine.c - the rule for host paths a client names (util/confine.h):
 * with a root of "/" still never /proc, /sys, /dev, /run or "/" itself; roots
 * there refused; a kernel filesystem mounted below a root refused; and
 * without openat2 the realpath fallback gives the same answers. The API's
 * use of it is in test_serve_trust.c. */
#include "test_common.h"

#include <errno.h>
#include <fcntl.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sched.h>
#include <stddef.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

#include "util/confine.h"

/* The rule itself: a root of "/" still never gives /proc, /sys, /dev, /run,
 * nor "/" itself (it holds them); roots there are refused. */
static void test_trust_confine_rule(void **state)
{
    struct sbx_confine c;
    char why[512];
    char *out = NULL;
    static const struct {
        const char *path;
        int code;
        const char *msg;
    } cases[] = {
        {"/proc", 403, "inside /proc"},
        {"/proc/self", 403, "inside /proc"},
        {"/sys/kernel", 403, "inside /sys"},
        {"/dev", 403, "inside /dev"},
        {"/run", 403, "inside /run"},
        {"/", 403, "contains /proc"},
        {"/proc/self/root", 403, "leads outside"},
    };

    (void)state;
    assert_int_equal(sbx_confine_init(&c, "runner.worktree_roots", (char *const[]){"/", NULL}, 1,
                                      NULL, why, sizeof(why)),
                     0);
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int rc = sbx_confine_dir(&c, cases[i].path, &out, why, sizeof(why));

        if (rc != cases[i].code || strstr(why, cases[i].msg) == NULL) {
            fail_msg("%s: %d %s (want %d '%s')", cases[i].path, rc, why, cases[i].code,
                     cases[i].msg);
        }
        assert_null(out);
    }
    assert_int_equal(sbx_confine_dir(&c, "/etc", &out, why, sizeof(why)), 0);
    assert_string_equal(out, "/etc");
    free(out);
    sbx_confine_clear(&c);
    assert_string_equal(sbx_confine_root_problem("/proc", NULL),
                        "inside /proc, /sys, /dev or /run");
    assert_string_equal(sbx_confine_root_problem("/run/x", NULL),
                        "inside /proc, /sys, /dev or /run");
    assert_string_equal(sbx_confine_root_problem("srv", NULL), "not an absolute path");
    assert_string_equal(sbx_confine_root_problem("/var/lib/sbx/x", "/var/lib/sbx"),
                        "inside the state directory");
    assert_null(sbx_confine_root_problem("/srv/work", "/var/lib/sbx"));
}

/* A kernel filesystem mounted below a root (here proc, in a mount namespace of
 * a child) is refused like /proc itself. */
static void test_trust_confine_kernel_fs(void **state)
{
    char *root = test_mkdtemp();
    char *kfs = NULL;
    pid_t pid;
    int st = 0;

    (void)state;
    assert_true(asprintf(&kfs, "%s/kfs", root) > 0);
    assert_int_equal(mkdir(kfs, 0755), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sbx_confine c;
        char why[512];
        char *out = NULL;
        int rc;

        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0 ||
            mount("proc", kfs, "proc", 0, NULL) < 0) {
            fprintf(stderr, "kernel fs: cannot mount proc in a mount namespace: %s\n",
                    strerror(errno));
            _exit(2);
        }
        if (sbx_confine_init(&c, "runner.worktree_roots", (char *const[]){root, NULL}, 1, NULL, why,
                             sizeof(why)) < 0) {
            _exit(3);
        }
        rc = sbx_confine_dir(&c, kfs, &out, why, sizeof(why));
        if (rc != 403 || strstr(why, "on a kernel filesystem (proc)") == NULL) {
            fprintf(stderr, "kernel fs: %d %s\n", rc, why);
            _exit(4);
        }
        _exit(0);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    test_rm_rf(root);
    free(root);
    free(kfs);
}

/* Without openat2 (a seccomp filter in a child makes it ENOSYS, as on a kernel
 * before 5.6) the realpath fallback gives the same answers. */
static void test_trust_confine_fallback(void **state)
{
    char *root = test_mkdtemp();
    char *outside = test_mkdtemp();
    char *p = NULL;
    pid_t pid;
    int st = 0;

    (void)state;
    assert_true(asprintf(&p, "%s/ok", root) > 0);
    assert_int_equal(mkdir(p, 0755), 0);
    free(p);
    assert_true(asprintf(&p, "%s/out", root) > 0);
    assert_int_equal(symlink(outside, p), 0);
    free(p);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_openat2, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ENOSYS),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {.len = sizeof(f) / sizeof(f[0]), .filter = f};
        struct sbx_confine c;
        char why[512];
        char *out = NULL;
        char *path = NULL;
        int bad = 0;

        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0 ||
            syscall(SYS_openat2, AT_FDCWD, ".", NULL, 0) != -1 || errno != ENOSYS) {
            _exit(2);
        }
        if (sbx_confine_init(&c, "runner.worktree_roots", (char *const[]){root, NULL}, 1, NULL, why,
                             sizeof(why)) < 0) {
            _exit(3);
        }
        if (asprintf(&path, "%s/ok", root) < 0 ||
            sbx_confine_dir(&c, path, &out, why, sizeof(why)) != 0) {
            bad |= 4;
        }
        free(path);
        free(out);
        if (asprintf(&path, "%s/out", root) < 0 ||
            sbx_confine_dir(&c, path, &out, why, sizeof(why)) != 403 ||
            strstr(why, "leads outside runner.worktree_roots") == NULL) {
            bad |= 8;
        }
        free(path);
        if (sbx_confine_dir(&c, "/proc", &out, why, sizeof(why)) != 403 ||
            strstr(why, "outside runner.worktree_roots") == NULL) {
            bad |= 16;
        }
        if (asprintf(&path, "%s/ok/../..", root) < 0 ||
            sbx_confine_dir(&c, path, &out, why, sizeof(why)) != 403) {
            bad |= 32;
        }
        free(path);
        sbx_confine_clear(&c);
        _exit(bad);
    }
    assert_int_equal(waitpid(pid, &st, 0), pid);
    assert_true(WIFEXITED(st));
    assert_int_equal(WEXITSTATUS(st), 0);
    test_rm_rf(root);
    test_rm_rf(outside);
    free(root);
    free(outside);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_trust_confine_rule),
        cmocka_unit_test(test_trust_confine_kernel_fs),
        cmocka_unit_test(test_trust_confine_fallback),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
