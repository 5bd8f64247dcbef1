/* fwd_parse.h - the bounded parts of a forward to the owning box (forward.c,
 * docs/runner.md "Several boxes"): the owner's HTTP/1.1 reply read byte by
 * byte under fixed caps, and where the frames of ?frames=1 end. Pure code:
 * no I/O, no allocation (tests/unit/test_fwd_parse.c). */
#ifndef SBX_RUNNER_FWD_PARSE_H
#define SBX_RUNNER_FWD_PARSE_H

#include <stddef.h>
#include <stdint.h>

#include "http/h1.h"
#include "util/frame.h"

#define FWD_HEAD_MAX 16384   /* the owner's status line and headers, bytes */
#define FWD_HEAD_LINES 64    /* ... and lines */
#define FWD_CHUNK_LINE 64    /* a chunk-size line */
#define FWD_TRAILER_MAX 4096 /* trailers after the last chunk */

enum fwd_phase {
    FWD_HEAD,
    FWD_CHUNK_SIZE,
    FWD_CHUNK_DATA,
    FWD_CHUNK_END, /* the CRLF after a chunk's data */
    FWD_TRAILER,
    FWD_LENGTH, /* Content-Length bytes left */
    FWD_UNTIL_CLOSE,
    FWD_DONE,
    FWD_BAD,
};

struct fwd_reply {
    enum fwd_phase phase;
    int status;           /* 200..599 once the head is read */
    char ctype[128];      /* Content-Type ("" none); printable ASCII only */
    uint64_t left;        /* bytes left in a chunk or of Content-Length */
    struct sbx_h1_head h; /* the head, by the one HTTP/1 parser */
    char head[FWD_HEAD_MAX + 1];
    size_t head_len;
    char line[FWD_CHUNK_LINE];
    size_t line_len;
    size_t trailer; /* trailer bytes seen */
    char err[224];  /* why phase is FWD_BAD */
};

void fwd_reply_init(struct fwd_reply *p);
/* Feeds bytes of the owner's reply: on_head once when the head is read (its
 * non-zero return stops the feed with -1 and p->err untouched), on_body with
 * each piece of the decoded body (non-zero: stop, -1). Bytes after the end
 * are ignored. 0, or -1 with p->phase FWD_BAD and p->err set. */
int fwd_reply_feed(struct fwd_reply *p, const char *in, size_t len, int (*on_head)(void *ud),
                   int (*on_body)(void *ud, const char *data, size_t n), void *ud);
/* The owner closed the connection: 0 when the reply was complete (or ends at
 * the close), -1 with p->err when it was cut short. */
int fwd_reply_eof(struct fwd_reply *p);

/* The frames of ?frames=1 (docs/api.md): the headers of sbx/sbx_frame.h
 * {1|2, 0, 0, 0, length BE32} and payloads (util/frame.h's decoder; zeroed
 * is ready). */
struct fwd_frames {
    struct sbx_frame_dec dec; /* bad: not frames, never at a boundary again */
};
void fwd_frames_feed(struct fwd_frames *f, const char *data, size_t n);
/* 1 when the bytes fed so far end at a frame's end. */
int fwd_frames_boundary(const struct fwd_frames *f);

#endif
