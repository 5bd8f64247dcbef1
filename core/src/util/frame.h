/* frame.h - reading and writing the frames of sbx/sbx_frame.h (8-byte header
 * {type u8, 0, 0, 0, length u32 BE}, then the payload) on a descriptor, and
 * a decoder for frames that arrive in pieces (an HTTP body). */
#ifndef SBX_UTIL_FRAME_H
#define SBX_UTIL_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include <sbx/sbx_frame.h>

#include "util/error.h"

/* One frame (header and payload) with send(2) semantics (no SIGPIPE).
 * 0, or -1 with errno (EMSGSIZE past UINT32_MAX). */
int sbx_frame_write(int fd, char type, const void *data, size_t len);
/* Reads one frame of at most SBX_FRAME_MAX bytes; *data is malloc'd and
 * NUL-terminated. 0 ok, 1 EOF before a header, -1 with an error naming the
 * problem (a truncated frame, a bad header, a peer that speaks the older
 * 5-byte headers). */
int sbx_frame_read(int fd, char *type, char **data, size_t *len, sbx_error_t **err);

/* Frames fed in pieces. */
struct sbx_frame_dec {
    const char *types; /* the type bytes allowed (NUL-terminated) */
    uint32_t max;      /* the longest payload allowed */
    unsigned char hdr[SBX_FRAME_HDR];
    unsigned char have; /* header bytes seen */
    unsigned char type; /* of the frame whose payload comes */
    uint32_t left;      /* payload bytes left of it */
    int bad;            /* SBX_FRAME_E*, or SBX_FRAME_ETYPE: sticky */
};
#define SBX_FRAME_ETYPE (-3) /* a type not in types */

void sbx_frame_dec_init(struct sbx_frame_dec *d, const char *types, uint32_t max);
/* Consumes bytes of data[0..n) and returns how many: it stops after a piece
 * of payload (*piece, *piece_len; 0 when none), at a bad header (d->bad set,
 * its 8 bytes in d->hdr) or at the end of data. */
size_t sbx_frame_dec_feed(struct sbx_frame_dec *d, const char *data, size_t n, const char **piece,
                          size_t *piece_len);
/* 1 when the bytes fed so far end at a frame's end. */
int sbx_frame_dec_boundary(const struct sbx_frame_dec *d);

#endif
