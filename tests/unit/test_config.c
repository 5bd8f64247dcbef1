/* test_config.c - configuration files, good and bad; every error names FILE:LINE. */
#include "test_common.h"

#include "config/config.h"
#include "plugin/instance.h"

#define dir test_dir

/* Loads TEXT; expects failure with "FILE:LINE: " + a fragment. */
static void expect_error(const char *text, int line, const char *fragment)
{
    char *path = test_write_file(dir, "bad.conf", text);
    char *prefix = NULL;
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);

    assert_null(c);
    assert_non_null(err);
    assert_int_equal(err->code, SBX_E_CONFIG);
    assert_true(asprintf(&prefix, "%s:%d: ", path, line) > 0);
    if (strncmp(err->msg, prefix, strlen(prefix)) != 0 || strstr(err->msg, fragment) == NULL) {
        fail_msg("got '%s', wanted prefix '%s' and '%s'", err->msg, prefix, fragment);
    }
    free(prefix);
    free(path);
    sbx_error_free(&err);
}

static void test_config_defaults(void **state)
{
    struct sbx_config *c = sbx_config_defaults();

    (void)state;
    assert_true(c->limits.cpus == 2.0);
    assert_int_equal(c->limits.memory, 8589934592LL);
    assert_int_equal(c->limits.disk, 40LL << 30);
    assert_int_equal(c->limits.pids, 4096);
    assert_int_equal(c->limits.idle, 3600);
    assert_int_equal(c->limits.max, 8 * 3600);
    assert_string_equal(c->provider, "docker");
    assert_string_equal(c->image, "sbx-sandbox:current");
    assert_int_equal(c->box.max_sandboxes, 6);
    assert_int_equal(c->n_instances, 7);
    assert_false(sbx_config_instance(c, "host", SBX_PLUGIN_PROVIDER)->unisolated);
    assert_non_null(sbx_config_instance(c, "docker", SBX_PLUGIN_PROVIDER));
    assert_non_null(sbx_config_instance(c, "agentvault", SBX_PLUGIN_CREDENTIAL));
    assert_null(sbx_config_instance(c, "docker", SBX_PLUGIN_CREDENTIAL));
    assert_true(c->runner.spend_day_cap == 150.0);
    assert_int_equal(c->runner.alert_after, 600);
    sbx_config_destroy(c);
}

static void test_config_good_file(void **state)
{
    static const char text[] =
        "provider = \"ci-docker\";\n"
        "limits = { cpus = 1.5; memory = \"4G\"; disk = \"20G\"; pids = 512;\n"
        "           idle = \"30m\"; max = \"2h\"; };\n"
        "caches = ( { host = \"/var/cache/pnpm\"; path = \"/pnpm-store\"; } );\n"
        "providers = {\n"
        "  ci-docker = { plugin = \"provider_docker\"; };\n"
        "  agent-docker = { plugin = \"provider_docker\"; unisolated = true; };\n"
        "};\n"
        "box = { pools = [\"ci\"]; max_sandboxes = 4; heavy_min_memory = \"16G\"; };\n"
        "runner = { listen = \"unix:/run/sbx.sock\"; alert_after = \"5m\"; box_hour_price = 0.8;"
        " };\n"
        "egress = { log = \"/var/log/sbx/egress.jsonl\"; registries = [\"registry.test\"]; };\n"
        "spike = { warm_start = \"5s\"; concurrent = 3; testcontainers_image = \"tc:1\";\n"
        "          egress_allowed_url = \"http://a.test:1/\"; egress_denied_url = "
        "\"http://d.test/\"; };\n";
    char *path = test_write_file(dir, "good.conf", text);
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);

    (void)state;
    if (c == NULL) {
        fail_msg("%s", err->msg);
    }
    assert_true(c->limits.cpus == 1.5);
    assert_int_equal(c->limits.memory, 4LL << 30);
    assert_int_equal(c->limits.pids, 512);
    assert_int_equal(c->limits.idle, 1800);
    assert_int_equal(c->limits.max, 7200);
    assert_int_equal(c->n_caches, 1);
    assert_string_equal(c->caches[0].path, "/pnpm-store");
    assert_true(c->caches[0].read_only);
    assert_int_equal(c->n_instances, 9);
    assert_true(sbx_config_instance(c, "agent-docker", SBX_PLUGIN_PROVIDER)->unisolated);
    assert_false(sbx_config_instance(c, "ci-docker", SBX_PLUGIN_PROVIDER)->unisolated);
    assert_string_equal(sbx_config_instance(c, "agent-docker", SBX_PLUGIN_PROVIDER)->plugin,
                        "provider_docker");
    assert_string_equal(c->box.pools[0], "ci");
    assert_null(c->box.pools[1]);
    assert_int_equal(c->box.heavy_min_memory, 16LL << 30);
    assert_int_equal(c->runner.alert_after, 300);
    assert_true(c->runner.box_hour_price == 0.8);
    assert_string_equal(c->egress.registries[0], "registry.test");
    assert_true(c->spike.warm_start == 5.0);
    assert_int_equal(c->spike.concurrent, 3);
    assert_string_equal(c->spike.testcontainers_image, "tc:1");
    assert_string_equal(c->spike.egress_allowed_url, "http://a.test:1/");
    assert_string_equal(c->spike.egress_denied_url, "http://d.test/");
    sbx_config_destroy(c);
    free(path);
}

