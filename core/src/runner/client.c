/* client.c - the client side of the runner's API, for sbx submit, job,
 * cancel and queue: the unix socket (or TCP with the bearer token). */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "http/http.h"
#include "runner/runner.h"
#include "util/frame.h"
#include "util/xalloc.h"

int sbx_runner_call(const struct sbx_config *cfg, const char *method, const char *path,
                    const char *body, int (*on_data)(void *ud, const char *data, size_t len),
                    void *ud, struct sbx_http_response *resp, sbx_error_t **err)
{
    return sbx_runner_call_cancel(cfg, method, path, body, on_data, ud, NULL, resp, err);
}

static int call_impl(const struct sbx_config *cfg, const char *method, const char *path,
                     const char *body, size_t body_len, const char *ctype,
                     int (*on_data)(void *ud, const char *data, size_t len), void *ud,
                     const volatile int *cancel, struct sbx_http_response *resp, sbx_error_t **err);

int sbx_runner_call_cancel(const struct sbx_config *cfg, const char *method, const char *path,
                           const char *body, int (*on_data)(void *ud, const char *data, size_t len),
                           void *ud, const volatile int *cancel, struct sbx_http_response *resp,
                           sbx_error_t **err)
{
    return call_impl(cfg, method, path, body, body ? strlen(body) : 0, NULL, on_data, ud, cancel,
                     resp, err);
}

int sbx_runner_call_body(const struct sbx_config *cfg, const char *method, const char *path,
                         const char *body, size_t len, const char *ctype,
                         int (*on_data)(void *ud, const char *data, size_t len), void *ud,
                         struct sbx_http_response *resp, sbx_error_t **err)
{
    return call_impl(cfg, method, path, body, len, ctype, on_data, ud, NULL, resp, err);
}

static int call_impl(const struct sbx_config *cfg, const char *method, const char *path,
                     const char *body, size_t body_len, const char *ctype,
                     int (*on_data)(void *ud, const char *data, size_t len), void *ud,
                     const volatile int *cancel, struct sbx_http_response *resp, sbx_error_t **err)
{
    struct sbx_runner_endpoint ep;
    struct sbx_http_request req = {0};
    char ct[96];
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
    if (ctype != NULL) { /* (added, issue 30) a body that is not JSON (sbx cp's archives) */
        snprintf(ct, sizeof(ct), "Content-Type: %s", ctype);
        hdrs[0] = ct;
    }
    req.body = body;
    req.body_len = body_len;
    req.connect_timeout_ms = 5000;
    req.timeout_ms = on_data ? 0 : 60000;
    req.on_data = on_data;
    req.userdata = ud;
    req.cancel = cancel;
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

/* The frames of ?frames=1 back into stdout and stderr. A body that is not
 * framed (the runner's JSON error of a 4xx) is kept, for its message. */
struct demux {
    int (*on_output)(void *ud, int stream, const char *data, size_t len);
    void *ud;
    size_t total; /* payload bytes passed on */
    struct sbx_frame_dec dec;
    char raw[512];
    size_t raw_len;
};

static int demux_feed(void *ud, const char *data, size_t len)
{
    struct demux *d = ud;

    while (len > 0 && !d->dec.bad) {
        const char *piece;
        size_t n;
        size_t k = sbx_frame_dec_feed(&d->dec, data, len, &piece, &n);

        data += k;
        len -= k;
        if (d->dec.bad) {
            memcpy(d->raw, d->dec.hdr, sizeof(d->dec.hdr));
            d->raw_len = sizeof(d->dec.hdr);
            break;
        }
        if (n > 0) {
            if (d->on_output(d->ud, d->dec.type, piece, n) != 0) {
                return 1;
            }
            d->total += n;
        }
    }
    if (d->dec.bad && len > 0 && d->raw_len < sizeof(d->raw) - 1) {
        size_t n = sizeof(d->raw) - 1 - d->raw_len < len ? sizeof(d->raw) - 1 - d->raw_len : len;

        memcpy(d->raw + d->raw_len, data, n);
        d->raw_len += n;
    }
    return 0;
}

int sbx_runner_follow(const struct sbx_config *cfg, const char *job_id,
                      int (*on_output)(void *ud, int stream, const char *data, size_t len),
                      void *ud, const volatile int *cancel, size_t *total, sbx_error_t **err)
{
    return sbx_runner_output(cfg, job_id, 1, on_output, ud, cancel, total, err);
}

int sbx_runner_output(const struct sbx_config *cfg, const char *job_id, int follow,
                      int (*on_output)(void *ud, int stream, const char *data, size_t len),
                      void *ud, const volatile int *cancel, size_t *total, sbx_error_t **err)
{
    struct demux d = {.on_output = on_output, .ud = ud};
    struct sbx_http_response resp = {0};
    sbx_error_t *e = NULL;
    char *path = xasprintf("/v1/jobs/%s/output?%sframes=1", job_id, follow ? "follow=1&" : "");
    int rc;

    /* any length: a payload is passed on in pieces, never held */
    sbx_frame_dec_init(&d.dec, "\1\2", UINT32_MAX);
    rc = sbx_runner_call_cancel(cfg, "GET", path, NULL, demux_feed, &d, cancel, &resp, &e);
    free(path);
    if (d.dec.bad) {
        json_t *o = json_loadb(d.raw, d.raw_len, 0, NULL);
        const char *msg = json_string_value(json_object_get(o, "error"));

        if (rc == 0) {
            sbx_http_response_free(&resp);
        }
        sbx_error_free(&e);
        rc = msg != NULL ? sbx_error_set(err, SBX_E_GENERIC, "runner: %s", msg)
                         : sbx_error_set(err, SBX_E_PROTOCOL,
                                         "runner: the output of job %s is not in frames "
                                         "(docs/api.md)",
                                         job_id);
        json_decref(o);
        return rc;
    }
    if (rc < 0) {
        if (err != NULL) {
            *err = e;
        }
        else {
            sbx_error_free(&e);
        }
        return -1;
    }
    sbx_http_response_free(&resp);
    if (!sbx_frame_dec_boundary(&d.dec)) {
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "runner: the output of job %s ends inside a "
                             "frame",
                             job_id);
    }
    if (total != NULL) {
        *total = d.total;
    }
    return 0;
}
