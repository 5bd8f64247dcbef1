/* fuzz_infisical.c - the Infisical credential plugin's readers of the
 * server's replies (plugins/cred_infisical/infisical_api.c): login and renew
 * tokens, and the secrets of a path (v4 and v3 raw), through the plugin's own
 * calls with an HTTP fixture that answers with the input. The first byte picks
 * the call (bits 0-1), the HTTP status (bits 2-4) and include_imports (bit 5). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "infisical.h"
#include "plugin/host.h"
#include "util/error.h"
#include "util/log.h"
#include "util/xalloc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const uint8_t *reply;
static size_t reply_len;
static long reply_status;
static int calls;

static int fx_http(const struct sbx_http_request *req, struct sbx_http_response *resp,
                   sbx_error_t **err)
{
    (void)req;
    (void)err;
    memset(resp, 0, sizeof(*resp));
    /* the second call of a fetch (v3 after a v4 404) gets 200 */
    resp->status = calls++ == 0 ? reply_status : 200;
    resp->body = xmalloc(reply_len + 1); /* the core's body is NUL-ended */
    memcpy(resp->body, reply, reply_len);
    resp->body[reply_len] = '\0';
    resp->body_len = reply_len;
    return 0;
}

static void fx_http_free(struct sbx_http_response *resp)
{
    free(resp->body);
    free(resp->content_type);
    memset(resp, 0, sizeof(*resp));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const long statuses[] = {200, 200, 200, 200, 404, 401, 429, 500};
    static struct sbx_host_api host;
    static struct inf_ctx c;
    struct inf_token tok;
    struct sbx_lease lease;
    enum inf_fail fail = INF_FAIL_NONE;
    sbx_error_t *err = NULL;
    int r;

    if (c.host == NULL) {
        sbx_log_setup(SBX_LOG_ERROR, SBX_LOG_TEXT);
        host = *sbx_host_api_get();
        host.http = fx_http;
        host.http_response_free = fx_http_free;
        c.host = &host;
        c.instance = "fuzz";
        c.cfg.url = "http://127.0.0.1:1";
        c.cfg.project = "proj";
        c.cfg.environment = "dev";
        c.cfg.timeout_ms = 1000;
        pthread_mutex_init(&c.lock, NULL);
    }
    if (size < 1 || size > (1u << 20)) {
        return 0;
    }
    reply = data + 1;
    reply_len = size - 1;
    reply_status = statuses[(data[0] >> 2) & 7];
    calls = 0;
    c.cfg.include_imports = (data[0] >> 5) & 1;
    memset(&tok, 0, sizeof(tok));
    memset(&lease, 0, sizeof(lease));
    switch (data[0] & 3) {
    case 0:
        r = inf_api_login(&c, "id", "secret", &tok, &fail, &err);
        break;
    case 1:
        r = inf_api_renew(&c, "token", &tok, &fail, &err);
        break;
    case 2:
        r = inf_api_revoke(&c, "token", &fail, &err);
        break;
    default:
        r = inf_api_fetch(&c, "token", "/app/{task}", &lease, &fail, &err);
        break;
    }
    if (r == 0) {
        if ((data[0] & 3) < 2 && (tok.value == NULL || tok.ttl <= 0)) {
            __builtin_trap();
        }
    }
    else {
        if (err == NULL || fail == INF_FAIL_NONE) {
            __builtin_trap(); /* a failure says why and how */
        }
        sbx_error_free(&err);
    }
    free(tok.value);
    sbx_lease_clear(&lease);
    return 0;
}