static void test_config_unknown_key(void **state)
{
    (void)state;
    expect_error("image = \"x\";\n\nfrobnicate = 1;\n", 3, "unknown key 'frobnicate'");
    expect_error("limits = {\n  cpus = 2.0;\n  memroy = \"8G\";\n};\n", 3,
                 "unknown key 'memroy' in 'limits'");
}

static void test_config_wrong_type(void **state)
{
    (void)state;
    expect_error("plugin_dir = 5;\n", 1, "'plugin_dir' must be a string");
    expect_error("\nlimits = { pids = \"many\"; };\n", 2, "'pids' must be an integer");
    expect_error("box = { pools = [1, 2]; };\n", 1, "element 0 must be a string");
    expect_error("limits = 3;\n", 1, "must be a group");
}

static void test_config_bad_units(void **state)
{
    (void)state;
    expect_error("limits = {\n memory = \"8X\";\n};\n", 2, "bad size '8X'");
    expect_error("limits = {\n idle = \"soon\";\n};\n", 2, "bad duration");
    expect_error("limits = { cpus = \"lots\"; };\n", 1, "bad CPU count");
    expect_error("limits = { cpus = 0; };\n", 1, "CPU count above 0");
    expect_error("limits = { pids = 0; };\n", 1, "greater than 0");
    expect_error("limits = {\n idle = \"0s\";\n};\n", 2, "'limits.idle' must be greater than 0");
    expect_error("limits = {\n disk = \"0G\";\n};\n", 2, "'limits.disk' must be greater than 0");
    expect_error("limits = {\n cpus = 1.0;\n memory = \"1M\";\n};\n", 3, "at least 6M");
    /* (added) the warm pool's keys (docs/runner.md, Warm pool) */
    expect_error("pools = {\n ci = { warm = -2; };\n};\n", 2, "'pools.ci.warm' must be 0 or more");
    expect_error("pools = {\n agent = {\n warm = 1;\n warm_max_age = \"0s\"; };\n};\n", 4,
                 "'pools.agent.warm_max_age' must be greater than 0");
    expect_error("pools = { ci = { warm = \"many\"; }; };\n", 1, "'warm' must be an integer");
    /* (added) this round's keys: the database's deadline, egress shares, snapshots */
    expect_error("runner = {\n database_timeout = \"0s\";\n};\n", 2,
                 "'runner.database_timeout' must be greater than 0");
    expect_error("runner = {\n database_keepalive = \"soon\";\n};\n", 2, "bad duration 'soon'");
    expect_error("egress = {\n bandwidth = \"5Q\";\n};\n", 2, "bad size '5Q'");
    expect_error("snapshot = {\n quota = -1;\n};\n", 2, "'snapshot.quota' must be 0 to 10000");
    expect_error("snapshot = {\n max_age = \"x\";\n};\n", 2, "bad duration 'x'");
}

static void test_config_syntax_error(void **state)
{
    (void)state;
    expect_error("a = 1;\nb = ;\n", 2, "syntax error");
}

static void test_config_instances(void **state)
{
    (void)state;
    expect_error("providers = {\n  x = { image = \"y\"; };\n};\n", 2, "has no 'plugin' key");
    expect_error(
        "providers = {\n  x = { plugin = \"provider_host\";\n  unisolated = \"yes\"; };\n};\n", 3,
        "providers instance 'x': 'unisolated' must be true or false");
    expect_error("providers = {\n  x = { plugin = \"cred_infisical\"; };\n};\n", 2,
                 "is not a provider plugin");
    expect_error("providers = {\n  x = 5;\n};\n", 2, "must be a group");
    expect_error("provider = \"nope\";\n", 1, "not a configured provider instance");
}

