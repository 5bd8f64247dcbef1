/* h1.c - the one HTTP/1 head parser (h1.h). Two passes over a head that is all
 * in the buffer: the byte scan (resumable, so a head dribbled in byte by byte
 * costs linear work) finds its end and refuses bad bytes; the line pass reads the
 * start line and the headers and decides the framing. */
#include "http/h1.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct sbx_h1_limits default_limits = {16384, 100, 8192};

void sbx_h1_init(struct sbx_h1_head *h, int response, const struct sbx_h1_limits *lim)
{
    memset(h, 0, offsetof(struct sbx_h1_head, headers)); /* the table: filled up to nheaders */
    h->response = response;
    h->lim = lim != NULL ? *lim : default_limits;
    if (h->lim.headers_max > SBX_H1_HEADERS_CAP) {
        h->lim.headers_max = SBX_H1_HEADERS_CAP;
    }
}

__attribute__((format(printf, 3, 4))) static long fail(struct sbx_h1_head *h, enum sbx_h1_error e,
                                                       const char *fmt, ...)
{
    va_list ap;

    h->error = e;
    va_start(ap, fmt);
    vsnprintf(h->err, sizeof(h->err), fmt, ap);
    va_end(ap);
    return -1;
}

int sbx_h1_token(const char *s, size_t n)
{
    /* tchar: "!#$%&'*+-.^_`|~" / DIGIT / ALPHA */
    static const char extra[] = "!#$%&'*+-.^_`|~";

    if (n == 0) {
        return 0;
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];

        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c != '\0' && memchr(extra, c, sizeof(extra) - 1) != NULL))) {
            return 0;
        }
    }
    return 1;
}

long sbx_h1_head_end(const char *buf, size_t len, size_t *scanned, const char **err)
{
    /* every check looks at most 3 bytes back or 1 ahead: resume 3 before the end */
    for (size_t i = *scanned > 3 ? *scanned - 3 : 0; i < len; i++) {
        unsigned char ch = (unsigned char)buf[i];

        if (ch == '\n') {
            if (i == 0 || buf[i - 1] != '\r') {
                *err = "a bare LF (lines end with CRLF)";
                *scanned = i;
                return -1;
            }
            if (i >= 3 && buf[i - 2] == '\n' && buf[i - 3] == '\r') {
                return (long)(i + 1);
            }
            if (i == 1) {
                *err = "an empty first line";
                *scanned = i;
                return -1;
            }
        }
        else if (ch == '\r') {
            if (i + 1 < len && buf[i + 1] != '\n') {
                *err = "a bare CR (lines end with CRLF)";
                *scanned = i;
                return -1;
            }
        }
        else if ((ch < 0x20 && ch != '\t') || ch == 0x7f) {
            *err = ch == 0 ? "a NUL byte" : "a control byte (not printable, not HTAB)";
            *scanned = i;
            return -1;
        }
    }
    *scanned = len;
    return 0;
}

static int digits(const char *s, size_t n, size_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > max) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        v = v * 10 + (uint64_t)(s[i] - '0');
    }
    *out = v;
    return 0;
}

/* At most 20 bytes of a hostile value for an error line: printable ASCII, else '?'
 * (the bytes are not NUL-terminated and may not be UTF-8). */
static const char *shown(const struct sbx_h1_str *v, char out[21])
{
    size_t n = v->n < 20 ? v->n : 20;

    for (size_t i = 0; i < n; i++) {
        out[i] = v->p[i] >= ' ' && v->p[i] <= '~' ? v->p[i] : '?';
    }
    out[n] = '\0';
    return out;
}

/* "HTTP/1.0" or "HTTP/1.1" in 8 bytes. */
static int version(const char *s, size_t n, int *minor)
{
    if (n != 8 || memcmp(s, "HTTP/1.", 7) != 0 || (s[7] != '0' && s[7] != '1')) {
        return -1;
    }
    *minor = s[7] - '0';
    return 0;
}

