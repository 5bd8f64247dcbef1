/* h1.h - the one HTTP/1 head parser (docs/architecture.md, "HTTP/1 heads"):
 * a request head (the egress proxy's, egress/request.c) or a response head
 * (a forwarded reply, runner/fwd_parse.c), read from a caller's buffer that
 * grows, under hard bounds (head bytes, header count, line length), RFC 9112
 * strict: CRLF only (no bare LF or CR), no control bytes, token names with the
 * colon right after, no obs-fold, one Content-Length of digits, Transfer-Encoding
 * "chunked" alone and never with a Content-Length or in HTTP/1.0. Pure code: no
 * I/O, no allocation (the headers point into the caller's buffer; the header
 * table is a fixed array). Fuzzed as target h1 (docs/fuzzing.md); unit test
 * tests/unit/test_h1.c. */
#ifndef SBX_HTTP_H1_H
#define SBX_HTTP_H1_H

#include <stddef.h>
#include <stdint.h>

#define SBX_H1_HEADERS_CAP 128 /* the header table's size: limits.headers_max at most */

struct sbx_h1_limits {
    size_t head_max;    /* bytes of start line + headers + blank line */
    size_t headers_max; /* header lines (<= SBX_H1_HEADERS_CAP) */
    size_t line_max;    /* bytes of one line without its CRLF */
};

/* What was wrong, for a caller that maps it to a status or a reason code. */
enum sbx_h1_error {
    SBX_H1_OK,
    SBX_H1_E_BYTES,     /* bare LF or CR, NUL, a control byte, an empty first line */
    SBX_H1_E_TOO_LARGE, /* the head is larger than head_max */
    SBX_H1_E_LINE,      /* a line longer than line_max */
    SBX_H1_E_START,     /* request line or status line */
    SBX_H1_E_TARGET,    /* a request target byte outside 0x21-0x7e */
    SBX_H1_E_STATUS,    /* a status code that is not 100-599 */
    SBX_H1_E_HEADER,    /* a header line: no name, no colon, a bad name, obs-fold */
    SBX_H1_E_TOO_MANY,  /* more than headers_max header lines */
    SBX_H1_E_LENGTH,    /* Content-Length: not 1-15 digits, or twice */
    SBX_H1_E_TE,        /* Transfer-Encoding: not "chunked", twice, with Content-Length, in 1.0 */
};

/* Where the body ends (RFC 9112 6.3). */
enum sbx_h1_framing {
    SBX_H1_NO_BODY, /* a request without either header; a 1xx, 204 or 304 reply */
    SBX_H1_LENGTH,  /* content_length bytes */
    SBX_H1_CHUNKED,
    SBX_H1_UNTIL_CLOSE, /* a reply without either header */
};

struct sbx_h1_str {
    const char *p; /* into the caller's buffer; not NUL-terminated */
    size_t n;
};

struct sbx_h1_header {
    struct sbx_h1_str name;
    struct sbx_h1_str value; /* without the optional whitespace around it */
    size_t line_len;         /* the whole line from name.p, CRLF included */
};

struct sbx_h1_head {
    int response; /* set by sbx_h1_init */
    struct sbx_h1_limits lim;
    size_t scanned; /* bytes checked by earlier feeds */
    /* the result, once complete */
    size_t len;                       /* head bytes through the blank line */
    int minor;                        /* HTTP/1.<minor> */
    struct sbx_h1_str method, target; /* a request */
    int status;                       /* a response */
    struct sbx_h1_str reason;
    enum sbx_h1_framing framing;
    uint64_t content_length; /* SBX_H1_LENGTH */
    /* on failure */
    enum sbx_h1_error error;
    char err[160]; /* one line: what and where (line number, byte) */
    size_t nheaders;
    struct sbx_h1_header headers[SBX_H1_HEADERS_CAP]; /* last: not cleared by init */
};

/* response 0: a request head; lim NULL: 16 KiB, 100 headers, 8 KiB lines. */
void sbx_h1_init(struct sbx_h1_head *h, int response, const struct sbx_h1_limits *lim);
/* buf holds every byte of the message so far (len of them, the head first).
 * Returns the head's length once it is complete and parsed, 0 when more bytes are
 * needed (earlier bytes are not scanned again: linear in all), -1 with h->error and
 * h->err set. A head larger than head_max fails as soon as len passes it. */
long sbx_h1_feed(struct sbx_h1_head *h, const char *buf, size_t len);
/* The first header named name (case-insensitive), or NULL. */
const struct sbx_h1_header *sbx_h1_find(const struct sbx_h1_head *h, const char *name);
/* Only the end of the head: >0 its length, 0 more bytes needed, -1 a bad byte
 * (bare LF or CR, NUL, control byte, an empty first line) with *err set. *scanned
 * (0 at first) is where the next call resumes. No size cap: the caller's. */
long sbx_h1_head_end(const char *buf, size_t len, size_t *scanned, const char **err);
/* A chunk-size line (without its CRLF): hex digits (at most 8), optional
 * extensions after ';'. 0 with *size, or -1 with err set. */
int sbx_h1_chunk_size(const char *line, size_t n, uint64_t *size, char *err, size_t errlen);
/* 1 when s is a token (RFC 9110 5.6.2) of n > 0 bytes. */
int sbx_h1_token(const char *s, size_t n);

#endif