static void test_config_pools(void **state)
{
    (void)state;
    expect_error("box = { pools = [\"ci\", \"gpu\"]; };\n", 1, "may hold only");
    expect_error("pools = {\n  gpu = { cpus = 2.0; };\n};\n", 2, "unknown pool 'gpu'");
    /* (added) a pool's own protected paths: the same globs, FILE:LINE of the list */
    expect_error("pools = {\n  ci = {\n worktree_protect = [\"../x\"]; };\n};\n", 3,
                 "'pools.ci.worktree_protect' '../x': a glob relative to the worktree");
    expect_error("pools = { ci = { worktree_protect = [1]; }; };\n", 1, "must be a string");
}

/* (added) pools.NAME.worktree_protect in place of worktree.protect for that pool's tasks */
static void test_config_pool_protect(void **state)
{
    char *path = test_write_file(dir, "protect.conf",
                                 "worktree = { protect = [\".vscode\", \".gitmodules\"]; };\n"
                                 "pools = { ci = { worktree_protect = [\".vscode\"]; };\n"
                                 "          agent = { warm = 0; }; };\n");
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);
    const char *const *g;

    (void)state;
    assert_non_null(c);
    g = sbx_config_protect(c, "ci");
    assert_non_null(g);
    assert_string_equal(g[0], ".vscode");
    assert_null(g[1]);
    g = sbx_config_protect(c, "agent"); /* no list of its own: worktree.protect */
    assert_non_null(g);
    assert_string_equal(g[1], ".gitmodules");
    assert_ptr_equal(sbx_config_protect(c, NULL), g);
    sbx_config_destroy(c);
    c = sbx_config_defaults();
    assert_null(sbx_config_protect(c, "ci")); /* nothing set: the default list */
    sbx_config_destroy(c);
    free(path);
}

/* (added) which image a sandbox runs: pool > provider instance > `image` >
 * the default; a bad reference names FILE:LINE and the key */
static void test_config_pool_image(void **state)
{
    char *path = test_write_file(dir, "image.conf",
                                 "image = \"top:1\";\n"
                                 "providers = { inst = { plugin = \"provider_docker\";\n"
                                 "                       image = \"inst:1\"; };\n"
                                 "              bare = { plugin = \"provider_docker\"; }; };\n"
                                 "pools = { ci = { image = \"reg.test:5000/ci@sha256:ab\"; };\n"
                                 "          agent = { warm = 0; }; };\n");
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);

    (void)state;
    assert_non_null(c);
    assert_string_equal(sbx_config_image(c, "ci", "inst"), "reg.test:5000/ci@sha256:ab");
    assert_string_equal(sbx_config_image(c, "ci", NULL), "reg.test:5000/ci@sha256:ab");
    assert_string_equal(sbx_config_image(c, "agent", "inst"), "inst:1");
    assert_string_equal(sbx_config_image(c, NULL, "inst"), "inst:1");
    assert_string_equal(sbx_config_image(c, "agent", "bare"), "top:1");
    assert_string_equal(sbx_config_image(c, "agent", NULL), "top:1"); /* provider: docker */
    sbx_config_destroy(c);
    c = sbx_config_defaults();
    assert_string_equal(sbx_config_image(c, "ci", NULL), "sbx-sandbox:current");
    sbx_config_destroy(c);
    free(path);

    expect_error("pools = {\n  ci = {\n image = \"bad ref\"; };\n};\n", 3,
                 "'pools.ci.image' 'bad ref' is not an image reference");
    expect_error("pools = { agent = { image = \"-x\"; }; };\n", 1, "'pools.agent.image'");
    expect_error("pools = { ci = { image = 3; }; };\n", 1, "must be a string");
    expect_error("providers = { d2 = { plugin = \"provider_docker\";\n image = \"a b\"; }; };\n", 2,
                 "'providers.d2.image' 'a b' is not an image reference");
    assert_true(sbx_config_image_ref_ok("sbx-sandbox:current"));
    assert_true(sbx_config_image_ref_ok("localhost:5000/a/b:t@sha256:0f"));
    assert_false(sbx_config_image_ref_ok(""));
    assert_false(sbx_config_image_ref_ok("a:"));
    assert_false(sbx_config_image_ref_ok("a\nb"));
}

