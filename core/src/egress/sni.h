/* sni.h - the server name a TLS client asks for, read from its ClientHello. */
#ifndef SBX_EGRESS_SNI_H
#define SBX_EGRESS_SNI_H

#include <stddef.h>

/* The most bytes of a client's first flight the proxy holds to find the name: a
 * ClientHello with post-quantum key shares is about 2 KiB, a record at most 16 KiB. */
#define SBX_EGRESS_SNI_MAX (20 * 1024)

enum sbx_egress_sni {
    SBX_SNI_MORE,      /* a ClientHello so far: read more */
    SBX_SNI_NOT_TLS,   /* the first byte does not start a TLS handshake record */
    SBX_SNI_ABSENT,    /* a complete ClientHello without a server_name */
    SBX_SNI_FOUND,     /* the name is in host */
    SBX_SNI_MALFORMED, /* a handshake record, but not a ClientHello the proxy can read */
};

/* Looks at the first n bytes a client sent in a tunnel. The ClientHello may span
 * several handshake records. host (at least 256 bytes) gets the host_name, NUL-ended,
 * when the result is SBX_SNI_FOUND; a name longer than 253 bytes or with a NUL is
 * SBX_SNI_MALFORMED. More than SBX_EGRESS_SNI_MAX bytes without an answer is the
 * caller's to refuse. */
enum sbx_egress_sni sbx_egress_sni_parse(const unsigned char *p, size_t n, char *host,
                                         size_t host_size);

/* Whether the name the client sent is the CONNECT host: case-insensitive, a trailing
 * dot on either side ignored. */
int sbx_egress_sni_matches(const char *sni, const char *host);

#endif
