/* test_tarx.c - the tar streams of a task's files (sandbox/tarx.c): what a sandbox
 * sends is hostile, so its extraction on the host must stay below the destination,
 * never follow a symlink, never write through one, and never make a device. */
#include "test_common.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "sandbox/tarx.h"
#include "util/xalloc.h"

/* A small file's content (malloc'd), or NULL. */
static char *test_read_file(const char *path)
{
    FILE *f = fopen(path, "r");
    char buf[4096];
    size_t n;

    if (f == NULL) {
        return NULL;
    }
    n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return xstrdup(buf);
}

static char *dir;  /* the destination */
static char *host; /* a host directory outside it, standing for host files */

static int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    host = test_mkdtemp();
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    test_rm_rf(host);
    free(dir);
    free(host);
    return 0;
}

/* Extracts b into dir (top: the new first component, or NULL); the extractor's error
 * in err ("" when none); returns sbx_tar_extract_fini's result, -1 if the feed failed. */
static int extract(struct sbx_tar_buf *b, const char *top, char *err, size_t len)
{
    struct sbx_tar_extract x;
    int fd = open(dir, O_RDONLY | O_DIRECTORY);
    int rc;

    assert_true(fd >= 0);
    sbx_tar_extract_init(&x, fd, top);
    rc = sbx_tar_extract_feed(&x, b->data, b->len);
    if (sbx_tar_extract_fini(&x) < 0) {
        rc = -1;
    }
    snprintf(err, len, "%s", x.rd.err);
    close(fd);
    return rc;
}

static char *path_in(const char *d, const char *name)
{
    return xasprintf("%s/%s", d, name);
}

static void test_roundtrip_long_names_and_top(void **state)
{
    struct sbx_tar_buf b = {0};
    char err[600];
    char longname[300];
    char *p;
    char *got;

    (void)state;
    memset(longname, 'n', 250);
    longname[250] = '\0';
    assert_int_equal(sbx_tar_add(&b, "src", '5', 0755, 1, NULL, NULL, 0), 0);
    p = xasprintf("src/%s", longname);
    assert_int_equal(sbx_tar_add(&b, p, '0', 0644, 1000, NULL, "hello", 5), 0);
    free(p);
    assert_int_equal(sbx_tar_add(&b, "src/l", '2', 0777, 1, "some/where/else", NULL, 0), 0);
    sbx_tar_finish(&b);
    assert_int_equal(extract(&b, "dst", err, sizeof(err)), 0);
    p = xasprintf("%s/dst/%s", dir, longname);
    got = test_read_file(p);
    assert_string_equal(got, "hello");
    free(got);
    free(p);
    p = xasprintf("%s/dst/l", dir);
    {
        char link[64] = "";

        assert_true(readlink(p, link, sizeof(link) - 1) > 0);
        assert_string_equal(link, "some/where/else");
    }
    free(p);
    free(b.data);
}

static void test_dotdot_refused(void **state)
{
    struct sbx_tar_buf b = {0};
    char err[600];
    char *outside = path_in(dir, "../escaped");

    (void)state;
    assert_int_equal(sbx_tar_add(&b, "a/../../escaped", '0', 0644, 1, NULL, "x", 1), 0);
    sbx_tar_finish(&b);
    assert_int_equal(extract(&b, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "'..'"));
    assert_int_equal(access(outside, F_OK), -1);
    free(outside);
    free(b.data);
}

static void test_absolute_names_stay_inside(void **state)
{
    struct sbx_tar_buf b = {0};
    char err[600];
    char *in = path_in(dir, "etc-hostname-copy");
    char *got;

    (void)state;
    /* "/etc-hostname-copy" is dir/etc-hostname-copy, never the host's root */
    assert_int_equal(sbx_tar_add(&b, "/etc-hostname-copy", '0', 0644, 1, NULL, "x", 1), 0);
    sbx_tar_finish(&b);
    assert_int_equal(extract(&b, NULL, err, sizeof(err)), 0);
    got = test_read_file(in);
    assert_string_equal(got, "x");
    free(got);
    free(in);
    free(b.data);
}

static void test_no_write_through_symlinked_dir(void **state)
{
    struct sbx_tar_buf b = {0};
    char err[600];
    char *pwn = path_in(host, "pwn");

    (void)state;
    /* the sandbox plants l -> HOST, then sends l/pwn */
    assert_int_equal(sbx_tar_add(&b, "l", '2', 0777, 1, host, NULL, 0), 0);
    assert_int_equal(sbx_tar_add(&b, "l/pwn", '0', 0644, 1, NULL, "owned", 5), 0);
    sbx_tar_finish(&b);
    assert_int_equal(extract(&b, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "symlink"));
    assert_int_equal(access(pwn, F_OK), -1);
    free(pwn);
    free(b.data);
}