static void test_config_egress(void **state)
{
    char *path = test_write_file(dir, "egress.conf",
                                 "egress = {\n  log = \"/tmp/e.log\";\n"
                                 "  header_timeout = \"2s\";\n  connect_timeout = 3;\n"
                                 "  check_sni = false;\n"
                                 "  hosts = ( { name = \"API.Test.\"; address = \"127.0.0.1\"; },\n"
                                 "            { name = \"v6.test\"; address = \"::1\"; } );\n};\n");
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);
    struct sbx_config *d = sbx_config_defaults();

    (void)state;
    assert_non_null(c);
    assert_int_equal(c->egress.header_timeout, 2);
    assert_int_equal(c->egress.connect_timeout, 3);
    assert_int_equal(c->egress.check_sni, 0);
    assert_int_equal(d->egress.check_sni, 1);
    assert_int_equal(c->egress.n_hosts, 2);
    assert_string_equal(c->egress.hosts[0].name, "api.test");
    assert_string_equal(c->egress.hosts[0].address, "127.0.0.1");
    assert_string_equal(c->egress.hosts[1].address, "::1");
    assert_int_equal(d->egress.header_timeout, SBX_DEFAULT_EGRESS_HEADER_TIMEOUT);
    assert_int_equal(d->egress.connect_timeout, SBX_DEFAULT_EGRESS_CONNECT_TIMEOUT);
    assert_int_equal(d->egress.n_hosts, 0);
    sbx_config_destroy(c);
    sbx_config_destroy(d);
    free(path);

    expect_error("egress = {\n hosts = ( { name = \"a.test\"; } );\n};\n", 2,
                 "needs 'name' and 'address'");
    expect_error("egress = {\n hosts = ( { name = \"a..test\"; address = \"1.2.3.4\"; } );\n"
                 "};\n",
                 2, "not a valid host name (host-malformed)");
    expect_error("egress = {\n hosts = ( { name = \"10.0.0.1\"; address = \"1.2.3.4\"; } );\n"
                 "};\n",
                 2, "not a valid host name (an IP literal)");
    expect_error("egress = {\n hosts = ( { name = \"a.test\"; address = \"localhost\"; } );\n"
                 "};\n",
                 2, "address 'localhost' is not an IP address");
    expect_error("egress = {\n hosts = ( { name = \"a.test\"; address = \"1.2.3.4\"; port = 1; }"
                 " );\n};\n",
                 2, "unknown key 'port'");
    expect_error("egress = {\n hosts = [ \"a.test\" ];\n};\n", 2, "must be a list of groups");
    expect_error("egress = {\n header_timeout = \"0s\";\n};\n", 2,
                 "'egress.header_timeout' must be greater than 0");
    expect_error("egress = {\n connect_timeout = \"soon\";\n};\n", 2, "bad duration");
    expect_error("egress = {\n check_sni = \"yes\";\n};\n", 2, "check_sni");
}

static void test_config_missing_file(void **state)
{
    cleanup_error sbx_error_t *err = NULL;

    (void)state;
    assert_null(sbx_config_load_file("/nonexistent/sbx.conf", &err));
    assert_non_null(strstr(err->msg, "/nonexistent/sbx.conf: cannot read"));
}

static void test_config_search_env(void **state)
{
    char *path = test_write_file(dir, "env.conf", "image = \"from-env:1\";\n");
    sbx_error_t *err = NULL;
    struct sbx_config *c;

    (void)state;
    setenv("SBX_CONFIG", path, 1);
    c = sbx_config_load(NULL, &err);
    unsetenv("SBX_CONFIG");
    assert_non_null(c);
    assert_string_equal(c->image, "from-env:1");
    sbx_config_destroy(c);
    free(path);
}

/* Plugin options: unknown keys and wrong types are FILE:LINE errors. */
static void plugin_option_error(const char *text, int line, const char *fragment)
{
    const char *plugins = getenv("SBX_TEST_PLUGINS");
    char *path = test_write_file(dir, "opts.conf", text);
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);
    struct sbx_open_instance *oi;
    char *prefix = NULL;

    if (c == NULL) {
        fail_msg("%s", err->msg);
    }
    oi = sbx_instance_load(c, plugins, "f", SBX_PLUGIN_PROVIDER, &err);
    assert_null(oi);
    assert_non_null(err);
    assert_true(asprintf(&prefix, "%s:%d: ", path, line) > 0);
    if (strstr(err->msg, prefix) == NULL || strstr(err->msg, fragment) == NULL) {
        fail_msg("got '%s', wanted '%s' and '%s'", err->msg, prefix, fragment);
    }
    free(prefix);
    sbx_error_free(&err);
    sbx_config_destroy(c);
    free(path);
}

