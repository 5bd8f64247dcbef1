/* test_config_search.c - which configuration file sbx_config_load() reads
 * (docs/configuration.md, "Which file is used"): --config, $SBX_CONFIG,
 * ./sbx.conf, $XDG_CONFIG_HOME/sbx/sbx.conf (~/.config/sbx/sbx.conf when the
 * variable is unset, empty or relative), /etc/sbx/sbx.conf, the defaults. */
#include "test_common.h"

#include <sys/stat.h>

#include "config/config.h"

static char *dir;
static char *cwd;
static char old_cwd[4096];

static void mkdir_p(const char *path)
{
    char *cmd = NULL;

    assert_true(asprintf(&cmd, "mkdir -p '%s'", path) > 0);
    assert_int_equal(system(cmd), 0);
    free(cmd);
}

/* DIR/REL/sbx.conf with image = IMAGE; returns its path (caller frees). */
static char *conf_in(const char *rel, const char *image)
{
    char *d = NULL, *text = NULL, *path;

    assert_true(asprintf(&d, "%s/%s", dir, rel) > 0);
    mkdir_p(d);
    assert_true(asprintf(&text, "image = \"%s\";\n", image) > 0);
    path = test_write_file(d, "sbx.conf", text);
    free(d);
    free(text);
    return path;
}

static int setup(void **state)
{
    (void)state;
    dir = test_mkdtemp();
    assert_non_null(getcwd(old_cwd, sizeof(old_cwd)));
    assert_true(asprintf(&cwd, "%s/cwd", dir) > 0);
    mkdir_p(cwd);
    assert_int_equal(chdir(cwd), 0);
    unsetenv("SBX_CONFIG");
    unsetenv("XDG_CONFIG_HOME");
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    assert_int_equal(chdir(old_cwd), 0);
    test_rm_rf(dir);
    free(dir);
    free(cwd);
    return 0;
}

/* Loads with no --config and checks which image (file) won. */
static void expect(const char *image, const char *path)
{
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load(NULL, &err);

    if (c == NULL) {
        fail_msg("load: %s", sbx_error_msg(err));
    }
    assert_string_equal(c->image, image);
    if (path == NULL) {
        assert_null(c->path);
    }
    else {
        assert_string_equal(c->path, path);
    }
    sbx_config_destroy(c);
}

/* Neither ours: /etc/sbx/sbx.conf if the machine has one, else the defaults. */
static void expect_fallback(void)
{
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load(NULL, &err);

    if (c == NULL) {
        fail_msg("load: %s", sbx_error_msg(err));
    }
    if (access(SBX_SYSTEM_CONFIG, F_OK) == 0) {
        assert_string_equal(c->path, SBX_SYSTEM_CONFIG);
    }
    else {
        assert_null(c->path);
    }
    sbx_config_destroy(c);
}

static void test_config_search_order(void **state)
{
    char *xdg = NULL, *home = NULL;
    char *x, *h, *local, *env;
    sbx_error_t *err = NULL;
    struct sbx_config *c;

    (void)state;
    assert_true(asprintf(&xdg, "%s/xdg", dir) > 0);
    assert_true(asprintf(&home, "%s/home", dir) > 0);
    x = conf_in("xdg/sbx", "from-xdg");
    h = conf_in("home/.config/sbx", "from-home");

    /* $XDG_CONFIG_HOME/sbx/sbx.conf */
    setenv("XDG_CONFIG_HOME", xdg, 1);
    setenv("HOME", home, 1);
    expect("from-xdg", x);
    /* unset, empty or relative: ~/.config/sbx/sbx.conf */
    unsetenv("XDG_CONFIG_HOME");
    expect("from-home", h);
    setenv("XDG_CONFIG_HOME", "", 1);
    expect("from-home", h);
    setenv("XDG_CONFIG_HOME", "xdg", 1);
    expect("from-home", h);
    /* set, but no file there: not ~/.config, on to /etc (or the defaults) */
    setenv("XDG_CONFIG_HOME", dir, 1);
    expect_fallback();
    /* no HOME either */
    unsetenv("XDG_CONFIG_HOME");
    setenv("HOME", cwd, 1);
    expect_fallback();

    /* ./sbx.conf comes before the user's; $SBX_CONFIG before both */
    setenv("XDG_CONFIG_HOME", xdg, 1);
    local = test_write_file(cwd, "sbx.conf", "image = \"from-cwd\";\n");
    expect("from-cwd", "sbx.conf");
    env = conf_in("env", "from-env");
    setenv("SBX_CONFIG", env, 1);
    expect("from-env", env);
    unsetenv("SBX_CONFIG");
    assert_int_equal(unlink(local), 0);

    /* a bad user file is an error naming it and the line, not skipped */
    free(test_write_file(xdg, "sbx/sbx.conf", "image = \"x\";\nlimits = { colour = 1; };\n"));
    c = sbx_config_load(NULL, &err);
    assert_null(c);
    if (strstr(sbx_error_msg(err), x) == NULL || strstr(sbx_error_msg(err), ":2:") == NULL) {
        fail_msg("got '%s'", sbx_error_msg(err));
    }
    sbx_error_free(&err);

    unsetenv("XDG_CONFIG_HOME");
    free(xdg);
    free(home);
    free(x);
    free(h);
    free(local);
    free(env);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_search_order),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
