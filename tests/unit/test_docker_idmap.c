/* test_docker_idmap.c - the Docker provider's idmapped worktree mounts
 * (plugins/provider_docker/docker_idmap.c): the remap range from subordinate id
 * files, the capability and kernel probes, and the mount itself: the owner of
 * the worktree shows as the range's first id through the view; a filesystem
 * without idmapped mounts, a path that changed after its check, or a missing
 * view fail with a line naming why. Needs root (the suite runs as root). */
#include "test_common.h"

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>

#include "docker_idmap.h"

static int mounted(const char *path)
{
    FILE *f = fopen("/proc/self/mountinfo", "r");
    char line[4096];
    char mp[4096];
    int found = 0;

    assert_non_null(f);
    while (fgets(line, sizeof(line), f) != NULL) {
        if (sscanf(line, "%*s %*s %*s %*s %4095s", mp) == 1 && strcmp(mp, path) == 0) {
            found = 1;
        }
    }
    fclose(f);
    return found;
}

static void test_subid_first(void **state)
{
    char *dir = test_mkdtemp();
    char *f = test_write_file(dir, "subuid",
                              "# comment\n\nalice:200000:65536\nnot a range line\n"
                              "dockremap:100000:65536\ndockremap:300000:65536\n"
                              "1234:400000:10\nbad:x:1\nzero:5:0\n");
    char why[256] = "";
    unsigned first = 0;

    (void)state;
    assert_int_equal(dk_subid_first(f, "dockremap", -1, &first, why, sizeof(why)), 0);
    assert_int_equal(first, 100000); /* the first range of that user */
    assert_int_equal(dk_subid_first(f, "alice", -1, &first, why, sizeof(why)), 0);
    assert_int_equal(first, 200000);
    /* a line may name the user by its uid */
    assert_int_equal(dk_subid_first(f, "somebody", 1234, &first, why, sizeof(why)), 0);
    assert_int_equal(first, 400000);
    assert_int_equal(dk_subid_first(f, "nobody-here", -1, &first, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "no range for 'nobody-here' in "));
    assert_int_equal(dk_subid_first(f, "bad", -1, &first, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "subuid:8: the range of 'bad' is not FIRST:COUNT"));
    assert_int_equal(dk_subid_first(f, "zero", -1, &first, why, sizeof(why)), -1);
    assert_non_null(strstr(why, ":9: the range of 'zero'"));
    assert_int_equal(dk_subid_first("/no/such/subuid", "x", -1, &first, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "/no/such/subuid: No such file"));
    free(f);
    test_rm_rf(dir);
    free(dir);
}

static void test_probes(void **state)
{
    char *dir = test_mkdtemp();
    char *none = test_write_file(dir, "none", "Name:\tx\nCapEff:\t00000000a80425fb\n");
    char *all = test_write_file(dir, "all", "CapEff:\t000001ffffffffff\n");
    char *junk = test_write_file(dir, "junk", "Name:\tx\n");
    char why[256] = "";

    (void)state;
    /* the default set of a container: no CAP_SYS_ADMIN (bit 21) */
    assert_int_equal(dk_cap_effective(none, 21, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "lacks CAP_SYS_ADMIN"));
    assert_int_equal(dk_cap_effective(all, 21, why, sizeof(why)), 1);
    assert_int_equal(dk_cap_effective(junk, 21, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "no CapEff line"));
    assert_int_equal(dk_cap_effective("/proc/self/status", 21, why, sizeof(why)), 1); /* root */
    assert_int_equal(dk_idmap_kernel(why, sizeof(why)), 1);
    free(none);
    free(all);
    free(junk);
    test_rm_rf(dir);
    free(dir);
}