/* method SP request-target SP HTTP-version */
static long request_line(struct sbx_h1_head *h, const char *s, size_t n)
{
    const char *sp1 = memchr(s, ' ', n);
    const char *sp2;
    const char *end = s + n;

    if (sp1 == NULL || !sbx_h1_token(s, (size_t)(sp1 - s))) {
        return fail(h, SBX_H1_E_START, "request line: the method is not a token followed by SP");
    }
    sp2 = memchr(sp1 + 1, ' ', (size_t)(end - sp1 - 1));
    if (sp2 == NULL || sp2 == sp1 + 1) {
        return fail(h, SBX_H1_E_START, "request line: no target between single spaces");
    }
    if (version(sp2 + 1, (size_t)(end - sp2 - 1), &h->minor) < 0) {
        return fail(h, SBX_H1_E_START, "request line: the version is not HTTP/1.0 or HTTP/1.1");
    }
    for (const char *c = sp1 + 1; c < sp2; c++) {
        if ((unsigned char)*c <= 0x20 || (unsigned char)*c >= 0x7f) {
            return fail(h, SBX_H1_E_TARGET,
                        "request target: byte 0x%02x at %zu is not visible ASCII",
                        (unsigned char)*c, (size_t)(c - s));
        }
    }
    h->method = (struct sbx_h1_str){s, (size_t)(sp1 - s)};
    h->target = (struct sbx_h1_str){sp1 + 1, (size_t)(sp2 - sp1 - 1)};
    return 0;
}

/* HTTP-version SP 3DIGIT SP [reason] (the SP before an empty reason optional) */
static long status_line(struct sbx_h1_head *h, const char *s, size_t n)
{
    uint64_t st;

    if (n < 12 || version(s, 8, &h->minor) < 0 || s[8] != ' ' || (n > 12 && s[12] != ' ')) {
        return fail(h, SBX_H1_E_START, "not an HTTP/1.0 or HTTP/1.1 status line");
    }
    if (digits(s + 9, 3, 3, &st) < 0 || st < 100 || st > 599) {
        char code[21];

        return fail(h, SBX_H1_E_STATUS, "bad status code '%s' (not 100-599)",
                    shown(&(struct sbx_h1_str){s + 9, 3}, code));
    }
    h->status = (int)st;
    h->reason = n > 13 ? (struct sbx_h1_str){s + 13, n - 13} : (struct sbx_h1_str){s + n, 0};
    return 0;
}

static int name_is(const struct sbx_h1_str *s, const char *name)
{
    size_t n = strlen(name);

    return s->n == n && strncasecmp(s->p, name, n) == 0;
}

/* field-name ":" OWS field-value OWS; line has no CRLF. */
static long header_line(struct sbx_h1_head *h, const char *line, size_t n, size_t lineno)
{
    const char *colon;
    const char *v;
    const char *ve = line + n;
    struct sbx_h1_header *hd;

    if (line[0] == ' ' || line[0] == '\t') {
        return fail(h, SBX_H1_E_HEADER,
                    "line %zu: obs-fold (a line starting with SP or HTAB) is not allowed", lineno);
    }
    colon = memchr(line, ':', n);
    if (colon == NULL || colon == line) {
        return fail(h, SBX_H1_E_HEADER, "line %zu: a header line without a name and ':'", lineno);
    }
    if (!sbx_h1_token(line, (size_t)(colon - line))) {
        return fail(h, SBX_H1_E_HEADER,
                    "line %zu: the header name is not a token (no space before ':')", lineno);
    }
    if (h->nheaders >= h->lim.headers_max) {
        return fail(h, SBX_H1_E_TOO_MANY, "more than %zu header lines", h->lim.headers_max);
    }
    v = colon + 1;
    while (v < ve && (*v == ' ' || *v == '\t')) {
        v++;
    }
    while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t')) {
        ve--;
    }
    hd = &h->headers[h->nheaders++];
    hd->name = (struct sbx_h1_str){line, (size_t)(colon - line)};
    hd->value = (struct sbx_h1_str){v, (size_t)(ve - v)};
    hd->line_len = n + 2;
    return 0;
}

