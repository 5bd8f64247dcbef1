/* fuzz_sni.c - the proxy's ClientHello reader (core/src/egress/sni.c): the
 * first bytes a sandbox sends inside a CONNECT tunnel. */
#include <stdint.h>
#include <string.h>

#include "egress/sni.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char host[256];
    enum sbx_egress_sni r;

    /* the proxy parses what it has so far, so every prefix is a real call */
    for (size_t n = 0; n <= size; n += (n < 64 ? 1 : 61)) {
        r = sbx_egress_sni_parse(data, n, host, sizeof(host));
        if (r == SBX_SNI_MORE) {
            (void)sbx_egress_sni_want(data, n);
        }
        (void)sbx_egress_http_start(data, n);
    }
    r = sbx_egress_sni_parse(data, size, host, sizeof(host));
    if (r == SBX_SNI_FOUND) {
        if (strlen(host) >= sizeof(host)) {
            __builtin_trap();
        }
        (void)sbx_egress_sni_matches(host, "example.com");
        (void)sbx_egress_sni_matches(host, host);
    }
    return 0;
}
