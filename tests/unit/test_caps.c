/* test_caps.c - capabilities fail closed (sandbox/caps.c): what a provider's
 * flags and info() say it enforces, what a task asks for, and the refusal of
 * a task on a provider that enforces nothing unless its instance is
 * `unisolated = true` (fixtures provider_nocaps and provider_good). */
#include "test_common.h"

#include "plugin/instance.h"
#include "sandbox/caps.h"
#include "sandbox/task.h"

static const char *fixtures;
static struct sbx_config *cfg;

static int setup(void **state)
{
    char *path;
    char *text = NULL;
    sbx_error_t *err = NULL;

    test_dir_setup(state);
    fixtures = getenv("SBX_TEST_PLUGINS");
    if (fixtures == NULL ||
        asprintf(&text,
                 "state_dir = \"%s/state\";\n"
                 "providers = {\n"
                 "  nocaps = { plugin = \"provider_nocaps\"; };\n"
                 "  open = { plugin = \"provider_nocaps\"; unisolated = true; };\n"
                 "  all = { plugin = \"provider_good\"; };\n"
                 "};\n",
                 test_dir) < 0) {
        return -1;
    }
    path = test_write_file(test_dir, "caps.conf", text);
    cfg = sbx_config_load_file(path, &err);
    free(path);
    free(text);
    if (cfg == NULL) {
        fprintf(stderr, "%s\n", err->msg);
        sbx_error_free(&err);
        return -1;
    }
    return 0;
}

static int teardown(void **state)
{
    sbx_config_destroy(cfg);
    return test_dir_teardown(state);
}

static void test_caps_from_flags(void **state)
{
    struct sbx_provider_info info = {.userns = -1};

    (void)state;
    assert_int_equal(sbx_caps_enforced(0, NULL), 0);
    /* the older spelling: LIMITS is cpu, memory and pids */
    assert_int_equal(sbx_caps_enforced(SBX_PROVIDER_ENFORCES_LIMITS, NULL),
                     SBX_CAP_CPUS | SBX_CAP_MEMORY | SBX_CAP_PIDS);
    assert_int_equal(
        sbx_caps_enforced(SBX_PROVIDER_ENFORCES_CPU | SBX_PROVIDER_ENFORCES_MEMORY, NULL),
        SBX_CAP_CPUS | SBX_CAP_MEMORY);
    /* egress either way: the core's socket or the provider's own controls */
    assert_int_equal(sbx_caps_enforced(SBX_PROVIDER_EGRESS_SOCKET, NULL), SBX_CAP_EGRESS);
    assert_int_equal(sbx_caps_enforced(SBX_PROVIDER_ENFORCES_EGRESS, NULL), SBX_CAP_EGRESS);
    /* the docker set is everything */
    assert_int_equal(sbx_caps_enforced(SBX_PROVIDER_ENFORCES_LIMITS | SBX_PROVIDER_ENFORCES_DISK |
                                           SBX_PROVIDER_EGRESS_SOCKET |
                                           SBX_PROVIDER_ENFORCES_USERNS,
                                       &info),
                     SBX_CAP_ALL);
    /* off at run time: user namespaces on an engine without remapping, the disk */
    info.userns = 0;
    assert_int_equal(sbx_caps_enforced(SBX_PROVIDER_ENFORCES_USERNS, &info), 0);
    info.userns = 1;
    info.flags_off = SBX_PROVIDER_ENFORCES_DISK;
    assert_int_equal(
        sbx_caps_enforced(SBX_PROVIDER_ENFORCES_DISK | SBX_PROVIDER_ENFORCES_USERNS, &info),
        SBX_CAP_USERNS);
}

