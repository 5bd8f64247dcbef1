/* test_abi.c - the plugin ABI's append rule (docs/plugins.md, Versioning):
 * every struct that the core and plugins share has its size recorded here
 * for each minor version of the ABI. Appending a field or an op without
 * bumping SBX_PLUGIN_ABI_MINOR_CURRENT (and recording the new size) fails
 * this test, so a plugin built against the newer header can never load on
 * an older core and read past its structs. Sizes are those of x86_64. */
#include "test_common.h"

#include <stdlib.h>

#include "plugin/host.h"
#include "plugin/loader.h"
#include "sbx/sbx_credential.h"
#include "sbx/sbx_host.h"
#include "sbx/sbx_plugin.h"
#include "sbx/sbx_provider.h"

struct abi_size {
    unsigned minor; /* the first minor with this size */
    const char *type;
    size_t size;
};

/* Append a row per struct that grows (or appears) with a minor bump. */
static const struct abi_size recorded[] = {
    {0, "sbx_plugin_desc", 72},
    {0, "sbx_option", 40},
    {0, "sbx_provider_ops", 80},
    {1, "sbx_provider_ops", 96}, /* 1.1: image_build, scan_secrets */
    {0, "sbx_credential_ops", 40},
    {0, "sbx_host_api", 128},
    {0, "sbx_sandbox_spec", 192},
    {0, "sbx_exec_spec", 64},
    {0, "sbx_exec_ctl", 16},
    {0, "sbx_provider_info", 940},
    {0, "sbx_limits", 48},
    {0, "sbx_mount", 24},
    {0, "sbx_kv", 16},
    {0, "sbx_http_request", 88},
    {0, "sbx_http_response", 32},
    {0, "sbx_cred_scope", 24},
    {0, "sbx_lease", 168},
    {1, "sbx_image_request", 64},
    {1, "sbx_secret_scan", 48},
    {1, "sbx_scan_hits", 32},
    {2, "sbx_provider_ops", 104}, /* 1.2: claim_worktree (the
                                     runner's warm pool) */
    {2, "sbx_sandbox_spec", 200}, /* 1.2: view_later */
    {3, "sbx_provider_ops", 112}, /* 1.3: update_limits (a warm sandbox resized at its claim) */
    {4, "sbx_cred_scope", 40},    /* 1.4: client, pool (secrets bound to the client) */
    {5, "sbx_image_request", 72}, /* 1.5: options (the Dev Container build, the tags) */
    {6, "sbx_provider_ops", 120}, /* 1.6: image_op (publishing and pulling images) */
    {6, "sbx_image_op", 56},
    {6, "sbx_image_info", 56},
    {7, "sbx_provider_ops", 136}, /* 1.7: snapshot, snapshot_remove (snapshot/fork) */
    {7, "sbx_snapshot_req", 32},
    {7, "sbx_snapshot_out", 256},
    {8, "sbx_provider_ops", 144},  /* 1.8: port_connect (terminals/ports) */
    {9, "sbx_provider_ops", 176},  /* 1.9: files_get, files_put, pause, resume */
    {10, "sbx_provider_ops", 184}, /* 1.10: files_put_stream (sbx cp into a task streamed) */
    {10, "sbx_host_api", 136},     /* 1.10: http_upload */
};

#define ACTUAL(t)                                                                                  \
    {                                                                                              \
#t, sizeof(struct t)                                                                       \
    }

static const struct {
    const char *type;
    size_t size;
} actual[] = {
    ACTUAL(sbx_plugin_desc),    ACTUAL(sbx_option),        ACTUAL(sbx_provider_ops),
    ACTUAL(sbx_credential_ops), ACTUAL(sbx_host_api),      ACTUAL(sbx_sandbox_spec),
    ACTUAL(sbx_exec_spec),      ACTUAL(sbx_exec_ctl),      ACTUAL(sbx_provider_info),
    ACTUAL(sbx_limits),         ACTUAL(sbx_mount),         ACTUAL(sbx_kv),
    ACTUAL(sbx_http_request),   ACTUAL(sbx_http_response), ACTUAL(sbx_cred_scope),
    ACTUAL(sbx_lease),          ACTUAL(sbx_image_request), ACTUAL(sbx_secret_scan),
    ACTUAL(sbx_scan_hits),      ACTUAL(sbx_image_op),      ACTUAL(sbx_image_info),
    ACTUAL(sbx_snapshot_req),   ACTUAL(sbx_snapshot_out),
};

/* The recorded size of type at minor, or 0 when it did not exist yet. */
static size_t recorded_size(const char *type, unsigned minor)
{
    size_t size = 0;

    for (size_t i = 0; i < sizeof(recorded) / sizeof(recorded[0]); i++) {
        if (strcmp(recorded[i].type, type) == 0 && recorded[i].minor <= minor) {
            size = recorded[i].size;
        }
    }
    return size;
}

