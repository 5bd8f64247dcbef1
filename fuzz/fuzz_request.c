/* fuzz_request.c - the proxy's request head parser (core/src/egress/request.c):
 * what a sandbox sends to the proxy (CONNECT, absolute-URI), and a request sent
 * inside a tunnel. */
#include <stdint.h>
#include <string.h>

#include "egress/request.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *buf = (const char *)data;
    struct sbx_egress_request r, tunnel, in;
    const char *reason = NULL;
    int status = 0;
    long end;

    if (size > 2 * SBX_EGRESS_HEAD_MAX) {
        return 0; /* the proxy never holds more than a head's cap */
    }
    end = sbx_egress_head_end(buf, size);
    if (end <= 0) {
        return 0;
    }
    if ((size_t)end > size) {
        __builtin_trap();
    }
    memset(&r, 0, sizeof(r));
    if (sbx_egress_request_parse(buf, (size_t)end, &r, &status, &reason) == 0 && r.forward) {
        if (r.forward_len == 0) {
            __builtin_trap();
        }
    }
    sbx_egress_request_clear(&r);

    memset(&tunnel, 0, sizeof(tunnel));
    memcpy(tunnel.method, "CONNECT", 8);
    tunnel.connect = 1;
    strcpy(tunnel.host, "example.com");
    tunnel.port = 443;
    memset(&in, 0, sizeof(in));
    (void)sbx_egress_request_parse_tunnel(buf, (size_t)end, &tunnel, &in, &status, &reason);
    sbx_egress_request_clear(&in);
    return 0;
}
