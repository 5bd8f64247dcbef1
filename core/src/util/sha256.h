/* sha256.h - SHA-256 (FIPS 180-4), incremental, for the digests of what a
 * registry sends (image/feature_oci.c checks every blob it reads). */
#ifndef SBX_UTIL_SHA256_H
#define SBX_UTIL_SHA256_H

#include <stddef.h>
#include <stdint.h>

struct sbx_sha256 {
    uint32_t h[8];
    unsigned char buf[64];
    size_t buf_len;
    uint64_t total;
};

void sbx_sha256_init(struct sbx_sha256 *s);
void sbx_sha256_update(struct sbx_sha256 *s, const void *data, size_t len);
/* The digest as 64 lower-case hex digits and a NUL. */
void sbx_sha256_hex(struct sbx_sha256 *s, char out[65]);

#endif
