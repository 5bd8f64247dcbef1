/* client.c - the client side of the runner's API, for sbx submit, job,
 * cancel and queue: the unix socket (or TCP with the bearer token). */
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/http.h"
#include "runner/runner.h"
#include "util/xalloc.h"

int sbx_runner_call(const struct sbx_config *cfg, const char *method, const char *path,
                    const char *body, int (*on_data)(void *ud, const char *data, size_t len),
                    void *ud, struct sbx_http_response *resp, sbx_error_t **err)
{
    struct sbx_runner_endpoint ep;
    struct sbx_http_request req = {0};
    const char *hdrs[3] = {"Content-Type: application/json", NULL, NULL};
    char *auth = NULL;
    char *url;
    const char *where;
    int rc;

    memset(resp, 0, sizeof(*resp));
    if (sbx_runner_endpoint(cfg, &ep, err) < 0) {
        return -1;
    }
    if (ep.tcp_host != NULL && access(ep.unix_path, F_OK) != 0) {
        const char *tok = cfg->runner.token_env ? getenv(cfg->runner.token_env) : NULL;

        if (tok == NULL || tok[0] == '\0') {
            sbx_runner_endpoint_clear(&ep);
            return sbx_error_set(err, SBX_E_CONFIG,
                                 "runner.listen is TCP: set the token in the variable named by "
                                 "runner.token_env");
        }
        auth = xasprintf("Authorization: Bearer %s", tok);
        hdrs[1] = auth;
        url = xasprintf("http://%s:%d%s", ep.tcp_host, ep.tcp_port, path);
        where = ep.tcp_host;
    }
    else {
        url = xasprintf("http://localhost%s", path);
        req.unix_socket = ep.unix_path;
        where = ep.unix_path;
    }
    req.method = method;
    req.url = url;
    req.headers = hdrs;
    req.body = body;
    req.body_len = body ? strlen(body) : 0;
    req.connect_timeout_ms = 5000;
    req.timeout_ms = on_data ? 0 : 60000;
    req.on_data = on_data;
    req.userdata = ud;
    rc = sbx_http_request(&req, resp, err);
    if (rc < 0 && err != NULL && *err != NULL && (*err)->code == SBX_E_ENGINE) {
        sbx_error_free(err);
        rc = sbx_error_set(err, SBX_E_ENGINE,
                           "runner not reachable at %s (is 'sbx serve' "
                           "running?)",
                           where);
    }
    else if (rc == 0 && (resp->status < 200 || resp->status >= 300)) {
        json_t *o = json_loadb(resp->body ? resp->body : "", resp->body_len, 0, NULL);
        const char *msg = json_string_value(json_object_get(o, "error"));

        rc = sbx_error_set(err,
                           resp->status == 404   ? SBX_E_NOTFOUND
                           : resp->status == 422 ? SBX_E_POLICY
                                                 : SBX_E_GENERIC,
                           "runner: %s (HTTP %ld)", msg ? msg : "error", resp->status);
        json_decref(o);
        sbx_http_response_free(resp);
    }
    if (auth != NULL) {
        explicit_bzero(auth, strlen(auth));
        free(auth);
    }
    free(url);
    sbx_runner_endpoint_clear(&ep);
    return rc;
}
