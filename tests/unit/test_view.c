/* test_view.c - the worktree's checks and the lifecycle of worktree views
 * (core/src/sandbox/view.c): a worktree is canonicalised and refused when it
 * is /, in /proc, /sys or /dev, or is, is inside or holds the state
 * directory; a view is unmounted by its release, by the removal of its task
 * directory, and by the sweep once its task is dead (no record, an ended
 * record, a record whose owner is gone), never while its owner lives. Needs
 * root for the mounts (the suite runs as root). */
#include "test_common.h"

#include <sys/mount.h>
#include <sys/stat.h>

#include "sandbox/owner.h"
#include "sandbox/statedir.h"
#include "sandbox/view.h"
#include "util/error.h"

static char *dir;   /* test directory */
static char *state; /* its state directory (a name with a space) */

static int setup(void **st)
{
    (void)st;
    dir = test_mkdtemp();
    if (asprintf(&state, "%s/st ate", dir) < 0 || mkdir(state, 0700) < 0) {
        return -1;
    }
    return 0;
}

static int teardown(void **st)
{
    (void)st;
    sbx_view_sweep(state);
    test_rm_rf(dir);
    free(dir);
    free(state);
    return 0;
}

static void refused(const char *w, const char *why)
{
    sbx_error_t *err = NULL;
    char *out = NULL;

    assert_int_equal(sbx_worktree_check(w, state, &out, &err), -1);
    assert_null(out);
    assert_non_null(err);
    if (strstr(err->msg, why) == NULL) {
        fail_msg("worktree %s: '%s' not in: %s", w, why, err->msg);
    }
    assert_null(strchr(err->msg, '\n'));
    sbx_error_free(&err);
}

static void test_worktree_check(void **st)
{
    char *wt = NULL;
    char *link = NULL;
    char *inside = NULL;
    char *out = NULL;
    sbx_error_t *err = NULL;

    (void)st;
    assert_true(asprintf(&wt, "%s/wt", dir) > 0 && mkdir(wt, 0755) == 0);
    assert_true(asprintf(&link, "%s/lnk", dir) > 0 && symlink("wt/../wt", link) == 0);
    assert_int_equal(sbx_worktree_check(link, state, &out, &err), 0);
    assert_string_equal(out, wt); /* canonical */
    free(out);
    refused("/", "refusing to mount the host root");
    refused("/proc/self", "in the kernel's /proc");
    refused("/sys/kernel/..", "in the kernel's /sys");
    refused("/dev/shm", "in the kernel's /dev");
    refused("/no/such/dir", "worktree /no/such/dir: No such file");
    refused(state, "is or is inside the state directory");
    assert_true(asprintf(&inside, "%s/tasks", state) > 0 && mkdir(inside, 0700) == 0);
    refused(inside, "is or is inside the state directory");
    refused(dir, "holds the state directory");
    unlink(link);
    assert_int_equal(symlink("/proc/1", link), 0);
    refused(link, "resolves to /proc/1, in the kernel's /proc");
    unlink(link);
    free(wt);
    free(link);
    free(inside);
}

/* tasks/<task>/workspace with a tmpfs on it and a record (NULL: none). */
static char *view_of(const char *task, const char *rec_state, const char *owner)
{
    char *tdir = sbx_task_dir(state, task);
    char *view = NULL;
    sbx_error_t *err = NULL;

    assert_true(asprintf(&view, "%s/" SBX_VIEW_NAME, tdir) > 0);
    assert_int_equal(sbx_mkdirs(view, 0700, &err), 0);
    assert_int_equal(mount("tmpfs", view, "tmpfs", 0, "size=64k"), 0);
    if (rec_state != NULL) {
        char *text = NULL;

        assert_true(asprintf(&text, "{\"state\": \"%s\", \"owner\": \"%s\"}\n", rec_state, owner) >
                    0);
        free(test_write_file(tdir, "task.json", text));
        free(text);
    }
    free(tdir);
    return view;
}

static void test_sweep(void **st)
{
    char self[160];
    char gone[200];
    char boot[64] = "";
    char *live;
    char *dead;
    char *ended;
    char *norec;
    char *garbled;
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");

    (void)st;
    assert_non_null(f);
    assert_non_null(fgets(boot, sizeof(boot), f));
    fclose(f);
    boot[strcspn(boot, "\n")] = '\0';
    sbx_owner_self(self, sizeof(self));
    /* our pid with another start time: a process that is gone */
    snprintf(gone, sizeof(gone), "boot=%s;pid=%d;start=1", boot, (int)getpid());
    live = view_of("live", "running", self);
    dead = view_of("dead", "running", gone);
    ended = view_of("ended", "ended", self);
    norec = view_of("norec", NULL, NULL);
    garbled = view_of("garbled", NULL, NULL);
    {
        char *tdir = sbx_task_dir(state, "garbled");

        free(test_write_file(tdir, "task.json", "{not json"));
        free(tdir);
    }
    assert_int_equal(sbx_view_mounted(dead), 1);
    assert_int_equal(sbx_view_sweep(state), 3);
    assert_int_equal(sbx_view_mounted(live), 1);
    assert_int_equal(sbx_view_mounted(garbled), 1); /* unreadable: never touched */
    assert_int_equal(sbx_view_mounted(dead), 0);
    assert_int_equal(sbx_view_mounted(ended), 0);
    assert_int_equal(sbx_view_mounted(norec), 0);
    assert_int_equal(access(dead, F_OK), -1); /* the empty view directory went too */
    assert_int_equal(sbx_view_sweep(state), 0);
    /* the owner is gone now: the record says so */
    {
        char *tdir = sbx_task_dir(state, "live");
        char *text = NULL;

        assert_true(asprintf(&text, "{\"state\": \"running\", \"owner\": \"%s\"}\n", gone) > 0);
        free(test_write_file(tdir, "task.json", text));
        free(text);
        /* ... until a new owner re-adopts the task */
        assert_int_equal(sbx_task_record_reown(tdir), 0);
        assert_int_equal(sbx_view_sweep(state), 0);
        assert_int_equal(sbx_view_mounted(live), 1);
        free(tdir);
    }
    /* removing a task directory unmounts its view first */
    sbx_task_dir_remove(state, "live");
    assert_int_equal(sbx_view_mounted(live), 0);
    {
        char *tdir = sbx_task_dir(state, "garbled");

        sbx_view_release(tdir);
        assert_int_equal(sbx_view_mounted(garbled), 0);
        free(tdir);
    }
    free(live);
    free(dead);
    free(ended);
    free(norec);
    free(garbled);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worktree_check),
        cmocka_unit_test(test_sweep),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
