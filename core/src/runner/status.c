/* status.c - the runner's read-only status page (status.h; docs/operations.md,
 * "Status page"). The page, its script and style are embedded in the binary
 * (core/src/runner/status_ui/, generated into status_ui.h) and served with a
 * strict Content-Security-Policy; the script polls the API's GET /v1/queue and
 * GET /v1/jobs. Over the unix socket the page is the local client's. Over TCP
 * it is behind the API's tokens: a login form takes a client's token once
 * (POST body, never a URL), checks it as a bearer token would be, and sets a
 * random session id in an HttpOnly, SameSite=Strict cookie. The session is
 * kept only in memory and is good only for GETs of what the page reads, so a
 * cookie can never submit or cancel. Loop thread only. */
#include "runner/status.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/random.h>
#include <time.h>

#include "runner/api_int.h"
#include "runner/auth.h"
#include "runner/rmetrics.h"
#include "status_ui.h"
#include "util/log.h"
#include "util/xalloc.h"

#define ID_BYTES 32
#define ID_HEX (ID_BYTES * 2)

struct status_session {
    char id[ID_HEX + 1]; /* hex; "" when free */
    const struct runner_client *who;
    int64_t created, expires; /* monotonic seconds */
};

struct runner_status {
    const struct runner_auth *auth; /* who a login's token is */
    struct runner_metrics *metrics; /* a refused login counted */
    struct status_session s[SBX_STATUS_SESSIONS];
};

static const char csp[] = "default-src 'none'; script-src 'self'; style-src 'self'; "
                          "connect-src 'self'; img-src 'self'; form-action 'self'; "
                          "frame-ancestors 'none'; base-uri 'none'";

struct runner_status *runner_status_new(const struct runner_auth *auth,
                                        struct runner_metrics *metrics)
{
    struct runner_status *st = xcalloc(1, sizeof(*st));

    st->auth = auth;
    st->metrics = metrics;
    return st;
}

void runner_status_free(struct runner_status *st)
{
    if (st != NULL) {
        explicit_bzero(st, sizeof(*st));
        free(st);
    }
}

/* ---- replies ------------------------------------------------------------- */

static void headers(struct evhttp_request *req, const char *type)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);

    evhttp_add_header(h, "Content-Type", type);
    evhttp_add_header(h, "Content-Security-Policy", csp);
    evhttp_add_header(h, "X-Content-Type-Options", "nosniff");
    evhttp_add_header(h, "X-Frame-Options", "DENY");
    evhttp_add_header(h, "Referrer-Policy", "same-origin");
    evhttp_add_header(h, "Cache-Control", "no-store");
}

static void send_asset(struct evhttp_request *req, const char *type, const unsigned char *data,
                       size_t len)
{
    struct evbuffer *b = evbuffer_new();

    evbuffer_add(b, data, len);
    headers(req, type);
    evhttp_send_reply(req, 200, "OK", b);
    evbuffer_free(b);
}

/* An embedded page with its marker comment replaced by insert (fixed text). */
static void send_html(struct evhttp_request *req, int code, const unsigned char *page, size_t len,
                      const char *marker, const char *insert)
{
    const char *at = strstr((const char *)page, marker);
    struct evbuffer *b = evbuffer_new();

    if (at == NULL) {
        evbuffer_add(b, page, len);
    }
    else {
        size_t head = (size_t)(at - (const char *)page);

        evbuffer_add(b, page, head);
        evbuffer_add(b, insert, strlen(insert));
        evbuffer_add(b, at + strlen(marker), len - head - strlen(marker));
    }
    headers(req, "text/html; charset=utf-8");
    evhttp_send_reply(req, code, code < 300 ? "OK" : "Error", b);
    evbuffer_free(b);
}

static void send_page(struct evhttp_request *req, int logout)
{
    send_html(req, 200, sbx_ui_index_html, sbx_ui_index_html_len, "<!--LOGOUT-->",
              logout ? "<form method=\"post\" action=\"/logout\"><button type=\"submit\">"
                       "Log out</button></form>"
                     : "");
}

/* The login form, with a message (fixed text, no input echoed). */
static void send_login(struct evhttp_request *req, int code, const char *message)
{
    char p[256] = "";

    if (message != NULL) {
        snprintf(p, sizeof(p), "<p class=\"error\" id=\"message\">%s</p>", message);
    }
    send_html(req, code, sbx_ui_login_html, sbx_ui_login_html_len, "<!--MESSAGE-->", p);
}

static void redirect_home(struct evhttp_request *req, const char *cookie)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    struct evbuffer *b = evbuffer_new();

    if (cookie != NULL) {
        evhttp_add_header(h, "Set-Cookie", cookie);
    }
    evhttp_add_header(h, "Location", "/");
    headers(req, "text/plain; charset=utf-8");
    evhttp_send_reply(req, 303, "See Other", b);
    evbuffer_free(b);
}

