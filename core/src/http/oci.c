/* oci.c - a small OCI distribution API client over libcurl (oci.h). */
#include "http/oci.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "http/http.h"
#include "util/xalloc.h"

#define OCI_HEADER_MAX 4096       /* one response header kept at most */
#define OCI_TOKEN_REPLY_MAX 65536 /* a token realm's reply */
#define OCI_TIMEOUT_MS (300 * 1000L)

struct xfer {
    struct sbx_oci_reply *r;
    sbx_oci_sink sink;
    void *ud;
    size_t max;
    size_t cap;
    size_t seen;
    int too_big;
    int stopped;
    char challenge[OCI_HEADER_MAX];
    long status; /* of the current response (redirects: the last) */
};

static void zfree(char *s)
{
    if (s != NULL) {
        memset(s, 0, strlen(s));
        free(s);
    }
}

void sbx_oci_fini(struct sbx_oci *o)
{
    zfree(o->user);
    zfree(o->pass);
    zfree(o->bearer);
    o->user = o->pass = o->bearer = NULL;
}

void sbx_oci_reply_free(struct sbx_oci_reply *r)
{
    free(r->body);
    memset(r, 0, sizeof(*r));
}

/* "Name: value" when the header is name; copies the trimmed value. */
static int header_is(const char *line, size_t len, const char *name, char *out, size_t size)
{
    size_t n = strlen(name);
    size_t v;

    if (len <= n || strncasecmp(line, name, n) != 0 || line[n] != ':') {
        return 0;
    }
    v = n + 1;
    while (v < len && (line[v] == ' ' || line[v] == '\t')) {
        v++;
    }
    while (len > v && (line[len - 1] == '\r' || line[len - 1] == '\n' || line[len - 1] == ' ')) {
        len--;
    }
    snprintf(out, size, "%.*s", (int)(len - v), line + v);
    return 1;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;

    if (n > 5 && strncmp(data, "HTTP/", 5) == 0) {
        /* a new response (after a redirect or a 100): forget the last one's */
        x->challenge[0] = '\0';
        x->r->digest[0] = '\0';
        x->r->content_type[0] = '\0';
        return n;
    }
    if (n < OCI_HEADER_MAX) {
        (void)(header_is(data, n, "Docker-Content-Digest", x->r->digest, sizeof(x->r->digest)) ||
               header_is(data, n, "Content-Type", x->r->content_type, sizeof(x->r->content_type)) ||
               header_is(data, n, "WWW-Authenticate", x->challenge, sizeof(x->challenge)));
    }
    return n;
}

static size_t on_write(char *data, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;

    if (x->seen + n > x->max) {
        x->too_big = 1;
        return 0;
    }
    x->seen += n;
    if (x->sink != NULL && x->status / 100 == 2) {
        if (x->sink(x->ud, data, n) != 0) {
            x->stopped = 1;
            return 0;
        }
        return n;
    }
    if (x->r->len + n + 1 > x->cap) {
        x->cap = (x->r->len + n + 1) * 2;
        x->r->body = xrealloc(x->r->body, x->cap);
    }
    memcpy(x->r->body + x->r->len, data, n);
    x->r->len += n;
    x->r->body[x->r->len] = '\0';
    return n;
}

static int on_progress(void *ud, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    const struct sbx_oci *o = ud;

    (void)dt;
    (void)dn;
    (void)ut;
    (void)un;
    /* (changed, issue 31) an atomic read: another thread may set the flag */
    return o->cancel != NULL && __atomic_load_n(o->cancel, __ATOMIC_ACQUIRE) ? 1 : 0;
}

/* The status line's code is known before the body: kept for on_write. */
static size_t on_header_status(char *data, size_t size, size_t nmemb, void *ud)
{
    struct xfer *x = ud;
    size_t n = size * nmemb;

    if (n > 12 && strncmp(data, "HTTP/", 5) == 0) {
        const char *sp = memchr(data, ' ', n);

        x->status = sp ? strtol(sp + 1, NULL, 10) : 0;
    }
    return on_header(data, size, nmemb, ud);
}

/* One exchange; auth: an "Authorization: ..." header or NULL. */
static int exchange(struct sbx_oci *o, const char *method, const char *url, const char *auth,
                    const char *const *accept, size_t max, sbx_oci_sink sink, void *ud,
                    struct sbx_oci_reply *r, char *challenge, sbx_error_t **err)
{
    struct xfer x = {.r = r, .sink = sink, .ud = ud, .max = max};
    struct curl_slist *hdrs = NULL;
    CURL *h;
    CURLcode rc;
    int ret = 0;

