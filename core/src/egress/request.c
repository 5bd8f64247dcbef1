/* request.c - the proxy's HTTP/1 request head parser.
 *
 * The head's syntax is the one HTTP/1 parser's (http/h1.c: one request line
 * "METHOD SP TARGET SP HTTP/1.x", CRLF line ends, token header names, no folding, one
 * way to frame a body); here: the target's form, at most one Host header and it must
 * name the same host (and port, when it gives one) as the target, the forwarded head. */
#include "egress/request.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "http/h1.h"
#include "util/xalloc.h"

long sbx_egress_head_end(const char *buf, size_t len)
{
    size_t scanned = 0;

    return sbx_egress_head_scan(buf, len, &scanned);
}

long sbx_egress_head_scan(const char *buf, size_t len, size_t *scanned)
{
    const char *why = NULL;

    return sbx_h1_head_end(buf, len, scanned, &why);
}

#define FAIL(st, why)                                                                              \
    do {                                                                                           \
        *status = (st);                                                                            \
        *reason = (why);                                                                           \
        return -1;                                                                                 \
    } while (0)

/* Parses "host[:port]" or "[v6][:port]" of n bytes. default_port 0 means the port is
 * required. */
static int parse_authority(const char *s, size_t n, unsigned default_port, char *host, int *is_ip,
                           struct sbx_egress_addr *ip, unsigned *port, int *status,
                           const char **reason)
{
    const char *h = s;
    size_t hl;
    const char *p = NULL;
    size_t pl = 0;
    char tmp[SBX_EGRESS_HOST_MAX + 2];
    const char *why;

    if (n == 0) {
        FAIL(400, "bad-target");
    }
    if (memchr(s, '@', n) != NULL || memchr(s, '%', n) != NULL) {
        FAIL(400, "bad-target");
    }
    if (s[0] == '[') {
        const char *close = memchr(s, ']', n);

        if (close == NULL) {
            FAIL(400, "host-malformed");
        }
        h = s + 1;
        hl = (size_t)(close - h);
        if (close + 1 < s + n) {
            if (close[1] != ':') {
                FAIL(400, "host-malformed");
            }
            p = close + 2;
            pl = (size_t)(s + n - p);
        }
        if (hl == 0 || hl > 45) {
            FAIL(400, "host-malformed");
        }
        memcpy(tmp, h, hl);
        tmp[hl] = '\0';
        if (!sbx_egress_addr_parse(tmp, ip) || strchr(tmp, ':') == NULL) {
            FAIL(400, "host-malformed");
        }
        *is_ip = 1;
        sbx_egress_addr_format(ip, host, SBX_EGRESS_HOST_MAX + 1);
    }
    else {
        const char *colon = memchr(s, ':', n);

        hl = n;
        if (colon != NULL) {
            hl = (size_t)(colon - s);
            p = colon + 1;
            pl = (size_t)(s + n - p);
        }
        if (hl > SBX_EGRESS_HOST_MAX + 1) {
            FAIL(400, "host-too-long");
        }
        memcpy(tmp, h, hl);
        tmp[hl] = '\0';
        if (sbx_egress_addr_parse(tmp, ip) && strchr(tmp, ':') == NULL) {
            *is_ip = 1;
            sbx_egress_addr_format(ip, host, SBX_EGRESS_HOST_MAX + 1);
        }
        else {
            *is_ip = 0;
            why = sbx_egress_host_normalize(tmp, hl, host);
            if (why != NULL) {
                FAIL(400, why);
            }
        }
    }
    if (p == NULL) {
        if (default_port == 0) {
            FAIL(400, "bad-port");
        }
        *port = default_port;
        return 0;
    }
    if (pl == 0 || pl > 5) {
        FAIL(400, "bad-port");
    }
    *port = 0;
    for (size_t i = 0; i < pl; i++) {
        if (!isdigit((unsigned char)p[i])) {
            FAIL(400, "bad-port");
        }
        *port = *port * 10 + (unsigned)(p[i] - '0');
    }
    if (*port == 0 || *port > 65535) {
        FAIL(400, "bad-port");
    }
    return 0;
}

static int hop_by_hop(const char *name, size_t n)
{
    static const char *const names[] = {
        "connection",         "proxy-connection", "keep-alive", "proxy-authorization",
        "proxy-authenticate", "upgrade",          "te",         NULL};

    for (size_t i = 0; names[i] != NULL; i++) {
        if (strlen(names[i]) == n && strncasecmp(names[i], name, n) == 0) {
            return 1;
        }
    }
    return 0;
}

