/* request.c - the proxy's HTTP/1 request head parser.
 *
 * Strict on purpose: one request line "METHOD SP TARGET SP HTTP/1.x" with CRLF line
 * ends, token header names, no folding, at most one Host header and it must name the
 * same host (and port, when it gives one) as the target. */
#include "egress/request.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "util/xalloc.h"

long sbx_egress_head_end(const char *buf, size_t len)
{
    size_t scanned = 0;

    return sbx_egress_head_scan(buf, len, &scanned);
}

long sbx_egress_head_scan(const char *buf, size_t len, size_t *scanned)
{
    /* every check looks at most 3 bytes back or 1 ahead: resume 3 before the end */
    for (size_t i = *scanned > 3 ? *scanned - 3 : 0; i < len; i++) {
        unsigned char ch = (unsigned char)buf[i];

        if (ch == '\n') {
            if (i == 0 || buf[i - 1] != '\r') {
                return -1;
            }
            if (i >= 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
                return (long)(i + 1);
            }
            if (i == 1) {
                return -1; /* an empty request line */
            }
        }
        else if (ch == '\r') {
            if (i + 1 < len && buf[i + 1] != '\n') {
                return -1;
            }
        }
        else if (ch == '\0' || (ch < 0x20 && ch != '\t') || ch == 0x7f) {
            return -1;
        }
    }
    *scanned = len;
    return 0;
}