/* Content-Length and Transfer-Encoding (RFC 9112 6.1-6.3): only one way to end. */
static long framing(struct sbx_h1_head *h)
{
    const struct sbx_h1_header *cl = NULL;
    const struct sbx_h1_header *te = NULL;
    char buf[21];

    for (size_t i = 0; i < h->nheaders; i++) {
        const struct sbx_h1_header *hd = &h->headers[i];

        if (name_is(&hd->name, "content-length")) {
            if (cl != NULL) {
                return fail(h, SBX_H1_E_LENGTH, "a duplicate Content-Length");
            }
            cl = hd;
            if (digits(hd->value.p, hd->value.n, 15, &h->content_length) < 0) {
                return fail(h, SBX_H1_E_LENGTH, "Content-Length '%s' is not 1-15 digits",
                            shown(&hd->value, buf));
            }
        }
        else if (name_is(&hd->name, "transfer-encoding")) {
            if (te != NULL) {
                return fail(h, SBX_H1_E_TE, "a duplicate Transfer-Encoding");
            }
            te = hd;
            if (!name_is(&hd->value, "chunked")) {
                return fail(h, SBX_H1_E_TE,
                            "Transfer-Encoding '%s' is not chunked (the only coding taken)",
                            shown(&hd->value, buf));
            }
        }
    }
    if (te != NULL && cl != NULL) {
        return fail(h, SBX_H1_E_TE, "both Transfer-Encoding and Content-Length (smuggling)");
    }
    if (te != NULL && h->minor == 0) {
        return fail(h, SBX_H1_E_TE, "Transfer-Encoding in an HTTP/1.0 message");
    }
    if (h->response && (h->status < 200 || h->status == 204 || h->status == 304)) {
        h->framing = SBX_H1_NO_BODY;
    }
    else if (te != NULL) {
        h->framing = SBX_H1_CHUNKED;
    }
    else if (cl != NULL) {
        h->framing = SBX_H1_LENGTH;
    }
    else {
        h->framing = h->response ? SBX_H1_UNTIL_CLOSE : SBX_H1_NO_BODY;
    }
    return 0;
}

/* The whole head is in buf[0, len) and ends with CRLF CRLF. */
static long parse(struct sbx_h1_head *h, const char *buf, size_t len)
{
    const char *end = buf + len - 2; /* the blank line's CR */
    const char *line = buf;
    size_t lineno = 1;

    while (line < end) {
        const char *eol = memchr(line, '\r', (size_t)(end - line) + 1);
        size_t n = (size_t)(eol - line);
        long rc;

        if (n > h->lim.line_max) {
            return fail(h, SBX_H1_E_LINE, "line %zu is longer than %zu bytes", lineno,
                        h->lim.line_max);
        }
        if (lineno == 1) {
            rc = h->response ? status_line(h, line, n) : request_line(h, line, n);
        }
        else {
            rc = header_line(h, line, n, lineno);
        }
        if (rc < 0) {
            return -1;
        }
        line = eol + 2;
        lineno++;
    }
    if (framing(h) < 0) {
        return -1;
    }
    h->len = len;
    return (long)len;
}

long sbx_h1_feed(struct sbx_h1_head *h, const char *buf, size_t len)
{
    size_t want = len < h->lim.head_max + 1 ? len : h->lim.head_max + 1;
    const char *why = NULL;
    long end;

    if (h->error != SBX_H1_OK) {
        return -1;
    }
    if (h->len > 0) {
        return (long)h->len;
    }
    if (h->response && memcmp(buf, "HTTP/", want < 5 ? want : 5) != 0) {
        /* not HTTP at all: said at once, before any byte check or a whole head */
        return fail(h, SBX_H1_E_START, "not an HTTP/1.0 or HTTP/1.1 status line");
    }
    end = sbx_h1_head_end(buf, want, &h->scanned, &why);
    if (end < 0) {
        return fail(h, SBX_H1_E_BYTES, "%s at byte %zu", why, h->scanned);
    }
    if (end == 0 || (size_t)end > h->lim.head_max) {
        if (want > h->lim.head_max) {
            return fail(h, SBX_H1_E_TOO_LARGE, "the head is larger than %zu bytes",
                        h->lim.head_max);
        }
        return 0;
    }
    return parse(h, buf, (size_t)end);
}

const struct sbx_h1_header *sbx_h1_find(const struct sbx_h1_head *h, const char *name)
{
    for (size_t i = 0; i < h->nheaders; i++) {
        if (name_is(&h->headers[i].name, name)) {
            return &h->headers[i];
        }
    }
    return NULL;
}

int sbx_h1_chunk_size(const char *line, size_t n, uint64_t *size, char *err, size_t errlen)
{
    const char *semi = memchr(line, ';', n); /* extensions are ignored */
    uint64_t v = 0;
    size_t k = semi != NULL ? (size_t)(semi - line) : n;

    while (k > 0 && (line[k - 1] == ' ' || line[k - 1] == '\t')) {
        k--;
    }
    if (k == 0 || k > 8) {
        snprintf(err, errlen, "a bad chunk size (1-8 hex digits)");
        return -1;
    }
    for (size_t i = 0; i < k; i++) {
        char c = line[i];
        int d = c >= '0' && c <= '9'   ? c - '0'
                : c >= 'a' && c <= 'f' ? c - 'a' + 10
                : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                       : -1;

        if (d < 0) {
            snprintf(err, errlen, "a bad chunk size (1-8 hex digits)");
            return -1;
        }
        v = v * 16 + (uint64_t)d;
    }
    *size = v;
    return 0;
}
