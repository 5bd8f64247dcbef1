/* host_api_mock.h - a host vtable (struct sbx_host_api) without the core, so
 * a plugin can be unit-tested alone: load its .so with dlopen, hand
 * sbx_host_mock_api() to its init() and sbx_host_mock_options() as its
 * options. Options come from a table; log lines are kept for assertions;
 * errors are real; leases keep their secrets in memory; every HTTP exchange
 * is a cmocka expectation:
 *
 *     expect_string(sbx_mock_http, method, "POST");
 *     expect_string(sbx_mock_http, url, "http://127.0.0.1:1/api/v1/auth/...");
 *     will_return(sbx_mock_http, 200);        // status; 0: a transport failure
 *     will_return(sbx_mock_http, "{...}");    // the body
 *
 * One mock per test process at a time (log() has no context argument).
 * docs/plugins.md, "Testing a plugin alone". */
#ifndef SBX_TEST_HOST_API_MOCK_H
#define SBX_TEST_HOST_API_MOCK_H

#include <stddef.h>
#include <stdint.h>

#include "sbx/sbx_credential.h"
#include "sbx/sbx_host.h"

/* One option: str for STRING values, num for INT/SIZE/DURATION/BOOL. */
struct sbx_mock_opt {
    const char *key;
    const char *str;
    int64_t num;
};

/* Resets the mock: instance name, options (terminated by a NULL key). */
void sbx_host_mock_init(const char *instance, const struct sbx_mock_opt *opts);
const struct sbx_host_api *sbx_host_mock_api(void);
const struct sbx_options *sbx_host_mock_options(void);
/* Every line logged since init, "LEVEL: text\n" each (LEVEL error, warn,
 * info, debug). */
const char *sbx_host_mock_log(void);
/* Frees the secrets the mock's lease_add_secret added to lease. */
void sbx_host_mock_lease_free(struct sbx_lease *lease);

/* The mocked host->http (named for cmocka's expectations). */
int sbx_mock_http(const struct sbx_http_request *req, struct sbx_http_response *resp,
                  sbx_error_t **err);

#endif
