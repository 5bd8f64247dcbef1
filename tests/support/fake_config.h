/* fake_config.h - a configuration of the fake provider of tests/plugin_abi
 * (provider_good) for unit tests that start tasks or runners in process.
 * Include after test_common.h. */
#ifndef SBX_TEST_FAKE_CONFIG_H
#define SBX_TEST_FAKE_CONFIG_H

#include "config/config.h"
#include "util/xalloc.h"

#define TEST_FAKE_PROVIDER                                                                         \
    "provider = \"fake\";\nproviders = { fake = { plugin = \"provider_good\"; }; };\n"

/* Writes DIR/NAME: state in STATE, the fake provider, then EXTRA (may be
 * NULL). Returns the path (caller frees). */
static inline char *test_fake_conf_file(const char *dir, const char *name, const char *state,
                                        const char *extra)
{
    char *text =
        xasprintf("state_dir = \"%s\";\n" TEST_FAKE_PROVIDER "%s", state, extra ? extra : "");
    char *path = test_write_file(dir, name, text);

    free(text);
    return path;
}

/* Loads DIR/sbx.conf as test_fake_conf_file writes it; fails the test on error. */
static inline struct sbx_config *test_fake_config(const char *dir, const char *extra)
{
    char *state = xasprintf("%s/state", dir);
    char *path = test_fake_conf_file(dir, "sbx.conf", state, extra);
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);

    free(path);
    free(state);
    if (c == NULL) {
        fail_msg("config: %s", err->msg);
    }
    return c;
}

/* A cmocka group fixture: test_fake_dir and test_fake_cfg for the group.
 * Needs SBX_TEST_PLUGINS (ctest sets it). */
__attribute__((unused)) static char *test_fake_dir;
__attribute__((unused)) static struct sbx_config *test_fake_cfg;

static inline int test_fake_setup(void **state)
{
    (void)state;
    if (getenv("SBX_TEST_PLUGINS") == NULL) {
        fprintf(stderr, "needs SBX_TEST_PLUGINS (run under ctest)\n");
        return -1;
    }
    test_fake_dir = test_mkdtemp();
    test_fake_cfg = test_fake_config(test_fake_dir, NULL);
    return 0;
}

static inline int test_fake_teardown(void **state)
{
    (void)state;
    sbx_config_destroy(test_fake_cfg);
    test_rm_rf(test_fake_dir);
    free(test_fake_dir);
    return 0;
}

/* A client's configuration in DIR (state in DIR itself, plugins from
 * SBX_TEST_PLUGINS, small default limits), naming the runner at unix:LISTEN
 * (embedded when LISTEN is NULL). Returns the path (caller frees). */
static inline char *test_fake_client_conf(const char *dir, const char *listen)
{
    char *extra = xasprintf("plugin_dir = \"%s\";\n"
                            "limits = { cpus = 0.5; memory = \"256M\"; idle = \"1h\"; };\n%s%s%s",
                            getenv("SBX_TEST_PLUGINS"), listen ? "runner = { listen = \"unix:" : "",
                            listen ? listen : "", listen ? "\"; };\n" : "");
    char *path = test_fake_conf_file(dir, listen ? "client.conf" : "embedded.conf", dir, extra);

    free(extra);
    return path;
}

#endif
