/* test_docker_worktree.c - which way the Docker provider mounts a worktree
 * (plugins/provider_docker/docker_worktree.c), with the probes fed fake files:
 * worktree_idmap = required refuses the task with one line naming why (sbx
 * without CAP_SYS_ADMIN, no range for the remap user, a range the engine
 * disagrees with, no user remapping); auto falls back to a plain bind mount
 * with one warning line saying why and how to fix it; off never warns; and
 * when everything allows it the view is mounted and bound instead. Needs root
 * for the real mount (the suite runs as root). */
#include "test_common.h"

#include <stdarg.h>
#include <sys/stat.h>

#include "docker.h"
#include "plugin/host.h"
#include "sandbox/view.h"

static char *dir;
static struct sbx_host_api host;
static const char *opt_mode;
static const char *opt_user;
static char logged[4][1024];
static int n_logged;

static const char *fake_opt_string(const struct sbx_options *o, const char *key)
{
    (void)o;
    if (strcmp(key, "worktree_idmap") == 0) {
        return opt_mode;
    }
    return strcmp(key, "userns_remap_user") == 0 ? opt_user : NULL;
}

static const char *fake_opt_where(const struct sbx_options *o, const char *key)
{
    (void)o;
    (void)key;
    return "sbx.conf:7";
}

static const char *fake_instance_name(const struct sbx_options *o)
{
    (void)o;
    return "docker";
}

static void fake_log(const char *instance, enum sbx_log_level level, const char *fmt, ...)
{
    va_list ap;

    (void)instance;
    (void)level;
    assert_true(n_logged < 4);
    va_start(ap, fmt);
    vsnprintf(logged[n_logged++], sizeof(logged[0]), fmt, ap);
    va_end(ap);
}

static int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    host = *sbx_host_api_get();
    host.opt_string = fake_opt_string;
    host.opt_where = fake_opt_where;
    host.instance_name = fake_instance_name;
    host.log = fake_log;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    test_rm_rf(dir);
    free(dir);
    return 0;
}

/* (added) The image's remote user (docker_poststart.c reads it from the
 * engine): none here, the worktree's owner is the sandbox's root. */
void dk_remote_ids(struct dk_ctx *c, const char *image, const char *container, unsigned *uid,
                   unsigned *gid)
{
    (void)c;
    (void)image;
    (void)container;
    *uid = 0;
    *gid = 0;
}

/* A context as init leaves it, for mode and user, probed with fake files. */
static void ctx_for(struct dk_ctx *c, const char *mode, const char *user, const char *subid,
                    const char *capeff, unsigned remap)
{
    char *subuid = test_write_file(dir, "subuid", subid);
    char *status = NULL;
    char *text = NULL;
    struct dk_probe_files f;
    sbx_error_t *err = NULL;

    assert_true(asprintf(&text, "Name:\tsbx\nCapEff:\t%s\n", capeff) > 0);
    status = test_write_file(dir, "status", text);
    memset(c, 0, sizeof(*c));
    c->host = &host;
    c->userns = remap != 0;
    c->remap_uid = remap;
    c->remap_gid = remap;
    c->socket = "/nonexistent/docker.sock"; /* the mount namespace check cannot tell */
    opt_mode = mode;
    opt_user = user;
    n_logged = 0;
    assert_int_equal(dk_worktree_init(c, &err), 0);
    f.subuid = subuid;
    f.subgid = subuid;
    f.status = status;
    assert_int_equal(dk_worktree_probe(c, user, &f), 0);
    free(subuid);
    free(status);
    free(text);
}

/* dk_worktree_source for a worktree of uid 1000: 0 or -1 with *msg. */
static int source(struct dk_ctx *c, const char **src, int *viewed, char **msg)
{
    char *wt = NULL;
    char *view = NULL;
    struct sbx_sandbox_spec s = {0};
    sbx_error_t *err = NULL;
    int r;

    assert_true(asprintf(&wt, "%s/wt", dir) > 0);
    assert_true(asprintf(&view, "%s/view", dir) > 0);
    mkdir(wt, 0755);
    assert_int_equal(chown(wt, 1000, 1000), 0);
    mkdir(view, 0700);
    s.task_id = "t1";
    s.worktree = wt;
    s.view_dir = view;
    r = dk_worktree_source(c, &s, src, viewed, &err);
    *msg = NULL;
    if (r < 0) {
        assert_non_null(err);
        assert_null(strchr(err->msg, '\n'));
        *msg = strdup(err->msg);
        sbx_error_free(&err);
    }
    else if (*viewed) {
        struct stat st;

        assert_string_equal(*src, view);
        assert_int_equal(stat(view, &st), 0);
        assert_int_equal(st.st_uid, 100000); /* the owner is the sandbox's root */
        dk_worktree_release(view);
        assert_int_equal(sbx_view_mounted(view), 0);
    }
    else {
        assert_string_equal(*src, wt);
    }
    free(wt);
    free(view);
    return r;
}

