/* http.c - one HTTP exchange with libcurl: unix sockets, streaming, cancel. */
#include "http/http.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "util/xalloc.h"

/* A reply body kept in memory is capped: remote replies are untrusted. */
#define SBX_HTTP_MAX_BODY (64u << 20)

struct xfer {
    const struct sbx_http_request *req;
    char *buf;
    size_t len;
    size_t cap;
    int too_big;
    int aborted_by_callback;
};

static pthread_once_t global_once = PTHREAD_ONCE_INIT;

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT);
}

void sbx_http_global_init(void)
{
    pthread_once(&global_once, global_init);
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;

    if (x->req->on_data != NULL) {
        if (x->req->on_data(x->req->userdata, data, n) != 0) {
            x->aborted_by_callback = 1;
            return 0;
        }
        return n;
    }
    if (x->len + n > SBX_HTTP_MAX_BODY) {
        x->too_big = 1;
        return 0;
    }
    if (x->len + n + 1 > x->cap) {
        x->cap = (x->len + n + 1) * 2;
        x->buf = xrealloc(x->buf, x->cap);
    }
    memcpy(x->buf + x->len, data, n);
    x->len += n;
    x->buf[x->len] = '\0';
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    struct xfer *x = ud;

    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    /* (changed, issue 31) an atomic read: another thread may set the flag */
    return x->req->cancel != NULL && __atomic_load_n(x->req->cancel, __ATOMIC_ACQUIRE) ? 1 : 0;
}

/* (added, issue 30) a request body read from a source as it goes */
struct upload {
    int (*source)(void *ud, char *buf, size_t cap, size_t *n);
    void *ud;
    int failed;
};

static size_t on_read(char *buf, size_t size, size_t nmemb, void *ud)
{
    struct upload *u = ud;
    size_t n = 0;

    if (u->source(u->ud, buf, size * nmemb, &n) != 0) {
        u->failed = 1;
        return CURL_READFUNC_ABORT;
    }
    return n;
}

static int perform(const struct sbx_http_request *req, struct upload *up,
                   struct sbx_http_response *resp, sbx_error_t **err);

int sbx_http_request(const struct sbx_http_request *req, struct sbx_http_response *resp,
                     sbx_error_t **err)
{
    return perform(req, NULL, resp, err);
}

int sbx_http_upload(const struct sbx_http_request *req,
                    int (*source)(void *ud, char *buf, size_t cap, size_t *n), void *ud,
                    struct sbx_http_response *resp, sbx_error_t **err)
{
    struct upload up = {.source = source, .ud = ud};
    int rc = perform(req, &up, resp, err);

    if (rc < 0 && up.failed) {
        sbx_error_free(err); /* the source's reason is the caller's to give */
        return sbx_error_set(err, SBX_E_CANCELLED, "%s %s: the body's source stopped", req->method,
                             req->url);
    }
    return rc;
}

static int perform(const struct sbx_http_request *req, struct upload *up,
                   struct sbx_http_response *resp, sbx_error_t **err)
{
    struct xfer x = {.req = req};
    struct curl_slist *hdrs = NULL;
    char *ctype = NULL;
    CURLcode rc;
    CURL *h;
    int ret = 0;

    sbx_http_global_init();
    memset(resp, 0, sizeof(*resp));
    h = curl_easy_init();
    if (h == NULL) {
        return sbx_error_set(err, SBX_E_ENGINE, "http: cannot create a libcurl handle");
    }
    curl_easy_setopt(h, CURLOPT_URL, req->url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, req->method ? req->method : "GET");
    if (req->unix_socket != NULL) {
        curl_easy_setopt(h, CURLOPT_UNIX_SOCKET_PATH, req->unix_socket);
    }
    /* never pick up a proxy from the environment for core traffic */
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    if (req->method != NULL && strcmp(req->method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    }
    if (up != NULL) { /* chunked: the length is not known before the end */
        curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
        curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
        curl_easy_setopt(h, CURLOPT_READDATA, up);
    }
    else if (req->body != NULL) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, req->body);
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
    }
    else if (req->method != NULL && strcmp(req->method, "POST") == 0) {
        curl_easy_setopt(h, CURLOPT_POSTFIELDS, "");
        curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)0);
    }
    for (size_t i = 0; req->headers != NULL && req->headers[i] != NULL; i++) {
        hdrs = curl_slist_append(hdrs, req->headers[i]);
    }
    hdrs = curl_slist_append(hdrs, "Expect:");
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS,
                     req->connect_timeout_ms > 0 ? req->connect_timeout_ms : 10000L);
    if (req->timeout_ms > 0) {
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, req->timeout_ms);
    }
    if (req->cancel != NULL) {
        curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(h, CURLOPT_XFERINFODATA, &x);
        curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    }
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &resp->status);
    if (curl_easy_getinfo(h, CURLINFO_CONTENT_TYPE, &ctype) == CURLE_OK && ctype != NULL) {
        resp->content_type = xstrdup(ctype);
    }
    if (rc == CURLE_ABORTED_BY_CALLBACK) {
        ret = sbx_error_set(err, SBX_E_CANCELLED, "%s %s: cancelled", req->method, req->url);
    }
    else if (rc == CURLE_WRITE_ERROR && x.too_big) {
        ret = sbx_error_set(err, SBX_E_PROTOCOL, "%s %s: reply larger than %u bytes", req->method,
                            req->url, SBX_HTTP_MAX_BODY);
    }
    else if (rc == CURLE_WRITE_ERROR && x.aborted_by_callback) {
        ret = sbx_error_set(err, SBX_E_PROTOCOL, "%s %s: stream aborted by its reader", req->method,
                            req->url);
    }
    else if (rc != CURLE_OK) {
        ret = sbx_error_set(err, rc == CURLE_OPERATION_TIMEDOUT ? SBX_E_TIMEOUT : SBX_E_ENGINE,
                            "%s %s%s%s: %s", req->method ? req->method : "GET", req->url,
                            req->unix_socket ? " via " : "",
                            req->unix_socket ? req->unix_socket : "", curl_easy_strerror(rc));
    }
    resp->body = x.buf ? x.buf : xstrdup("");
    resp->body_len = x.len;
    if (ret < 0) {
        free(resp->body);
        free(resp->content_type);
        memset(resp, 0, sizeof(*resp));
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return ret;
}

void sbx_http_response_free(struct sbx_http_response *resp)
{
    if (resp == NULL) {
        return;
    }
    free(resp->body);
    free(resp->content_type);
    memset(resp, 0, sizeof(*resp));
}
