/* fwd_parse.c - the owner's reply to a forward, read under fixed caps, and
 * frame boundaries (fwd_parse.h). A hostile or broken owner gets one error
 * line, never more memory than the caps. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "runner/fwd_parse.h"

void fwd_reply_init(struct fwd_reply *p)
{
    memset(p, 0, sizeof(*p));
    p->phase = FWD_HEAD;
}

static int bad(struct fwd_reply *p, const char *msg)
{
    p->phase = FWD_BAD;
    snprintf(p->err, sizeof(p->err), "%s", msg);
    return -1;
}

/* A decimal or hex number of at most max_digits digits, all of s. */
static int parse_num(const char *s, size_t n, int base, size_t max_digits, uint64_t *out)
{
    uint64_t v = 0;

    if (n == 0 || n > max_digits) {
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        int d;

        if (s[i] >= '0' && s[i] <= '9') {
            d = s[i] - '0';
        }
        else if (base == 16 && s[i] >= 'a' && s[i] <= 'f') {
            d = s[i] - 'a' + 10;
        }
        else if (base == 16 && s[i] >= 'A' && s[i] <= 'F') {
            d = s[i] - 'A' + 10;
        }
        else {
            return -1;
        }
        v = v * (uint64_t)base + (uint64_t)d;
    }
    *out = v;
    return 0;
}

static size_t trim_len(const char *s, size_t n)
{
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t')) {
        n--;
    }
    return n;
}

/* The head in p->head (ends with CRLF CRLF): status, Content-Type, framing. */
static int parse_head(struct fwd_reply *p)
{
    char *s = p->head;
    char *end = p->head + p->head_len;
    char *eol = memchr(s, '\n', (size_t)(end - s));
    int lines = 1;
    int chunked = 0;
    int have_len = 0;
    uint64_t len = 0;

    /* "HTTP/1.x NNN reason" */
    if (eol == NULL || eol - s < 12 || memcmp(s, "HTTP/1.", 7) != 0 ||
        (s[7] != '0' && s[7] != '1') || s[8] != ' ' || (s[12] != ' ' && s[12] != '\r')) {
        return bad(p, "the owner's reply does not start with an HTTP/1.x status line");
    }
    {
        uint64_t st;

        /* no 1xx: the forward asks for none (no Expect, no Upgrade) */
        if (parse_num(s + 9, 3, 10, 3, &st) < 0 || st < 200 || st > 599) {
            return bad(p, "the owner's reply has a bad status code");
        }
        p->status = (int)st;
    }
    for (s = eol + 1; s < end; s = eol + 1) {
        size_t n;
        char *colon;

        eol = memchr(s, '\n', (size_t)(end - s));
        if (eol == NULL) {
            break;
        }
        n = (size_t)(eol - s);
        if (n > 0 && s[n - 1] == '\r') {
            n--;
        }
        if (n == 0) {
            break; /* the empty line */
        }
        if (++lines > FWD_HEAD_LINES) {
            return bad(p, "the owner's reply has more than 64 header lines");
        }
        colon = memchr(s, ':', n);
        if (colon == NULL || colon == s) {
            return bad(p, "the owner's reply has a header line without a name");
        }
        {
            size_t name_len = (size_t)(colon - s);
            const char *v = colon + 1;
            size_t vlen = n - name_len - 1;

            while (vlen > 0 && (*v == ' ' || *v == '\t')) {
                v++;
                vlen--;
            }
            vlen = trim_len(v, vlen);
            if (name_len == 12 && strncasecmp(s, "Content-Type", 12) == 0) {
                if (vlen >= sizeof(p->ctype)) {
                    return bad(p, "the owner's Content-Type is longer than 127 bytes");
                }
                for (size_t i = 0; i < vlen; i++) {
                    if (v[i] < ' ' || v[i] > '~') {
                        return bad(p, "the owner's Content-Type is not printable ASCII");
                    }
                }
                memcpy(p->ctype, v, vlen);
                p->ctype[vlen] = '\0';
            }
            else if (name_len == 17 && strncasecmp(s, "Transfer-Encoding", 17) == 0) {
                if (vlen != 7 || strncasecmp(v, "chunked", 7) != 0) {
                    return bad(p, "the owner's Transfer-Encoding is not chunked");
                }
                chunked = 1;
            }
            else if (name_len == 14 && strncasecmp(s, "Content-Length", 14) == 0) {
                uint64_t l;

                if (parse_num(v, vlen, 10, 15, &l) < 0 || (have_len && l != len)) {
                    return bad(p, "the owner's Content-Length is not a number");
                }
                have_len = 1;
                len = l;
            }
        }
    }
    if (chunked) {
        p->phase = FWD_CHUNK_SIZE;
    }
    else if (have_len) {
        p->left = len;
        p->phase = len > 0 ? FWD_LENGTH : FWD_DONE;
    }
    else {
        p->phase = (p->status == 204 || p->status == 304) ? FWD_DONE : FWD_UNTIL_CLOSE;
    }
    return 0;
}