#define RANGE "dockremap:100000:65536\n"
#define ALLCAPS "000001ffffffffff"
#define NOADMIN "00000000a80425fb" /* a container's default set: no CAP_SYS_ADMIN */

static void test_required_refuses(void **state)
{
    struct dk_ctx c;
    const char *src;
    int viewed = 0;
    char *msg = NULL;
    char buf[256];

    (void)state;
    /* the capability probe fails */
    ctx_for(&c, "required", "dockremap", RANGE, NOADMIN, 100000);
    assert_int_equal(source(&c, &src, &viewed, &msg), -1);
    assert_non_null(strstr(msg, "worktree_idmap = required, but no idmapped mount: sbx lacks "
                                "CAP_SYS_ADMIN"));
    free(msg);
    dk_worktree_describe(&c, buf, sizeof(buf));
    assert_non_null(strstr(buf, "REFUSED: sbx lacks CAP_SYS_ADMIN"));
    /* no range for the user */
    ctx_for(&c, "required", "someone", RANGE, ALLCAPS, 100000);
    assert_int_equal(source(&c, &src, &viewed, &msg), -1);
    assert_non_null(strstr(msg, "no range for 'someone' in "));
    free(msg);
    /* a range the engine disagrees with (a fake uid map) */
    ctx_for(&c, "required", "dockremap", "dockremap:300000:65536\n", ALLCAPS, 100000);
    assert_int_equal(source(&c, &src, &viewed, &msg), -1);
    assert_non_null(strstr(msg, "'dockremap' starts at 300000:300000"));
    assert_non_null(strstr(msg, "but the engine's root is host 100000:100000"));
    free(msg);
    /* no user remapping at all */
    ctx_for(&c, "required", "dockremap", RANGE, ALLCAPS, 0);
    assert_int_equal(source(&c, &src, &viewed, &msg), -1);
    assert_non_null(strstr(msg, "the engine does not remap users"));
    free(msg);
    assert_int_equal(n_logged, 0);
}

static void test_auto_warns_once(void **state)
{
    struct dk_ctx c;
    const char *src;
    int viewed = 1;
    char *msg = NULL;
    char buf[256];

    (void)state;
    ctx_for(&c, "auto", "dockremap", RANGE, NOADMIN, 100000);
    assert_int_equal(source(&c, &src, &viewed, &msg), 0);
    assert_int_equal(viewed, 0);
    assert_int_equal(n_logged, 1);
    assert_non_null(strstr(logged[0], "plain bind mount, its files show as nobody inside"));
    assert_non_null(strstr(logged[0], "no idmapped mount (sbx lacks CAP_SYS_ADMIN"));
    assert_non_null(strstr(logged[0], "fix: run sbx as root, or set worktree_idmap = \"off\""));
    assert_null(strchr(logged[0], '\n'));
    dk_worktree_describe(&c, buf, sizeof(buf));
    assert_non_null(strstr(buf, "plain bind mount, files show as nobody: sbx lacks"));
    /* without remapping root is host root: a plain bind, nothing to warn about */
    ctx_for(&c, "auto", "dockremap", RANGE, ALLCAPS, 0);
    assert_int_equal(source(&c, &src, &viewed, &msg), 0);
    assert_int_equal(viewed, 0);
    assert_int_equal(n_logged, 0);
    /* off: never a view, never a warning */
    ctx_for(&c, "off", "dockremap", RANGE, NOADMIN, 100000);
    assert_int_equal(source(&c, &src, &viewed, &msg), 0);
    assert_int_equal(viewed, 0);
    assert_int_equal(n_logged, 0);
    dk_worktree_describe(&c, buf, sizeof(buf));
    assert_string_equal(buf, "plain bind mount (worktree_idmap = off)");
}

static void test_idmapped_when_possible(void **state)
{
    struct dk_ctx c;
    const char *src;
    int viewed = 0;
    char *msg = NULL;
    char buf[256];
    sbx_error_t *err = NULL;

    (void)state;
    ctx_for(&c, "required", "dockremap", RANGE, ALLCAPS, 100000);
    assert_int_equal(source(&c, &src, &viewed, &msg), 0);
    assert_int_equal(viewed, 1);
    assert_int_equal(n_logged, 0);
    dk_worktree_describe(&c, buf, sizeof(buf));
    assert_string_equal(buf, "idmapped: its owner is root inside (host 100000:100000) (required)");
    /* bad option values are FILE:LINE errors */
    opt_mode = "sometimes";
    assert_int_equal(dk_worktree_init(&c, &err), -1);
    assert_string_equal(err->msg, "sbx.conf:7: worktree_idmap 'sometimes': use auto, required or "
                                  "off");
    sbx_error_free(&err);
    opt_mode = "auto";
    opt_user = "a:b";
    assert_int_equal(dk_worktree_init(&c, &err), -1);
    assert_non_null(strstr(err->msg, "sbx.conf:7: userns_remap_user 'a:b': a user name"));
    sbx_error_free(&err);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_required_refuses),
        cmocka_unit_test(test_auto_warns_once),
        cmocka_unit_test(test_idmapped_when_possible),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