/* On failure the parsed method, host and port stay for the log. */
static void drop_forward(struct sbx_egress_request *r)
{
    free(r->forward);
    r->forward = NULL;
    r->forward_len = 0;
}

void sbx_egress_request_clear(struct sbx_egress_request *r)
{
    free(r->forward);
    memset(r, 0, sizeof(*r));
}

static void append(char **buf, size_t *len, size_t *cap, const char *s, size_t n)
{
    if (*len + n + 1 > *cap) {
        *cap = (*len + n + 1) * 2;
        *buf = xrealloc(*buf, *cap);
    }
    memcpy(*buf + *len, s, n);
    *len += n;
    (*buf)[*len] = '\0';
}

static int parse_head(const char *buf, size_t len, const struct sbx_egress_request *tunnel,
                      struct sbx_egress_request *r, int *status, const char **reason);

int sbx_egress_request_parse(const char *buf, size_t len, struct sbx_egress_request *r, int *status,
                             const char **reason)
{
    return parse_head(buf, len, NULL, r, status, reason);
}

int sbx_egress_request_parse_tunnel(const char *buf, size_t len,
                                    const struct sbx_egress_request *tunnel,
                                    struct sbx_egress_request *r, int *status, const char **reason)
{
    return parse_head(buf, len, tunnel, r, status, reason);
}

/* The head parser's refusal as the proxy's status and reason code. */
static int h1_refusal(const struct sbx_h1_head *h, int *status, const char **reason)
{
    switch (h->error) {
    case SBX_H1_E_TOO_LARGE:
        FAIL(431, "header-too-large");
    case SBX_H1_E_TOO_MANY:
        FAIL(431, "too-many-headers");
    case SBX_H1_E_TARGET:
        FAIL(400, "bad-target");
    case SBX_H1_E_HEADER:
    case SBX_H1_E_LINE:
        FAIL(400, "bad-header");
    case SBX_H1_E_LENGTH:
        FAIL(400, "bad-content-length");
    case SBX_H1_E_TE:
        FAIL(411, "chunked-body"); /* the proxy takes no Transfer-Encoding at all */
    case SBX_H1_E_BYTES:
        FAIL(400, "malformed-head");
    default:
        FAIL(400, "bad-request-line");
    }
}

/* A plain request's target: absolute-form "http://AUTHORITY/path" (or, in a tunnel,
 * origin-form: the authority is the tunnel's) gives the host, and the forwarded
 * request line gets the path alone. */
static int parse_target(const struct sbx_h1_head *h, const struct sbx_egress_request *tunnel,
                        struct sbx_egress_request *r, size_t *cap, int *status, const char **reason)
{
    const char *target = h->target.p;
    size_t target_len = h->target.n;
    const char *path;
    size_t path_len;

    if (target_len >= 8 && strncasecmp(target, "https://", 8) == 0) {
        FAIL(400, "use-connect-for-https");
    }
    if (tunnel != NULL && (target[0] == '/' || (target_len == 1 && target[0] == '*'))) {
        /* origin-form in a tunnel: the authority is the tunnel's */
        memcpy(r->host, tunnel->host, sizeof(r->host));
        r->host_is_ip = tunnel->host_is_ip;
        r->ip = tunnel->ip;
        r->port = tunnel->port;
        path = target;
        path_len = target_len;
    }
    else {
        const char *auth;
        size_t al = 0;

        if (target_len < 7 || strncasecmp(target, "http://", 7) != 0) {
            FAIL(400, "not-a-proxy-request");
        }
        auth = target + 7;
        while (auth + al < target + target_len && strchr("/?#", auth[al]) == NULL) {
            al++;
        }
        if (parse_authority(auth, al, 80, r->host, &r->host_is_ip, &r->ip, &r->port, status,
                            reason) < 0) {
            return -1;
        }
        if (tunnel != NULL && (r->host_is_ip != tunnel->host_is_ip ||
                               strcmp(r->host, tunnel->host) != 0 || r->port != tunnel->port)) {
            FAIL(403, "host-mismatch");
        }
        path = auth + al;
        path_len = (size_t)(target + target_len - path);
    }
    if (path_len > 0 && path[0] == '#') {
        path_len = 0;
    }
    append(&r->forward, &r->forward_len, cap, r->method, strlen(r->method));
    append(&r->forward, &r->forward_len, cap, " ", 1);
    if (path_len == 0 || (path[0] != '/' && !(path_len == 1 && path[0] == '*'))) {
        append(&r->forward, &r->forward_len, cap, "/", 1);
    }
    append(&r->forward, &r->forward_len, cap, path, path_len);
    append(&r->forward, &r->forward_len, cap, h->minor ? " HTTP/1.1\r\n" : " HTTP/1.0\r\n", 11);
    return 0;
}