/* The chunk-size line in p->line (without its LF). */
static int chunk_size(struct fwd_reply *p)
{
    size_t n = p->line_len;
    char *semi;

    if (n > 0 && p->line[n - 1] == '\r') {
        n--;
    }
    semi = memchr(p->line, ';', n); /* chunk extensions are ignored */
    if (semi != NULL) {
        n = (size_t)(semi - p->line);
    }
    n = trim_len(p->line, n);
    if (parse_num(p->line, n, 16, 8, &p->left) < 0) {
        return bad(p, "the owner's reply has a bad chunk size");
    }
    p->line_len = 0;
    p->phase = p->left == 0 ? FWD_TRAILER : FWD_CHUNK_DATA;
    return 0;
}

int fwd_reply_feed(struct fwd_reply *p, const char *in, size_t len, int (*on_head)(void *ud),
                   int (*on_body)(void *ud, const char *data, size_t n), void *ud)
{
    size_t i = 0;

    while (i < len) {
        switch (p->phase) {
        case FWD_HEAD: {
            char c = in[i++];

            if (p->head_len == sizeof(p->head) - 1) {
                return bad(p, "the owner's reply head is larger than 16384 bytes");
            }
            p->head[p->head_len++] = c;
            p->head[p->head_len] = '\0';
            if (c == '\n' && p->head_len >= 2 &&
                (p->head[p->head_len - 2] == '\n' ||
                 (p->head_len >= 4 && memcmp(p->head + p->head_len - 4, "\r\n\r\n", 4) == 0))) {
                if (parse_head(p) < 0) {
                    return -1;
                }
                if (on_head != NULL && on_head(ud) != 0) {
                    return -1;
                }
            }
            break;
        }
        case FWD_CHUNK_SIZE:
        case FWD_TRAILER: {
            char c = in[i++];

            if (c == '\n') {
                if (p->phase == FWD_CHUNK_SIZE) {
                    p->line[p->line_len] = '\0';
                    if (chunk_size(p) < 0) {
                        return -1;
                    }
                }
                else if (p->line_len == 0 || (p->line_len == 1 && p->line[0] == '\r')) {
                    p->phase = FWD_DONE;
                }
                else {
                    p->line_len = 0;
                }
                break;
            }
            if (p->phase == FWD_TRAILER) {
                if (++p->trailer > FWD_TRAILER_MAX) {
                    return bad(p, "the owner's trailers are larger than 4096 bytes");
                }
                p->line[0] = c;
                p->line_len = 1; /* only "is the line empty" matters */
                break;
            }
            if (p->line_len == sizeof(p->line) - 1) {
                return bad(p, "the owner's chunk-size line is longer than 63 bytes");
            }
            p->line[p->line_len++] = c;
            break;
        }
        case FWD_CHUNK_DATA:
        case FWD_LENGTH:
        case FWD_UNTIL_CLOSE: {
            size_t n = len - i;

            if (p->phase != FWD_UNTIL_CLOSE && n > p->left) {
                n = (size_t)p->left;
            }
            if (on_body != NULL && on_body(ud, in + i, n) != 0) {
                i += n;
                if (p->phase != FWD_UNTIL_CLOSE) {
                    p->left -= n;
                }
                return -1;
            }
            i += n;
            if (p->phase != FWD_UNTIL_CLOSE) {
                p->left -= n;
                if (p->left == 0) {
                    p->phase = p->phase == FWD_LENGTH ? FWD_DONE : FWD_CHUNK_END;
                }
            }
            break;
        }
        case FWD_CHUNK_END: {
            char c = in[i++];

            if (c == '\r' && p->line_len == 0) {
                p->line_len = 1;
            }
            else if (c == '\n') {
                p->line_len = 0;
                p->phase = FWD_CHUNK_SIZE;
            }
            else {
                return bad(p, "the owner's chunk does not end with CRLF");
            }
            break;
        }
        case FWD_DONE:
            return 0;
        case FWD_BAD:
            return -1;
        }
    }
    return p->phase == FWD_BAD ? -1 : 0;
}

int fwd_reply_eof(struct fwd_reply *p)
{
    switch (p->phase) {
    case FWD_DONE:
        return 0;
    case FWD_UNTIL_CLOSE:
        p->phase = FWD_DONE;
        return 0;
    case FWD_BAD:
        return -1;
    case FWD_HEAD:
        return bad(p, p->head_len == 0 ? "the owner closed the connection without a reply"
                                       : "the owner closed the connection inside its reply head");
    default:
        return bad(p, "the owner closed the connection before the end of its reply");
    }
}

void fwd_frames_feed(struct fwd_frames *f, const char *data, size_t n)
{
    size_t i = 0;

    while (i < n && !f->bad) {
        if (f->left > 0) {
            size_t k = n - i < f->left ? n - i : f->left;

            f->left -= (uint32_t)k;
            i += k;
            continue;
        }
        f->hdr[f->have++] = (unsigned char)data[i++];
        if (f->have < sizeof(f->hdr)) {
            continue;
        }
        f->have = 0;
        if ((f->hdr[0] != 1 && f->hdr[0] != 2) || f->hdr[1] || f->hdr[2] || f->hdr[3]) {
            f->bad = 1;
            break;
        }
        f->left = (uint32_t)f->hdr[4] << 24 | (uint32_t)f->hdr[5] << 16 | (uint32_t)f->hdr[6] << 8 |
                  (uint32_t)f->hdr[7];
    }
}

int fwd_frames_boundary(const struct fwd_frames *f)
{
    return !f->bad && f->have == 0 && f->left == 0;
}
