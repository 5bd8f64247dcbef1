/* test_infisical_alone.c - cred_infisical unit-tested alone: its .so is
 * dlopen()ed and driven through its ops with the host-API mock
 * (tests/support/host_api_mock.h) instead of the core: options from a table,
 * HTTP exchanges as cmocka expectations, log lines kept. docs/plugins.md,
 * "Testing a plugin alone". */
#include "test_common.h"

#include <dlfcn.h>

#include "host_api_mock.h"
#include "sbx/sbx_credential.h"
#include "sbx/sbx_plugin.h"

static void *handle;
static const struct sbx_credential_ops *ops;

static int setup(void **state)
{
    const char *dir = getenv("SBX_PLUGIN_DIR");
    const struct sbx_plugin_desc *(*entry)(void);
    char path[4096];

    (void)state;
    snprintf(path, sizeof(path), "%s/cred_infisical.so", dir ? dir : ".");
    handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (handle == NULL) {
        fprintf(stderr, "dlopen %s: %s\n", path, dlerror());
        return -1;
    }
    *(void **)&entry = dlsym(handle, SBX_PLUGIN_ENTRY_SYMBOL);
    if (entry == NULL || entry()->kind != SBX_PLUGIN_CREDENTIAL) {
        return -1;
    }
    ops = entry()->ops;
    setenv("SBX_ALONE_ID", "machine-id", 1);
    setenv("SBX_ALONE_SECRET", "machine-secret", 1);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (handle != NULL) {
        dlclose(handle);
    }
    return 0;
}

/* The instance's options, with url set to url. */
static void mock_with_url(const char *url, struct sbx_mock_opt *opts)
{
    const struct sbx_mock_opt base[] = {
        {"url", url, 0},
        {"client_id_env", "SBX_ALONE_ID", 0},
        {"client_secret_env", "SBX_ALONE_SECRET", 0},
        {"project", "proj 1", 0},
        {"environment", "dev", 0},
        {"path", "/tasks/{task}", 0},
        {"timeout", NULL, 30},
        {"renew_before", NULL, 60},
        {"login_cooldown", NULL, 30},
        {"lockout_wait", NULL, 300},
        {"include_imports", NULL, 0},
        {NULL, NULL, 0},
    };

    memcpy(opts, base, sizeof(base));
    sbx_host_mock_init("vault", opts);
}

static int init_warns(const char *url)
{
    struct sbx_mock_opt opts[12];
    sbx_error_t *err = NULL;
    void *ctx = NULL;

    mock_with_url(url, opts);
    if (ops->init(sbx_host_mock_api(), sbx_host_mock_options(), &ctx, &err) < 0) {
        fail_msg("init %s: %s", url, err->msg);
    }
    ops->destroy_ctx(ctx);
    return strstr(sbx_host_mock_log(), "is plain http") != NULL;
}

/* Plain http is warned about unless the host is the loopback itself: the
 * check parses the URL (libcurl), so a name that only starts like a
 * loopback address is remote. */
static void test_alone_plain_http_warning(void **state)
{
    static const char *const remote[] = {
        "http://127.0.0.1.evil.example",
        "http://localhost.evil.example:8080",
        "http://10.0.0.1",
    };
    static const char *const loopback[] = {
        "http://127.0.0.1",  "http://127.0.0.1:8080/", "http://localhost:1",    "http://LOCALHOST",
        "http://[::1]:8200", "http://127.1.2.3",       "https://vault.example",
    };

    (void)state;
    for (size_t i = 0; i < sizeof(remote) / sizeof(remote[0]); i++) {
        if (!init_warns(remote[i])) {
            fail_msg("no plain-http warning for %s; log: %s", remote[i], sbx_host_mock_log());
        }
    }
    for (size_t i = 0; i < sizeof(loopback) / sizeof(loopback[0]); i++) {
        if (init_warns(loopback[i])) {
            fail_msg("warned for %s: %s", loopback[i], sbx_host_mock_log());
        }
    }
}

/* What libcurl does not parse as an http(s) base URL is refused, with the
 * option's place: user info, a bracketed host that is no address, another
 * scheme. */
static void test_alone_bad_urls_refused(void **state)
{
    static const char *const bad[] = {
        "http://127.0.0.1@evil.example",
        "http://[::1].evil.example",
        "ftp://127.0.0.1",
        "http://",
    };
    struct sbx_mock_opt opts[12];
    char want[160];

    (void)state;
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        sbx_error_t *err = NULL;
        void *ctx = NULL;

        mock_with_url(bad[i], opts);
        assert_int_equal(ops->init(sbx_host_mock_api(), sbx_host_mock_options(), &ctx, &err), -1);
        snprintf(want, sizeof(want), "mock.conf:1: url '%s' must be", bad[i]);
        if (strstr(err->msg, want) == NULL) {
            fail_msg("%s: %s", bad[i], err->msg);
        }
        sbx_host_mock_api()->error_free(&err);
    }
}

/* acquire: login, then the task's secrets, all through host->http; the
 * path and the project go out percent-encoded (libcurl). */
static void test_alone_acquire(void **state)
{
    struct sbx_mock_opt opts[12];
    struct sbx_cred_scope scope = {.task_id = "t-1", .job_id = "t-1"};
    struct sbx_lease lease;
    sbx_error_t *err = NULL;
    void *ctx = NULL;

    (void)state;
    memset(&lease, 0, sizeof(lease));
    mock_with_url("http://127.0.0.1:1", opts);
    assert_int_equal(ops->init(sbx_host_mock_api(), sbx_host_mock_options(), &ctx, &err), 0);
    expect_string(sbx_mock_http, method, "POST");
    expect_string(sbx_mock_http, url, "http://127.0.0.1:1/api/v1/auth/universal-auth/login");
    will_return(sbx_mock_http, 200);
    will_return(sbx_mock_http,
                "{\"accessToken\":\"tok123\",\"expiresIn\":600,\"accessTokenMaxTTL\":3600}");
    expect_string(sbx_mock_http, method, "GET");
    expect_string(sbx_mock_http, url,
                  "http://127.0.0.1:1/api/v4/secrets?projectId=proj%201&environment=dev"
                  "&secretPath=%2Ftasks%2Ft-1&viewSecretValue=true&expandSecretReferences=true"
                  "&include_imports=false");
    will_return(sbx_mock_http, 200);
    will_return(sbx_mock_http,
                "{\"secrets\":[{\"secretKey\":\"API_KEY\",\"secretValue\":\"v1\"}]}");
    if (ops->acquire(ctx, &scope, &lease, &err) < 0) {
        fail_msg("acquire: %s", err->msg);
    }
    assert_int_equal(lease.n_secrets, 1);
    assert_string_equal(lease.secrets[0].name, "API_KEY");
    assert_string_equal(lease.secrets[0].value, "v1");
    expect_string(sbx_mock_http, method, "POST");
    expect_string(sbx_mock_http, url, "http://127.0.0.1:1/api/v1/auth/token/revoke");
    will_return(sbx_mock_http, 200);
    will_return(sbx_mock_http, "{}");
    assert_int_equal(ops->revoke(ctx, &lease, &err), 0);
    sbx_host_mock_lease_free(&lease);
    ops->destroy_ctx(ctx);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_alone_plain_http_warning),
        cmocka_unit_test(test_alone_bad_urls_refused),
        cmocka_unit_test(test_alone_acquire),
    };

    return cmocka_run_group_tests(tests, setup, teardown);
}