static void test_abi_sizes_match_the_minor(void **state)
{
    (void)state;
    assert_int_equal(sizeof(void *), 8);
    for (size_t i = 0; i < sizeof(actual) / sizeof(actual[0]); i++) {
        size_t want = recorded_size(actual[i].type, SBX_PLUGIN_ABI_MINOR_CURRENT);

        if (want != actual[i].size) {
            fail_msg("struct %s is %zu bytes, ABI %u.%u recorded %zu: an append bumps "
                     "SBX_PLUGIN_ABI_MINOR_CURRENT and adds a row to tests/unit/test_abi.c",
                     actual[i].type, actual[i].size, SBX_PLUGIN_ABI_MAJOR,
                     SBX_PLUGIN_ABI_MINOR_CURRENT, want);
        }
    }
}

/* Structs only grow, and only at a minor bump. */
static void test_abi_structs_only_grow(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(recorded) / sizeof(recorded[0]); i++) {
        assert_true(recorded[i].minor <= SBX_PLUGIN_ABI_MINOR_CURRENT);
        if (recorded[i].minor > 0) {
            assert_true(recorded_size(recorded[i].type, recorded[i].minor - 1) < recorded[i].size);
        }
    }
}

/* A plugin built against the 1.0 header (no image_build, scan_secrets) loads
 * on this core, and the ops it does not know read as NULL. */
static void test_abi_older_minor_loads(void **state)
{
    const char *fixtures = getenv("SBX_TEST_PLUGINS");
    char *path = NULL;
    sbx_error_t *err = NULL;
    struct sbx_plugin *p;

    (void)state;
    assert_non_null(fixtures);
    assert_true(asprintf(&path, "%s/provider_oldminor.so", fixtures) > 0);
    p = sbx_plugin_load(fixtures, path, SBX_PLUGIN_PROVIDER, NULL, &err);
    if (p == NULL) {
        fail_msg("%s", err->msg);
    }
    assert_int_equal(p->desc.abi_minor, 0);
    assert_int_equal(p->desc.ops_size, offsetof(struct sbx_provider_ops, image_build));
    assert_null(p->ops.provider.image_build);
    assert_null(p->ops.provider.scan_secrets);
    assert_non_null(p->ops.provider.exec);
    sbx_plugin_unload(p);
    free(path);
}

/* The value of NAME in a lease, or NULL. */
static const char *lease_get(const struct sbx_lease *l, const char *name)
{
    for (size_t i = 0; i < l->n_secrets; i++) {
        if (strcmp(l->secrets[i].name, name) == 0) {
            return l->secrets[i].value;
        }
    }
    return NULL;
}

/* Loads credential fixture NAME (built against ABI 1.MINOR) and leases the
 * scope of client alice, pool ci, task T1 through it. */
static void lease_through(const char *name, unsigned minor, struct sbx_lease *lease)
{
    const char *fixtures = getenv("SBX_TEST_PLUGINS");
    const struct sbx_cred_scope scope = {
        .task_id = "T1", .job_id = "J1", .path = NULL, .client = "alice", .pool = "ci"};
    char *path = NULL;
    sbx_error_t *err = NULL;
    struct sbx_plugin *p;
    void *ctx = NULL;

    assert_non_null(fixtures);
    assert_true(asprintf(&path, "%s/%s.so", fixtures, name) > 0);
    p = sbx_plugin_load(fixtures, path, SBX_PLUGIN_CREDENTIAL, NULL, &err);
    if (p == NULL) {
        fail_msg("%s", err->msg);
    }
    assert_int_equal(p->desc.abi_minor, minor);
    assert_int_equal(p->ops.credential.init(sbx_host_api_get(), NULL, &ctx, &err), 0);
    memset(lease, 0, sizeof(*lease));
    if (p->ops.credential.acquire(ctx, &scope, lease, &err) != 0) {
        fail_msg("%s: %s", name, err->msg);
    }
    assert_int_equal(p->ops.credential.revoke(ctx, lease, &err), 0);
    p->ops.credential.destroy_ctx(ctx);
    sbx_plugin_unload(p);
    free(path);
}

/* (added, 1.4) A credential plugin built against 1.3 loads and leases on
 * this core (it reads the scope's first three fields only); one built
 * against 1.4 also gets the client and the pool. */
static void test_abi_credential_scope_13_and_14(void **state)
{
    struct sbx_lease lease;

    (void)state;
    lease_through("cred_scope13", 3, &lease);
    assert_string_equal(lease_get(&lease, "SCOPE_TASK"), "T1");
    assert_null(lease_get(&lease, "SCOPE_CLIENT"));
    assert_int_equal(lease.n_secrets, 1);
    sbx_lease_clear(&lease);
    lease_through("cred_scope14", 4, &lease);
    assert_string_equal(lease_get(&lease, "SCOPE_TASK"), "T1");
    assert_string_equal(lease_get(&lease, "SCOPE_CLIENT"), "alice");
    assert_string_equal(lease_get(&lease, "SCOPE_POOL"), "ci");
    sbx_lease_clear(&lease);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_abi_sizes_match_the_minor),
        cmocka_unit_test(test_abi_structs_only_grow),
        cmocka_unit_test(test_abi_older_minor_loads),
        cmocka_unit_test(test_abi_credential_scope_13_and_14),
    };

    return cmocka_run_group_tests(tests, NULL, NULL);
}