static void test_no_write_through_symlinked_file(void **state)
{
    struct sbx_tar_buf b = {0};
    char err[600];
    char *victim = path_in(host, "victim");
    char *f = path_in(dir, "f");
    struct stat st;
    char *got;

    (void)state;
    free(test_write_file(host, "victim", "host data"));
    assert_int_equal(sbx_tar_add(&b, "f", '2', 0777, 1, victim, NULL, 0), 0);
    assert_int_equal(sbx_tar_add(&b, "f", '0', 0644, 1, NULL, "sandbox", 7), 0);
    sbx_tar_finish(&b);
    assert_int_equal(extract(&b, NULL, err, sizeof(err)), 0);
    got = test_read_file(victim);
    assert_string_equal(got, "host data"); /* untouched: the link was replaced */
    free(got);
    assert_int_equal(lstat(f, &st), 0);
    assert_true(S_ISREG(st.st_mode));
    free(f);
    free(victim);
    free(b.data);
}

static void test_hard_link_out_refused(void **state)
{
    struct sbx_tar_buf b = {0};
    char err[600];

    (void)state;
    assert_int_equal(sbx_tar_add(&b, "h", '1', 0644, 1, "../../etc/passwd", NULL, 0), 0);
    sbx_tar_finish(&b);
    assert_int_equal(extract(&b, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "hard link"));
    free(b.data);
}

static void test_devices_skipped_setid_dropped(void **state)
{
    struct sbx_tar_buf b = {0};
    struct sbx_tar_extract x;
    struct stat st;
    char *dev = path_in(dir, "sda");
    char *suid = path_in(dir, "suid");
    int fd = open(dir, O_RDONLY | O_DIRECTORY);

    (void)state;
    assert_int_equal(sbx_tar_add(&b, "sda", '4', 0666, 1, NULL, NULL, 0), 0);
    assert_int_equal(sbx_tar_add(&b, "fifo", '6', 0666, 1, NULL, NULL, 0), 0);
    assert_int_equal(sbx_tar_add(&b, "suid", '0', 04755, 1, NULL, "x", 1), 0);
    sbx_tar_finish(&b);
    sbx_tar_extract_init(&x, fd, NULL);
    assert_int_equal(sbx_tar_extract_feed(&x, b.data, b.len), 0);
    assert_int_equal(sbx_tar_extract_fini(&x), 0);
    assert_int_equal(x.skipped, 2);
    assert_int_equal(lstat(dev, &st), -1);
    assert_int_equal(lstat(suid, &st), 0);
    assert_int_equal(st.st_mode & 07000, 0);
    close(fd);
    free(dev);
    free(suid);
    free(b.data);
}

static void test_malformed_streams(void **state)
{
    struct sbx_tar_buf b = {0};
    char err[600];

    (void)state;
    assert_int_equal(sbx_tar_add(&b, "f", '0', 0644, 1, NULL, "0123456789", 10), 0);
    sbx_tar_finish(&b);
    /* cut in the middle of the content */
    b.len = 512 + 5;
    assert_int_equal(extract(&b, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "ended early"));
    /* a header whose checksum does not match */
    b.len = 512 + 512 + 1024;
    b.data[0] ^= 1;
    assert_int_equal(extract(&b, NULL, err, sizeof(err)), -1);
    assert_non_null(strstr(err, "malformed"));
    free(b.data);
}

static void test_one_file(void **state)
{
    char *tar = NULL;
    size_t len = 0;
    struct sbx_tar_buf b;
    char err[600];
    char *p = path_in(dir, "note.txt");
    char *got;

    (void)state;
    assert_int_equal(sbx_tar_one_file("a/b", "x", 1, 0644, 1, &tar, &len), -1);
    assert_int_equal(sbx_tar_one_file("note.txt", "text", 4, 0644, 1, &tar, &len), 0);
    b.data = tar;
    b.len = len;
    assert_int_equal(extract(&b, NULL, err, sizeof(err)), 0);
    got = test_read_file(p);
    assert_string_equal(got, "text");
    free(got);
    free(p);
    free(tar);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_roundtrip_long_names_and_top, setup, teardown),
        cmocka_unit_test_setup_teardown(test_dotdot_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_absolute_names_stay_inside, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_write_through_symlinked_dir, setup, teardown),
        cmocka_unit_test_setup_teardown(test_no_write_through_symlinked_file, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hard_link_out_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_devices_skipped_setid_dropped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_streams, setup, teardown),
        cmocka_unit_test_setup_teardown(test_one_file, setup, teardown),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