/* The parsed headers: Host must name the target's authority; hop-by-hop ones are not
 * forwarded. A plain request's forwarded head ends with a Host (when it had none) and
 * "Connection: close". On failure the forwarded head is dropped. */
static int check_headers(const struct sbx_h1_head *h, struct sbx_egress_request *r, size_t *cap,
                         int *status, const char **reason)
{
    int seen_host = 0;

    for (size_t i = 0; i < h->nheaders; i++) {
        const struct sbx_h1_header *hd = &h->headers[i];

        if (hd->name.n == 4 && strncasecmp(hd->name.p, "host", 4) == 0) {
            char host[SBX_EGRESS_HOST_MAX + 1];
            int h_ip = 0;
            struct sbx_egress_addr a;
            unsigned hp = 0;

            if (seen_host++) {
                drop_forward(r);
                FAIL(400, "duplicate-host");
            }
            if (parse_authority(hd->value.p, hd->value.n, r->port, host, &h_ip, &a, &hp, status,
                                reason) < 0) {
                drop_forward(r);
                return -1;
            }
            if (h_ip != r->host_is_ip || strcmp(host, r->host) != 0 || hp != r->port) {
                drop_forward(r);
                FAIL(403, "host-mismatch");
            }
        }
        if (!r->connect && !hop_by_hop(hd->name.p, hd->name.n)) {
            append(&r->forward, &r->forward_len, cap, hd->name.p, hd->line_len);
        }
    }
    if (!r->connect) {
        if (!seen_host) {
            char *hl = r->host_is_ip && r->ip.family == AF_INET6
                           ? xasprintf("Host: [%s]:%u\r\n", r->host, r->port)
                           : xasprintf("Host: %s:%u\r\n", r->host, r->port);

            append(&r->forward, &r->forward_len, cap, hl, strlen(hl));
            free(hl);
        }
        append(&r->forward, &r->forward_len, cap, "Connection: close\r\n\r\n", 21);
    }
    return 0;
}

/* The head's syntax and framing are the one HTTP/1 parser's (http/h1.c); what is
 * the proxy's own: the method's size, the target's form, Host, the forwarded head,
 * and no Transfer-Encoding on a plain request: the proxy forwards exactly one
 * request and must know its end (a chunked body would need every chunk parsed). */
static int parse_head(const char *buf, size_t len, const struct sbx_egress_request *tunnel,
                      struct sbx_egress_request *r, int *status, const char **reason)
{
    static const struct sbx_h1_limits lim = {SBX_EGRESS_HEAD_MAX, SBX_EGRESS_HEADERS_MAX,
                                             SBX_EGRESS_HEAD_MAX};
    struct sbx_h1_head h;
    size_t cap = 0;

    memset(r, 0, sizeof(*r));
    sbx_h1_init(&h, 0, &lim);
    if (sbx_h1_feed(&h, buf, len) <= 0) {
        if (h.error == SBX_H1_OK) {
            FAIL(400, "malformed-head"); /* not a whole head */
        }
        return h1_refusal(&h, status, reason);
    }
    if (h.method.n >= sizeof(r->method)) {
        FAIL(400, "bad-request-line");
    }
    memcpy(r->method, h.method.p, h.method.n);
    if (strcmp(r->method, "CONNECT") == 0) {
        if (tunnel != NULL) {
            FAIL(400, "connect-in-tunnel");
        }
        r->connect = 1;
        if (parse_authority(h.target.p, h.target.n, 0, r->host, &r->host_is_ip, &r->ip, &r->port,
                            status, reason) < 0) {
            return -1;
        }
    }
    else if (parse_target(&h, tunnel, r, &cap, status, reason) < 0) {
        return -1;
    }
    if (check_headers(&h, r, &cap, status, reason) < 0) {
        return -1;
    }
    if (!r->connect && h.framing == SBX_H1_CHUNKED) {
        drop_forward(r);
        FAIL(411, "chunked-body");
    }
    r->body = !r->connect && h.framing == SBX_H1_LENGTH ? h.content_length : 0;
    return 0;
}
