/* docker_stream.c - the multiplexed exec stream: 8-byte headers
 * {type, 0, 0, 0, size (big endian)}; 1 stdout, 2 stderr, 3 system error. */
#include <string.h>

#include <sbx/sbx_frame.h>

#include "docker.h"

int dk_demux_feed(void *ud, const char *data, size_t len)
{
    struct dk_demux *d = ud;
    size_t off = 0;

    while (off < len) {
        size_t k;

        if (d->left == 0) {
            unsigned char h[SBX_FRAME_HDR];
            unsigned char t;
            int rc;

            k = 8 - d->hlen;
            if (k > len - off) {
                k = len - off;
            }
            memcpy(d->hdr + d->hlen, data + off, k);
            d->hlen += k;
            off += k;
            if (d->hlen < 8) {
                break;
            }
            /* sbx's frame header (sbx/sbx_frame.h); Docker's stream 0
             * (stdin, written as stdout) is a type the codec reserves */
            memcpy(h, d->hdr, sizeof(h));
            h[0] = h[0] == 0 ? 1 : h[0];
            rc = sbx_frame_decode(h, UINT32_MAX, &t, &d->left);
            d->type = d->hdr[0];
            d->hlen = 0;
            if (rc != SBX_FRAME_OK || t > 3) {
                d->bad = 1;
                return 1; /* abort the transfer: not a multiplexed stream */
            }
            continue;
        }
        k = d->left < len - off ? d->left : len - off;
        if (!d->seen_payload && d->type == 1 && k >= 23 &&
            memcmp(data + off, "OCI runtime exec failed", 23) == 0) {
            d->type = 3; /* runc could not start the command: a system error */
        }
        d->seen_payload = 1;
        if (d->type == 3) {
            size_t room = sizeof(d->syserr) - 1 - d->syserr_len;
            size_t n = k < room ? k : room;

            memcpy(d->syserr + d->syserr_len, data + off, n);
            d->syserr_len += n;
            d->syserr[d->syserr_len] = '\0';
        }
        else if (d->out != NULL) {
            if (d->out(d->out_ud, d->type == 2 ? 2 : 1, data + off, k) != 0) {
                return 1;
            }
        }
        off += k;
        d->left -= (uint32_t)k;
    }
    return 0;
}
