/* fuzz_frame.c - sbx's one frame header (sbx/sbx_frame.h, util/frame.c): the
 * piecewise decoder (the ?frames=1 readers) and sbx_frame_read (the keeper and
 * the terminal) on hostile bytes. The first input byte picks the chunk size
 * the stream is cut into and the max length allowed. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "util/fileio.h"
#include "util/frame.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void pieces(const char *in, size_t size, size_t chunk, uint32_t max)
{
    struct sbx_frame_dec d;
    size_t off = 0;
    uint64_t payload = 0;

    sbx_frame_dec_init(&d, "\1\2", max);
    while (off < size && !d.bad) {
        size_t n = size - off < chunk ? size - off : chunk;

        while (n > 0 && !d.bad) {
            const char *piece;
            size_t len;
            size_t k = sbx_frame_dec_feed(&d, in + off, n, &piece, &len);

            if (k == 0 || k > n || len > k || (len > 0 && piece + len != in + off + k)) {
                __builtin_trap();
            }
            if (len > 0 && d.type != 1 && d.type != 2) {
                __builtin_trap();
            }
            payload += len;
            off += k;
            n -= k;
        }
    }
    if (payload > size || (d.bad && sbx_frame_dec_boundary(&d))) {
        __builtin_trap();
    }
}

static void from_fd(const char *in, size_t size)
{
    int sv[2];
    char type;
    char *frame;
    size_t len;

    if (size > 32768 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) {
        return; /* the whole input fits the socket's buffer: no writer thread */
    }
    if (size > 0 && sbx_send_all(sv[0], in, size) < 0) {
        __builtin_trap();
    }
    close(sv[0]);
    for (;;) {
        sbx_error_t *err = NULL;
        int r = sbx_frame_read(sv[1], &type, &frame, &len, &err);

        sbx_error_free(&err);
        if (r != 0) {
            break;
        }
        if (frame[len] != '\0' || len > size) {
            __builtin_trap();
        }
        free(frame);
    }
    close(sv[1]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    unsigned char hdr[SBX_FRAME_HDR];
    unsigned char t;
    uint32_t n;

    if (size < 1) {
        return 0;
    }
    pieces((const char *)data + 1, size - 1, (size_t)(data[0] & 0x3f) + 1,
           (data[0] & 0x40) ? 16 : UINT32_MAX);
    from_fd((const char *)data + 1, size - 1);
    if (size >= 1 + SBX_FRAME_HDR) {
        /* what decodes re-encodes to the same bytes */
        if (sbx_frame_decode(data + 1, UINT32_MAX, &t, &n) == SBX_FRAME_OK) {
            sbx_frame_encode(hdr, t, n);
            if (memcmp(hdr, data + 1, SBX_FRAME_HDR) != 0) {
                __builtin_trap();
            }
        }
    }
    return 0;
}