/* ---- sessions ------------------------------------------------------------ */

/* The session id of the request's cookie into id (ID_HEX + 1), or -1. */
static int cookie_id(struct evhttp_request *req, char *id)
{
    const char *p = evhttp_find_header(evhttp_request_get_input_headers(req), "Cookie");
    size_t nl = strlen(SBX_STATUS_COOKIE);

    while (p != NULL && *p != '\0') {
        p += strspn(p, " \t;");
        if (strncmp(p, SBX_STATUS_COOKIE, nl) == 0 && p[nl] == '=') {
            const char *v = p + nl + 1;
            size_t n = strcspn(v, "; \t");

            if (n != ID_HEX) {
                return -1;
            }
            memcpy(id, v, n);
            id[n] = '\0';
            return 0;
        }
        p = strchr(p, ';');
    }
    return -1;
}

/* The live session of the request's cookie, or NULL; compares every session
 * in constant time per id. */
static struct status_session *session_of(struct runner_status *st, struct evhttp_request *req)
{
    struct status_session *found = NULL;
    char id[ID_HEX + 1];
    int64_t now = (sbx_mono_ms() / 1000);

    if (st == NULL || cookie_id(req, id) < 0) {
        return NULL;
    }
    for (int i = 0; i < SBX_STATUS_SESSIONS; i++) {
        struct status_session *s = &st->s[i];
        unsigned char d = 0;

        if (s->id[0] == '\0') {
            continue;
        }
        if (s->expires <= now) {
            explicit_bzero(s, sizeof(*s));
            continue;
        }
        for (int k = 0; k < ID_HEX; k++) {
            d |= (unsigned char)(s->id[k] ^ id[k]);
        }
        if (d == 0) {
            found = s;
        }
    }
    explicit_bzero(id, sizeof(id));
    return found;
}

/* A new session for who: its Set-Cookie value into cookie, or -1. */
static int session_new(struct runner_status *st, const struct runner_client *who, char *cookie,
                       size_t len)
{
    struct status_session *s = &st->s[0];
    unsigned char raw[ID_BYTES];
    int64_t now = (sbx_mono_ms() / 1000);

    for (int i = 0; i < SBX_STATUS_SESSIONS; i++) {
        struct status_session *c = &st->s[i];

        if (c->id[0] == '\0' || c->expires <= now) {
            s = c;
            break;
        }
        if (c->created < s->created) {
            s = c; /* full: the oldest goes */
        }
    }
    if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw)) {
        return -1;
    }
    for (int i = 0; i < ID_BYTES; i++) {
        snprintf(s->id + 2 * i, 3, "%02x", raw[i]);
    }
    explicit_bzero(raw, sizeof(raw));
    s->who = who;
    s->created = now;
    s->expires = now + SBX_STATUS_SESSION_S;
    snprintf(cookie, len, "%s=%s; Path=/; Max-Age=%d; HttpOnly; SameSite=Strict", SBX_STATUS_COOKIE,
             s->id, SBX_STATUS_SESSION_S);
    return 0;
}

const struct runner_client *runner_status_session(struct runner_status *st,
                                                  struct evhttp_request *req, const char *path)
{
    struct status_session *s;

    if (evhttp_request_get_command(req) != EVHTTP_REQ_GET ||
        (strcmp(path, "/v1/queue") != 0 && strcmp(path, "/v1/slots") != 0 &&
         strcmp(path, "/v1/jobs") != 0 && strncmp(path, "/v1/jobs/", 9) != 0)) {
        return NULL;
    }
    s = session_of(st, req);
    return s != NULL ? s->who : NULL;
}

/* ---- login and logout ------------------------------------------------------ */

/* A cross-site form post: an Origin header that is not this host. */
static int cross_site(struct evhttp_request *req)
{
    struct evkeyvalq *in = evhttp_request_get_input_headers(req);
    const char *origin = evhttp_find_header(in, "Origin");
    const char *host = evhttp_find_header(in, "Host");
    const char *rest;

    if (origin == NULL) {
        return 0; /* not from a browser (a browser sends one with same-origin referrers) */
    }
    if (host == NULL) {
        return 1;
    }
    rest = strncmp(origin, "http://", 7) == 0    ? origin + 7
           : strncmp(origin, "https://", 8) == 0 ? origin + 8
                                                 : NULL;
    return rest == NULL || strcmp(rest, host) != 0;
}