    sbx_http_global_init();
    h = curl_easy_init();
    if (h == NULL) {
        return sbx_error_set(err, SBX_E_ENGINE, "registry %s: cannot create a libcurl handle",
                             o->host);
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, method);
    if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
    }
    curl_easy_setopt(h, CURLOPT_PROXY, "");
    curl_easy_setopt(h, CURLOPT_NOPROXY, "*");
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "https");
    /* blobs may be redirected to storage; the Authorization header is not
     * sent to another host (CURLOPT_UNRESTRICTED_AUTH stays off) */
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, strcmp(method, "GET") == 0 ? 1L : 0L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 5L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYPEER, 1L);
    curl_easy_setopt(h, CURLOPT_SSL_VERIFYHOST, 2L);
    if (o->ca_file != NULL) {
        curl_easy_setopt(h, CURLOPT_CAINFO, o->ca_file);
    }
    for (size_t i = 0; accept != NULL && accept[i] != NULL; i++) {
        char line[256];

        snprintf(line, sizeof(line), "Accept: %s", accept[i]);
        hdrs = curl_slist_append(hdrs, line);
    }
    if (auth != NULL) {
        hdrs = curl_slist_append(hdrs, auth);
    }
    curl_easy_setopt(h, CURLOPT_HTTPHEADER, hdrs);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header_status);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &x);
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &x);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, 10000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, OCI_TIMEOUT_MS);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, o);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    rc = curl_easy_perform(h);
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
    if (rc == CURLE_WRITE_ERROR && x.too_big) {
        ret = sbx_error_set(err, SBX_E_PROTOCOL, "registry %s: %s: reply larger than %zu bytes",
                            o->host, method, max);
    }
    else if (rc == CURLE_WRITE_ERROR && x.stopped) {
        ret = -1; /* the sink said why */
    }
    else if (rc == CURLE_ABORTED_BY_CALLBACK) {
        ret = sbx_error_set(err, SBX_E_CANCELLED, "registry %s: cancelled", o->host);
    }
    else if (rc != CURLE_OK) {
        ret = sbx_error_set(err, rc == CURLE_OPERATION_TIMEDOUT ? SBX_E_TIMEOUT : SBX_E_ENGINE,
                            "registry %s: %s: %s", o->host, method, curl_easy_strerror(rc));
    }
    if (challenge != NULL) {
        snprintf(challenge, OCI_HEADER_MAX, "%s", x.challenge);
    }
    curl_slist_free_all(hdrs);
    curl_easy_cleanup(h);
    return ret;
}

int sbx_oci_challenge_param(const char *c, const char *name, char *out, size_t size)
{
    size_t n = strlen(name);
    const char *p = c;

    while ((p = strcasestr(p, name)) != NULL) {
        int start = p == c || p[-1] == ' ' || p[-1] == ',';

        if (start && p[n] == '=' && p[n + 1] == '"') {
            const char *v = p + n + 2;
            const char *end = strchr(v, '"');

            if (end == NULL || (size_t)(end - v) >= size) {
                return -1;
            }
            snprintf(out, size, "%.*s", (int)(end - v), v);
            return 0;
        }
        p += n;
    }
    return -1;
}

