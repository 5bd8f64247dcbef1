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
    static const struct sbx_h1_limits lim = {FWD_HEAD_MAX, FWD_HEAD_LINES, FWD_HEAD_MAX};

    memset(p, 0, sizeof(*p));
    p->phase = FWD_HEAD;
    sbx_h1_init(&p->h, 1, &lim);
}

static int bad(struct fwd_reply *p, const char *msg)
{
    p->phase = FWD_BAD;
    snprintf(p->err, sizeof(p->err), "%s", msg);
    return -1;
}

/* The head is complete (h1 parsed it): status, Content-Type, framing. */
static int head_done(struct fwd_reply *p)
{
    const struct sbx_h1_header *ct = sbx_h1_find(&p->h, "content-type");

    /* no 1xx: the forward asks for none (no Expect, no Upgrade) */
    if (p->h.status < 200) {
        snprintf(p->err, sizeof(p->err), "the owner's reply has a bad status code %d (no 1xx)",
                 p->h.status);
        p->phase = FWD_BAD;
        return -1;
    }
    p->status = p->h.status;
    if (ct != NULL) {
        if (ct->value.n >= sizeof(p->ctype)) {
            return bad(p, "the owner's Content-Type is longer than 127 bytes");
        }
        for (size_t i = 0; i < ct->value.n; i++) {
            if (ct->value.p[i] < ' ' || ct->value.p[i] > '~') {
                return bad(p, "the owner's Content-Type is not printable ASCII");
            }
        }
        memcpy(p->ctype, ct->value.p, ct->value.n);
        p->ctype[ct->value.n] = '\0';
    }
    switch (p->h.framing) {
    case SBX_H1_CHUNKED:
        p->phase = FWD_CHUNK_SIZE;
        break;
    case SBX_H1_LENGTH:
        p->left = p->h.content_length;
        p->phase = p->left > 0 ? FWD_LENGTH : FWD_DONE;
        break;
    case SBX_H1_UNTIL_CLOSE:
        p->phase = FWD_UNTIL_CLOSE;
        break;
    default:
        p->phase = FWD_DONE;
    }
    return 0;
}

/* Head bytes: copied (up to the cap) and given to the parser; *used gets how many
 * of in were the head's. */
static int head_feed(struct fwd_reply *p, const char *in, size_t len, size_t *used)
{
    size_t room = sizeof(p->head) - p->head_len;
    size_t n = len < room ? len : room;
    size_t before = p->head_len;
    long end;

    memcpy(p->head + p->head_len, in, n);
    p->head_len += n;
    end = sbx_h1_feed(&p->h, p->head, p->head_len);
    if (end < 0) {
        snprintf(p->err, sizeof(p->err),
                 p->h.error == SBX_H1_E_START
                     ? "the owner's reply does not start with an HTTP/1.x status line (%s)"
                     : "the owner's reply: %s",
                 p->h.err);
        p->phase = FWD_BAD;
        return -1;
    }
    *used = end > 0 ? (size_t)end - before : n;
    return end > 0 ? head_done(p) : 0;
}

/* The chunk-size line in p->line (without its LF). */
static int chunk_size(struct fwd_reply *p)
{
    size_t n = p->line_len;
    char why[64];

    if (n > 0 && p->line[n - 1] == '\r') {
        n--;
    }
    if (sbx_h1_chunk_size(p->line, n, &p->left, why, sizeof(why)) < 0) {
        snprintf(p->err, sizeof(p->err), "the owner's reply has %s", why);
        p->phase = FWD_BAD;
        return -1;
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
            size_t used = 0;

            if (head_feed(p, in + i, len - i, &used) < 0) {
                return -1;
            }
            i += used;
            if (p->phase != FWD_HEAD && on_head != NULL && on_head(ud) != 0) {
                return -1;
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
    if (f->dec.types == NULL) {
        sbx_frame_dec_init(&f->dec, "\1\2", UINT32_MAX);
    }
    while (n > 0 && !f->dec.bad) {
        const char *piece;
        size_t len;
        size_t k = sbx_frame_dec_feed(&f->dec, data, n, &piece, &len);

        data += k;
        n -= k;
    }
}

int fwd_frames_boundary(const struct fwd_frames *f)
{
    return sbx_frame_dec_boundary(&f->dec);
}