/* `unisolated` is the core's key of provider instances only */
static void test_config_unisolated_credentials(void **state)
{
    char *path = test_write_file(dir, "cred.conf",
                                 "credentials = {\n v = { plugin = \"cred_agentvault\";\n"
                                 "  unisolated = true; };\n};\n");
    sbx_error_t *err = NULL;
    struct sbx_config *c = sbx_config_load_file(path, &err);

    (void)state;
    assert_non_null(c);
    assert_null(sbx_instance_load(c, getenv("SBX_PLUGIN_DIR"), "v", SBX_PLUGIN_CREDENTIAL, &err));
    assert_non_null(err);
    assert_non_null(strstr(err->msg, ":3: unknown option 'unisolated' for cred_agentvault"));
    sbx_error_free(&err);
    sbx_config_destroy(c);
    free(path);
}

static void test_config_plugin_options(void **state)
{
    const char *plugins = getenv("SBX_TEST_PLUGINS");
    char *path;
    sbx_error_t *err = NULL;
    struct sbx_config *c;
    struct sbx_open_instance *oi;
    const struct sbx_opt_value *v;

    (void)state;
    assert_non_null(plugins);
    plugin_option_error("providers = {\n f = { plugin = \"provider_good\";\n  colour = 1; };\n};\n",
                        3, "unknown option 'colour'");
    plugin_option_error("providers = {\n f = { plugin = \"provider_good\";\n  retries = \"x\"; };\n"
                        "};\n",
                        3, "must be an integer");
    plugin_option_error("providers = {\n f = { plugin = \"provider_good\"; timeout = \"1y\"; };\n"
                        "};\n",
                        2, "bad duration");
    path = test_write_file(dir, "opts.conf",
                           "providers = {\n f = { plugin = \"provider_needtoken\"; };\n};\n");
    c = sbx_config_load_file(path, &err);
    assert_non_null(c);
    oi = sbx_instance_load(c, plugins, "f", SBX_PLUGIN_PROVIDER, &err);
    assert_null(oi);
    assert_non_null(strstr(err->msg, "needs option 'token'"));
    assert_non_null(strstr(err->msg, ":2"));
    sbx_error_free(&err);
    sbx_config_destroy(c);
    free(path);

    path = test_write_file(dir, "opts.conf",
                           "providers = {\n f = { plugin = \"provider_good\"; retries = 7;\n"
                           " quota = \"2G\"; };\n};\n");
    c = sbx_config_load_file(path, &err);
    assert_non_null(c);
    oi = sbx_instance_load(c, plugins, "f", SBX_PLUGIN_PROVIDER, &err);
    assert_non_null(oi);
    v = sbx_options_get(oi->opts, "retries");
    assert_int_equal(v->i, 7);
    v = sbx_options_get(oi->opts, "timeout");
    assert_int_equal(v->i, 30);
    v = sbx_options_get(oi->opts, "quota");
    assert_int_equal(v->i, 2LL << 30);
    v = sbx_options_get(oi->opts, "socket");
    assert_string_equal(v->str, "/run/fake.sock");
    sbx_instance_close(oi);
    sbx_config_destroy(c);
    free(path);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_config_defaults),
        cmocka_unit_test(test_config_good_file),
        cmocka_unit_test(test_config_unknown_key),
        cmocka_unit_test(test_config_wrong_type),
        cmocka_unit_test(test_config_bad_units),
        cmocka_unit_test(test_config_syntax_error),
        cmocka_unit_test(test_config_instances),
        cmocka_unit_test(test_config_unisolated_credentials),
        cmocka_unit_test(test_config_pools),
        cmocka_unit_test(test_config_pool_protect),
        cmocka_unit_test(test_config_missing_file),
        cmocka_unit_test(test_config_search_env),
        cmocka_unit_test(test_config_plugin_options),
        cmocka_unit_test(test_config_egress),
        cmocka_unit_test(test_config_pool_image),
    };

    return cmocka_run_group_tests_name("config", tests, test_dir_setup, test_dir_teardown);
}