static void test_mount_and_release(void **state)
{
    char *dir = test_mkdtemp();
    char *wt = NULL;
    char *view = NULL;
    char *inner = NULL;
    char why[512] = "";
    struct stat st;

    (void)state;
    assert_true(asprintf(&wt, "%s/wt", dir) > 0);
    assert_true(asprintf(&view, "%s/view", dir) > 0);
    assert_int_equal(mkdir(wt, 0755), 0);
    assert_int_equal(mkdir(view, 0700), 0);
    assert_int_equal(chown(wt, 1000, 1000), 0);
    free(test_write_file(wt, "mine", "x"));
    assert_true(asprintf(&inner, "%s/mine", wt) > 0 && chown(inner, 1000, 1001) == 0);
    free(inner);
    assert_true(asprintf(&inner, "%s/view/mine", dir) > 0);
    if (dk_idmap_mount(wt, view, 100000, 200000, why, sizeof(why)) < 0) {
        fail_msg("idmapped mount: %s", why);
    }
    assert_true(mounted(view));
    /* through the view the owner's ids are the range's; another gid is nobody's */
    assert_int_equal(stat(view, &st), 0);
    assert_int_equal(st.st_uid, 100000);
    assert_int_equal(st.st_gid, 200000);
    assert_int_equal(stat(inner, &st), 0);
    assert_int_equal(st.st_uid, 100000);
    assert_int_equal(st.st_gid, 65534);
    dk_idmap_release(view);
    assert_false(mounted(view));
    dk_idmap_release(view); /* not a mount point any more: fine */
    assert_int_equal(stat(view, &st), 0);
    assert_int_equal(st.st_uid, 0);
    free(inner);
    free(wt);
    free(view);
    test_rm_rf(dir);
    free(dir);
}

static void test_mount_refusals(void **state)
{
    char *dir = test_mkdtemp();
    char *real = NULL;
    char *link = NULL;
    char *via = NULL;
    char *view = NULL;
    char why[512] = "";

    (void)state;
    assert_true(asprintf(&real, "%s/real", dir) > 0);
    assert_true(asprintf(&link, "%s/link", dir) > 0);
    assert_true(asprintf(&via, "%s/link/sub", dir) > 0);
    assert_true(asprintf(&view, "%s/view", dir) > 0);
    assert_int_equal(mkdir(real, 0755), 0);
    assert_int_equal(symlink("real", link), 0);
    assert_int_equal(mkdir(via, 0755), 0); /* real/sub */
    assert_int_equal(mkdir(view, 0700), 0);
    /* a filesystem without idmapped mounts (the kernel's sysfs) */
    assert_int_equal(dk_idmap_mount("/sys/kernel", view, 100000, 100000, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "the filesystem of /sys/kernel does not support idmapped mounts"));
    assert_false(mounted(view));
    /* a path that is not the canonical one it was checked as */
    assert_int_equal(dk_idmap_mount(via, view, 100000, 100000, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "changed while it was being mounted"));
    assert_int_equal(dk_idmap_mount(link, view, 100000, 100000, why, sizeof(why)), -1);
    assert_non_null(strstr(why, link));
    assert_false(mounted(view));
    /* no view directory */
    assert_int_equal(dk_idmap_mount(real, "/no/such/view", 100000, 100000, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "view /no/such/view: No such file"));
    free(real);
    free(link);
    free(via);
    free(view);
    test_rm_rf(dir);
    free(dir);
}

/* The plain view: what was checked is what is mounted; a component swapped
 * for a symlink after the check is refused, never followed (the runner's
 * worktree re-check and the engine's bind are apart in time). */