static char *basic_header(const struct sbx_oci *o)
{
    char *up = xasprintf("%s:%s", o->user, o->pass);
    char *b64;
    char *line;
    size_t len = strlen(up);
    static const char a[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t k = 0;

    b64 = xmalloc(4 * ((len + 2) / 3) + 1);
    for (size_t i = 0; i < len; i += 3) {
        unsigned v = (unsigned)(unsigned char)up[i] << 16;

        v |= i + 1 < len ? (unsigned)(unsigned char)up[i + 1] << 8 : 0;
        v |= i + 2 < len ? (unsigned)(unsigned char)up[i + 2] : 0;
        b64[k++] = a[(v >> 18) & 63];
        b64[k++] = a[(v >> 12) & 63];
        b64[k++] = i + 1 < len ? a[(v >> 6) & 63] : '=';
        b64[k++] = i + 2 < len ? a[v & 63] : '=';
    }
    b64[k] = '\0';
    line = xasprintf("Authorization: Basic %s", b64);
    zfree(up);
    zfree(b64);
    return line;
}

/* A token from the Bearer challenge's realm (https only), with the login
 * when there is one. */
static int get_token(struct sbx_oci *o, const char *challenge, sbx_error_t **err)
{
    char realm[1024];
    char service[256] = "";
    char scope[512] = "";
    char *url;
    char *auth = NULL;
    struct sbx_oci_reply r = {0};
    json_t *j;
    const char *tok;
    CURL *esc = curl_easy_init();
    int ret;

    if (sbx_oci_challenge_param(challenge, "realm", realm, sizeof(realm)) < 0 ||
        strncmp(realm, "https://", 8) != 0) {
        curl_easy_cleanup(esc);
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "registry %s: its token realm is missing or not https", o->host);
    }
    sbx_oci_challenge_param(challenge, "service", service, sizeof(service));
    sbx_oci_challenge_param(challenge, "scope", scope, sizeof(scope));
    {
        char *s1 = curl_easy_escape(esc, service, 0);
        char *s2 = curl_easy_escape(esc, scope, 0);

        url = xasprintf("%s%sservice=%s%s%s", realm, strchr(realm, '?') ? "&" : "?", s1 ? s1 : "",
                        scope[0] ? "&scope=" : "", scope[0] && s2 ? s2 : "");
        curl_free(s1);
        curl_free(s2);
    }
    curl_easy_cleanup(esc);
    if (o->user != NULL) {
        auth = basic_header(o);
    }
    ret = exchange(o, "GET", url, auth, NULL, OCI_TOKEN_REPLY_MAX, NULL, NULL, &r, NULL, err);
    free(url);
    zfree(auth);
    if (ret < 0) {
        sbx_oci_reply_free(&r);
        return -1;
    }
    if (r.status != 200) {
        long st = r.status;

        sbx_oci_reply_free(&r);
        return sbx_error_set(err, SBX_E_ENGINE, "registry %s: its token realm answered %ld (%s)",
                             o->host, st, o->user ? "the login was refused" : "no login for it");
    }
    j = json_loadb(r.body ? r.body : "", r.len, 0, NULL);
    tok = json_string_value(json_object_get(j, "token"));
    if (tok == NULL) {
        tok = json_string_value(json_object_get(j, "access_token"));
    }
    if (tok == NULL || *tok == '\0' || strlen(tok) > 16384 || strpbrk(tok, "\r\n") != NULL) {
        ret = sbx_error_set(err, SBX_E_PROTOCOL, "registry %s: its token realm gave no token",
                            o->host);
    }
    else {
        zfree(o->bearer);
        o->bearer = xstrdup(tok);
    }
    if (r.body != NULL) {
        memset(r.body, 0, r.len);
    }
    json_decref(j);
    sbx_oci_reply_free(&r);
    return ret;
}

int sbx_oci_request(struct sbx_oci *o, const char *method, const char *path,
                    const char *const *accept, size_t max, sbx_oci_sink sink, void *ud,
                    struct sbx_oci_reply *r, sbx_error_t **err)
{
    char *url = xasprintf("https://%s%s", o->host, path);
    char *challenge = xmalloc(OCI_HEADER_MAX);
    char *auth = NULL;
    int ret;

    memset(r, 0, sizeof(*r));
    for (int round = 0;; round++) {
        zfree(auth);
        auth = NULL;
        if (o->bearer != NULL) {
            auth = xasprintf("Authorization: Bearer %s", o->bearer);
        }
        else if (o->basic && o->user != NULL) {
            auth = basic_header(o);
        }
        challenge[0] = '\0';
        ret = exchange(o, method, url, auth, accept, max, sink, ud, r, challenge, err);
        if (ret < 0 || r->status != 401 || round > 0) {
            break;
        }
        if (strncasecmp(challenge, "Basic", 5) == 0 && o->user != NULL && !o->basic) {
            o->basic = 1;
        }
        else if (strncasecmp(challenge, "Bearer", 6) == 0) {
            if (get_token(o, challenge, err) < 0) {
                ret = -1;
                break;
            }
        }
        else {
            break; /* 401 with no login to give: the caller says so */
        }
        sbx_oci_reply_free(r);
    }
    zfree(auth);
    free(challenge);
    free(url);
    if (ret < 0) {
        sbx_oci_reply_free(r); /* the caller reads a reply only when it is 0 */
    }
    return ret;
}