static void test_caps_wanted_and_text(void **state)
{
    struct sbx_limits all = {.cpus = 1, .memory = 1, .disk = 1, .pids = 1};
    struct sbx_limits some = {.memory = 1};
    char buf[128];

    (void)state;
    assert_int_equal(sbx_caps_wanted(&all), SBX_CAP_ALL);
    /* egress and user namespaces are always asked for */
    assert_int_equal(sbx_caps_wanted(&some), SBX_CAP_MEMORY | SBX_CAP_EGRESS | SBX_CAP_USERNS);
    sbx_caps_text(SBX_CAP_ALL, buf, sizeof(buf));
    assert_string_equal(buf, "memory, cpus, pids, disk, egress, user namespaces");
    sbx_caps_text(SBX_CAP_DISK, buf, sizeof(buf));
    assert_string_equal(buf, "disk");
    sbx_caps_text(0, buf, sizeof(buf));
    assert_string_equal(buf, "");
    sbx_caps_text(SBX_CAP_ALL, buf, 12); /* cut, still terminated */
    assert_true(strlen(buf) < 12);
    assert_string_equal(sbx_caps_isolation(SBX_CAP_ALL, SBX_CAP_ALL), "sandbox");
    assert_string_equal(sbx_caps_isolation(SBX_CAP_ALL, 0), "none");
    assert_string_equal(sbx_caps_isolation(SBX_CAP_ALL, SBX_CAP_MEMORY), "partial");
}

static void test_caps_check_instances(void **state)
{
    struct sbx_open_instance *oi;
    sbx_error_t *err = NULL;
    uint32_t missing = 0;

    (void)state;
    oi = sbx_instance_open(cfg, fixtures, "nocaps", SBX_PLUGIN_PROVIDER, &err);
    assert_non_null(oi);
    assert_int_equal(sbx_caps_check(oi, "t1", &cfg->limits, &missing, &err), -1);
    assert_int_equal(err->code, SBX_E_PLUGIN);
    assert_string_equal(err->msg, "provider \"nocaps\" does not enforce memory, cpus, pids, disk, "
                                  "egress, user namespaces that the policy asks for; set "
                                  "unisolated = true on the instance to run anyway");
    assert_int_equal(missing, SBX_CAP_ALL);
    sbx_error_free(&err);
    sbx_instance_close(oi);

    oi = sbx_instance_open(cfg, fixtures, "open", SBX_PLUGIN_PROVIDER, &err);
    assert_non_null(oi);
    assert_int_equal(sbx_caps_check(oi, "t2", &cfg->limits, &missing, &err), 0);
    assert_int_equal(missing, SBX_CAP_ALL);
    assert_null(err);
    sbx_instance_close(oi);

    oi = sbx_instance_open(cfg, fixtures, "all", SBX_PLUGIN_PROVIDER, &err);
    assert_non_null(oi);
    assert_int_equal(sbx_caps_check(oi, "t3", &cfg->limits, &missing, &err), 0);
    assert_int_equal(missing, 0);
    sbx_instance_close(oi);
}

/* One task start per instance: refused, unisolated (and recorded), as before. */
static json_t *start_end(const char *provider, sbx_error_t **err)
{
    static const char *const argv[] = {"true", NULL};
    struct sbx_task_opts o = {.provider = provider, .ephemeral = 1, .argv = argv};
    struct sbx_task *t = NULL;
    json_t *rec = NULL;
    int status = -1;

    if (sbx_task_start(cfg, fixtures, &o, &t, err) < 0) {
        return NULL;
    }
    assert_int_equal(sbx_task_exec(t, argv, NULL, 0, NULL, NULL, NULL, &status, err), 0);
    assert_int_equal(sbx_task_end(t, "done", &rec, err), 0);
    return rec;
}

static void test_caps_task_start(void **state)
{
    sbx_error_t *err = NULL;
    json_t *rec;
    json_t *un;

    (void)state;
    assert_null(start_end("nocaps", &err));
    assert_non_null(err);
    assert_non_null(strstr(err->msg, "provider \"nocaps\" does not enforce memory, cpus, pids, "
                                     "disk, egress, user namespaces"));
    sbx_error_free(&err);

    rec = start_end("open", &err);
    assert_non_null(rec);
    assert_string_equal(json_string_value(json_object_get(rec, "isolation")), "none");
    un = json_object_get(rec, "unenforced");
    assert_int_equal(json_array_size(un), 6);
    assert_string_equal(json_string_value(json_array_get(un, 5)), "user namespaces");
    json_decref(rec);

    rec = start_end("all", &err);
    assert_non_null(rec);
    assert_string_equal(json_string_value(json_object_get(rec, "isolation")), "sandbox");
    assert_null(json_object_get(rec, "unenforced"));
    json_decref(rec);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_caps_from_flags),
        cmocka_unit_test(test_caps_wanted_and_text),
        cmocka_unit_test(test_caps_check_instances),
        cmocka_unit_test(test_caps_task_start),
    };

    return cmocka_run_group_tests_name("caps", tests, setup, teardown);
}