static void test_pinned_bind(void **state)
{
    char *dir = test_mkdtemp();
    char *real = NULL;
    char *other = NULL;
    char *sub = NULL;
    char *view = NULL;
    char *inner = NULL;
    char why[512] = "";
    struct stat st;

    (void)state;
    assert_true(asprintf(&real, "%s/real", dir) > 0);
    assert_true(asprintf(&other, "%s/other", dir) > 0);
    assert_true(asprintf(&sub, "%s/real/sub", dir) > 0);
    assert_true(asprintf(&view, "%s/view", dir) > 0);
    assert_int_equal(mkdir(real, 0755), 0);
    assert_int_equal(mkdir(sub, 0755), 0);
    assert_int_equal(mkdir(other, 0755), 0);
    assert_int_equal(mkdir(view, 0700), 0);
    assert_int_equal(chown(sub, 1000, 1000), 0);
    free(test_write_file(sub, "mine", "x"));
    if (dk_pinned_bind(sub, view, why, sizeof(why)) < 0) {
        fail_msg("pinned bind: %s", why);
    }
    assert_true(mounted(view));
    /* no id mapping: the owner stays 1000, and the file is there */
    assert_int_equal(stat(view, &st), 0);
    assert_int_equal(st.st_uid, 1000);
    assert_true(asprintf(&inner, "%s/mine", view) > 0);
    assert_int_equal(access(inner, R_OK), 0);
    dk_idmap_release(view);
    assert_false(mounted(view));
    /* real swapped for a symlink to other (with a sub of its own): refused */
    free(inner);
    assert_true(asprintf(&inner, "%s/real.moved", dir) > 0);
    assert_int_equal(rename(real, inner), 0);
    assert_int_equal(symlink("other", real), 0);
    free(other);
    assert_true(asprintf(&other, "%s/other/sub", dir) > 0);
    assert_int_equal(mkdir(other, 0755), 0);
    assert_int_equal(dk_pinned_bind(sub, view, why, sizeof(why)), -1);
    assert_non_null(strstr(why, "changed while it was being mounted"));
    assert_false(mounted(view));
    free(real);
    free(other);
    free(sub);
    free(view);
    free(inner);
    test_rm_rf(dir);
    free(dir);
}

/* A child listening on path, in a mount namespace of its own when newns. */
static pid_t listener(const char *path, int newns)
{
    int ready[2];
    char c = 0;
    pid_t pid;

    assert_int_equal(pipe(ready), 0);
    pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        int fd;

        if (newns && unshare(CLONE_NEWNS) < 0) {
            _exit(2);
        }
        snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
        fd = socket(AF_UNIX, SOCK_STREAM, 0);
        if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 4) < 0) {
            _exit(3);
        }
        if (write(ready[1], &c, 1) != 1) {
            _exit(4);
        }
        pause();
        _exit(0);
    }
    close(ready[1]);
    assert_int_equal(read(ready[0], &c, 1), 1);
    close(ready[0]);
    return pid;
}

static void test_engine_mount_ns(void **state)
{
    char *dir = test_mkdtemp();
    char *same = NULL;
    char *other = NULL;
    char why[512] = "";
    pid_t a;
    pid_t b;

    (void)state;
    assert_true(asprintf(&same, "%s/same.sock", dir) > 0);
    assert_true(asprintf(&other, "%s/other.sock", dir) > 0);
    a = listener(same, 0);
    b = listener(other, 1);
    assert_int_equal(dk_same_mount_ns(same, why, sizeof(why)), 1);
    assert_int_equal(dk_same_mount_ns(other, why, sizeof(why)), 0);
    assert_non_null(strstr(why, "another mount namespace than the engine"));
    assert_int_equal(dk_same_mount_ns("/no/such.sock", why, sizeof(why)), -1);
    assert_non_null(strstr(why, "/no/such.sock: No such file"));
    kill(a, SIGKILL);
    kill(b, SIGKILL);
    waitpid(a, NULL, 0);
    waitpid(b, NULL, 0);
    free(same);
    free(other);
    test_rm_rf(dir);
    free(dir);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_subid_first),       cmocka_unit_test(test_probes),
        cmocka_unit_test(test_mount_and_release), cmocka_unit_test(test_mount_refusals),
        cmocka_unit_test(test_engine_mount_ns),   cmocka_unit_test(test_pinned_bind),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
