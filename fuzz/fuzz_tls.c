/* fuzz_tls.c - following a tunnel's TLS records after its first ClientHello
 * (core/src/egress/tls_record.c): the bytes a sandbox sends, interleaved with what a
 * destination answers. First byte: chunk size; then chunks whose first byte's low bit
 * says whose they are (1: the server's). The client's bytes are buffered as the proxy
 * does (what was not forwarded stays, more is appended). Promises: a denial has a
 * reason, a verdict never forwards more than is there, and "more" always asks for more
 * than is buffered and no more than the proxy's input holds (else the tunnel would
 * stall). */
#include <stdint.h>
#include <string.h>

#include "egress/sni.h"
#include "egress/tls_record.h"

#define IN_MAX (SBX_EGRESS_SNI_MAX + 5 + SBX_TLS_RECORD_MAX)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned char buf[IN_MAX];
    struct sbx_tls_follow t;
    size_t k;
    size_t have = 0;
    size_t off = 1;

    if (size < 1) {
        return 0;
    }
    k = data[0] % 64 + 2;
    sbx_tls_follow_init(&t, (data[0] & 0x40) ? NULL : "example.com");
    while (off < size) {
        size_t n = size - off < k ? size - off : k;
        const uint8_t *p = data + off + 1;
        size_t len = n - 1;

        off += n;
        if (data[off - n] & 1) {
            sbx_tls_follow_server(&t, p, len);
            continue;
        }
        if (len > sizeof(buf) - have) {
            len = sizeof(buf) - have; /* the proxy stops reading at its high watermark */
        }
        memcpy(buf + have, p, len);
        have += len;
        for (;;) {
            size_t used = SIZE_MAX;
            size_t need = 0;
            const char *reason = NULL;
            enum sbx_tls_verdict v = sbx_tls_follow_client(&t, buf, have, &used, &need, &reason);

            if (v == SBX_TLS_DENY) {
                if (reason == NULL) {
                    __builtin_trap();
                }
                return 0;
            }
            if (used > have) {
                __builtin_trap();
            }
            if (v == SBX_TLS_DONE) {
                return 0;
            }
            if (need <= have || need - used > IN_MAX) {
                __builtin_trap();
            }
            memmove(buf, buf + used, have - used);
            have -= used;
            break;
        }
    }
    return 0;
}