static int is_tchar(unsigned char ch)
{
    return isascii(ch) && (isalnum(ch) || strchr("!#$%&'*+-.^_`|~", ch) != NULL) && ch != '\0';
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

/* The headers that say where a request's body ends: one Content-Length of digits, and
 * no Transfer-Encoding (the proxy forwards exactly one request and must know its end;
 * a chunked body would need the proxy to parse every chunk). */
static int body_header(const char *name, size_t n, const char *v, size_t vn, int *seen,
                       uint64_t *body, int *status, const char **reason)
{
    if (n == 17 && strncasecmp(name, "transfer-encoding", n) == 0) {
        FAIL(411, "chunked-body");
    }
    if (n != 14 || strncasecmp(name, "content-length", n) != 0) {
        return 0;
    }
    if ((*seen)++ || vn == 0 || vn > 15) {
        FAIL(400, "bad-content-length");
    }
    *body = 0;
    for (size_t i = 0; i < vn; i++) {
        if (!isdigit((unsigned char)v[i])) {
            FAIL(400, "bad-content-length");
        }
        *body = *body * 10 + (uint64_t)(v[i] - '0');
    }
    return 0;
}

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

/* The request line: method (a token), target (printable, no spaces) and version
 * (HTTP/1.0 or 1.1). */
struct request_line {
    const char *end; /* its CR */
    const char *target;
    size_t target_len;
    const char *version; /* 8 bytes */
};

static int parse_request_line(const char *buf, size_t len, struct sbx_egress_request *r,
                              struct request_line *rl, int *status, const char **reason)
{
    const char *end = buf + len;
    const char *line_end = memchr(buf, '\r', len);
    const char *sp1;
    const char *sp2;

    if (line_end == NULL || line_end + 1 >= end || line_end[1] != '\n') {
        FAIL(400, "bad-request-line");
    }
    sp1 = memchr(buf, ' ', (size_t)(line_end - buf));
    if (sp1 == NULL || sp1 == buf || (size_t)(sp1 - buf) >= sizeof(r->method)) {
        FAIL(400, "bad-request-line");
    }
    for (const char *c = buf; c < sp1; c++) {
        if (!is_tchar((unsigned char)*c)) {
            FAIL(400, "bad-request-line");
        }
    }
    memcpy(r->method, buf, (size_t)(sp1 - buf));
    rl->target = sp1 + 1;
    sp2 = memchr(rl->target, ' ', (size_t)(line_end - rl->target));
    if (sp2 == NULL || sp2 == rl->target) {
        FAIL(400, "bad-request-line");
    }
    rl->target_len = (size_t)(sp2 - rl->target);
    rl->version = sp2 + 1;
    if (line_end - rl->version != 8 ||
        (strncmp(rl->version, "HTTP/1.1", 8) != 0 && strncmp(rl->version, "HTTP/1.0", 8) != 0)) {
        FAIL(400, "bad-request-line");
    }
    for (size_t i = 0; i < rl->target_len; i++) {
        unsigned char ch = (unsigned char)rl->target[i];

        if (ch <= 0x20 || ch >= 0x7f) {
            FAIL(400, "bad-target");
        }
    }
    rl->end = line_end;
    return 0;
}

/* A plain request's target: absolute-form "http://AUTHORITY/path" (or, in a tunnel,
 * origin-form: the authority is the tunnel's) gives the host, and the forwarded
 * request line gets the path alone. */
static int parse_target(const struct request_line *rl, const struct sbx_egress_request *tunnel,
                        struct sbx_egress_request *r, size_t *cap, int *status, const char **reason)
{
    const char *target = rl->target;
    size_t target_len = rl->target_len;
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
    append(&r->forward, &r->forward_len, cap, " ", 1);
    append(&r->forward, &r->forward_len, cap, rl->version, 8);
    append(&r->forward, &r->forward_len, cap, "\r\n", 2);
    return 0;
}

/* The header lines up to the blank one: counted, each a token and a value; Host must
 * name the target's authority; body headers are checked (plain requests); hop-by-hop
 * ones are not forwarded. A plain request's forwarded head ends with a Host (when it
 * had none) and "Connection: close". On failure the forwarded head is dropped. */
static int parse_headers(const char *line, const char *end, struct sbx_egress_request *r,
                         size_t *cap, int *status, const char **reason)
{
    int n_headers = 0;
    int seen_host = 0;
    int seen_length = 0;

    while (line < end) {
        const char *eol = memchr(line, '\r', (size_t)(end - line));
        const char *colon;
        const char *v;
        const char *ve;

        if (eol == NULL) {
            break;
        }
        if (eol == line) {
            break; /* the blank line */
        }
        if (++n_headers > SBX_EGRESS_HEADERS_MAX) {
            drop_forward(r);
            FAIL(431, "too-many-headers");
        }
        colon = memchr(line, ':', (size_t)(eol - line));
        if (colon == NULL || colon == line) {
            drop_forward(r);
            FAIL(400, "bad-header");
        }
        for (const char *c = line; c < colon; c++) {
            if (!is_tchar((unsigned char)*c)) {
                drop_forward(r);
                FAIL(400, "bad-header");
            }
        }
        v = colon + 1;
        ve = eol;
        while (v < ve && (*v == ' ' || *v == '\t')) {
            v++;
        }
        while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) {
            ve--;
        }
        if (colon - line == 4 && strncasecmp(line, "host", 4) == 0) {
            char h[SBX_EGRESS_HOST_MAX + 1];
            int h_ip = 0;
            struct sbx_egress_addr a;
            unsigned hp = 0;

            if (seen_host++) {
                drop_forward(r);
                FAIL(400, "duplicate-host");
            }
            if (parse_authority(v, (size_t)(ve - v), r->port, h, &h_ip, &a, &hp, status, reason) <
                0) {
                drop_forward(r);
                return -1;
            }
            if (h_ip != r->host_is_ip || strcmp(h, r->host) != 0 || hp != r->port) {
                drop_forward(r);
                FAIL(403, "host-mismatch");
            }
        }
        if (!r->connect && body_header(line, (size_t)(colon - line), v, (size_t)(ve - v),
                                       &seen_length, &r->body, status, reason) < 0) {
            drop_forward(r);
            return -1;
        }
        if (!r->connect && !hop_by_hop(line, (size_t)(colon - line))) {
            append(&r->forward, &r->forward_len, cap, line, (size_t)(eol - line) + 2);
        }
        line = eol + 2;
    }
    if (!r->connect) {
        if (!seen_host) {
            char *h = r->host_is_ip && r->ip.family == AF_INET6
                          ? xasprintf("Host: [%s]:%u\r\n", r->host, r->port)
                          : xasprintf("Host: %s:%u\r\n", r->host, r->port);

            append(&r->forward, &r->forward_len, cap, h, strlen(h));
            free(h);
        }
        append(&r->forward, &r->forward_len, cap, "Connection: close\r\n\r\n", 21);
    }
    return 0;
}

static int parse_head(const char *buf, size_t len, const struct sbx_egress_request *tunnel,
                      struct sbx_egress_request *r, int *status, const char **reason)
{
    struct request_line rl;
    size_t cap = 0;

    memset(r, 0, sizeof(*r));
    if (parse_request_line(buf, len, r, &rl, status, reason) < 0) {
        return -1;
    }
    if (tunnel != NULL && strcmp(r->method, "CONNECT") == 0) {
        FAIL(400, "connect-in-tunnel");
    }
    if (strcmp(r->method, "CONNECT") == 0) {
        r->connect = 1;
        if (parse_authority(rl.target, rl.target_len, 0, r->host, &r->host_is_ip, &r->ip, &r->port,
                            status, reason) < 0) {
            return -1;
        }
    }
    else if (parse_target(&rl, tunnel, r, &cap, status, reason) < 0) {
        return -1;
    }
    return parse_headers(rl.end + 2, buf + len, r, &cap, status, reason);
}
