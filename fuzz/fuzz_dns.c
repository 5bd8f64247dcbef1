/* fuzz_dns.c - the relay's resolver (tools/relay/dns.c, names.c): a datagram a
 * program in the sandbox sends to 127.0.0.53:53, answered as if the proxy allowed
 * every name but those starting with 'd' (both tables fill; they are reset now and
 * then). A deny address never maps to a name to connect to, nor the reverse. */
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "dns.h"
#include "names.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int allow_all(const struct sockaddr_un *sun, const char *name, char *text, size_t size)
{
    (void)sun;
    snprintf(text, size, "sbx egress: %s", name);
    return name[0] == 'd' ? 0 : 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static unsigned calls;
    unsigned char out[SBX_DNS_MSG_MAX];
    struct sbx_dns_query q;
    size_t n;

    if (size > SBX_DNS_MSG_MAX + 1) {
        size = SBX_DNS_MSG_MAX + 1; /* the relay reads no more */
    }
    if (sbx_dns_parse(data, size, &q) == SBX_DNS_NOERROR &&
        (q.qend > size || strlen(q.name) > SBX_DNS_NAME_MAX)) {
        __builtin_trap();
    }
    n = sbx_relay_dns_reply(data, size, out, sizeof(out), allow_all, NULL);
    if (n > sizeof(out)) {
        __builtin_trap();
    }
    for (unsigned k = 0; k < 4; k++) {
        if (sbx_relay_name_of(0x7f650000u + k) != NULL ||
            sbx_relay_denied_name_of(0x7f640000u + k) != NULL) {
            __builtin_trap();
        }
    }
    if (++calls % 1000 == 0) {
        sbx_relay_names_reset();
    }
    return 0;
}
