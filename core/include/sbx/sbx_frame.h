/* sbx_frame.h - the one frame header of sbx's byte streams (docs/architecture.md,
 * "One framing"): 8 bytes {type u8, 0, 0, 0, length u32 big-endian}.
 *
 * Used by the keeper protocol and the terminal (core/src/sandbox/proto.h,
 * types 'R' 'I' 'W' 'O' 'E' 'X'), the runner API's ?frames=1 output (type 1
 * stdout, 2 stderr; docs/api.md) and the exec agent's records
 * (sbx_agent_proto.h, where the u32 is a value and no payload follows).
 * Header-only and free of sbx's libraries: the static in-sandbox agent
 * (tools/relay/agent.c) includes it too. The fd helpers are in
 * core/src/util/frame.h. */
#ifndef SBX_FRAME_H
#define SBX_FRAME_H

#include <stdint.h>

#define SBX_FRAME_HDR 8
/* The default bound of a frame's payload (the keeper protocol's). */
#define SBX_FRAME_MAX (16u << 20)

/* sbx_frame_decode's results. */
#define SBX_FRAME_OK 0
#define SBX_FRAME_ERESERVED (-1) /* a reserved byte (1..3) is not zero, or type 0 */
#define SBX_FRAME_ETOOLONG (-2)  /* the length is past the caller's max */

static inline void sbx_frame_encode(unsigned char hdr[SBX_FRAME_HDR], unsigned char type,
                                    uint32_t len)
{
    hdr[0] = type;
    hdr[1] = 0;
    hdr[2] = 0;
    hdr[3] = 0;
    hdr[4] = (unsigned char)(len >> 24);
    hdr[5] = (unsigned char)(len >> 16);
    hdr[6] = (unsigned char)(len >> 8);
    hdr[7] = (unsigned char)len;
}

/* Decodes a header: SBX_FRAME_OK with *type and *len, or an SBX_FRAME_E*
 * (then *type and *len are still set, for the caller's message). */
static inline int sbx_frame_decode(const unsigned char hdr[SBX_FRAME_HDR], uint32_t max,
                                   unsigned char *type, uint32_t *len)
{
    *type = hdr[0];
    *len = ((uint32_t)hdr[4] << 24) | ((uint32_t)hdr[5] << 16) | ((uint32_t)hdr[6] << 8) |
           (uint32_t)hdr[7];
    if (hdr[0] == 0 || hdr[1] != 0 || hdr[2] != 0 || hdr[3] != 0) {
        return SBX_FRAME_ERESERVED;
    }
    return *len > max ? SBX_FRAME_ETOOLONG : SBX_FRAME_OK;
}

#endif