static void handle_login(struct runner_status *st, struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t len = evbuffer_get_length(in);
    struct evkeyvalq q;
    struct evkeyval *kv;
    const struct runner_client *who = NULL;
    const char *token;
    char *body, *bearer = NULL;
    char cookie[160];

    if (cross_site(req)) {
        send_login(req, 403, "A login from another site was refused.");
        return;
    }
    if (len > SBX_STATUS_MAX_LOGIN) {
        send_login(req, 413, "The login form was too large.");
        return;
    }
    body = xmalloc(len + 1);
    evbuffer_copyout(in, body, len);
    body[len] = '\0';
    if (len > 0) {
        explicit_bzero(evbuffer_pullup(in, -1), len); /* the token's bytes */
    }
    TAILQ_INIT(&q);
    if (evhttp_parse_query_str(body, &q) == 0 && (token = evhttp_find_header(&q, "token")) &&
        asprintf(&bearer, "Bearer %s", token) > 0) {
        who = runner_authenticate(st->auth, bearer);
        explicit_bzero(bearer, strlen(bearer));
        free(bearer);
    }
    TAILQ_FOREACH(kv, &q, next)
    {
        explicit_bzero(kv->value, strlen(kv->value));
    }
    evhttp_clear_headers(&q);
    explicit_bzero(body, len);
    free(body);
    if (who == NULL) {
        rm_refused(st->metrics, RM_REFUSED_UNAUTHORIZED);
        sbx_info("runner: status page: a login with a wrong or missing token refused");
        evhttp_add_header(evhttp_request_get_output_headers(req), "Connection", "close");
        send_login(req, 401, "Wrong token.");
        return;
    }
    if ((who->scopes & (SBX_SCOPE_READ_OWN | SBX_SCOPE_READ_ALL)) == 0) {
        sbx_info("runner: status page: client '%s' lacks scope 'read-own' (login refused)",
                 who->name);
        send_login(req, 403, "This client lacks scope read-own or read-all.");
        return;
    }
    if (session_new(st, who, cookie, sizeof(cookie)) < 0) {
        send_login(req, 500, "No session: the system's random source failed.");
        return;
    }
    sbx_info("runner: status page: client '%s' logged in", who->name);
    redirect_home(req, cookie);
    explicit_bzero(cookie, sizeof(cookie));
}

static void handle_logout(struct runner_status *st, struct evhttp_request *req)
{
    struct status_session *s = session_of(st, req);

    if (s != NULL) {
        explicit_bzero(s, sizeof(*s));
    }
    redirect_home(req, SBX_STATUS_COOKIE "=; Path=/; Max-Age=0; HttpOnly; SameSite=Strict");
}

/* ---- routing ------------------------------------------------------------- */

static int method_is(struct evhttp_request *req, enum evhttp_cmd_type m, const char *path,
                     const char *use)
{
    if (evhttp_request_get_command(req) == m) {
        return 1;
    }
    runner_reply_error(req, 405, "%s: use %s", path, use);
    return 0;
}

int runner_status_route(struct runner_status *st, int tcp, struct evhttp_request *req,
                        const char *path)
{
    if (strcmp(path, "/ui/status.js") == 0 || strcmp(path, "/ui/status.css") == 0 ||
        strcmp(path, "/ui/icon.svg") == 0) {
        /* static, the same for everyone, no data: served without a token */
        if (!method_is(req, EVHTTP_REQ_GET, path, "GET")) {
            return 1;
        }
        if (path[4] == 'i') {
            send_asset(req, "image/svg+xml", sbx_ui_icon_svg, sbx_ui_icon_svg_len);
        }
        else if (strcmp(path + 11, "js") == 0) {
            send_asset(req, "text/javascript; charset=utf-8", sbx_ui_status_js,
                       sbx_ui_status_js_len);
        }
        else {
            send_asset(req, "text/css; charset=utf-8", sbx_ui_status_css, sbx_ui_status_css_len);
        }
        return 1;
    }
    if (strcmp(path, "/") == 0) {
        if (!method_is(req, EVHTTP_REQ_GET, path, "GET")) {
            return 1;
        }
        if (!tcp) {
            send_page(req, 0);
        }
        else if (session_of(st, req) != NULL) {
            send_page(req, 1);
        }
        else if (runner_authenticate(st->auth,
                                     evhttp_find_header(evhttp_request_get_input_headers(req),
                                                        "Authorization")) != NULL) {
            send_page(req, 0);
        }
        else {
            send_login(req, 200, NULL);
        }
        return 1;
    }
    if (strcmp(path, "/login") == 0) {
        if (evhttp_request_get_command(req) == EVHTTP_REQ_GET || !tcp) {
            redirect_home(req, NULL); /* the form is at `/`; the unix socket needs none */
        }
        else if (method_is(req, EVHTTP_REQ_POST, path, "POST")) {
            handle_login(st, req);
        }
        return 1;
    }
    if (strcmp(path, "/logout") == 0) {
        if (method_is(req, EVHTTP_REQ_POST, path, "POST")) {
            handle_logout(st, req);
        }
        return 1;
    }
    return 0;
}
