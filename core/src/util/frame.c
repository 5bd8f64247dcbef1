/* frame.c - the frames of sbx/sbx_frame.h on descriptors and in pieces. */
#include "util/frame.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "util/fileio.h"
#include "util/xalloc.h"

/* 0 read, 1 EOF at once, -1 an error (errno), -2 EOF inside. */
static int read_all(int fd, void *buf, size_t len)
{
    char *p = buf;
    size_t got = 0;

    while (got < len) {
        ssize_t n = read(fd, p + got, len - got);

        if (n < 0) {
            if (errno == EINTR) {
                continue;
            }
            return -1;
        }
        if (n == 0) {
            return got == 0 ? 1 : -2; /* EOF: before any byte, or inside */
        }
        got += (size_t)n;
    }
    return 0;
}

int sbx_frame_write(int fd, char type, const void *data, size_t len)
{
    unsigned char hdr[SBX_FRAME_HDR];

    if (len > UINT32_MAX) {
        errno = EMSGSIZE;
        return -1;
    }
    sbx_frame_encode(hdr, (unsigned char)type, (uint32_t)len);
    if (sbx_send_all(fd, hdr, sizeof(hdr)) < 0) {
        return -1;
    }
    return len > 0 ? sbx_send_all(fd, data, len) : 0;
}

int sbx_frame_read(int fd, char *type, char **data, size_t *len, sbx_error_t **err)
{
    unsigned char hdr[SBX_FRAME_HDR];
    unsigned char t;
    uint32_t n;
    int r = read_all(fd, hdr, sizeof(hdr));

    if (r == -1) {
        return sbx_error_set(err, errno, "keeper connection: %s", strerror(errno));
    }
    if (r == -2) {
        return sbx_error_set(err, SBX_E_PROTOCOL, "keeper connection: truncated frame");
    }
    if (r != 0) {
        return 1;
    }
    r = sbx_frame_decode(hdr, SBX_FRAME_MAX, &t, &n);
    if (r != SBX_FRAME_OK && hdr[1] == 0 && hdr[2] == 0 && hdr[5] == '{') {
        /* [type][length u32 BE]{JSON...: a v1 peer (an older sbx) */
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "keeper connection: the peer speaks keeper frames v1 (5-byte "
                             "headers, an older sbx), this sbx v2 (8-byte): end the task with "
                             "the sbx that started it");
    }
    if (r == SBX_FRAME_ERESERVED) {
        return sbx_error_set(err, SBX_E_PROTOCOL,
                             "keeper connection: bad frame header (type %u, reserved bytes "
                             "%02x %02x %02x)",
                             hdr[0], hdr[1], hdr[2], hdr[3]);
    }
    if (r == SBX_FRAME_ETOOLONG) {
        return sbx_error_set(err, SBX_E_PROTOCOL, "keeper connection: frame of %u bytes (max %u)",
                             n, SBX_FRAME_MAX);
    }
    *type = (char)t;
    *data = xmalloc((size_t)n + 1);
    if (n > 0 && (r = read_all(fd, *data, n)) != 0) {
        free(*data);
        *data = NULL;
        return r == -1 ? sbx_error_set(err, errno, "keeper connection: %s", strerror(errno))
                       : sbx_error_set(err, SBX_E_PROTOCOL, "keeper connection: truncated frame");
    }
    (*data)[n] = '\0';
    *len = n;
    return 0;
}

void sbx_frame_dec_init(struct sbx_frame_dec *d, const char *types, uint32_t max)
{
    memset(d, 0, sizeof(*d));
    d->types = types;
    d->max = max;
}

size_t sbx_frame_dec_feed(struct sbx_frame_dec *d, const char *data, size_t n, const char **piece,
                          size_t *piece_len)
{
    size_t i = 0;

    *piece = NULL;
    *piece_len = 0;
    while (i < n && !d->bad) {
        if (d->left > 0) {
            size_t k = n - i < d->left ? n - i : d->left;

            d->left -= (uint32_t)k;
            *piece = data + i;
            *piece_len = k;
            return i + k;
        }
        d->hdr[d->have++] = (unsigned char)data[i++];
        if (d->have < SBX_FRAME_HDR) {
            continue;
        }
        d->have = 0;
        d->bad = sbx_frame_decode(d->hdr, d->max, &d->type, &d->left);
        if (d->bad == SBX_FRAME_OK && strchr(d->types, (char)d->type) == NULL) {
            d->bad = SBX_FRAME_ETYPE;
        }
        if (d->bad) {
            d->left = 0;
        }
    }
    return i;
}

int sbx_frame_dec_boundary(const struct sbx_frame_dec *d)
{
    return !d->bad && d->have == 0 && d->left == 0;
}
